"""The execution engine: intents -> risk check -> journal -> batches of <= 20 -> reconciliation.

Pure core: no I/O, time from the ``now_ms`` callable passed in, randomness (retry jitter)
passed in. A driver (``framework.live.executor.LiveExecutor``, or a backtest's paper venue)
runs the loop::

    batch = engine.next_batch()        # cut when due
    engine.begin_send(batch)           # rows + 'sent' mark, one commit: never resent after
    ... send batch.orders ...
    engine.on_results(batch, results)  # or engine.on_failure(batch, exc)

Results are bound to intents by clientOrderId, never by position. An intent missing from a
successful answer is UNKNOWN (or REJECTED 9010 with ``missing_result: rejected``). A whole-call
refusal (a code SPEC section 7 lists, or an auth refusal: ``VenueError.refuses``) rejects every
intent of the call with its code, except busy answers (2329, 2331) and failures before
sending, which are retried with capped exponential backoff and jitter with the same
clientOrderIds and payloads. Anything else makes the whole call UNKNOWN and is never retried:
a timeout or reset after sending, an HTTP status >= 500 (with or without an envelope), a code
the table does not list, an answer that is not the envelope. An UNKNOWN intent is
resolved by evidence only: a match linked by :mod:`framework.engine.fills` (held while a
batch that may name its order is in flight), an open-order list or record naming it by its
clientOrderId (:mod:`framework.engine.cancels`), or settled by count with same-looking
intents (AMBIGUOUS, k of n filled). With no evidence it becomes LOST after
``unknown_window_s``, logged at ERROR; a later list or record naming it still adopts it.

Transitions publish :class:`~framework.engine.events.OrderUpdate` addressed to the strategy
that submitted the intent: ACCEPTED, REJECTED or UNKNOWN, then FILLED (every match of the
order adds up to its quantity, or the evidence that resolved it), CANCELED, AMBIGUOUS or LOST
(after which only ACCEPTED, FILLED, CANCELED or AMBIGUOUS, on evidence).
Submitting is not a transition: submit() returns the client order id; there is no PENDING
event.
"""

from __future__ import annotations

import logging
import random as _random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Final

from framework.engine import recovery
from framework.engine.batching import Batcher, backoff_s
from framework.engine.cancels import CancelAnswer, CancelBatch, Canceller
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.events import Event, MatchFilled, OrderUpdate
from framework.engine.execution_settings import ExecutionSettings
from framework.engine.fills import FillLinker
from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.journaling import JournalProtocol, StatusRow
from framework.engine.open_orders import OpenOrder, VenueOrder, open_orders
from framework.engine.outcomes import COUNTER_NAMES, Outcomes
from framework.engine.reconcile import Batch, Ledger, LiveOrder, order_input
from framework.engine.risk import (
    FRAMEWORK_CODES,
    MISSING_FROM_ANSWER,
    NOT_SENT,
    STOPPING,
    RiskGate,
    is_resting,
)
from framework.venue.errors import SendFailed, VenueError
from framework.venue.models import MatchRecord, OrderResult
from framework.venue.requests import MAX_BATCH
from framework.venue.rules import PairRules

__all__ = ["COUNTER_NAMES", "Batch", "ExecutionEngine", "ExecutionSettings", "LiveOrder"]

log = logging.getLogger("framework.execution")

PENDING: Final = OrderStatus.PENDING
ACCEPTED: Final = OrderStatus.ACCEPTED
REJECTED: Final = OrderStatus.REJECTED
UNKNOWN: Final = OrderStatus.UNKNOWN


