"""What a strategy asks for (OrderIntent) and what becomes of it (OrderStatus)."""

from __future__ import annotations

import enum
from decimal import Decimal

import attrs

from framework.venue.models import MatchType, PositionType

__all__ = ["TERMINAL", "MatchType", "OrderIntent", "OrderStatus", "PositionType"]


class OrderStatus(enum.StrEnum):
    """The life of an intent: PENDING, ACCEPTED/REJECTED/UNKNOWN, FILLED/AMBIGUOUS/LOST/CANCELED.

    AMBIGUOUS ends an UNKNOWN intent that belonged to a group of same-looking in-doubt intents
    (same pair, side and quantity) when matches of the group were seen: the group's fills are
    counted (``OrderUpdate.group_filled`` of ``len(OrderUpdate.group)``), but which of its
    intents filled is unknowable, since a match carries no clientOrderId.

    CANCELED ends an order the venue withdrew at a cancel (an extension beyond SPEC.md): what
    had filled before stays filled (``OrderUpdate.msg`` says how much was known); a fill
    listed later reaches ``on_match`` with its client order id, and no update follows.

    LOST: no answer and no evidence within the unknown window; the order may rest or have
    filled. A list or record naming it later makes it ACCEPTED (or FILLED, CANCELED), a
    match only it could own FILLED, a group of same-looking ones AMBIGUOUS.
    """

    PENDING = "PENDING"
    ACCEPTED = "ACCEPTED"
    REJECTED = "REJECTED"
    UNKNOWN = "UNKNOWN"
    FILLED = "FILLED"
    AMBIGUOUS = "AMBIGUOUS"
    LOST = "LOST"
    CANCELED = "CANCELED"


TERMINAL = frozenset(
    {
        OrderStatus.ACCEPTED,
        OrderStatus.REJECTED,
        OrderStatus.FILLED,
        OrderStatus.AMBIGUOUS,
        OrderStatus.LOST,
        OrderStatus.CANCELED,
    }
)
"""Statuses after which the execution engine never sends the intent again."""


def _shown(value: object) -> str:
    """A value as an error shows it; a float or int with how to write it as a Decimal."""
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        return f'{type(value).__name__} {value!r} (write Decimal("{value}"): money is exact)'
    return repr(value)


def _default_is_market(intent: OrderIntent) -> bool:
    return intent.price is None


@attrs.frozen(slots=True, kw_only=True)
class OrderIntent:
    """An order a strategy wants placed; price None with is_market True is a market order."""

    pair: str
    is_long: bool
    quantity: Decimal
    price: Decimal | None = None
    is_market: bool = attrs.field(default=attrs.Factory(_default_is_market, takes_self=True))
    lever: int = 1
    match_type: MatchType = MatchType.GTC
    position_type: PositionType = PositionType.ISOLATED
    client_order_id: str | None = None
    tag: str | None = None

    def __attrs_post_init__(self) -> None:
        """Refuse what no venue would take, naming the field, the value and what was expected."""
        if not isinstance(self.pair, str) or not self.pair:
            raise ValueError(
                f"OrderIntent.pair: expected a pair name like 'ETH-USD', got {self.pair!r}"
            )
        for name in ("is_long", "is_market"):
            value = getattr(self, name)
            if type(value) is not bool:
                raise ValueError(f"OrderIntent.{name}: expected True or False, got {value!r}")
        q = self.quantity
        if not isinstance(q, Decimal) or not q.is_finite() or q <= 0:
            raise ValueError(f"OrderIntent.quantity: expected a positive Decimal, got {_shown(q)}")
        p = self.price
        if p is None:
            if not self.is_market:
                raise ValueError("OrderIntent.price: a limit order (is_market False) needs a price")
        elif not isinstance(p, Decimal) or not p.is_finite() or p <= 0:
            raise ValueError(
                f"OrderIntent.price: expected a positive Decimal or None, got {_shown(p)}"
            )
        if type(self.lever) is not int or self.lever < 1:
            raise ValueError(f"OrderIntent.lever: expected a positive int, got {self.lever!r}")
