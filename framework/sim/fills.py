"""How orders meet the mark and fill: the arrival plan, the fill step, resting orders, liquidation.

Arrival (:func:`plan_fill`, pure): market orders and limit orders that cross the mark (a buy
at or above it, a sell at or below it) fill as taker at ``mark x (1 + slippage)`` for buys
and ``mark x (1 - slippage)`` for sells, rounded away from the mark to the pair's price
decimals, and never beyond a limit price. The pair's liquidity (None: unlimited) caps one
order's immediate fill. IOC and market orders drop what does not fill; FOK fills everything
or nothing; GTC rests the rest; POST_ONLY rests only when it does not cross (the caller
decides what a crossing POST_ONLY means).

The fill step (:class:`FillStep`): a fill in the position's direction (or with no position)
opens or increases it (NEW, INCREASE): its margin ``quantity x price / lever`` is frozen
and its fee charged from the available balance, and the opening price becomes the
quantity-weighted average. A fill against the position reduces or closes it (REDUCE,
CLOSE): the margin of the closed part is released with its realized PnL, less the fee. The
fee is the taker or maker rate of the notional; amounts are rounded to the pair's settle
decimals. Each fill records a :class:`~framework.sim.events.Match` in the account's history
of the pair (held back from the match list by the match_delay fault's draw, when there is
one) and reports a :class:`~framework.sim.events.PositionChanged` and a
:class:`~framework.sim.events.BalanceChanged` with the next logId. The history is trimmed at
once unless an atomic batch is open.

Resting orders: the unfilled rest of a GTC (or non-crossing POST_ONLY) order goes into the
pair's book (:mod:`framework.sim.book`); its quantity counts in ``Account.resting`` by pair
and side (what :func:`can_close` and the one-way limit see) and, when it opens, its margin
and maker fee at its limit price are frozen as its reserve. When the mark crosses it, it
fills whole at its limit price, as maker, except that a resting fill never flips a position
(the part beyond the position it reduces is cancelled), and it is cancelled whole when its
positionType no longer matches the open position's or when opening would take more than the
available balance plus its reserve. An order that ends unfilled releases its rest and its
reserve. Against a published market, the queue rule fills a resting order in part
(:func:`fill_part`): each part at its limit as maker, with its share of the reserve.

Liquidation (:func:`positions_to_liquidate`, pure): an isolated position goes when its
margin plus unrealized PnL falls to its maintenance margin, ``maintenance_rate x quantity x
mark``. Cross positions of one account and settlement coin go together when the available
balance plus their margins and unrealized PnL falls to the sum of their maintenance
margins. A liquidation (LIQUIDATE) closes the whole position at the mark with no fee, its
loss capped at the margin (isolated) or the margin plus the available balance (cross).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import ROUND_DOWN, ROUND_UP, Decimal

import attrs

from framework.sim.book import RestingOrder
from framework.sim.events import BalanceChanged, Event, Match, PositionChanged
from framework.sim.history import MatchHistory
from framework.sim.state import (
    Account,
    Balance,
    FeeSettings,
    Market,
    Position,
    Sequences,
    pnl_at,
    trim_matches,
)
from framework.venue.models import MatchType, OrderInput

__all__ = [
    "FillPlan",
    "FillStep",
    "can_close",
    "fill_crossed",
    "fill_part",
    "liquidation_price",
    "margin_and_fee",
    "plan_fill",
    "positions_to_liquidate",
    "release",
    "rest_order",
]

_ZERO = Decimal(0)
_ISOLATED = 3


@attrs.frozen(slots=True)
class FillPlan:
    """What an order does on arrival: fill now at price, rest the rest, crossing or not."""

    fill: Decimal
    price: Decimal
    rest: Decimal
    crossing: bool


def plan_fill(market: Market, order: OrderInput, slippage: Decimal) -> FillPlan:
    """The immediate fill and resting quantity of an order at the market's mark."""
    qty = order.quantity
    is_long = order.is_long
    mark = market.mark
    slip = mark * (1 + slippage) if is_long else mark * (1 - slippage)
    slipped = slip.quantize(market.price_exp, ROUND_UP if is_long else ROUND_DOWN)
    limit = order.price
    if order.is_market or limit is None:
        crossing, price = True, slipped
    else:
        crossing = limit >= mark if is_long else limit <= mark
        price = (min(limit, slipped) if is_long else max(limit, slipped)) if crossing else limit
    match_type = order.match_type
    if not crossing:
        rests = match_type == MatchType.GTC or match_type == MatchType.POST_ONLY
        return FillPlan(_ZERO, price, qty if rests else _ZERO, False)
    liquidity = market.settings.liquidity
    fill = qty if liquidity is None or liquidity >= qty else liquidity
    if match_type == MatchType.FOK and fill < qty:
        fill = _ZERO
    rest = qty - fill if match_type == MatchType.GTC and not order.is_market else _ZERO
    return FillPlan(fill, price, rest, True)


