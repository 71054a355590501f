"""Resting orders and their account: an order's rest held in the book, then filled or released.

The unfilled rest of a GTC (or non-crossing POST_ONLY) order goes into the pair's book
(:mod:`framework.twin.book`); its quantity counts in ``Account.resting`` by pair and side
(what :func:`~framework.twin.fills.can_close` and the one-way limit see) and, when it opens,
its margin and maker fee at its limit price are frozen as its reserve. When the mark crosses
it, it fills whole at its limit price, as maker, except that a resting fill never flips a
position (the part beyond the position it reduces is cancelled), and it is cancelled whole
when its positionType no longer matches the open position's or when opening would take more
than the available balance plus its reserve. An order that ends unfilled releases its rest
and its reserve.
"""

from __future__ import annotations

from decimal import Decimal

from framework.twin.book import RestingOrder
from framework.twin.events import Event
from framework.twin.fills import FillStep, margin_and_fee
from framework.twin.state import Account, Market
from framework.venue.models import OrderInput

__all__ = ["fill_crossed", "release", "rest_order"]

_ZERO = Decimal(0)


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
        released_reserve=order.reserve,
    )


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
