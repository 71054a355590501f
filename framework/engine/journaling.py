"""The journal as the execution engine sees it: a Protocol, so the engine stays free of I/O.

The engine writes through :class:`JournalProtocol`; writes are buffered and made durable
together by :meth:`JournalProtocol.commit`, which the engine calls once per batch before any
byte of the batch is sent (never once per intent): the batch's intent rows and its 'sent'
mark go in that one commit, so a batch whose rows are not durable is never sent. A driver
also commits when idle, so intents queued behind batches in flight become durable soon. :mod:`framework.live.journal` implements
it over SQLite; tests and backtests may pass ``None`` (no journal) or an in-memory SQLite one.

An intent's row goes through: added PENDING (unsent) -> marked sent (committed right before
the send) -> ACCEPTED, REJECTED or UNKNOWN -> FILLED, AMBIGUOUS or LOST. A retryable refusal
(2329, a failure before sending) marks it unsent again. At restart, unsent PENDING rows are
sent and sent PENDING rows (the answer never came) become UNKNOWN.

The journal also keeps the matches the engine cannot settle yet (:class:`KeptAs`: held until
an answer names their order, counted for a group of same-looking in-doubt intents, or found
external while intents were in doubt), written by the same commit, so no fill the venue
listed is lost to a kill.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from enum import IntEnum
from typing import Protocol

import attrs

from framework.engine.client_ids import IdSource
from framework.engine.intents import OrderIntent, OrderStatus
from framework.venue.models import MatchRecord

__all__ = ["JournalEntry", "JournalProtocol", "KeptAs", "StatusRow"]

StatusRow = tuple[str, int | None, int | None, str | None, int, str]
"""(status, order_id, code, msg, updated_ms, client_order_id): one status change."""


class KeptAs(IntEnum):
    """Why the engine keeps a match in the journal (its kind, stored with it)."""

    HELD = 0
    """Its order was unnamed while a batch was in flight: held for the answer, unpublished."""
    COUNTED = 1
    """Published, and counted for a group of same-looking in-doubt intents."""
    UNLINKED = 2
    """Published as external while intents were in doubt: a record may name its order later."""


@attrs.frozen(slots=True, kw_only=True)
class JournalEntry:
    """One intent as the journal holds it (what recovery reads back)."""

    client_order_id: str
    strategy: str
    intent: OrderIntent
    status: OrderStatus
    sent: bool
    created_ms: int
    order_id: int | None = None
    code: int | None = None
    msg: str | None = None
    filled: Decimal = Decimal(0)
    matched: Decimal | None = None
    """The sum of its matches, when a venue record said more had filled (None: filled)."""
    updated_ms: int = 0
    """When its status last changed."""


class JournalProtocol(IdSource, Protocol):
    """What the execution engine needs from a journal (also the source of id blocks)."""

    def add(
        self,
        client_order_id: str,
        owner: str,
        strategy: str,
        intent: OrderIntent,
        status: OrderStatus,
        created_ms: int,
        code: int | None = None,
        msg: str | None = None,
    ) -> None:
        """Buffer a new intent row (PENDING, or REJECTED when refused before sending)."""
        ...

    def mark_sent(self, client_order_ids: Iterable[str], sent: bool) -> None:
        """Buffer the sent mark of rows: True right before a send, False after a safe refusal."""
        ...

    def update(self, rows: Sequence[StatusRow]) -> None:
        """Buffer status changes."""
        ...

    def set_filled(
        self, client_order_id: str, filled: Decimal, matched: Decimal | None = None
    ) -> None:
        """Buffer what has filled of an intent, and its matches' sum when that is less."""
        ...

    def commit(self) -> None:
        """Make every buffered write durable (one transaction); cheap when nothing is buffered."""
        ...

    def contains(self, client_order_id: str) -> bool:
        """True if a strategy-chosen id was ever journaled (an in-memory look-up)."""
        ...

    def load_open(self, owner: str) -> list[JournalEntry]:
        """The owner's PENDING, UNKNOWN and ACCEPTED intents, oldest first."""
        ...

    def load_lost(self, owner: str, since_ms: int, limit: int) -> list[JournalEntry]:
        """The owner's newest ``limit`` LOST intents that became so at since_ms or later,
        oldest first."""
        ...

    def load_intent(self, owner: str, client_order_id: str) -> JournalEntry | None:
        """The owner's intent of that client order id, whatever its status, else None."""
        ...

    def retire(self, client_order_id: str) -> None:
        """Buffer that an ACCEPTED order is no longer tracked (not loaded at restart)."""
        ...

    def load_done(self, owner: str, limit: int) -> list[JournalEntry]:
        """The owner's newest ``limit`` FILLED, CANCELED and retired intents with an orderId,
        newest first."""
        ...

    def keep_match(self, owner: str, match: MatchRecord, kind: KeptAs) -> None:
        """Buffer a match the engine keeps, and why."""
        ...

    def drop_match(self, match_id: int) -> None:
        """Buffer the end of keeping a match."""
        ...

    def load_matches(self, owner: str) -> list[tuple[MatchRecord, KeptAs]]:
        """The owner's kept matches with why each was kept, in id order."""
        ...
