"""Restart recovery, as a plan: what becomes of each open intent the journal holds.

:func:`plan` sorts the journal's open intents of this node (pure, from public records only);
:meth:`framework.engine.execution.ExecutionEngine.recover` carries the plan out:

* PENDING and never sent: sent again (``resend``), or refused with 9012 when older than
  ``pending_max_age_s`` (``expired``);
* ACCEPTED: tracked again, bound to its orderId (``accepted``);
* PENDING but sent, with no answer recorded (``unanswered``), and UNKNOWN (``in_doubt``):
  UNKNOWN, their window starting again now; never resent.

Intents the running process already tracks (submitted before recovery ran) are left out.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

import attrs

from framework.engine.intents import OrderStatus
from framework.engine.journaling import JournalEntry

__all__ = ["RecoveryPlan", "plan"]


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