@attrs.define(slots=True, eq=False, kw_only=True)
class FillStep:
    """Applies fills to accounts with the exchange's fee rates, id sequences and match limit."""

    fees: FeeSettings
    ids: Sequences
    match_delay: Callable[[], int] | None
    match_history_limit: int
    # True while an atomic batch holds a savepoint: nothing is trimmed meanwhile.
    hold_trim: bool = False

    def apply(
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
                self.ids.position_id += 1
                position = Position(
                    id=self.ids.position_id,
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
        self.ids.match_id += 1
        if self.match_delay is not None:
            delay = self.match_delay()
            if delay > 0:
                account.listed_from_ms[self.ids.match_id] = now_ms + delay
        history = account.matches.get(pair)
        if history is None:
            history = account.matches[pair] = MatchHistory(self.match_history_limit)
        history.append(
            Match(
                id=self.ids.match_id,
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
        if not self.hold_trim:
            trim_matches(account, history)
        events.append(
            PositionChanged(
                user_id=account.user_id,
                pair=pair,
                change_type=change,
                position_id=position.id,
                is_long=position.is_long,
                current_quantity=position.quantity,
                operate_quantity=qty,
                can_closed_quantity=can_close(account, position),
                contract_pair_id=market.contract_pair_id,
                position_type=position.position_type,
                opening_price=position.opening_price,
                margin_amount=position.margin,
                margin_call_amount=_ZERO,
            )
        )
        self.balance_changed(account, balance, balance.available - before, events)

    def close_at_mark(
        self,
        account: Account,
        market: Market,
        position: Position,
        now_ms: int,
        events: list[Event],
    ) -> None:
        """Liquidate a position: close all of it at the mark, as a taker market order, no fee."""
        self.ids.order_id += 1
        self.apply(
            account,
            market,
            self.ids.order_id,
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

    def balance_changed(
        self, account: Account, balance: Balance, operate: Decimal, events: list[Event]
    ) -> None:
        """Report a balance's new amounts (operate: the change of available) with the next logId."""
        self.ids.log_id += 1
        events.append(
            BalanceChanged(
                user_id=account.user_id,
                coin=balance.coin,
                coin_id=balance.coin_id,
                available=balance.available,
                frozen=balance.frozen,
                log_id=self.ids.log_id,
                operate_amount=operate,
            )
        )


def can_close(account: Account, position: Position) -> Decimal:
    """The quantity of a position not yet claimed by resting orders against it."""
    claimed = account.resting.get((position.pair, not position.is_long), _ZERO)
    return max(position.quantity - claimed, _ZERO)


def margin_and_fee(market: Market, notional: Decimal, lever: int, rate: Decimal) -> Decimal:
    """What opening notional freezes and charges: its margin plus its fee, each rounded."""
    exp = market.money_exp
    return (notional / lever).quantize(exp) + (notional * rate).quantize(exp)


def rest_order(
    step: FillStep,
    account: Account,
    market: Market,
    order: OrderInput,
    order_id: int,
    rest: Decimal,
    reserve: Decimal,
    events: list[Event],
) -> RestingOrder:
    """Put rest of an accepted limit order in the book with its reserve frozen; returns it."""
    assert order.price is not None
    step.ids.seq += 1
    resting = RestingOrder(
        order_id=order_id,
        user_id=account.user_id,
        pair=market.name,
        client_order_id=order.client_order_id,
        is_long=order.is_long,
        price=order.price,
        remaining=rest,
        lever=order.lever,
        position_type=int(order.position_type),
        reserve=reserve,
        seq=step.ids.seq,
    )
    market.book.add(resting)
    key = (market.name, order.is_long)
    account.resting[key] = account.resting.get(key, _ZERO) + rest
    if reserve:
        balance = account.balances[market.coin]
        balance.available -= reserve
        balance.frozen += reserve
        step.balance_changed(account, balance, -reserve, events)
    return resting


def fill_crossed(
    step: FillStep,
    account: Account,
    market: Market,
    order: RestingOrder,
    now_ms: int,
    events: list[Event],
) -> None:
    """Fill a resting order the mark crossed (at most the position it reduces), or cancel it."""
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
        need = margin_and_fee(market, qty * order.price, order.lever, step.fees.maker)
        if need > balance.available + order.reserve:
            qty = _ZERO
    account.orders.ended(order, qty, now_ms)
    if not qty:
        release(step, account, market, order, events)
        return
    key = (market.name, order.is_long)
    account.resting[key] = account.resting.get(key, _ZERO) - order.remaining
    _maker_fill(step, account, market, order, qty, now_ms, events, order.reserve)


def _maker_fill(
    step: FillStep,
    account: Account,
    market: Market,
    order: RestingOrder,
    qty: Decimal,
    now_ms: int,
    events: list[Event],
    released: Decimal,
) -> None:
    """qty of a resting order filled at its limit, as maker, released of its reserve."""
    step.apply(
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
        released_reserve=released,
    )


def fill_part(
    step: FillStep,
    account: Account,
    market: Market,
    order: RestingOrder,
    qty: Decimal,
    now_ms: int,
    events: list[Event],
) -> bool:
    """Fill part (qty < remaining) of a resting order at its limit, as maker; it keeps
    resting with the rest and the rest of its reserve. The whole-fill rule's exceptions hold:
    a part that would flip the position fills what it reduces and the order ends (cancelled),
    and a positionType that no longer matches, or an opening part the available balance plus
    its share of the reserve does not cover, cancels the order. True when the order ended
    (the caller has taken it out of the book then)."""
    balance = account.balances[market.coin]
    position = account.positions.get(market.name)
    opens = position is None or position.is_long == order.is_long
    share = (order.reserve * qty / order.remaining).quantize(market.money_exp)
    ended = False
    if position is not None and position.position_type != order.position_type:
        qty, ended = _ZERO, True
    elif not opens:
        assert position is not None
        if qty >= position.quantity:
            qty, ended = position.quantity, True
    elif margin_and_fee(market, qty * order.price, order.lever, step.fees.maker) > (
        balance.available + share
    ):
        qty, ended = _ZERO, True
    if ended:
        market.book.cancel(order)
        account.orders.ended(order, qty, now_ms)
    else:
        account.orders.part_filled(order, qty, now_ms)
    key = (market.name, order.is_long)
    if qty:
        account.resting[key] = account.resting.get(key, _ZERO) - qty
        order.remaining -= qty
        if not ended:
            order.reserve -= share
        _maker_fill(step, account, market, order, qty, now_ms, events, _ZERO if ended else share)
    if ended:
        release(step, account, market, order, events)
    return ended


def release(
    step: FillStep,
    account: Account,
    market: Market,
    order: RestingOrder,
    events: list[Event],
) -> None:
    """A resting order ends unfilled: its quantity no longer rests, its reserve is free."""
    key = (market.name, order.is_long)
    account.resting[key] = account.resting.get(key, _ZERO) - order.remaining
    if order.reserve:
        balance = account.balances[market.coin]
        balance.available += order.reserve
        balance.frozen -= order.reserve
        step.balance_changed(account, balance, order.reserve, events)


def positions_to_liquidate(
    market: Market,
    accounts: Mapping[int, Account],
    markets: Mapping[str, Market],
    maintenance_rate: Decimal,
) -> list[tuple[Account, Position]]:
    """The positions to close after market's mark moved, in holder order."""
    due: list[tuple[Account, Position]] = []
    cross_accounts: list[Account] = []
    for user_id in market.holders:
        account = accounts[user_id]
        position = account.positions[market.name]
        if position.position_type != _ISOLATED:
            cross_accounts.append(account)
            continue
        upnl = pnl_at(position, market.mark, position.quantity)
        if position.margin + upnl <= maintenance_rate * position.quantity * market.mark:
            due.append((account, position))
    for account in cross_accounts:
        crossed = [
            p
            for p in account.positions.values()
            if p.position_type != _ISOLATED and markets[p.pair].coin == market.coin
        ]
        equity = account.balances[market.coin].available
        maintenance = Decimal(0)
        for p in crossed:
            mark = markets[p.pair].mark
            equity += p.margin + pnl_at(p, mark, p.quantity)
            maintenance += maintenance_rate * p.quantity * mark
        if equity <= maintenance:
            due.extend((account, p) for p in crossed)
    return due


def liquidation_price(
    position: Position, maintenance_rate: Decimal, price_exp: Decimal
) -> Decimal | None:
    """The mark at which an isolated position is liquidated; None for cross positions."""
    if position.position_type != _ISOLATED:
        return None
    qty, entry, rate = position.quantity, position.opening_price, maintenance_rate
    if position.is_long:
        price = (entry * qty - position.margin) / (qty * (1 - rate))
    else:
        price = (entry * qty + position.margin) / (qty * (1 + rate))
    return max(price, Decimal(0)).quantize(price_exp)
