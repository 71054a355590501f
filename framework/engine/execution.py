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
resolved by evidence only (:meth:`ExecutionEngine.attribute`): a match whose order an answer
named, or the only in-doubt intent a match agrees with (pair, side, quantity). Where several
same-looking intents are in doubt, the matches are counted for the group and the group is
settled by count: every member AMBIGUOUS, with k of n filled (see
:class:`~framework.engine.reconcile.Ledger`). An intent with no evidence becomes LOST after
``unknown_window_s``, logged at ERROR.

A match may be seen before the answer that names its order (the poller runs beside the
send). One whose entrustId names no known order while a batch is in flight is held, neither
external nor evidence: ``attribute`` returns None and the engine publishes its MatchFilled
itself, once, when the answers of the batches in flight when it was seen have been handled. Held matches, and the
matches counted for a doubt group, are kept in the journal (same commit as the poller's
delivered mark), so a kill loses none: :meth:`ExecutionEngine.recover` decides them again.

Transitions publish :class:`~framework.engine.events.OrderUpdate` addressed to the strategy
that submitted the intent: ACCEPTED, REJECTED or UNKNOWN, then FILLED (every match of the
order adds up to its quantity, or the evidence that resolved it), AMBIGUOUS or LOST.
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

import msgspec

from framework.engine import recovery
from framework.engine.batching import Batcher, backoff_s
from framework.engine.client_ids import ClientIdError, ClientIdGenerator
from framework.engine.events import Event, MatchFilled, OrderUpdate
from framework.engine.execution_settings import ExecutionSettings
from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.journaling import JournalProtocol, StatusRow
from framework.engine.reconcile import (
    Batch,
    DoubtGroup,
    EarlyMatches,
    Ledger,
    LiveOrder,
    order_input,
)
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

COUNTER_NAMES: Final = (
    "orders_submitted",
    "orders_sent",
    "orders_accepted",
    "orders_rejected",
    "orders_risk_rejected",
    "orders_unknown",
    "orders_filled",
    "orders_ambiguous",
    "orders_lost",
    "batches_sent",
    "retries",
    "matches_linked",
    "matches_external",
    "matches_held",
    "matches_ambiguous",
)
"""Every counter :meth:`ExecutionEngine.counters` reports."""

