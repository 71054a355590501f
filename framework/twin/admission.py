"""Whether an account may place an order, before it meets the mark: the twin's refusals.

Pure checks over the exchange's state, in the order :class:`~framework.twin.exchange.Exchange`
applies them: a clientOrderId already used by the account or earlier in the batch (``2001
Illegal parameter:clientOrderId``; "used" while the twin remembers an order of that id, in
``Account.order_ids``, the newest ``client_id_history_limit`` accepted orders, or in the
order records, every open order and the newest ``order_history_limit`` completed ones; an
id both have forgotten is accepted again), the pair's rules
(:func:`framework.venue.rules.check_order`: 2301-2304, 2307, 2312, 2316, 2317), no balance in
the settlement coin (2330), a positionType other than the open position's (2310), an order
against the position larger than it (2318), and, for orders in the position's direction,
the one-way limit counting resting orders (2305) and the pair's total open quantity (2306).
Balance checks (2102, 2201) come later, once the fill is known.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from framework.twin.state import Account, Market, Refusal
from framework.venue.codec import plain_decimal
from framework.venue.errors import render_message
from framework.venue.models import OrderInput
from framework.venue.rules import check_order

__all__ = ["admission_refusal"]

_ZERO = Decimal(0)


def admission_refusal(
    account: Account, market: Market, order: OrderInput, *, now: datetime, seen: set[str]
) -> Refusal | None:
    """The refusal of an order by the checks above, or None; adds its id to seen."""
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
