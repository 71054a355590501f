"""Restart recovery: what becomes of each open intent the journal holds, planned and done.

:func:`plan` sorts the journal's open intents of this node (pure, from public records only);
:func:`carry_out` does it on the engine's public collaborators (ledger, outcomes, risk
gate, the batcher's queue), called by
:meth:`framework.engine.execution.ExecutionEngine.restore`:

* PENDING and never sent: sent again (``resend``), or refused with 9012 when older than
  ``pending_max_age_s`` (``expired``);
* ACCEPTED: tracked again, bound to its orderId (``accepted``);
* PENDING but sent, with no answer recorded (``unanswered``), and UNKNOWN (``in_doubt``):
  UNKNOWN, their window starting again now; never resent.

:func:`remember` then reads what a late match or a listing may still name: LOST intents
within ``lost_memory_s`` (possible owners of same-looking matches, adoptable by the
open-order list), and the newest FILLED and CANCELED orders by orderId (a late match still
finds its intent, and a CANCELED order's raises what has filled of it).

Intents the running process already tracks (submitted before recovery ran) are left out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable
from decimal import Decimal

import attrs

from framework.engine.events import OrderUpdate
from framework.engine.execution_settings import ExecutionSettings
from framework.engine.intents import OrderStatus
from framework.engine.journaling import JournalEntry, JournalProtocol, KeptAs, StatusRow
from framework.engine.outcomes import Outcomes
from framework.engine.reconcile import DONE_MEMORY, LOST_MEMORY, Ledger, LiveOrder, done_of, revive
from framework.engine.risk import FRAMEWORK_CODES, PENDING_EXPIRED, RiskGate, is_resting
from framework.venue.models import MatchRecord, OrderInput

__all__ = ["RecoveryPlan", "carry_out", "decide_kept", "plan", "remember", "restore"]

log = logging.getLogger("framework.execution")


@attrs.frozen(slots=True)
class RecoveryPlan:
    """The journal's open intents, sorted by what recovery does with them (journal order)."""

    resend: list[JournalEntry] = attrs.Factory(list)
    expired: list[JournalEntry] = attrs.Factory(list)
    accepted: list[JournalEntry] = attrs.Factory(list)
    unanswered: list[JournalEntry] = attrs.Factory(list)
    in_doubt: list[JournalEntry] = attrs.Factory(list)


def plan(
    saved: Iterable[JournalEntry],
    *,
    now_ms: int,
    pending_max_age_s: float | None,
    live: Container[str] = (),
) -> RecoveryPlan:
    """Sort open intents into a RecoveryPlan; those in ``live`` are skipped."""
    out = RecoveryPlan()
    for entry in saved:
        if entry.client_order_id in live:
            continue
        if entry.status is OrderStatus.PENDING and not entry.sent:
            too_old = (
                pending_max_age_s is not None
                and now_ms - entry.created_ms > pending_max_age_s * 1000
            )
            (out.expired if too_old else out.resend).append(entry)
        elif entry.status is OrderStatus.ACCEPTED:
            out.accepted.append(entry)
        elif entry.status is OrderStatus.PENDING:
            out.unanswered.append(entry)
        else:
            out.in_doubt.append(entry)
    return out


def carry_out(
    todo: RecoveryPlan,
    *,
    ledger: Ledger,
    outcomes: Outcomes,
    risk: RiskGate,
    queue: Callable[[LiveOrder, int], None],
    now_ms: int,
    pending_max_age_s: float | None,
    chosen_id: Callable[[str], None],
) -> int:
    """Track, queue, refuse or doubt each intent of the plan; returns how many were queued.

    ``queue`` puts an intent back in the send queue; ``chosen_id`` notes a strategy-chosen
    client order id as used. The updates go through ``outcomes`` (held until the engine
    publishes them).
    """
    now = now_ms
    rows: list[StatusRow] = []
    events: list[OrderUpdate] = []

    def revived(saved: JournalEntry) -> LiveOrder:
        if saved.intent.client_order_id is not None:
            chosen_id(saved.client_order_id)
        return revive(saved, risk.reference_price, risk.tracks_exposure)

    for saved in todo.expired:
        entry = revived(saved)
        entry.booked = False
        msg = FRAMEWORK_CODES[PENDING_EXPIRED].format(pending_max_age_s)
        outcomes.reject([entry], PENDING_EXPIRED, msg, now, rows, events)
    tracked: list[LiveOrder] = []
    for saved in todo.resend:
        entry = revived(saved)
        queue(entry, now)
        tracked.append(entry)
    for saved in todo.accepted:
        entry = revived(saved)
        if saved.order_id is not None:
            ledger.bind(entry, saved.order_id)
        entry.booked = entry.booked and is_resting(entry.order)
        tracked.append(entry)
    unanswered = [revived(saved) for saved in todo.unanswered]
    in_doubt = [revived(saved) for saved in todo.in_doubt]
    for entry in [*tracked, *unanswered, *in_doubt]:
        ledger.add(entry)
        if entry.booked:
            remaining = entry.order.quantity - entry.filled
            risk.book(entry.order.pair_name, max(remaining, Decimal(0)), entry.price)
    for entry in in_doubt:
        ledger.doubt(entry, now)
    if unanswered:
        log.error(
            "restart: %d intents were sent without a recorded answer -> UNKNOWN",
            len(unanswered),
        )
        outcomes.to_unknown(unanswered, now, rows, events)
    if todo.resend:
        log.warning("restart: %d journaled intents never left; sending them now", len(todo.resend))
    outcomes.emit(rows, events)
    return len(todo.resend)