PENDING: Final = OrderStatus.PENDING
ACCEPTED: Final = OrderStatus.ACCEPTED
REJECTED: Final = OrderStatus.REJECTED
UNKNOWN: Final = OrderStatus.UNKNOWN
FILLED: Final = OrderStatus.FILLED
AMBIGUOUS: Final = OrderStatus.AMBIGUOUS
LOST: Final = OrderStatus.LOST


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
        random: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings
        self._publish = publish
        self._now_ms = now_ms
        self._ids = ids
        self._journal = journal
        self.on_ready = on_ready
        self._random = random if random is not None else _random.Random(0x5EED).random
        self._risk = RiskGate(settings.risk, rules, mark_price=mark_price)
        self._batcher: Batcher[LiveOrder, Batch] = Batcher(
            linger_ms=settings.linger_ms,
            max_inflight=settings.max_inflight,
            calls_per_second=settings.calls_per_second,
            max_size=MAX_BATCH,
        )
        self._ledger = Ledger()
        self._early = EarlyMatches()
        self._user_ids: set[str] = set()
        self._next_batch_id = 1
        self._dirty = False  # journal writes buffered since the last commit
        self._recovered = journal is None
        self._closed = False
        self._dt_ms = -1
        self._dt = datetime.fromtimestamp(0, UTC)
        self._missing_unknown = settings.missing_result == "unknown"
        self._c = dict.fromkeys(COUNTER_NAMES, 0)

    # -- submitting ---------------------------------------------------------------------

    @property
    def kill_switch(self) -> bool:
        """When on, every new intent is refused with code 9001."""
        return self._risk.kill_switch

    @kill_switch.setter
    def kill_switch(self, on: bool) -> None:
        if on and not self._risk.kill_switch:
            log.warning("kill switch ON: every new intent is refused")
        self._risk.kill_switch = on

    def _now_dt(self, now_ms: int) -> datetime:
        if now_ms != self._dt_ms:
            self._dt_ms = now_ms
            self._dt = datetime.fromtimestamp(now_ms / 1000, UTC)
        return self._dt

    def _check_user_id(self, client_order_id: str) -> None:
        self._ids.check_user_id(client_order_id)
        journal = self._journal
        # In memory either way: the journal loads the chosen ids it holds once, when opened,
        # and notes every one added since (journal.add runs for accepted and refused intents).
        if journal is not None:
            used = journal.contains(client_order_id)
        else:
            used = client_order_id in self._user_ids
            self._user_ids.add(client_order_id)
        if used:
            raise ClientIdError(f"client_order_id {client_order_id!r} was already used")

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
                self._dirty = True
            self._c["orders_rejected"] += 1
            self._c["orders_risk_rejected"] += 1
            self._publish(OrderUpdate(coid, REJECTED, strategy, None, code, msg, intent))
            return coid
        entry = LiveOrder(
            coid, strategy, intent, order, PENDING, now, risk.admitted_price, risk.tracks_exposure
        )
        self._ledger.add(entry)
        if journal is not None:
            journal.add(coid, self._ids.node, strategy, intent, PENDING, now)
            self._dirty = True
        self._batcher.push(entry, now)
        if self.on_ready is not None:
            self.on_ready()
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
        self._reject(entries, STOPPING, FRAMEWORK_CODES[STOPPING], self._now_ms(), rows, events)
        self._emit(rows, events)
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
            self._dirty = False
        self._early.sent(batch.id)
        c = self._c
        c["batches_sent"] += 1
        if batch.attempt == 1:
            c["orders_sent"] += len(batch.orders)
        else:
            c["retries"] += 1

    def flush(self) -> None:
        """Commit buffered journal writes (the driver calls it when idle and at shutdown)."""
        if self._dirty and self._journal is not None:
            self._journal.commit()
        self._dirty = False

    # -- answers ------------------------------------------------------------------------

    def on_results(self, batch: Batch, results: list[OrderResult]) -> None:
        """Reconcile a successful answer by clientOrderId; missing intents become UNKNOWN."""
        now = self._now_ms()
        self._batcher.done()
        self._early.answered(batch.id)
        members = {e.client_order_id: e for e in batch.entries}
        rows: list[StatusRow] = []
        events: list[OrderUpdate] = []
        bind = self._ledger.bind
        strangers = 0
        for result in results:
            entry = members.pop(result.client_order_id, None)
            if entry is None:
                strangers += 1
                continue
            order_id = result.order_id
            entry.status = ACCEPTED
            bind(entry, order_id)
            if entry.booked and not is_resting(entry.order):
                self._risk.release(entry.order.pair_name, entry.order.quantity, entry.price)
                entry.booked = False
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
                self._to_unknown(list(members.values()), now, rows, events)
            else:
                msg = FRAMEWORK_CODES[MISSING_FROM_ANSWER]
                self._reject(list(members.values()), MISSING_FROM_ANSWER, msg, now, rows, events)
        self._emit(rows, events)
        self._release_early()

    def on_failure(self, batch: Batch, exc: BaseException) -> None:
        """Handle a whole-call failure: retry, reject every intent, or mark them UNKNOWN."""
        now = self._now_ms()
        self._early.answered(batch.id)
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
                self._dirty = True
                self.flush()
            self._release_early()  # surely not executed: a held match is none of its orders
            return
        self._batcher.done()
        if isinstance(exc, VenueError) and exc.refuses:
            log.warning("batch %d (%d orders) refused: %s", batch.id, len(entries), exc)
            self._reject(entries, exc.code, exc.msg, now, rows, events)
        elif isinstance(exc, SendFailed):
            log.error("batch %d (%d orders) could not be sent: %s", batch.id, len(entries), exc)
            msg = FRAMEWORK_CODES[NOT_SENT].format(exc)
            self._reject(entries, NOT_SENT, msg, now, rows, events)
        else:
            log.error(
                "batch %d (%d orders) outcome unknown (%s: %s) -> UNKNOWN, never resent",
                batch.id,
                len(entries),
                type(exc).__name__,
                exc,
            )
            self._to_unknown(entries, now, rows, events)
        self._emit(rows, events)
        self._release_early()

    def _emit(self, rows: list[StatusRow], events: list[OrderUpdate]) -> None:
        if self._journal is not None and rows:
            self._journal.update(rows)
            self._dirty = True
        publish = self._publish
        for event in events:
            publish(event)

    def _reject(
        self,
        entries: list[LiveOrder],
        code: int,
        msg: str,
        now: int,
        rows: list[StatusRow],
        events: list[OrderUpdate],
    ) -> None:
        self._mark(entries, REJECTED, code, msg, now, rows, events)
        for e in entries:
            self._ledger.drop(e)
            self._unbook(e)
        self._c["orders_rejected"] += len(entries)

    def _to_unknown(
        self, entries: list[LiveOrder], now: int, rows: list[StatusRow], events: list[OrderUpdate]
    ) -> None:
        self._mark(entries, UNKNOWN, None, None, now, rows, events)
        for e in entries:
            self._ledger.doubt(e, now)
        self._c["orders_unknown"] += len(entries)

    @staticmethod
    def _mark(
        entries: list[LiveOrder],
        status: OrderStatus,
        code: int | None,
        msg: str | None,
        now: int,
        rows: list[StatusRow],
        events: list[OrderUpdate],
    ) -> None:
        """Move entries to status (one with no order id), with their journal rows and events."""
        for e in entries:
            e.status = status
            rows.append((status, None, code, msg, now, e.client_order_id))
            events.append(
                OrderUpdate(e.client_order_id, status, e.strategy, None, code, msg, e.intent)
            )

    def _unbook(self, e: LiveOrder) -> None:
        """Give back what the risk gate booked for e's order."""
        if e.booked:
            self._risk.release(e.order.pair_name, e.order.quantity, e.price)
            e.booked = False

    # -- time ---------------------------------------------------------------------------

    def tick(self) -> int:
        """End doubt that outlived unknown_window_s: LOST, or AMBIGUOUS for counted groups.

        Returns how many intents ended.
        """
        ledger = self._ledger
        if not ledger.unknown:
            return 0
        now = self._now_ms()
        expired, due = ledger.expired(now - int(self.settings.unknown_window_s * 1000))
        ended = 0
        for group in due:
            ended += self._settle(group, "the window is over")
        if not expired:
            return ended
        rows: list[StatusRow] = []
        events: list[OrderUpdate] = []
        self._mark(expired, LOST, None, None, now, rows, events)
        for e in expired:
            ledger.drop(e)
            self._unbook(e)
            log.error(
                "order LOST: %s (strategy %s, %s %s %s @ %s): no answer and no matching fill "
                "within %.0f s; it may or may not rest on the venue",
                e.client_order_id,
                e.strategy,
                e.order.pair_name,
                "long" if e.order.is_long else "short",
                e.order.quantity,
                e.order.price if e.order.price is not None else "market",
                self.settings.unknown_window_s,
            )
        self._c["orders_lost"] += len(expired)
        self._emit(rows, events)
        return ended + len(expired)

    def next_wakeup_ms(self) -> int | None:
        """Milliseconds until next_batch() or tick() may have work; None: only an event can."""
        now = self._now_ms()
        due = self._batcher.next_due_ms(now)
        if self._ledger.unknown:
            window_ms = int(self.settings.unknown_window_s * 1000)
            deadline = self._ledger.next_doubt_deadline_ms(window_ms)
            if deadline is not None:
                expiry = max(0, deadline - now)
                due = expiry if due is None else min(due, expiry)
        return due

    # -- evidence -----------------------------------------------------------------------

    def attribute(self, match: MatchRecord) -> MatchFilled | None:
        """Link a match to its intent by orderId == entrustId, resolving UNKNOWN by evidence.

        A match of a known order carries its client_order_id and is addressed to its
        strategy. One whose entrustId belongs to no known order resolves an UNKNOWN intent
        only when that intent is the one in doubt that agrees in pair, side and quantity;
        with several such intents it is counted for their group (``candidates`` set, no
        client_order_id). Any other match is external. The caller publishes the MatchFilled
        returned. None: the match names no known order while a batch is in flight (its
        answer may name it); the engine holds it and publishes its MatchFilled itself later.
        """
        order_id = match.entrust_id
        if order_id is not None and self._early.in_flight and not self._ledger.knows(order_id):
            self._early.hold(match)
            self._keep(match, delivered=False)
            self._c["matches_held"] += 1
            return None
        return self._decide(match)

    def _keep(self, match: MatchRecord, *, delivered: bool) -> None:
        """Journal a match the engine cannot settle yet (survives a kill)."""
        if self._journal is not None:
            self._journal.keep_match(self._ids.node, match, delivered)
            self._dirty = True

    def _unkeep(self, match: MatchRecord) -> None:
        if self._journal is not None:
            self._journal.drop_match(match.id)
            self._dirty = True

    def _release_early(self) -> None:
        """Decide and publish the held matches an answer (or its absence) now explains."""
        if len(self._early):
            for match in self._early.release(self._ledger.knows):
                self._unkeep(match)
                self._publish(self._decide(match))

    def _decide(self, match: MatchRecord) -> MatchFilled:
        ledger = self._ledger
        order_id = match.entrust_id
        if order_id is None:
            return self._external(match)
        entry = ledger.by_order_id.get(order_id)
        if entry is not None:
            self._fill(entry, match)
            return self._linked(match, entry)
        link = ledger.recently_done(order_id)
        if link is not None:
            self._c["matches_linked"] += 1
            coid, strategy, candidates = link
            if coid is not None or candidates:
                match = msgspec.structs.replace(match, client_order_id=coid, candidates=candidates)
            return MatchFilled(match, strategy, False, candidates)
        group = ledger.claimed.get(order_id)
        if group is None:
            group = ledger.group_for(match)
            if group is None:
                return self._external(match)
            if len(group.members) == 1 and not group.claimed:
                entry = ledger.resolve(group)  # the one intent in doubt it can be: unique
                self._resolve(entry, match, order_id)
                return self._linked(match, entry)
        ledger.claim(group, order_id, match.id)
        self._keep(match, delivered=True)
        self._c["matches_ambiguous"] += 1
        candidates = group.candidates
        event = MatchFilled(
            msgspec.structs.replace(match, candidates=candidates), group.strategy, False, candidates
        )
        if group.complete:
            self._settle(group, "every member is accounted for")
        return event

    def _external(self, match: MatchRecord) -> MatchFilled:
        self._c["matches_external"] += 1
        return MatchFilled(match, None, True)

    def _linked(self, match: MatchRecord, entry: LiveOrder) -> MatchFilled:
        self._c["matches_linked"] += 1
        linked = msgspec.structs.replace(match, client_order_id=entry.client_order_id)
        return MatchFilled(linked, entry.strategy, False)

    def _settle(self, group: DoubtGroup, why: str) -> int:
        """Settle a doubt group by count: every member AMBIGUOUS, k of n filled."""
        filled = len(group.claimed)
        kept = [mid for ids in group.claimed.values() for mid in ids]
        candidates = group.candidates
        pair, is_long, quantity = group.key
        members = self._ledger.settle(group)
        for e in members:
            self._unbook(e)
        if self._journal is not None:
            for match_id in kept:
                self._journal.drop_match(match_id)
        msg = (
            f"{filled} of {len(members)} same-looking in-doubt orders ({pair}"
            f" {'long' if is_long else 'short'} {quantity}) filled; which ones is unknowable"
        )
        log.warning("doubt group settled by count (%s): %s: %s", why, msg, ", ".join(candidates))
        now = self._now_ms()
        rows: list[StatusRow] = []
        events: list[OrderUpdate] = []
        for e in members:
            rows.append((AMBIGUOUS, None, None, msg, now, e.client_order_id))
            events.append(
                OrderUpdate(
                    e.client_order_id, AMBIGUOUS, e.strategy, None, None, msg, e.intent,
                    candidates, filled,
                )
            )  # fmt: skip
        self._c["orders_ambiguous"] += len(members)
        self._emit(rows, events)
        return len(members)

    def _fill(self, entry: LiveOrder, match: MatchRecord) -> None:
        quantity = match.quantity or Decimal(0)
        if entry.booked:
            left = entry.order.quantity - entry.filled
            self._risk.release(entry.order.pair_name, min(quantity, left), entry.price)
        entry.filled += quantity
        journal = self._journal
        if journal is not None:
            journal.set_filled(entry.client_order_id, entry.filled)
            self._dirty = True
        if entry.status is ACCEPTED and entry.filled >= entry.order.quantity:
            self._finish_filled(entry)

    def _resolve(self, entry: LiveOrder, match: MatchRecord, order_id: int) -> None:
        """An UNKNOWN intent resolved by the evidence of a match: FILLED with its orderId."""
        entry.order_id = order_id
        entry.filled = entry.order.quantity
        if entry.booked:
            self._risk.release(entry.order.pair_name, entry.order.quantity, entry.price)
        log.warning(
            "UNKNOWN order %s resolved by evidence: match %d (entrustId %d), the only in-doubt"
            " intent it agrees with -> FILLED",
            entry.client_order_id,
            match.id,
            order_id,
        )
        self._finish_filled(entry)

    def _finish_filled(self, entry: LiveOrder) -> None:
        entry.status = FILLED
        entry.booked = False
        self._ledger.drop(entry)
        self._c["orders_filled"] += 1
        now = self._now_ms()
        row: StatusRow = (FILLED, entry.order_id, None, None, now, entry.client_order_id)
        event = OrderUpdate(
            entry.client_order_id, FILLED, entry.strategy, entry.order_id, None, None, entry.intent
        )
        self._emit([row], [event])

    # -- restart ------------------------------------------------------------------------

    def recover(self) -> int:
        """Reload the journal's open intents (once): resend unsent ones, the rest UNKNOWN.

        Returns how many intents were queued to be sent. Call it after the bus has its
        subscribers (the driver does, when it starts), since it publishes UNKNOWN updates.
        """
        return recovery.recover(self)

    def _recover_match(self, match: MatchRecord, delivered: bool) -> None:
        """A match the journal kept, decided again at restart (see recovery)."""
        order_id = match.entrust_id
        ledger = self._ledger
        if not delivered:  # held for an answer that never came: publish it now
            self._unkeep(match)
            self._publish(self._decide(match))
            return
        group = ledger.claimed.get(order_id) if order_id is not None else None
        if group is None:
            group = ledger.group_for(match)
        if order_id is None or group is None:
            self._unkeep(match)  # its group was settled: nothing left to count for
            return
        ledger.claim(group, order_id, match.id)
        if group.complete:
            self._settle(group, "every member is accounted for")

    # -- introspection ------------------------------------------------------------------

    def counters(self) -> Mapping[str, int]:
        """Counters: orders_sent, orders_accepted, orders_rejected, ..., batches_sent, retries."""
        return dict(self._c)

    def status(self, client_order_id: str) -> OrderStatus | None:
        """The status of a live intent (PENDING, UNKNOWN, ACCEPTED), else None."""
        entry = self._ledger.live.get(client_order_id)
        return entry.status if entry is not None else None

    @property
    def idle(self) -> bool:
        """True when nothing is queued, in flight or waiting for a retry."""
        b = self._batcher
        return not b.queue and b.inflight == 0 and b.retrying == 0

    @property
    def unknown_count(self) -> int:
        """How many intents are UNKNOWN."""
        return len(self._ledger.unknown)

    def open_quantity(self, pair: str) -> Decimal:
        """The pair's open quantity as the risk gate counts it."""
        return self._risk.open_quantity(pair)
