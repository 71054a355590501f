"""Who is who: the engine's live intents by clientOrderId and by orderId, and those in doubt.

The :class:`Ledger` is the execution engine's memory of its intents. It binds a venue
orderId to an intent only through the clientOrderId of an answer, or through evidence: a
match whose entrustId belongs to no known order and that agrees with an UNKNOWN intent in
pair, side and quantity resolves the oldest such intent. It also remembers the orderIds of
orders filled lately, so a late match still names its intent and is never taken for
evidence about another. Pure data structure: no I/O, no clock.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Final

import attrs

from framework.engine.intents import OrderIntent, OrderStatus
from framework.venue.models import MatchRecord, OrderInput

__all__ = ["DONE_MEMORY", "Batch", "Ledger", "LiveOrder", "agrees", "order_input"]

DONE_MEMORY: Final = 100_000
"""How many filled orders' ids the ledger remembers to link late matches."""


@attrs.define(slots=True, eq=False)
class LiveOrder:
    """The engine's mutable record of one intent it still tracks."""

    client_order_id: str
    strategy: str
    intent: OrderIntent
    order: OrderInput  # the payload: built once, sent identically on every attempt
    status: OrderStatus
    created_ms: int
    price: Decimal | None  # the risk reference price it was booked at
    booked: bool  # counted in the risk gate's open quantity
    order_id: int | None = None
    filled: Decimal = Decimal(0)
    unknown_since_ms: int = 0


@attrs.define(slots=True, eq=False)
class Batch:
    """One batchCreate call: the same orders (payloads) on every attempt."""

    id: int
    orders: tuple[OrderInput, ...]
    attempt: int = 0
    entries: list[LiveOrder] = attrs.field(factory=list, repr=False)

    @property
    def client_order_ids(self) -> list[str]:
        """The clientOrderIds of the batch, in order."""
        return [o.client_order_id for o in self.orders]


def order_input(client_order_id: str, intent: OrderIntent) -> OrderInput:
    """The wire record (SPEC 2.1) of an intent under its client order id."""
    return OrderInput(
        client_order_id=client_order_id,
        is_long=intent.is_long,
        is_market=intent.is_market,
        lever=intent.lever,
        match_type=intent.match_type,
        pair_name=intent.pair,
        position_type=intent.position_type,
        price=intent.price,
        quantity=intent.quantity,
    )


def agrees(order: OrderInput, match: MatchRecord) -> bool:
    """True when a match could be the whole fill of an order: same pair, side and quantity."""
    return (
        order.pair_name == match.symbol
        and order.is_long == match.is_long
        and order.quantity == match.quantity
    )


class Ledger:
    """Live intents by client order id and order id; UNKNOWN ones in the order of doubt."""

    __slots__ = ("_done", "_done_limit", "by_order_id", "live", "unknown")

    def __init__(self, *, done_memory: int = DONE_MEMORY) -> None:
        self.live: dict[str, LiveOrder] = {}  # PENDING, UNKNOWN and ACCEPTED intents
        self.by_order_id: dict[int, LiveOrder] = {}
        self.unknown: dict[str, LiveOrder] = {}  # insertion order = order of doubt
        self._done: dict[int, tuple[str, str]] = {}
        self._done_limit = done_memory

    def add(self, entry: LiveOrder) -> None:
        """Track an intent."""
        self.live[entry.client_order_id] = entry

    def bind(self, entry: LiveOrder, order_id: int) -> None:
        """The venue named the intent's order id."""
        entry.order_id = order_id
        self.by_order_id[order_id] = entry

    def doubt(self, entry: LiveOrder, now_ms: int) -> None:
        """The intent's outcome is unknown from now on."""
        entry.unknown_since_ms = now_ms
        self.unknown[entry.client_order_id] = entry

    def drop(self, entry: LiveOrder) -> None:
        """Stop tracking an intent (final); a filled order's id is remembered for a while."""
        coid = entry.client_order_id
        self.live.pop(coid, None)
        self.unknown.pop(coid, None)
        if entry.order_id is not None:
            self.by_order_id.pop(entry.order_id, None)
            if entry.status is OrderStatus.FILLED:
                done = self._done
                done[entry.order_id] = (coid, entry.strategy)
                if len(done) > self._done_limit:
                    del done[next(iter(done))]

    def recently_filled(self, order_id: int) -> tuple[str, str] | None:
        """(client_order_id, strategy) of a lately filled order, else None."""
        return self._done.get(order_id)

    def evidence(self, match: MatchRecord) -> LiveOrder | None:
        """The oldest UNKNOWN intent the match agrees with (no longer UNKNOWN), else None."""
        best: LiveOrder | None = None
        for entry in self.unknown.values():
            if agrees(entry.order, match) and (best is None or entry.created_ms < best.created_ms):
                best = entry
        if best is not None:
            del self.unknown[best.client_order_id]
        return best

    def expired(self, horizon_ms: int) -> list[LiveOrder]:
        """UNKNOWN intents in doubt since horizon_ms or earlier, oldest first."""
        out = []
        for entry in self.unknown.values():
            if entry.unknown_since_ms > horizon_ms:
                break
            out.append(entry)
        return out

    def oldest_doubt_ms(self) -> int | None:
        """When the longest-standing UNKNOWN intent became UNKNOWN, or None."""
        for entry in self.unknown.values():
            return entry.unknown_since_ms
        return None