def remember(
    journal: JournalProtocol,
    owner: str,
    ledger: Ledger,
    reference_price: Callable[[OrderInput], Decimal | None],
    now_ms: int,
    settings: ExecutionSettings,
) -> list[LiveOrder]:
    """Read back the owner's orders that ended but may still be named (see module); returns
    the LOST ones revived (possible owners again)."""
    window_ms = int(settings.unknown_window_s * 1000)
    lost_memory_ms = int(settings.lost_memory_s * 1000)
    revived: list[LiveOrder] = []
    for saved in journal.load_lost(owner, now_ms - lost_memory_ms, LOST_MEMORY):
        if ledger.find(saved.client_order_id) is not None:
            continue
        entry = revive(saved, reference_price, False)
        entry.unknown_since_ms = saved.updated_ms - window_ms  # its doubt began a window before
        until = saved.updated_ms + (lost_memory_ms if is_resting(entry.order) else window_ms)
        if until > now_ms:
            ledger.revive_lost(entry, until)
            revived.append(entry)
    for saved in reversed(journal.load_done(owner, DONE_MEMORY)):  # the newest remembered last
        order_id = saved.order_id
        if order_id is None or ledger.knows(order_id):
            continue
        if saved.status is OrderStatus.CANCELED:
            ledger.remember(order_id, done_of(revive(saved, reference_price, False)))
        else:
            ledger.remember(order_id, (saved.client_order_id, saved.strategy, ()))
    return revived


def restore(
    journal: JournalProtocol,
    owner: str,
    settings: ExecutionSettings,
    now_ms: int,
    *,
    ledger: Ledger,
    outcomes: Outcomes,
    risk: RiskGate,
    queue: Callable[[LiveOrder, int], None],
    chosen_id: Callable[[str], None],
    accepted: Callable[[LiveOrder, int], None],
) -> int:
    """Plan and carry out the journal's open intents, then :func:`remember` what ended; returns
    how many were queued. ``accepted`` is told of each ACCEPTED one (an IOC, FOK or market
    order answered before the stop is watched until its fills add up)."""
    todo = plan(
        journal.load_open(owner),
        now_ms=now_ms,
        pending_max_age_s=settings.pending_max_age_s,
        live=ledger.live,
    )
    queued = carry_out(
        todo,
        ledger=ledger,
        outcomes=outcomes,
        risk=risk,
        queue=queue,
        now_ms=now_ms,
        pending_max_age_s=settings.pending_max_age_s,
        chosen_id=chosen_id,
    )
    for entry in ledger.live.values():
        if entry.status is OrderStatus.ACCEPTED:
            accepted(entry, now_ms)
    for entry in remember(journal, owner, ledger, risk.reference_price, now_ms, settings):
        if entry.status is OrderStatus.LOST and risk.tracks_exposure:  # may rest: counted
            entry.booked = True
            risk.book(entry.order.pair_name, max(entry.order.quantity - entry.filled, Decimal(0)),
                      entry.price)  # fmt: skip
    return queued


def decide_kept(
    journal: JournalProtocol, owner: str, recover_match: Callable[[MatchRecord, KeptAs], None]
) -> None:
    """Decide again each match the journal kept for owner (held for an answer, counted for a
    doubt group, or found external while intents were in doubt)."""
    kept = journal.load_matches(owner)
    if kept:
        log.warning(
            "restart: %d matches kept in the journal (held for an answer, counted for a"
            " doubt group, or found external while intents were in doubt) are decided again",
            len(kept),
        )
    for match, kind in kept:
        recover_match(match, kind)
