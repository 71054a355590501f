"""The twin's exchange: a pure state machine of accounts, positions, orders and fills.

No I/O, no clock reads, no randomness: every operation takes ``now_ms`` and returns the events
it caused (:mod:`framework.twin.events`), so the same calls always give the same state. The
one outside input is the optional ``match_delay`` (the match_delay fault, drawn by
:class:`~framework.twin.faults.Faults`): milliseconds the match list holds each new match back.

Model (the business rules SPEC.md leaves "not shown", all documented choices):

* One-way positions per account and pair. An order in the position's direction opens or
  increases it (NEW, INCREASE); an order against it reduces or closes it (REDUCE, CLOSE) and
  may not take it through zero (2318). An order whose positionType differs from the open
  position's is refused with 2310.
* Margin is ``quantity x price / lever`` (isolated and cross alike), frozen from the available
  balance together with the fee. A resting GTC order that opens freezes its margin and maker
  fee at its limit price until it fills. Amounts are rounded to the pair's settle decimals.
* Balance refusals: 2201 when the available balance is zero or below (nothing to freeze),
  2102 ``Insufficient balance:<coin>`` when it is positive but smaller than margin + fee.
* Matching is against the mark: market orders and marketable limit orders fill at once as
  taker at ``mark x (1 +/- slippage)`` (a limit order never beyond its limit), up to the
  pair's liquidity per order (unlimited by default). IOC drops the unfilled rest; FOK fills
  all or nothing (the order is still accepted, with no fill); GTC rests the rest, which fills
  whole at its limit price, as maker, when the mark crosses it; POST_ONLY that would cross is
  refused with ``2001 Illegal parameter:price`` (or accepted and cancelled, configurable).
  A resting fill never flips a position (the excess is cancelled), and a resting fill that
  would open with too little balance is cancelled. :meth:`Exchange.cancel_resting` cancels a
  resting order (its reserve is released); ``accounts[user].orders`` keeps every accepted
  order's record and status (:mod:`framework.twin.order_index`).
* Liquidation when the mark moves: an isolated position when its margin plus unrealized PnL
  falls to its maintenance margin (``maintenance_margin_rate x quantity x mark``); cross
  positions of one coin together when the available balance plus their margins and
  unrealized PnL falls to their maintenance. Liquidation closes at the mark, with no fee, and
  the loss is capped at the margin (isolated) or the margin plus available balance (cross).
* Realized PnL and fees go to the available balance, so at every moment
  ``available + frozen = initial - fees + realized PnL`` and ``frozen`` is the sum of open
  margins and the reserves of resting orders.
* Ground truth for tests: ``accounts[user].order_ids`` maps the clientOrderId of each
  accepted order to its orderId (``client_ids`` is a view of its keys); ``accounts[user]
  .matches`` holds the matches by pair, listed or held back.
* Memory bound (the twin's choice; the venue's documentation is silent): per account, the
  newest ``match_history_limit`` matches per pair (older ones are no longer listed, see
  :mod:`framework.twin.match_list`), the newest ``client_id_history_limit`` entries of
  ``order_ids``, every open order and the newest ``order_history_limit`` completed order
  records (:mod:`framework.twin.order_index`); each 100000 by default. A clientOrderId is
  refused as already used (``2001 Illegal parameter:clientOrderId``) while the twin still
  remembers an order that carried it, in ``order_ids`` or in the order records (an open
  order is always remembered); once both have forgotten it, the id is accepted again. The
  bounds are applied after each operation, never inside an atomic batch, so a refused batch
  still rolls back exactly (:mod:`framework.twin.savepoint`); each costs O(1) amortized
  per order or match.
* Codes the model never gives: 2123 and 2124 (no failure mode of the hot account is
  modelled) and 2331 (every pair always has a mark); 2329 only comes from fault injection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal

import attrs

from framework.twin.admission import admission_refusal
from framework.twin.book import RestingOrder
from framework.twin.events import BalanceChanged, Event, Match, PositionChanged
from framework.twin.liquidation import liquidation_price, positions_to_liquidate
from framework.twin.match_history import MatchHistory
from framework.twin.match_list import list_page
from framework.twin.matching import plan_fill
from framework.twin.order_index import OrderIndex
from framework.twin.savepoint import Savepoint, Sequences
from framework.twin.settings import TwinSettings
from framework.twin.state import Account, Balance, Market, Position, Refusal, pnl_at
from framework.venue.errors import render_message
from framework.venue.models import MatchType, OrderInput
from framework.venue.rules import settle_coin_of

__all__ = ["BatchOutcome", "Exchange"]

_ZERO = Decimal(0)
_ISOLATED = 3


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
        self, settings: TwinSettings, *, match_delay: Callable[[], int] | None = None
    ) -> None:
        """Build the markets of settings.pairs; accounts are added with open_account."""
        self.match_delay = match_delay
        self.fees = settings.fees
        self.slippage = settings.slippage
        self.maintenance_rate = settings.maintenance_margin_rate
        self.post_only_reject = settings.post_only_crossing == "reject"
        self.order_history_limit = settings.order_history_limit
        self.match_history_limit = settings.match_history_limit
        self.client_id_history_limit = settings.client_id_history_limit
        # True while an atomic batch holds a savepoint: nothing is trimmed meanwhile.
        self._hold_trim = False
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
        self._ids = Sequences()

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
        """One page of the matches listed at now_ms (None: all), newest first, ids < before."""
        return list_page(
            self.accounts[user_id],
            pair,
            before=before,
            page_no=page_no,
            page_size=page_size,
            now_ms=now_ms,
        )

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
        """The logId of the latest balance change (0 before any)."""
        return self._ids.log_id

    def can_close(self, account: Account, position: Position) -> Decimal:
        """The quantity of a position not yet claimed by resting orders against it."""
        claimed = account.resting.get((position.pair, not position.is_long), _ZERO)
        return max(position.quantity - claimed, _ZERO)

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
        self._hold_trim = savepoint is not None
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
            self._hold_trim = False
        self._trim(account)
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
        plan = plan_fill(market, order, self.slippage)
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
            need = _margin_and_fee(market, fill * price, lever, self.fees.taker)
        if rest and not opposite:
            assert order.price is not None
            reserve = _margin_and_fee(market, rest * order.price, lever, self.fees.maker)
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
            self._fill(
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
            assert order.price is not None
            self._ids.seq += 1
            resting = RestingOrder(
                order_id=order_id,
                user_id=account.user_id,
                pair=pair,
                client_order_id=client_id,
                is_long=is_long,
                price=order.price,
                remaining=rest,
                lever=lever,
                position_type=int(order.position_type),
                reserve=reserve,
                seq=self._ids.seq,
            )
            market.book.add(resting)
            key = (pair, is_long)
            account.resting[key] = account.resting.get(key, _ZERO) + rest
            if reserve:
                balance.available -= reserve
                balance.frozen += reserve
                self._balance_event(account, balance, -reserve, events)
        account.orders.placed(order, order_id, now_ms, filled=fill, resting=resting)
        return order_id

    # -- fills -------------------------------------------------------------------------------

    def _fill(
        self,
        account: Account,
        market: Market,
        order_id: int,
        is_long: bool,
        qty: Decimal,
        price: Decimal,
        lever: int,
        position_type: int,
        taker: bool,
        is_market: bool,
        now_ms: int,
        events: list[Event],
        *,
        released_reserve: Decimal = _ZERO,
        liquidation: bool = False,
    ) -> None:
        """Apply one fill to the account's position and balance; report both changes."""
        exp = market.money_exp
        pair = market.name
        balance = account.balances[market.coin]
        notional = qty * price
        fee = (
            _ZERO
            if liquidation
            else (notional * (self.fees.taker if taker else self.fees.maker)).quantize(exp)
        )
        position = account.positions.get(pair)
        pnl = _ZERO
        before = balance.available
        balance.available += released_reserve
        balance.frozen -= released_reserve
        if position is None or position.is_long == is_long:
            margin = (notional / lever).quantize(exp)
            balance.available -= margin + fee
            balance.frozen += margin
            market.total_quantity += qty
            if position is None:
                self._ids.position_id += 1
                position = Position(
                    id=self._ids.position_id,
                    user_id=account.user_id,
                    pair=pair,
                    is_long=is_long,
                    quantity=qty,
                    opening_price=price,
                    margin=margin,
                    lever=lever,
                    position_type=position_type,
                    entrust_id=order_id,
                    fees=fee,
                    create_ms=now_ms,
                )
                account.positions[pair] = position
                market.holders[account.user_id] = None
                change = "NEW"
            else:
                total = position.quantity + qty
                position.opening_price = (
                    (position.quantity * position.opening_price + notional) / total
                ).quantize(exp)
                position.quantity = total
                position.margin += margin
                position.fees += fee
                change = "INCREASE"
            is_close = False
        else:
            closes = qty == position.quantity
            released = (
                position.margin
                if closes
                else (position.margin * qty / position.quantity).quantize(exp)
            )
            pnl = pnl_at(position, price, qty).quantize(exp)
            if liquidation:
                floor = released
                if position.position_type != _ISOLATED:
                    floor += max(balance.available, _ZERO)
                pnl = max(pnl, -floor)
            position.quantity -= qty
            position.margin -= released
            position.realized_pnl += pnl
            position.fees += fee
            balance.frozen -= released
            balance.available += released + pnl - fee
            market.total_quantity -= qty
            if closes:
                del account.positions[pair]
                del market.holders[account.user_id]
            change = "LIQUIDATE" if liquidation else ("CLOSE" if closes else "REDUCE")
            is_close = True
        self._ids.match_id += 1
        if self.match_delay is not None:
            delay = self.match_delay()
            if delay > 0:
                account.listed_from_ms[self._ids.match_id] = now_ms + delay
        history = account.matches.get(pair)
        if history is None:
            history = account.matches[pair] = MatchHistory(self.match_history_limit)
        history.append(
            Match(
                id=self._ids.match_id,
                order_id=order_id,
                position_id=position.id,
                contract_pair_id=market.contract_pair_id,
                time_ms=now_ms,
                pair=pair,
                coin=market.coin,
                settle_decimals=market.settings.settle_decimals,
                lever=lever,
                is_market=is_market,
                is_close=is_close,
                is_long=is_long,
                is_taker=taker,
                price=price,
                quantity=qty,
                amount=notional,
                fee=fee,
                profit_loss=pnl,
                opening_price=position.opening_price,
                address=account.address,
                delivery_time=market.rules.delivery_time,
            )
        )
        if not self._hold_trim:
            _trim_matches(account, history)
        events.append(
            PositionChanged(
                user_id=account.user_id,
                pair=pair,
                change_type=change,
                position_id=position.id,
                is_long=position.is_long,
                current_quantity=position.quantity,
                operate_quantity=qty,
                can_closed_quantity=self.can_close(account, position),
                contract_pair_id=market.contract_pair_id,
                position_type=position.position_type,
                opening_price=position.opening_price,
                margin_amount=position.margin,
                margin_call_amount=_ZERO,
            )
        )
        self._balance_event(account, balance, balance.available - before, events)

    def _trim(self, account: Account) -> None:
        """Bound what the account keeps per order and match (never inside an atomic batch)."""
        account.orders.trim()
        order_ids = account.order_ids
        while len(order_ids) > self.client_id_history_limit:
            order_ids.popitem(last=False)
        for history in account.matches.values():
            _trim_matches(account, history)

    def _balance_event(
        self, account: Account, balance: Balance, operate: Decimal, events: list[Event]
    ) -> None:
        self._ids.log_id += 1
        events.append(
            BalanceChanged(
                user_id=account.user_id,
                coin=balance.coin,
                coin_id=balance.coin_id,
                available=balance.available,
                frozen=balance.frozen,
                log_id=self._ids.log_id,
                operate_amount=operate,
            )
        )

    # -- marks -------------------------------------------------------------------------------

    def set_mark(self, pair: str, price: Decimal, now_ms: int) -> list[Event]:
        """Move a pair's mark: fill the resting orders it crosses, then liquidate."""
        market = self.markets[pair]
        if price <= 0:
            raise ValueError(f"a mark price must be positive, got {price}")
        market.mark = price
        events: list[Event] = []
        for order in market.book.pop_crossed(price):
            self._fill_resting(market, order, now_ms, events)
        self._liquidate(market, now_ms, events)
        return events

    def _fill_resting(
        self, market: Market, order: RestingOrder, now_ms: int, events: list[Event]
    ) -> None:
        account = self.accounts[order.user_id]
        balance = account.balances[market.coin]
        position = account.positions.get(market.name)
        qty = order.remaining
        opens = position is None or position.is_long == order.is_long
        if not opens:
            assert position is not None
            if position.position_type != order.position_type:
                qty = _ZERO
            qty = min(qty, position.quantity)
        else:
            if position is not None and position.position_type != order.position_type:
                qty = _ZERO
            need = _margin_and_fee(market, qty * order.price, order.lever, self.fees.maker)
            if need > balance.available + order.reserve:
                qty = _ZERO
        account.orders.ended(order, qty, now_ms)
        if not qty:
            self._release(account, market, order, events)
            return
        key = (market.name, order.is_long)
        account.resting[key] = account.resting.get(key, _ZERO) - order.remaining
        self._fill(
            account,
            market,
            order.order_id,
            order.is_long,
            qty,
            order.price,
            order.lever,
            order.position_type,
            False,
            False,
            now_ms,
            events,
            released_reserve=order.reserve,
        )

    def cancel_resting(self, order: RestingOrder, now_ms: int) -> list[Event]:
        """Cancel a resting order: out of the book, its rest and frozen reserve released."""
        market = self.markets[order.pair]
        account = self.accounts[order.user_id]
        market.book.cancel(order)
        account.orders.ended(order, _ZERO, now_ms)
        events: list[Event] = []
        self._release(account, market, order, events)
        return events

    def _release(
        self, account: Account, market: Market, order: RestingOrder, events: list[Event]
    ) -> None:
        """A resting order ends unfilled: its quantity no longer rests, its reserve is free."""
        key = (market.name, order.is_long)
        account.resting[key] = account.resting.get(key, _ZERO) - order.remaining
        if order.reserve:
            balance = account.balances[market.coin]
            balance.available += order.reserve
            balance.frozen -= order.reserve
            self._balance_event(account, balance, order.reserve, events)

    def _liquidate(self, market: Market, now_ms: int, events: list[Event]) -> None:
        due = positions_to_liquidate(market, self.accounts, self.markets, self.maintenance_rate)
        for account, position in due:
            self._close_at_mark(account, self.markets[position.pair], position, now_ms, events)

    def _close_at_mark(
        self,
        account: Account,
        market: Market,
        position: Position,
        now_ms: int,
        events: list[Event],
    ) -> None:
        self._ids.order_id += 1
        self._fill(
            account,
            market,
            self._ids.order_id,
            not position.is_long,
            position.quantity,
            market.mark,
            position.lever,
            position.position_type,
            True,
            True,
            now_ms,
            events,
            liquidation=True,
        )


def _trim_matches(account: Account, history: MatchHistory) -> None:
    """Forget the matches beyond the history's limit, and their held-back listing times."""
    forgotten = history.trim()
    held = account.listed_from_ms
    if held:
        for match in forgotten:
            held.pop(match.id, None)


def _margin_and_fee(market: Market, notional: Decimal, lever: int, rate: Decimal) -> Decimal:
    """What opening notional freezes and charges: its margin plus its fee, each rounded."""
    exp = market.money_exp
    return (notional / lever).quantize(exp) + (notional * rate).quantize(exp)
