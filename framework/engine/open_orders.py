"""Open orders as the engine knows them: the ACCEPTED orders that may rest, for strategies.

What the engine tracks of its orders lives in the ledger (:mod:`framework.engine.reconcile`);
this is the read a strategy gets (``Strategy.open_orders``), each order as a frozen
:class:`OpenOrder`. Cancels (:mod:`framework.engine.cancels`) keep the set true to the venue.
"""

from __future__ import annotations

from decimal import Decimal

import attrs

from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.reconcile import Ledger
from framework.engine.risk import is_resting

__all__ = ["OpenOrder", "open_orders"]


@attrs.frozen(slots=True)
class OpenOrder:
    """A resting order of a strategy, as the engine knows it."""

    client_order_id: str
    strategy: str
    pair: str
    is_long: bool
    price: Decimal | None
    quantity: Decimal
    filled: Decimal
    order_id: int | None
    intent: OrderIntent = attrs.field(repr=False)

    @property
    def remaining(self) -> Decimal:
        """What is left to fill."""
        return self.quantity - self.filled


def open_orders(
    ledger: Ledger, strategy: str | None = None, pair: str | None = None
) -> list[OpenOrder]:
    """The ACCEPTED orders that may rest, of strategy and pair (None: all), oldest first."""
    out = []
    for e in ledger.live.values():
        if e.status is not OrderStatus.ACCEPTED or not is_resting(e.order):
            continue
        if strategy is not None and e.strategy != strategy:
            continue
        if pair is not None and e.order.pair_name != pair:
            continue
        o = e.order
        out.append(
            OpenOrder(
                e.client_order_id,
                e.strategy,
                o.pair_name,
                o.is_long,
                o.price,
                o.quantity,
                e.filled,
                e.order_id,
                e.intent,
            )
        )
    return out
