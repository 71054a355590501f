"""Open orders as the engine knows them: the ACCEPTED orders that may rest, for strategies.

What the engine tracks of its orders lives in the ledger (:mod:`framework.engine.reconcile`);
this is the read a strategy gets (``Strategy.open_orders``), each order as a frozen
:class:`OpenOrder`. Cancels (:mod:`framework.engine.cancels`) keep the set true to the venue
by the venue's order records (:class:`VenueOrder`: its open-order list, queryOrder).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Final, Protocol

import attrs

from framework.engine.intents import MatchType, OrderIntent, OrderStatus, PositionType
from framework.engine.reconcile import Ledger
from framework.engine.risk import is_resting

__all__ = ["NO_OWNER", "OpenOrder", "VenueOrder", "listed_intent", "open_orders"]

NO_OWNER: Final = ""
"""The strategy name of orders adopted from an earlier journal of this node (owner unknown)."""


class VenueOrder(Protocol):
    """What the engine reads of a venue's order record (open-order list, queryOrder)."""

    @property
    def client_order_id(self) -> str | None:
        """The clientOrderId the order was created with."""
        ...

    @property
    def entrust_id(self) -> int | None:
        """The venue's order id."""
        ...

    @property
    def filled_quantity(self) -> Decimal | None:
        """How much of it has filled, when told."""
        ...

    @property
    def state(self) -> str:
        """'open', 'filled', 'canceled' or 'unknown'."""
        ...


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


def listed_intent(record: VenueOrder) -> OrderIntent | None:
    """The intent a listed order was placed with, as far as its record says (None: the record
    lacks its pair, side or quantity, or holds what no intent may)."""
    pair = getattr(record, "pair_name", None)
    is_long = getattr(record, "is_long", None)
    quantity = getattr(record, "quantity", None)
    if not isinstance(pair, str) or not isinstance(is_long, bool) or quantity is None:
        return None
    price = getattr(record, "price", None)
    is_market = getattr(record, "is_market", None)
    try:
        return OrderIntent(
            pair=pair,
            is_long=is_long,
            quantity=quantity,
            price=price,
            is_market=is_market if isinstance(is_market, bool) else price is None,
            lever=getattr(record, "lever", None) or 1,
            match_type=MatchType(getattr(record, "match_type", None) or MatchType.GTC),
            position_type=PositionType(
                getattr(record, "position_type", None) or PositionType.ISOLATED
            ),
        )
    except ValueError:
        return None