class ExecutionEngine:
    """Turns strategies' intents into batches and every answer into OrderUpdate events."""

    def __init__(
        self,
        settings: ExecutionSettings,
        *,
        rules: Mapping[str, PairRules],
        publish: Callable[[Event], None],
        now_ms: Callable[[], int],
        ids: ClientIdGenerator,
        journal: JournalProtocol | None = None,
        on_ready: Callable[[], None] | None = None,
        mark_price: Callable[[str], Decimal | None] | None = None,
        position: Callable[[str], Decimal] | None = None,
        random: Callable[[], float] | None = None,
        stale: Callable[[str], tuple[float | None, float] | None] | None = None,
    ) -> None:
        """``mark_price``, ``stale``: a pair's reference price and market staleness (RiskGate);
        ``position``: a pair's signed net position (the portfolio's), for max_position."""
        self.settings = settings
        self._publish = publish
        self._now_ms = now_ms
        self._ids = ids
        self._journal = journal
        self._ready = on_ready if on_ready is not None else lambda: None  # nobody drives it
        self._random = random if random is not None else _random.Random(0x5EED).random
        self._ledger = ledger = Ledger()
        self._risk = RiskGate(
            settings.risk,
            rules,
            mark_price=mark_price,
            position=position,
            tracked=ledger.open_or_lost,
            window_ms=int(settings.unknown_window_s * 1000),
            stale=stale,
        )
        self._batcher: Batcher[LiveOrder, Batch] = Batcher(
            linger_ms=settings.linger_ms,
            max_inflight=settings.max_inflight,
            calls_per_second=settings.calls_per_second,
            max_size=MAX_BATCH,
        )
        self._outcomes = outcomes = Outcomes(
            ledger=ledger, risk=self._risk, journal=journal, publish=publish, now_ms=now_ms,
            lost_memory_ms=int(settings.lost_memory_s * 1000),
        )  # fmt: skip
        self._fills = FillLinker(outcomes, journal=journal, node=ids.node, publish=publish)
        self.attribute: Callable[[MatchRecord], MatchFilled | None] = self._risk.watch_matches(
            self._fills.attribute, now_ms
        )
        """attribute(match): the MatchFilled of a match, linked by the evidence rules of
        :mod:`framework.engine.fills` (the caller publishes it); None when it is held until
        an answer names its order. The linker's own (shown first to max_position's tally when
        that is set), bound here: a runtime calls it per match."""
        self.cancels = Canceller(
            ledger=ledger,
            outcomes=outcomes,
            publish=publish,
            now_ms=now_ms,
            unqueue=self._batcher.remove,
            max_batch=settings.cancel_batch,
        )
        self._c = outcomes.counts
        self._journaled = journal.contains if journal is not None else None
        self._next_batch_id = 1
        self._recovered = journal is None
        self._restored = journal is None
        self._resend = 0
        self._closed = False
        self._dt_ms = -1
        self._dt = datetime.fromtimestamp(0, UTC)
        self._missing_unknown = settings.missing_result == "unknown"

    # -- submitting ---------------------------------------------------------------------

    @property
    def kill_switch(self) -> bool:
        """When on, every new intent is refused with code 9001."""
        return self._risk.kill_switch

    @kill_switch.setter
    def kill_switch(self, on: bool) -> None:
        if on and not self._risk.kill_switch:
            log.warning("kill switch ON: every new intent is refused, every open order cancelled")
        self._risk.kill_switch = on
        if on and self.cancels.available and self.cancel_all(None):
            self._ready()

    def _now_dt(self, now_ms: int) -> datetime:
        if now_ms != self._dt_ms:
            self._dt_ms = now_ms
            self._dt = datetime.fromtimestamp(now_ms / 1000, UTC)
        return self._dt

    def _check_user_id(self, client_order_id: str) -> None:
        self._ids.claim(client_order_id, self._journaled)

    def submit(self, strategy: str, intent: OrderIntent) -> str:
        """Check, journal and queue an intent; returns its client order id at once.

        A refused intent is published as OrderUpdate REJECTED (venue or framework code) with
        no round trip. A malformed or reused client_order_id raises ClientIdError.
        """
        now = self._now_ms()
        coid = intent.client_order_id
        if coid is None:
            coid = self._ids.next()
        else:
            self._check_user_id(coid)
        order = order_input(coid, intent)
        self._c["orders_submitted"] += 1
        risk = self._risk
        if self._closed:
            failure: tuple[int, str] | None = (STOPPING, FRAMEWORK_CODES[STOPPING])
        else:
            failure = risk.check(order, now, self._now_dt(now))
        journal = self._journal
        if failure is not None:
            code, msg = failure
            if journal is not None:
                journal.add(coid, self._ids.node, strategy, intent, REJECTED, now, code, msg)
                self._outcomes.dirty = True
            self._c["orders_rejected"] += 1
            self._c["orders_risk_rejected"] += 1
            self._outcomes.refused_before_sending(strategy, coid, code, msg)
            self._publish(OrderUpdate(coid, REJECTED, strategy, None, code, msg, intent))
            return coid
        entry = LiveOrder(
            coid, strategy, intent, order, PENDING, now, risk.admitted_price, risk.tracks_exposure
        )
        self._ledger.add(entry)
        if journal is not None:
            journal.add(coid, self._ids.node, strategy, intent, PENDING, now)
            self._outcomes.dirty = True
        self._batcher.push(entry, now)
        self._ready()
        return coid

    def close(self) -> int:
        """End of a graceful stop: no intent is sent any more; returns how many were refused.

        Queued intents and batches waiting for a retry (the venue surely did not execute
        them) are REJECTED with code 9013 at once, and so is every later submit. Batches in
        flight are not touched: their answers are still reconciled.
        """
        self._closed = True
        items, retries = self._batcher.take_waiting()
        entries = items + [e for batch in retries for e in batch.entries]
        if not entries:
            return 0
        log.warning("stopping: %d intents not sent (9013), none of them reached the venue",
                    len(entries))  # fmt: skip
        if self._journal is not None and retries:
            for batch in retries:
                self._journal.mark_sent(batch.client_order_ids, False)
        rows: list[StatusRow] = []
        events: list[OrderUpdate] = []
        outcomes = self._outcomes
        outcomes.reject(entries, STOPPING, FRAMEWORK_CODES[STOPPING], self._now_ms(), rows, events)
        outcomes.emit(rows, events)
        self.flush()
        return len(entries)

    @property
    def closed(self) -> bool:
        """True once close() ran: every submit is refused with code 9013."""
        return self._closed

    # -- sending ------------------------------------------------------------------------

    def next_batch(self) -> Batch | None:
        """The next batch due (a retry first); nothing is committed until begin_send()."""
        now = self._now_ms()
        batcher = self._batcher
        batch = batcher.take_retry(now)
        if batch is None:
            entries = batcher.cut(now)
            if entries is None:
                return None
            batch = Batch(self._next_batch_id, tuple(e.order for e in entries), 0, entries)
            self._next_batch_id += 1
        return batch

    def begin_send(self, batch: Batch) -> None:
        """Commit, in ONE transaction, every buffered write (the batch's intent rows among
        them) and the batch's 'sent' mark: call right before its first byte goes out."""
        batch.attempt += 1
        journal = self._journal
        if journal is not None:
            journal.mark_sent(batch.client_order_ids, True)
            journal.commit()
            self._outcomes.dirty = False
        self._fills.early.sent(batch.id)
        c = self._c
        c["batches_sent"] += 1
        if batch.attempt == 1:
            c["orders_sent"] += len(batch.orders)
        else:
            c["retries"] += 1

    def flush(self) -> None:
        """Commit buffered journal writes (the driver calls it when idle and at shutdown)."""
        self._outcomes.settle_touched()  # groups members left, once the evidence is taken
        self._fills.forget_unlinked()  # once nothing is in doubt
        self._outcomes.flush()

    # -- answers ------------------------------------------------------------------------

    def on_results(self, batch: Batch, results: list[OrderResult]) -> None:
        """Reconcile a successful answer by clientOrderId; missing intents become UNKNOWN."""
        now = self._now_ms()
        self._batcher.done()
        fills, outcomes = self._fills, self._outcomes
        fills.early.answered(batch.id)
        members = {e.client_order_id: e for e in batch.entries}
        rows: list[StatusRow] = []
        events: list[OrderUpdate] = []
        bind = outcomes.bind
        grown: list[LiveOrder] = []  # bound to matches found external before its answer
        strangers = 0
        for result in results:
            entry = members.pop(result.client_order_id, None)
            if entry is None:
                strangers += 1
                continue
            order_id = result.order_id
            entry.status = ACCEPTED
            if bind(entry, order_id):
                grown.append(entry)
            if entry.booked and not is_resting(entry.order):
                outcomes.unbook(entry)  # what matches found before the answer filled is back
            self.cancels.accepted(entry, now)
            rows.append((ACCEPTED, order_id, None, None, now, entry.client_order_id))
            events.append(
                OrderUpdate(
                    entry.client_order_id, ACCEPTED, entry.strategy, order_id, None, None,
                    entry.intent,
                )
            )  # fmt: skip
        self._c["orders_accepted"] += len(events)
        if strangers:
            log.warning(
                "batch %d: %d results name no order of the batch; ignored", batch.id, strangers
            )
        if members:
            if self._missing_unknown:
                log.warning(
                    "batch %d: %d orders missing from a successful answer -> UNKNOWN",
                    batch.id,
                    len(members),
                )
                outcomes.to_unknown(list(members.values()), now, rows, events)
            else:
                msg = FRAMEWORK_CODES[MISSING_FROM_ANSWER]
                outcomes.reject(list(members.values()), MISSING_FROM_ANSWER, msg, now, rows, events)
        outcomes.emit(rows, events)
        for entry in grown:
            if entry.status is ACCEPTED and entry.filled >= entry.order.quantity:
                outcomes.filled(entry)
        fills.release_early()
        self._answered(batch)

    def on_failure(self, batch: Batch, exc: BaseException) -> None:
        """Handle a whole-call failure: retry, reject every intent, or mark them UNKNOWN."""
        now = self._now_ms()
        fills, outcomes = self._fills, self._outcomes
        fills.early.answered(batch.id)
        rows: list[StatusRow] = []
        events: list[OrderUpdate] = []
        entries = batch.entries
        busy = isinstance(exc, VenueError) and exc.retryable
        retryable = busy or isinstance(exc, SendFailed)
        if retryable and batch.attempt <= self.settings.retry_attempts:
            delay = backoff_s(
                batch.attempt,
                base_s=self.settings.retry_base_s,
                max_s=self.settings.retry_max_s,
                random=self._random,
            )
            log.warning(
                "batch %d (%d orders) attempt %d failed (%s); retry in %.3f s",
                batch.id,
                len(entries),
                batch.attempt,
                exc,
                delay,
            )
            self._batcher.retry_later(batch, now + int(delay * 1000))
            if self._journal is not None:
                # Surely not executed: a restart may send it again. Committed now, so a kill
                # during the backoff does not leave these intents in doubt.
                self._journal.mark_sent(batch.client_order_ids, False)
                outcomes.dirty = True
                self.flush()
            fills.release_early()  # surely not executed: a held match is none of its orders
            return
        self._batcher.done()
        if isinstance(exc, VenueError) and exc.refuses:
            log.warning("batch %d (%d orders) refused: %s", batch.id, len(entries), exc)
            outcomes.reject(entries, exc.code, exc.msg, now, rows, events)
        elif isinstance(exc, SendFailed):
            log.error("batch %d (%d orders) could not be sent: %s", batch.id, len(entries), exc)
            msg = FRAMEWORK_CODES[NOT_SENT].format(exc)
            outcomes.reject(entries, NOT_SENT, msg, now, rows, events)
        else:
            log.error(
                "batch %d (%d orders) outcome unknown (%s: %s) -> UNKNOWN, never resent",
                batch.id,
                len(entries),
                type(exc).__name__,
                exc,
            )
            outcomes.to_unknown(entries, now, rows, events)
        outcomes.emit(rows, events)
        fills.release_early()
        self._answered(batch)

    def _answered(self, batch: Batch) -> None:
        """Cancels that waited for these creates' answers go on (or end)."""
        cancels = self.cancels
        for entry in batch.entries:
            cancels.create_answered(entry)
        if cancels.pending:
            self._ready()

    # -- cancels (an extension beyond SPEC.md: framework.engine.cancels) ------------------

    def cancel(self, strategy: str | None, client_order_id: str) -> bool:
        """Ask for the cancel of one order (see framework.engine.cancels); never raises."""
        asked = self.cancels.cancel(strategy, client_order_id)
        if asked and self.cancels.pending:
            self._ready()
        return asked

    def cancel_all(
        self, strategy: str | None, pair: str | None = None, is_long: bool | None = None
    ) -> int:
        """Cancel every open order of strategy (None: all) on pair and side (None: all)."""
        count = self.cancels.cancel_all(strategy, pair, is_long)
        if self.cancels.pending:
            self._ready()
        return count

    def open_orders(self, strategy: str | None = None, pair: str | None = None) -> list[OpenOrder]:
        """The ACCEPTED orders that may rest (GTC, POST_ONLY), oldest first."""
        return open_orders(self._ledger, strategy, pair)

    def next_cancels(self) -> CancelBatch | None:
        """The next cancel call to send, if any (the driver sends it and answers below)."""
        return self.cancels.next_batch()

    def on_cancel_answers(self, batch: CancelBatch, answers: dict[int | str, CancelAnswer]) -> None:
        """Per-order answers to a cancel call; orders it does not cover are queried."""
        self.cancels.on_answers(batch, answers)
        self.flush()

    def on_cancel_error(self, batch: CancelBatch, exc: BaseException) -> None:
        """A cancel call raised: refused, unavailable, not sent, or outcome unknown."""
        self.cancels.on_error(batch, exc)
        self.flush()

    def apply_order_record(self, record: VenueOrder) -> str:
        """An order record from the venue (queryOrder, open orders) taken as evidence."""
        what = self.cancels.apply_record(record)
        self.flush()
        return what

    def adopt(self, pair: str, records: list[VenueOrder]) -> dict[str, int]:
        """Reconcile pair's tracked orders with the venue's open-order list (at start)."""
        counts = self.cancels.adopt(pair, records, self._ids.node)
        self.flush()
        return counts

    def check_open_orders(
        self, pair: str, records: list[VenueOrder], asked_ms: int | None = None
    ) -> dict[str, int]:
        """A later open-order list of pair, asked for at asked_ms (Canceller.check): UNKNOWN
        and LOST intents it names are ACCEPTED, the tracked orders it lacks are queried."""
        window_ms = int(self.settings.unknown_window_s * 1000)
        counts = self.cancels.check(pair, records, asked_ms=asked_ms, window_ms=window_ms)
        self.flush()
        if counts["missing"] or self.cancels.pending:
            self._ready()
        return counts

    @property
    def node(self) -> str:
        """The node name its client order ids start with."""
        return self._ids.node

    def now_ms(self) -> int:
        """The engine's clock (wall clock live, virtual time in a backtest)."""
        return self._now_ms()

    # -- time ---------------------------------------------------------------------------

    def tick(self) -> int:
        """End doubt that outlived unknown_window_s: LOST, or AMBIGUOUS for counted groups.

        Also settles ACCEPTED orders that cannot rest and have not filled within that window
        (queried, or retired: see Canceller.settle_unfilled). Returns how many intents ended
        in doubt.
        """
        ledger = self._ledger
        window_ms = int(self.settings.unknown_window_s * 1000)
        cancels = self.cancels
        if cancels.next_unfilled_ms() is not None:
            now = self._now_ms()
            cancels.settle_unfilled(now - window_ms)
            if cancels.pending:
                self._ready()
        if not ledger.in_doubt:
            return 0
        now = self._now_ms()
        expired, due = ledger.expired(now - window_ms)
        ended = 0
        for group in due:
            ended += self._outcomes.ambiguous(group, "the window is over")
        if expired:
            until = now + int(self.settings.lost_memory_s * 1000)
            self._outcomes.lost(expired, self.settings.unknown_window_s, until)
        if ledger.lost:
            self._outcomes.forget(ledger.forget_lost(now))
        self._fills.forget_unlinked()  # once nothing is in doubt
        return ended + len(expired)

    def next_wakeup_ms(self) -> int | None:
        """Milliseconds until next_batch() or tick() may have work; None: only an event can."""
        now = self._now_ms()
        due = self._batcher.next_due_ms(now)
        oldest = self.cancels.next_unfilled_ms()
        if oldest is not None:
            settle = max(0, oldest + int(self.settings.unknown_window_s * 1000) - now)
            due = settle if due is None else min(due, settle)
        forget = self._ledger.lost_due_ms
        if forget is not None:
            due = max(0, forget - now) if due is None else min(due, max(0, forget - now))
        if self._ledger.groups:
            window_ms = int(self.settings.unknown_window_s * 1000)
            deadline = self._ledger.next_doubt_deadline_ms(window_ms)
            if deadline is not None:
                expiry = max(0, deadline - now)
                due = expiry if due is None else min(due, expiry)
        return due

    # -- restart ------------------------------------------------------------------------

    def restore(self) -> None:
        """Load the journal's open intents (once) without telling anyone yet.

        After it, open_orders() shows the journal's resting orders (so the open-order list
        can be adopted before strategies start); the updates it makes are held until
        recover(), which publishes them in order.
        """
        if self._restored:
            return
        self._restored = True
        self._outcomes.hold()
        assert self._journal is not None
        self._resend = recovery.restore(
            self._journal, self._ids.node, self.settings, self._now_ms(),
            ledger=self._ledger, outcomes=self._outcomes, risk=self._risk,
            queue=self._batcher.push, chosen_id=self._ids.chosen.add,
            accepted=self.cancels.accepted,
        )  # fmt: skip

    def recover(self) -> int:
        """Restore (if not yet), publish what it found, then decide the kept matches (once).

        By the plan of framework.engine.recovery: unsent intents are queued again (9012 when
        too old), ACCEPTED ones tracked again, the rest UNKNOWN (never resent); then the
        matches the journal kept are decided again. Returns how many intents were queued to
        be sent. Publishes: call it after Started.
        """
        if self._recovered:
            return 0
        self.restore()
        self._recovered = True
        self._outcomes.release()
        assert self._journal is not None
        recovery.decide_kept(self._journal, self._ids.node, self._fills.recover_match)
        self.flush()
        if self._resend or self.cancels.pending:
            self._ready()
        return self._resend

    # -- introspection ------------------------------------------------------------------

    def counters(self) -> Mapping[str, int]:
        """Counters: orders_sent, orders_accepted, orders_rejected, ..., batches_sent, retries."""
        return dict(self._c)

    def status(self, client_order_id: str) -> OrderStatus | None:
        """The status of a live intent (PENDING, UNKNOWN, ACCEPTED) or a LOST one the engine
        still remembers, else None."""
        entry = self._ledger.find(client_order_id)
        return entry.status if entry is not None else None

    @property
    def idle(self) -> bool:
        """True when nothing is queued, in flight or waiting for a retry."""
        b = self._batcher
        return not b.queue and b.inflight == 0 and b.retrying == 0 and not self.cancels.busy

    @property
    def unknown_count(self) -> int:
        """How many intents are UNKNOWN."""
        return len(self._ledger.unknown)

    @property
    def lost_count(self) -> int:
        """How many LOST intents are still possible owners of matches (adoptable by a list)."""
        return len(self._ledger.lost)

    def open_quantity(self, pair: str) -> Decimal:
        """The pair's open quantity as the risk gate counts it."""
        return self._risk.open_quantity(pair)
