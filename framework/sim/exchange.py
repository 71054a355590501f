"""The simulated exchange: a pure state machine of accounts, positions, orders and fills.

The one matching engine of the framework: the venue twin serves it over HTTP and WebSocket,
the paper venue runs backtests on it in-process. No I/O, no clock reads, no randomness:
every operation takes ``now_ms`` and returns the events it caused
(:mod:`framework.sim.events`), so the same calls always give the same state. The one outside
input is the optional ``match_delay`` (the twin's match_delay fault): milliseconds the match
list holds each new match back. Ids start above ``id_base`` (0 for the twin; the paper venue's
never meet a recording's).

Model (the business rules SPEC.md leaves "not shown", all documented choices):

* One-way positions per account and pair. An order in the position's direction opens or
  increases it (NEW, INCREASE); an order against it reduces or closes it (REDUCE, CLOSE) and
  may not take it through zero (2318). An order whose positionType differs from the open
  position's is refused with 2310.
* Margin is ``quantity x price / lever`` (isolated and cross alike), frozen from the available
  balance together with the fee (the fill step: :mod:`framework.sim.fills`). A resting GTC
  order that opens freezes its margin and maker fee at its limit price until it fills.
  Amounts are rounded to the pair's settle decimals.
* Balance refusals: 2201 when the available balance is zero or below (nothing to freeze),
  2102 ``Insufficient balance:<coin>`` when it is positive but smaller than margin + fee.
* Matching is against the mark, liquidity-capped; resting GTC orders fill whole at their
  limit, as maker, when the mark crosses them; the mark moving also liquidates
  (:mod:`framework.sim.fills`). With ``book_fills`` (or per pair, :meth:`Exchange.follow_market`) the exchange
  reads a published market instead: arrivals walk its book, resting orders fill on its trades by the fill rule
  (``fill_rule``: touch, through, or queue with fills in part; :mod:`framework.sim.market_fills`). FOK without its fill is still accepted; POST_ONLY that would
  cross is refused with ``2001 Illegal parameter:price`` (or accepted and cancelled,
  configurable). :meth:`Exchange.cancel_resting` cancels a resting order (its reserve is
  released); ``accounts[user].orders`` keeps every accepted order's record and status
  (:mod:`framework.sim.history`); :meth:`Exchange.cancel_order` cancels one by its record:
  2340 when there is none, 2341 when it is completed.
* Realized PnL and fees go to the available balance, so at every moment
  ``available + frozen = initial - fees + realized PnL`` and ``frozen`` is the sum of open
  margins and the reserves of resting orders.
* Ground truth for tests: ``accounts[user].order_ids`` maps the clientOrderId of each
  accepted order to its orderId (``client_ids`` is a view of its keys); ``accounts[user]
  .matches`` holds the matches by pair, listed or held back.
* Memory bound (the exchange's choice): per account, the newest matches per pair, order ids and
  completed order records, each bounded by a setting and trimmed after each operation, never
  inside an atomic batch (:mod:`framework.sim.state`).
* Codes the model never gives: 2123 and 2124 (no failure mode of the hot account is
  modelled) and 2331 (every pair always has a mark); 2329 only comes from fault injection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Final

import attrs

from framework.sim.book import RestingOrder
from framework.sim.events import Event, Match
from framework.sim.fill_model import FillRule
from framework.sim.fills import (
    FillStep,
    can_close,
    fill_crossed,
    liquidation_price,
    margin_and_fee,
    plan_fill,
    positions_to_liquidate,
    release,
    rest_order,
)
from framework.sim.history import OrderIndex, OrderRecord
from framework.sim.market_fills import fill_on_trades, plan_book_fill, queue_on_book
from framework.sim.queue import start_queue
from framework.sim.state import (
    Account,
    Balance,
    ExchangeSettings,
    FeeSettings,
    Market,
    Position,
    Refusal,
    Savepoint,
    Sequences,
    pnl_at,
    trim_account,
)
from framework.venue.codec import plain_decimal
from framework.venue.errors import ORDER_COMPLETED, ORDER_NOT_FOUND, render_message
from framework.venue.market import Book as QuoteBook
from framework.venue.market import Trade
from framework.venue.models import MatchType, OrderInput
from framework.venue.rules import check_order, settle_coin_of

__all__ = ["CANCEL_MESSAGES", "BatchOutcome", "Exchange", "admission_refusal"]

CANCEL_MESSAGES: Final = {
    200: "SUCCESS",
    ORDER_NOT_FOUND: "Order does not exist",
    ORDER_COMPLETED: "Order is already completed",
}
"""The message of each code a cancel of one order answers (the order-management extension)."""

_ZERO = Decimal(0)


@attrs.frozen(slots=True, kw_only=True)
class BatchOutcome:
    """The result of one batchCreate: accepted orders, refusals, whole-call error, events."""

    accepted: list[tuple[str, int, str]]
    refusals: list[tuple[int, int, str]]
    error: Refusal | None
    events: list[Event]


class Exchange:
    """Accounts, positions, resting orders and matching for every configured pair."""

    def __init__(
        self,
        settings: ExchangeSettings,
        *,
        match_delay: Callable[[], int] | None = None,
        id_base: int = 0,
        book_fills: bool = False,
        fill_rule: FillRule | None = None,
    ) -> None:
        """Build the markets of settings.pairs; accounts are added with open_account.

        book_fills: fills follow a published market (:mod:`framework.sim.market_fills`):
        arrivals walk the book given to :meth:`set_book`, resting orders fill on the trades
        given to :meth:`market_trades` by fill_rule (``queue`` by default), and a mark alone
        fills nothing. Without it, :meth:`follow_market` turns that on for one pair.
        """
        self.book_fills = book_fills
        self.market_pairs: set[str] = set()
        """The pairs whose fills follow a published market although book_fills is off."""
        self.fill_rule = fill_rule if fill_rule is not None else FillRule()
        self.slippage = settings.slippage
        self.maintenance_rate = settings.maintenance_margin_rate
        self.post_only_reject = settings.post_only_crossing == "reject"
        self.order_history_limit = settings.order_history_limit
        self.client_id_history_limit = settings.client_id_history_limit
        self._coin_ids: dict[str, int] = dict(settings.coins)
        self.markets: dict[str, Market] = {}
        next_pair_id = max((p.contract_pair_id or 0 for p in settings.pairs.values()), default=0)
        for name, pair in settings.pairs.items():
            pair_id = pair.contract_pair_id
            if pair_id is None:
                next_pair_id += 1
                pair_id = next_pair_id
            coin = settle_coin_of(name, pair.rules)
            self.markets[name] = Market(
                name=name,
                settings=pair,
                rules=pair.rules,
                coin=coin,
                coin_id=self.coin_id(coin),
                contract_pair_id=pair_id,
                mark=pair.initial_price,
                money_exp=Decimal(1).scaleb(-pair.settle_decimals),
                price_exp=Decimal(1).scaleb(-pair.rules.price_decimals),
            )
        self.accounts: dict[int, Account] = {}
        self._ids = Sequences(
            order_id=id_base + 1_000_000, match_id=id_base, position_id=id_base, log_id=id_base
        )
        self._fill_step = FillStep(
            fees=settings.fees,
            ids=self._ids,
            match_delay=match_delay,
            match_history_limit=settings.match_history_limit,
        )

    @property
    def fees(self) -> FeeSettings:
        """The maker and taker fee rates of every fill."""
        return self._fill_step.fees

    @property
    def match_delay(self) -> Callable[[], int] | None:
        """The match_delay fault's draw in ms (None: every match is listed at once)."""
        return self._fill_step.match_delay

    @property
    def match_history_limit(self) -> int:
        """How many matches per pair an account keeps."""
        return self._fill_step.match_history_limit

    # -- accounts and reads ------------------------------------------------------------------

    def coin_id(self, coin: str) -> int:
        """The id of a coin; coins not configured get the next free id."""
        found = self._coin_ids.get(coin)
        if found is None:
            found = self._coin_ids[coin] = max(self._coin_ids.values(), default=0) + 1
        return found

    def knows_coin(self, coin: str) -> bool:
        """True when the coin is configured, settles a pair or is held by an account."""
        return coin in self._coin_ids

    def open_account(
        self, user_id: int, address: str | None, balances: Mapping[str, Decimal]
    ) -> Account:
        """Create an account with its starting balances (replaces one with the same id)."""
        account = Account(
            user_id=user_id,
            address=address,
            balances={
                coin: Balance(coin, self.coin_id(coin), Decimal(amount))
                for coin, amount in balances.items()
            },
            orders=OrderIndex(self.order_history_limit),
        )
        self.accounts[user_id] = account
        return account

    def positions(self, user_id: int, pair: str) -> list[Position]:
        """The open positions of an account on a pair (at most one, one-way mode)."""
        position = self.accounts[user_id].positions.get(pair)
        return [position] if position is not None else []

    def balance(self, user_id: int, coin: str) -> Balance | None:
        """The balance of one coin of an account, None when the account has no such coin."""
        return self.accounts[user_id].balances.get(coin)

    def resting_orders(self, pair: str) -> list[RestingOrder]:
        """The active resting orders of a pair, bids then asks."""
        return self.markets[pair].book.orders()

    def matches(
        self,
        user_id: int,
        pair: str,
        *,
        before: int | None,
        page_no: int,
        page_size: int,
        now_ms: int | None = None,
    ) -> list[Match]:
        """One page of the matches listed at now_ms (None: all), newest first, ids < before.

        SPEC 4.4: ``matchId`` is a strict upper bound, pages are counted from 1. A match the
        match_delay fault holds back (``Account.listed_from_ms``) is not listed before its
        time: pages count listed matches only, so a lower id may appear after a higher one was
        already read. Only the matches the account still keeps are listed.
        """
        account = self.accounts[user_id]
        found = account.matches.get(pair)
        if not found:
            return []
        end = len(found) if before is None else found.count_below(before)
        held = account.listed_from_ms
        if held and now_ms is not None:
            for match_id in [i for i, at in held.items() if at <= now_ms]:
                del held[match_id]
        if not held or now_ms is None:
            high = end - (page_no - 1) * page_size
            if high <= 0:
                return []
            return found[max(0, high - page_size) : high][::-1]
        skip = (page_no - 1) * page_size
        page: list[Match] = []
        for index in range(end - 1, -1, -1):
            match = found[index]
            if match.id in held:
                continue
            if skip:
                skip -= 1
                continue
            page.append(match)
            if len(page) == page_size:
                break
        return page

    def unrealized_pnl(self, position: Position) -> Decimal:
        """The PnL of a position if it closed at the mark now."""
        market = self.markets[position.pair]
        return pnl_at(position, market.mark, position.quantity).quantize(market.money_exp)

    def liquidation_price(self, position: Position) -> Decimal | None:
        """The mark at which an isolated position is liquidated; None for cross."""
        market = self.markets[position.pair]
        return liquidation_price(position, self.maintenance_rate, market.price_exp)

    @property
    def last_log_id(self) -> int:
        """The logId of the latest balance change (id_base before any)."""
        return self._ids.log_id

    def can_close(self, account: Account, position: Position) -> Decimal:
        """The quantity of a position not yet claimed by resting orders against it."""
        return can_close(account, position)

    # -- orders ------------------------------------------------------------------------------

    def submit(
        self,
        user_id: int,
        items: Sequence[OrderInput | Refusal],
        now_ms: int,
        *,
        atomic: bool,
    ) -> BatchOutcome:
        """Place a batch; items already refused by parsing are passed as (code, message)."""
        account = self.accounts[user_id]
        now = datetime.fromtimestamp(now_ms / 1000, UTC)
        events: list[Event] = []
        accepted: list[tuple[str, int, str]] = []
        refusals: list[tuple[int, int, str]] = []
        seen: set[str] = set()
        savepoint = Savepoint.take(account, self.markets, self._ids, items) if atomic else None
        self._fill_step.hold_trim = savepoint is not None
        try:
            for index, item in enumerate(items):
                if isinstance(item, tuple):
                    result: int | Refusal = item
                else:
                    result = self._place(account, item, now_ms, now, events, seen)
                if isinstance(result, int):
                    assert not isinstance(item, tuple)
                    accepted.append((item.client_order_id, result, item.pair_name))
                    continue
                if savepoint is not None:
                    taken = [a[0] for a in accepted]
                    savepoint.restore(account, self.markets, self._ids, taken)
                    for _client_id, order_id, _pair in accepted:
                        account.orders.forget(order_id)
                    last_match = savepoint.ids.match_id
                    for match_id in [i for i in account.listed_from_ms if i > last_match]:
                        del account.listed_from_ms[match_id]
                    return BatchOutcome(accepted=[], refusals=[], error=result, events=[])
                refusals.append((index, result[0], result[1]))
        finally:
            self._fill_step.hold_trim = False
        trim_account(account, self.client_id_history_limit)
        error = None
        if not accepted and refusals:
            error = (refusals[0][1], refusals[0][2])
        return BatchOutcome(accepted=accepted, refusals=refusals, error=error, events=events)

    def _place(
        self,
        account: Account,
        order: OrderInput,
        now_ms: int,
        now: datetime,
        events: list[Event],
        seen: set[str],
    ) -> int | Refusal:
        """Check and execute one order; nothing changes unless it is accepted."""
        market = self.markets[order.pair_name]
        refusal = admission_refusal(account, market, order, now=now, seen=seen)
        if refusal is not None:
            return refusal
        balance = account.balances[market.coin]
        pair = market.name
        is_long = order.is_long
        client_id = order.client_order_id
        position = account.positions.get(pair)
        opposite = position is not None and position.is_long != is_long
        quotes = market.quotes if self.follows_market(pair) else None
        if quotes is None:
            plan = plan_fill(market, order, self.slippage)
        else:
            plan, quotes = plan_book_fill(market, order, quotes)
        fill, price, rest, crossing = plan.fill, plan.price, plan.rest, plan.crossing
        cancel_all = False
        if order.match_type == MatchType.POST_ONLY and crossing:
            if self.post_only_reject:
                return 2001, render_message(2001, "price")
            cancel_all = True
            fill = rest = _ZERO
        lever = order.lever
        need = _ZERO
        reserve = _ZERO
        if not opposite:
            need = margin_and_fee(market, fill * price, lever, self.fees.taker)
        if rest and not opposite:
            assert order.price is not None
            reserve = margin_and_fee(market, rest * order.price, lever, self.fees.maker)
            need += reserve
        if need > balance.available:
            if balance.available <= 0:
                return 2201, render_message(2201)
            return 2102, render_message(2102, market.coin)
        self._ids.order_id += 1
        order_id = self._ids.order_id
        account.order_ids[client_id] = order_id
        if cancel_all:
            account.orders.placed(order, order_id, now_ms, filled=_ZERO, resting=None)
            return order_id
        if fill:
            if quotes is not None:
                market.quotes = quotes
            self._fill_step.apply(
                account,
                market,
                order_id,
                is_long,
                fill,
                price,
                lever,
                int(order.position_type),
                True,
                order.is_market,
                now_ms,
                events,
            )
        resting = None
        if rest:
            resting = rest_order(
                self._fill_step, account, market, order, order_id, rest, reserve, events
            )
            if quotes is not None and self.fill_rule.rule == "queue":
                start_queue(resting, quotes, self.fill_rule.params.queue_start_share)
        account.orders.placed(order, order_id, now_ms, filled=fill, resting=resting)
        return order_id

    def follows_market(self, pair: str) -> bool:
        """True when the pair's fills follow its published market (book_fills or follow_market)."""
        return self.book_fills or pair in self.market_pairs

    def follow_market(self, pair: str) -> None:
        """From now on, the pair's fills follow its published market (book_fills for one pair)."""
        self.market_pairs.add(pair)

    # -- marks -------------------------------------------------------------------------------

    def set_mark(self, pair: str, price: Decimal, now_ms: int) -> list[Event]:
        """Move a pair's mark: fill the resting orders it crosses (not with book_fills: trades
        do), then liquidate."""
        market = self.markets[pair]
        if price <= 0:
            raise ValueError(f"a mark price must be positive, got {price}")
        market.mark = price
        events: list[Event] = []
        if not self.follows_market(pair):
            for order in market.book.pop_crossed(price):
                account = self.accounts[order.user_id]
                fill_crossed(self._fill_step, account, market, order, now_ms, events)
        self._liquidate(market, now_ms, events)
        return events

    def set_book(self, pair: str, book: QuoteBook | None) -> None:
        """The pair's current published book, what arrivals walk (with book_fills), and what
        the queue rule reads the resting orders' queues from."""
        market = self.markets[pair]
        market.quotes = book
        # follows_market and queue_on_book's own test of the book, inlined: a replay sets
        # hundreds of thousands of books a second, on a book where nothing rests mostly.
        if book is not None and len(market.book) and (self.book_fills or pair in self.market_pairs):
            queue_on_book(market, book, self.fill_rule)

    def market_trades(self, pair: str, trades: Sequence[Trade], now_ms: int) -> list[Event]:
        """Trades published on the pair: fill the resting orders they reach, by the fill
        rule, in order (with book_fills; otherwise the mark does that and this does nothing).
        """
        if not self.follows_market(pair):
            return []
        market = self.markets[pair]
        events = fill_on_trades(
            self._fill_step, self.accounts, market, trades, self.fill_rule, now_ms
        )
        if events:
            self._liquidate(market, now_ms, events)
        return events

    def _liquidate(self, market: Market, now_ms: int, events: list[Event]) -> None:
        """Close the positions the pair's mark now puts under their maintenance margin."""
        due = positions_to_liquidate(market, self.accounts, self.markets, self.maintenance_rate)
        for account, position in due:
            self._fill_step.close_at_mark(
                account, self.markets[position.pair], position, now_ms, events
            )

    def cancel_order(self, record: OrderRecord | None, now_ms: int) -> tuple[int, list[Event]]:
        """Cancel an account's order by its record: 200 and the events, or 2340 (no record)
        or 2341 (completed) with nothing changed."""
        if record is None:
            return ORDER_NOT_FOUND, []
        if record.resting is None:
            return ORDER_COMPLETED, []
        return 200, self.cancel_resting(record.resting, now_ms)

    def cancel_resting(self, order: RestingOrder, now_ms: int) -> list[Event]:
        """Cancel a resting order: out of the book, its rest and frozen reserve released."""
        market = self.markets[order.pair]
        account = self.accounts[order.user_id]
        market.book.cancel(order)
        account.orders.ended(order, _ZERO, now_ms)
        events: list[Event] = []
        release(self._fill_step, account, market, order, events)
        return events

    # -- the account's reads and cancel-all (the twin's answers and the paper venue's) -------

    def position_page(
        self, user_id: int, pair: str, page_no: int, page_size: int
    ) -> list[Position]:
        """One page (from 1) of an account's open positions on a pair (SPEC 4.2)."""
        start = (page_no - 1) * page_size
        return self.positions(user_id, pair)[start : start + page_size]

    def open_order_page(
        self, user_id: int, pair: str, page_no: int, page_size: int
    ) -> tuple[list[OrderRecord], int]:
        """One page (from 1) of an account's open orders on a pair, entrustId ascending,
        and how many it has open there."""
        found = self.accounts[user_id].orders.open_orders(pair)
        start = (page_no - 1) * page_size
        return found[start : start + page_size], len(found)

    def balance_answer(self, user_id: int, coin: str) -> Balance | Refusal:
        """The balance of one coin (SPEC 4.3), or the refusal: 2122 for a coin the account
        does not hold, 4001 for one the exchange does not know."""
        balance = self.balance(user_id, coin)
        if balance is not None:
            return balance
        code = 2122 if self.knows_coin(coin) else 4001
        return code, render_message(code)

    def cancel_all(
        self, user_id: int, pair: str | None, is_long: bool | None, now_ms: int
    ) -> tuple[list[int], list[Event]]:
        """Cancel an account's open orders (of pair, of one side; None: all): the ids
        cancelled, ascending, and the events."""
        cancelled: list[int] = []
        events: list[Event] = []
        for record in self.accounts[user_id].orders.open_orders(pair):
            if is_long is None or record.is_long == is_long:
                events += self.cancel_order(record, now_ms)[1]
                cancelled.append(record.order_id)
        return cancelled, events


