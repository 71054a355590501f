"""Restart recovery of the execution engine: the journal's open intents brought back.

:func:`recover` works on the state of an :class:`~framework.engine.execution.ExecutionEngine`
(whose ``recover()`` calls it), kept apart from the engine's running logic. Unsent PENDING
intents are sent again (or refused with 9012 when older than ``pending_max_age_s``),
ACCEPTED ones are tracked again, and the rest (UNKNOWN, or PENDING sent without a recorded
answer) are UNKNOWN, their window starting again now. Then the matches the journal kept are
decided again: one held for an answer that never came is published now (as evidence, or
external), and one already counted for a doubt group is counted again, silently.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import TYPE_CHECKING

from framework.engine.intents import OrderStatus
from framework.engine.journaling import StatusRow
from framework.engine.reconcile import LiveOrder, revive
from framework.engine.risk import FRAMEWORK_CODES, PENDING_EXPIRED, is_resting

if TYPE_CHECKING:
    from framework.engine.events import OrderUpdate
    from framework.engine.execution import ExecutionEngine

__all__ = ["recover"]

log = logging.getLogger("framework.execution")


def recover(engine: ExecutionEngine) -> int:
    """ExecutionEngine.recover(): how many intents were queued to be sent."""
    if engine._recovered:
        return 0
    engine._recovered = True
    journal = engine._journal
    assert journal is not None
    now = engine._now_ms()
    max_age = engine.settings.pending_max_age_s
    rows: list[StatusRow] = []
    events: list[OrderUpdate] = []
    queued = 0
    to_unknown: list[LiveOrder] = []
    ledger = engine._ledger
    for saved in journal.load_open(engine._ids.node):
        if saved.client_order_id in ledger.live:
            continue  # submitted by this process before recover() ran
        entry = revive(saved, engine._risk.reference_price, engine._risk.tracks_exposure)
        order, price = entry.order, entry.price
        if saved.intent.client_order_id is not None:
            engine._user_ids.add(saved.client_order_id)
        if saved.status is OrderStatus.PENDING and not saved.sent:
            if max_age is not None and now - saved.created_ms > max_age * 1000:
                entry.booked = False
                msg = FRAMEWORK_CODES[PENDING_EXPIRED].format(max_age)
                engine._reject([entry], PENDING_EXPIRED, msg, now, rows, events)
                continue
            ledger.add(entry)
            engine._batcher.push(entry, now)
            queued += 1
        elif saved.status is OrderStatus.ACCEPTED:
            ledger.add(entry)
            if saved.order_id is not None:
                ledger.bind(entry, saved.order_id)
            entry.booked = entry.booked and is_resting(order)
        else:  # UNKNOWN, or PENDING sent without an answer: the window starts again now
            ledger.add(entry)
            if saved.status is OrderStatus.PENDING:
                to_unknown.append(entry)
            else:
                ledger.doubt(entry, now)
        if entry.booked:
            remaining = order.quantity - entry.filled
            engine._risk.book(order.pair_name, max(remaining, Decimal(0)), price)
    if to_unknown:
        log.error(
            "restart: %d intents were sent without a recorded answer -> UNKNOWN",
            len(to_unknown),
        )
        engine._to_unknown(to_unknown, now, rows, events)
    if queued:
        log.warning("restart: %d journaled intents never left; sending them now", queued)
    engine._emit(rows, events)
    kept = journal.load_matches(engine._ids.node)
    if kept:
        log.warning(
            "restart: %d matches kept in the journal (held for an answer, or counted for a"
            " doubt group) are decided again",
            len(kept),
        )
    for match, delivered in kept:
        engine._recover_match(match, delivered)
    engine.flush()
    if queued and engine.on_ready is not None:
        engine.on_ready()
    return queued
