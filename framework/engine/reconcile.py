"""Who is who: the engine's live intents by clientOrderId and by orderId, and those in doubt.

The :class:`Ledger` is the execution engine's memory of its intents. It binds a venue
orderId to an intent only through the clientOrderId of an answer, or through evidence: a
match whose entrustId belongs to no known order and that agrees with an UNKNOWN intent in
pair, side and quantity resolves the oldest such intent. It also remembers the orderIds of
orders filled lately, so a late match still names its intent and is never taken for
evidence about another.

The :class:`EarlyMatches` hold the matches seen before the answer that may name their
order: the match poller runs beside the send, so the venue may have executed a batch (and a
poll found its fills) while its answer is still in flight. Such a match is neither external
nor evidence until every batch in flight when it was seen has been answered.
Pure data structures: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Final

import attrs

from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.journaling import JournalEntry
from framework.venue.models import MatchRecord, OrderInput

__all__ = [
    "DONE_MEMORY",
    "Batch",
    "EarlyMatches",
    "Ledger",
    "LiveOrder",
    "agrees",
    "order_input",
    "revive",
]

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


def revive(
    saved: JournalEntry, reference_price: Callable[[OrderInput], Decimal | None], booked: bool
) -> LiveOrder:
    """The engine's record of an intent read back from the journal at restart."""
    order = order_input(saved.client_order_id, saved.intent)
    return LiveOrder(
        saved.client_order_id,
        saved.strategy,
        saved.intent,
        order,
        saved.status,
        saved.created_ms,
        reference_price(order),
        booked,
        saved.order_id,
        saved.filled,
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

    def knows(self, order_id: int) -> bool:
        """True if the order id names a tracked intent or one filled lately."""
        return order_id in self.by_order_id or order_id in self._done

    def could_claim(self, order_ids: Iterable[int | None]) -> bool:
        """True when a match of one of order_ids may be linked here: a known or UNKNOWN order."""
        if self.unknown:
            return True
        if not self.by_order_id and not self._done:
            return False
        return any(order_id is not None and self.knows(order_id) for order_id in order_ids)

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


class EarlyMatches:
    """Batches in flight (sent, answer not yet handled) and the matches held meanwhile.

    A match is held when its entrustId names no known order while a batch is in flight; it
    is released, in arrival order, once its order is known (the answer bound the orderId)
    or once every batch that was in flight when it was seen has been answered: a batch sent
    later cannot hold its order (a retried batch was not executed before).
    """

    __slots__ = ("_flight", "_held", "_sends")

    def __init__(self) -> None:
        self._sends = 0  # sends so far: a batch in flight and a held match note the count
        self._flight: dict[int, int] = {}  # batch id -> number of its send
        self._held: list[tuple[int, MatchRecord]] = []  # arrival order

    @property
    def in_flight(self) -> bool:
        """True while some batch has been sent and its answer not yet handled."""
        return bool(self._flight)

    def __len__(self) -> int:
        return len(self._held)

    def sent(self, batch_id: int) -> None:
        """The batch's first byte goes out now."""
        self._sends += 1
        self._flight[batch_id] = self._sends

    def answered(self, batch_id: int) -> None:
        """The batch's answer (or failure) is being handled: it is no longer in flight."""
        self._flight.pop(batch_id, None)

    def hold(self, match: MatchRecord) -> None:
        """Keep a match until the batches in flight now are answered."""
        self._held.append((self._sends, match))

    def release(self, known: Callable[[int], bool]) -> list[MatchRecord]:
        """Remove and return, in arrival order, the held matches that can now be decided.

        Those whose entrustId is ``known`` (an order the engine can name), and those seen
        when every batch still in flight had not left yet.
        """
        held = self._held
        if not held:
            return []
        oldest = min(self._flight.values(), default=None)
        out: list[MatchRecord] = []
        keep: list[tuple[int, MatchRecord]] = []
        for item in held:
            seen_at, match = item
            entrust_id = match.entrust_id
            if (oldest is None or seen_at < oldest) or (
                entrust_id is not None and known(entrust_id)
            ):
                out.append(match)
            else:
                keep.append(item)
        self._held = keep
        return out