def admission_refusal(
    account: Account, market: Market, order: OrderInput, *, now: datetime, seen: set[str]
) -> Refusal | None:
    """Whether an account may place an order, before it meets the mark; adds its id to seen.

    In this order: a clientOrderId the account still remembers or used earlier in the batch
    (``2001 Illegal parameter:clientOrderId``), the pair's rules
    (:func:`framework.venue.rules.check_order`), no balance in the settlement coin (2330), a
    positionType other than the open position's (2310), an order against the position larger
    than it (2318), and for orders in the position's direction the one-way limit counting
    resting orders (2305) and the pair's total open quantity (2306). Balance checks (2102,
    2201) come later, once the fill is known.
    """
    rules = market.rules
    client_id = order.client_order_id
    if (
        client_id in seen
        or client_id in account.order_ids
        or account.orders.by_client_id(client_id) is not None
    ):
        seen.add(client_id)
        return 2001, render_message(2001, "clientOrderId")
    seen.add(client_id)
    failure = check_order(rules, order, now=now, mark_price=market.mark)
    if failure is not None:
        return failure
    if market.coin not in account.balances:
        return 2330, render_message(2330)
    qty = order.quantity
    position = account.positions.get(market.name)
    opposite = position is not None and position.is_long != order.is_long
    if position is not None:
        if position.position_type != int(order.position_type):
            return 2310, render_message(2310)
        if opposite and qty > position.quantity:
            return 2318, render_message(2318)
    if not opposite:
        held = (position.quantity if position is not None else _ZERO) + account.resting.get(
            (market.name, order.is_long), _ZERO
        )
        if held + qty > rules.max_one_way_quantity:
            return 2305, render_message(2305, plain_decimal(rules.max_one_way_quantity))
        if market.total_quantity + qty > rules.max_total_quantity:
            return 2306, render_message(2306, plain_decimal(rules.max_total_quantity))
    return None
