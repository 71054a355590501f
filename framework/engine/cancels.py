"""Cancels and open orders: withdrawing resting orders, an extension beyond SPEC.md.

SPEC.md creates orders but cannot withdraw them; the venue's public SDK has cancel and
open-order endpoints (see VENUE-FACTS.md and :mod:`framework.venue.order_management`). They
are an extension: the venue may answer 404, and then the runtime turns cancels off
(:attr:`Canceller.available`) and every cancel is refused with 9022 in one clear update.

A cancel is a command like a submit, addressed by client order id, and settled by evidence:

* an order still queued (never sent) leaves the queue: CANCELED at once, nothing reached
  the venue;
* an order whose create is in flight waits for its answer: once ACCEPTED its cancel is
  queued; refused, there is nothing to cancel;
* an ACCEPTED resting order (GTC, POST_ONLY) is cancelled by its orderId; cancels are sent
  in batches of at most ``max_batch`` ids (batchCancelEntrust);
* an UNKNOWN order is cancelled by its clientOrderId (cancelEntrustByCli, one per call):
  the venue's answer names the order, so it also ends the doubt.

What the venue answers per order decides: code 200 is CANCELED (with the filled quantity
when the answer tells it: a partly filled order keeps its fills, which arrive as matches);
any other code is a :class:`~framework.engine.events.CancelRejected` with that code, and the
order keeps its state (a refusal says the cancel did not happen, not what the order did).
An answer that does not cover an order, and a call whose outcome is unknown (HTTP >= 500,
a timeout after sending), leave the order's state unknown to the cancel: it is queried
(queryOrder) and the order record the venue returns is the evidence
(:meth:`Canceller.apply_record`). A strategy never gets an exception for a cancel. A venue
that answers queryOrder with 404 has none (:attr:`Canceller.queries_available`): from then
on nothing is queried and cancels go one order per call (cancelEntrust: every answer names
its order), as they do after any query for what a cancel did has failed; an order whose
cancel's effect could only have been asked gets a CancelRejected with 9023 (it keeps its
last known state, and says so), once no other query of it is out.

Open orders are the tracked ACCEPTED orders that may rest
(:func:`framework.engine.open_orders.open_orders`). The venue's open-order list, at start
(:meth:`Canceller.adopt`) and now and then while running (:meth:`Canceller.check`), is
evidence: an UNKNOWN or LOST intent it names by clientOrderId rests (ACCEPTED with the
list's orderId), a tracked resting order it lacks is queried, and what a record says has
filled of an order is the least that has (its matches listed later count only beyond it).
A LOST order that may rest is cancelled by its clientOrderId, as an UNKNOWN one.

Pure: no I/O, time passed in. Written here rather than taken from a library: it is the
engine's own bookkeeping of its intents.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Final

from framework.engine.cancel_calls import (
    CANCEL_CODES,
    NO_ANSWER,
    NO_CANCELS,
    NOT_OWNER,
    NOTHING_TO_CANCEL,
    CancelAnswer,
    CancelBatch,
    answer_key,
)
from framework.engine.client_ids import generated_by
from framework.engine.events import CancelRejected, Event
from framework.engine.intents import OrderStatus
from framework.engine.open_orders import VenueOrder, listed_intent
from framework.engine.outcomes import Outcomes
from framework.engine.reconcile import Ledger, LiveOrder
from framework.engine.risk import FRAMEWORK_CODES, NOT_SENT, is_resting
from framework.venue.errors import ExtensionUnavailable, SendFailed, VenueError

__all__ = [
    "CANCEL_CODES",
    "NOTHING_TO_CANCEL",
    "NOT_OWNER",
    "NO_ANSWER",
    "NO_CANCELS",
    "CancelAnswer",
    "CancelBatch",
    "Canceller",
]

log = logging.getLogger("framework.execution")

ACCEPTED: Final = OrderStatus.ACCEPTED
CANCELED: Final = OrderStatus.CANCELED
FILLED: Final = OrderStatus.FILLED
PENDING: Final = OrderStatus.PENDING
UNKNOWN: Final = OrderStatus.UNKNOWN
LOST: Final = OrderStatus.LOST
_GONE: Final = frozenset({LOST, OrderStatus.AMBIGUOUS})  # ended in doubt; may still rest
_CANCELLABLE: Final = frozenset({PENDING, ACCEPTED, UNKNOWN, *_GONE})


class Canceller:
    """The engine's cancels: queued, in flight, waiting for a create's answer; see module."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        outcomes: Outcomes,
        publish: Callable[[Event], None],
        now_ms: Callable[[], int],
        unqueue: Callable[[LiveOrder], bool],
        max_batch: int = 20,
    ) -> None:
        self._ledger = ledger
        self._outcomes = outcomes
        self._publish = publish
        self._now_ms = now_ms
        self._unqueue = unqueue
        self.max_batch = max_batch
        self.available = True
        """False once the venue answered that it has no cancels (404): every cancel is 9022."""
        self.unavailable_reason = ""
        self.queries_available = True
        """False once the venue answered queryOrder with 404: nothing is queried from then on."""
        self.queries_unavailable_reason = ""
        self._queued: dict[str, LiveOrder] = {}
        self._after_answer: dict[str, LiveOrder] = {}
        self._inflight: set[str] = set()
        self._queries: dict[int, LiveOrder] = {}  # order id -> entry: to ask the venue
        self._asking: dict[int, LiveOrder] = {}  # queries sent, not answered
        self._for_cancel: set[int] = set()  # order ids queried for what a cancel did
        self._one_by_one = False  # no queries, or one for what a cancel did failed
        self._missing_told: set[int] = set()  # not listed: counted (and warned of) once
        self._next_id = 1
        self.external = 0
        """Orders the venue listed as open that this node did not place (at adoption)."""

    # -- commands -----------------------------------------------------------------------

    def cancel(self, strategy: str | None, client_order_id: str) -> bool:
        """Ask for the cancel of one order; False when refused at once (CancelRejected sent)."""
        entry = self._ledger.find(client_order_id)
        if entry is None or (entry.status in _GONE and not is_resting(entry.order)):
            return self._refuse(strategy or "", client_order_id, NOTHING_TO_CANCEL,
                                self._why_not_open(client_order_id))  # fmt: skip
        if strategy is not None and entry.strategy != strategy:
            return self._refuse(
                strategy, client_order_id, NOT_OWNER, client_order_id, entry.strategy
            )
        coid = client_order_id
        if self._cancelling(coid):
            return True  # asked already
        status = entry.status
        if status is PENDING and self._unqueue(entry):  # never sent: nothing reached the venue
            self._cancelled([entry], None, "canceled before it was sent")
            return True
        if not self.available:
            return self._refuse(entry.strategy, client_order_id, NO_CANCELS,
                                self.unavailable_reason)  # fmt: skip
        if status is PENDING:
            self._after_answer[coid] = entry  # in flight (or waiting for a retry)
            return True
        if status is UNKNOWN or status in _GONE or (status is ACCEPTED and entry.order_id is None):
            self._queued[coid] = entry  # by its clientOrderId: the answer names the order
            return True
        if status is ACCEPTED:
            if not is_resting(entry.order):
                return self._refuse(entry.strategy, coid, NOTHING_TO_CANCEL,
                                    f"{coid} is not a resting order")  # fmt: skip
            self._queued[coid] = entry
            return True
        return self._refuse(entry.strategy, coid, NOTHING_TO_CANCEL, f"{coid} is {status}")

    def cancel_all(
        self, strategy: str | None, pair: str | None = None, is_long: bool | None = None
    ) -> int:
        """Cancel every open order of strategy (every strategy: None), of pair (None: all) and
        side (None: both); returns how many cancels were asked."""
        count = 0
        ledger = self._ledger
        for entry in [*ledger.live.values(), *ledger.lost.values()]:  # LOST: it may rest
            if strategy is not None and entry.strategy != strategy:
                continue
            if pair is not None and entry.order.pair_name != pair:
                continue
            if is_long is not None and entry.order.is_long is not is_long:
                continue
            if not is_resting(entry.order) or entry.status not in _CANCELLABLE:
                continue
            if self.cancel(entry.strategy, entry.client_order_id):
                count += 1
        return count

    def create_answered(self, entry: LiveOrder) -> None:
        """A create came back (accepted or not): a cancel waiting for it goes on or ends."""
        if self._after_answer.pop(entry.client_order_id, None) is None:
            return
        if entry.status is ACCEPTED or entry.status is UNKNOWN:
            self._queued[entry.client_order_id] = entry

    def _cancelling(self, client_order_id: str) -> bool:
        """True when a cancel of the order is queued, in flight, or waits for its create."""
        coid = client_order_id
        return coid in self._queued or coid in self._inflight or coid in self._after_answer

    @property
    def busy(self) -> bool:
        """True while a cancel or query is queued or in flight."""
        return bool(self._queued or self._inflight or self._queries or self._asking)

    @property
    def pending(self) -> bool:
        """True when cancels or queries wait to be sent."""
        return bool(self._queued) or bool(self._queries)

    @staticmethod
    def _why_not_open(client_order_id: str) -> str:
        return (
            f"{client_order_id} is not an open order of this node (filled, cancelled, refused"
            " or never placed)"
        )

    def _refuse(self, strategy: str, client_order_id: str, code: int, *args: object) -> bool:
        """CancelRejected: a framework code's message made from args, a venue's given as is."""
        template = CANCEL_CODES.get(code)
        msg = template.format(*args) if template is not None else " ".join(map(str, args))
        self._outcomes.counts["cancels_rejected"] += 1
        self._publish(CancelRejected(client_order_id, strategy, code, msg))
        return False

    # -- orders that never rest ---------------------------------------------------------

    def accepted(self, entry: LiveOrder, now_ms: int) -> None:
        """An order was ACCEPTED: one that cannot rest is watched until its fills add up."""
        if not is_resting(entry.order):
            self._ledger.unfilled[entry.client_order_id] = now_ms

    def settle_unfilled(self, cutoff_ms: int) -> None:
        """ACCEPTED orders that cannot rest, accepted at or before cutoff_ms and not filled.

        Their fate was sealed at the venue when it answered (an IOC's rest, a FOK without
        fill, are not kept); their fills may still come as matches. Each is queried where
        the venue offers queryOrder (its record ends it: CANCELED with what filled), else
        retired: no longer tracked, its status left as told, a late match still linked.
        The watch list holds only orders still unfilled (the ledger drops filled ones).
        """
        ledger = self._ledger
        unfilled = ledger.unfilled
        while unfilled:
            coid, accepted_ms = next(iter(unfilled.items()))
            if accepted_ms > cutoff_ms:
                return
            del unfilled[coid]
            entry = ledger.live.get(coid)
            if entry is None or entry.status is not ACCEPTED:
                continue
            if self.available and self.queries_available and entry.order_id is not None:
                self._queries[entry.order_id] = entry
            else:
                self._outcomes.retire(entry)

    def next_unfilled_ms(self) -> int | None:
        """When the oldest watched order was accepted (None: none is watched)."""
        unfilled = self._ledger.unfilled
        return next(iter(unfilled.values())) if unfilled else None

    # -- sending ------------------------------------------------------------------------

    def next_batch(self) -> CancelBatch | None:
        """The next cancel call due: by clientOrderId first (one order), then up to max_batch ids."""
        queued = self._queued
        if not queued:
            return None
        if not self.available:
            for entry in list(queued.values()):
                del queued[entry.client_order_id]
                self._refuse(entry.strategy, entry.client_order_id, NO_CANCELS,
                             self.unavailable_reason)  # fmt: skip
            return None
        by_cli = [e for e in queued.values() if e.order_id is None]
        # Without queries an answer must name each order: one per call (cancelEntrust).
        most = 1 if self._one_by_one else self.max_batch
        entries = by_cli[:1] if by_cli else list(queued.values())[:most]
        for entry in entries:
            del queued[entry.client_order_id]
            self._inflight.add(entry.client_order_id)
        batch = CancelBatch(self._next_id, entries, by_client_id=bool(by_cli))
        self._next_id += 1
        self._outcomes.counts["cancels_sent"] += len(entries)
        return batch

    def take_queries(self) -> list[int]:
        """Order ids whose state must be asked of the venue (queryOrder); each given once."""
        ids = list(self._queries)
        self._asking.update(self._queries)
        self._queries.clear()
        return ids

    def query_failed(self, order_id: int, why: str, *, unavailable: bool = False) -> None:
        """A queryOrder call failed: the order keeps the state the engine knows.

        unavailable: the venue does not offer queryOrder (404): nothing is queried again.
        """
        entry = self._asking.pop(order_id, None)
        if unavailable:
            self.turn_off_queries(why)
        if entry is not None:
            self._unasked(entry, why)

    def turn_off_queries(self, reason: str) -> None:
        """The venue has no queryOrder: one log line; what waits for a query is settled now."""
        if not self.queries_available:
            return
        log.warning("queryOrder turned off: %s; cancels go one order per call, and an order"
                    " the venue no longer lists keeps its last known state", reason)  # fmt: skip
        self.queries_available = False
        self.queries_unavailable_reason = reason
        self._one_by_one = True
        waiting = list(self._queries.values())
        self._queries.clear()
        for entry in waiting:
            self._unasked(entry, reason)

    def _unasked(self, entry: LiveOrder, why: str) -> None:
        """An order the venue could not be asked about: it keeps its state, and says so."""
        order_id = entry.order_id
        if order_id in self._queries or order_id in self._asking:
            return  # another query of it is still out: its answer decides
        for_cancel = order_id is not None and order_id in self._for_cancel
        if for_cancel:
            self._one_by_one = True  # from now on, a cancel's answer must name its order
        self._for_cancel.discard(order_id)
        status = entry.status
        if status is ACCEPTED and not is_resting(entry.order):
            self._outcomes.retire(entry)  # it cannot rest: nothing more to wait for
        elif for_cancel and status is not CANCELED and status is not FILLED:
            self._refuse(entry.strategy, entry.client_order_id, NO_ANSWER, f"queryOrder: {why}",
                         status)  # fmt: skip
        else:
            log.warning("order %s: query failed (%s); its state stays as known (%s)",
                        entry.client_order_id, why, status)  # fmt: skip

    # -- answers ------------------------------------------------------------------------

    def on_answers(self, batch: CancelBatch, answers: dict[int | str, CancelAnswer]) -> None:
        """Per-order answers, keyed by orderId (by clientOrderId for a by-client-id batch)."""
        canceled: list[tuple[LiveOrder, Decimal | None]] = []
        for entry in batch.entries:
            self._inflight.discard(entry.client_order_id)
            key = answer_key(batch, entry)
            answer = answers.get(key)
            if answer is None:
                self._query(entry, for_cancel=True)
                continue
            ended = entry.status is CANCELED or entry.status is FILLED
            if answer.code == 200:
                if ended:
                    continue  # it ended meanwhile (a query's record, its fills): said already
                if entry.order_id is None and answer.order_id is not None:
                    self._outcomes.bind(entry, answer.order_id)
                canceled.append((entry, answer.filled))
            else:
                self._refuse(entry.strategy, entry.client_order_id, answer.code,
                             answer.msg or f"code {answer.code}")  # fmt: skip
                if entry.order_id is not None and not ended and self.queries_available:
                    self._queries[entry.order_id] = entry  # what it did instead: ask
        for entry, filled in canceled:
            self._cancelled([entry], filled, "canceled at the venue")

    def on_failure(self, batch: CancelBatch, *, code: int | None, msg: str,
                   unavailable: bool = False) -> None:  # fmt: skip
        """A whole cancel call failed: refused (code), unavailable (404), or outcome unknown."""
        for entry in batch.entries:
            self._inflight.discard(entry.client_order_id)
        if unavailable:
            self.turn_off(msg)
            for entry in batch.entries:
                self._refuse(entry.strategy, entry.client_order_id, NO_CANCELS, msg)
            return
        if code is not None:
            for entry in batch.entries:
                self._refuse(entry.strategy, entry.client_order_id, code, msg)
            return
        log.warning("cancel call %d (%d orders): outcome unknown (%s); the orders with an"
                    " orderId are queried", batch.id, len(batch.entries), msg)  # fmt: skip
        for entry in batch.entries:
            self._query(entry, for_cancel=True)

    def on_error(self, batch: CancelBatch, exc: BaseException) -> None:
        """A cancel call raised: sorted by what the error says happened (see module)."""
        if isinstance(exc, ExtensionUnavailable):
            self.on_failure(batch, code=None, msg=str(exc), unavailable=True)
        elif isinstance(exc, SendFailed):
            self.on_failure(batch, code=NOT_SENT, msg=FRAMEWORK_CODES[NOT_SENT].format(exc))
        elif isinstance(exc, VenueError) and exc.refuses:
            if batch.by_client_id or len(batch.entries) == 1:
                self.on_answers(batch, {answer_key(batch, e): CancelAnswer(exc.code, exc.msg)
                                        for e in batch.entries})  # fmt: skip
            else:
                self.on_failure(batch, code=exc.code, msg=exc.msg)
        else:
            self.on_failure(batch, code=None, msg=f"{type(exc).__name__}: {exc}")

    def turn_off(self, reason: str) -> None:
        """The venue has no cancels: one log line, and every later cancel is refused (9022)."""
        if self.available:
            log.warning("cancels and open orders turned off: %s", reason)
        self.available = False
        self.unavailable_reason = reason

    def _query(self, entry: LiveOrder, *, for_cancel: bool = False) -> None:
        if entry.status is CANCELED or entry.status is FILLED:
            return  # it ended meanwhile: a record cannot change that
        order_id = entry.order_id
        if order_id is None:  # nothing to ask by (queryOrder takes an orderId): say so
            self._refuse(entry.strategy, entry.client_order_id, NO_ANSWER, "no orderId",
                         entry.status)  # fmt: skip
            return
        if for_cancel:
            self._for_cancel.add(order_id)
        if not self.queries_available:
            self._unasked(entry, self.queries_unavailable_reason)
            return
        self._queries[order_id] = entry

    # -- evidence -----------------------------------------------------------------------

    def apply_record(self, record: VenueOrder) -> str:
        """Take an order record the venue gave as evidence; returns what it did.

        'adopted' (an UNKNOWN order found at the venue by its clientOrderId, now ACCEPTED),
        'canceled', 'filled', 'open' (nothing to change), or 'external' (not this node's).
        """
        coid = record.client_order_id
        ledger = self._ledger
        entry = ledger.find(coid) if coid is not None else None
        if entry is None and record.entrust_id is not None:
            entry = ledger.by_order_id.get(record.entrust_id)
        if record.entrust_id is not None:
            queried = self._asking.pop(record.entrust_id, None)
            self._queries.pop(record.entrust_id, None)
            self._for_cancel.discard(record.entrust_id)
            entry = entry or queried
        if entry is None or ledger.find(entry.client_order_id) is None:
            return "external" if entry is None else "done"
        if entry.status is PENDING:
            return "open"  # its create's answer is on its way
        state = record.state
        if entry.order_id is None and record.entrust_id is not None:
            if coid != entry.client_order_id:
                return "external"  # only a record naming the intent's own id is evidence
            self._outcomes.bind(entry, record.entrust_id)
        filled = record.filled_quantity
        if state == "canceled":
            self._cancelled([entry], filled, "the venue reports it canceled")
            return "canceled"
        if state == "filled":
            self._outcomes.settle_filled(entry, "the venue reports it filled")
            return "filled"
        if state == "open" and (entry.status is UNKNOWN or entry.status in _GONE):
            self._outcomes.found_open(entry, filled)
            return "adopted"
        if filled is not None and entry.status is ACCEPTED:
            self._outcomes.raise_filled(entry, filled)  # the least that has filled
        if entry.status is ACCEPTED and not is_resting(entry.order):
            self._outcomes.retire(entry)  # it cannot rest: no state to wait for
        return "open"

    def adopt(
        self, pair: str, records: Iterable[VenueOrder], node: str | None = None
    ) -> dict[str, int]:
        """Reconcile the tracked orders of pair with the venue's open-order list (see module).

        A listed order the engine does not know whose clientOrderId is in this node's
        generated space (it starts with ``node``) was placed by an earlier journal of this
        node (a new, replaced or damaged one): it is tracked as an open order of no strategy
        (:data:`~framework.engine.open_orders.NO_OWNER`), so its fills are linked and the kill
        switch and ``cancel_on_stop`` cancel it. Returns counts: adopted, open, external,
        orphans (those), missing (tracked resting orders the venue does not list: queried).
        """
        counts = {"adopted": 0, "open": 0, "external": 0, "orphans": 0, "missing": 0}
        listed: set[str] = set()
        for record in records:
            what = self.apply_record(record)
            coid = record.client_order_id
            if what == "external" and node and coid is not None and generated_by(node, coid):
                intent = listed_intent(record)
                if intent is not None and record.state == "open" and record.entrust_id:
                    self._outcomes.orphan(node, coid, intent, record.entrust_id,
                                          record.filled_quantity)  # fmt: skip
                    what = "orphans"
            if what in counts:
                counts[what] += 1
            if record.client_order_id is not None:
                listed.add(record.client_order_id)
        for entry in list(self._ledger.live.values()):
            if (entry.order.pair_name == pair and entry.status is ACCEPTED
                    and is_resting(entry.order) and entry.client_order_id not in listed):  # fmt: skip
                counts["missing"] += 1
                self._query(entry)
        self.external += counts["external"]
        return counts

    def check(
        self,
        pair: str,
        records: Iterable[VenueOrder],
        *,
        asked_ms: int | None = None,
        window_ms: int = 0,
    ) -> dict[str, int]:
        """A later list of pair's open orders (a periodic check), asked for at asked_ms.

        UNKNOWN and LOST intents it names by clientOrderId are ACCEPTED (unless a cancel of
        one is on its way: its answer decides); a tracked ACCEPTED resting order it names
        neither by clientOrderId nor by orderId is queried (its record decides); of the other
        records only what one says has filled of an ACCEPTED order is taken, as a floor. A
        LOST intent the list lacks, asked for a window after its doubt began, does not rest:
        it stays a possible owner one window more (fills listed late). Returns counts:
        listed, adopted, missing; orders_missing counts an order once until listed again.
        """
        by_client: set[str] = set()
        by_id: set[int] = set()
        listed = adopted = 0
        ledger = self._ledger
        for record in records:
            listed += 1
            coid = record.client_order_id
            if coid is not None:
                by_client.add(coid)
                if (coid in ledger.unknown or coid in ledger.lost) and record.state == "open" \
                        and not self._cancelling(coid):  # fmt: skip
                    adopted += self.apply_record(record) == "adopted"
                    continue
            if record.entrust_id is not None:
                by_id.add(record.entrust_id)
            self._floor(record)
        if asked_ms is not None and ledger.lost:
            self._unlisted(pair, by_client, asked_ms, window_ms)
        missing = newly = 0  # this round's / not missing at the last round too (the counter)
        told = self._missing_told
        if told:  # listed again (read before it rested), or no longer tracked: forgotten
            told.difference_update(by_id)
            told.intersection_update(ledger.by_order_id)
        for entry in list(ledger.live.values()):
            coid, order_id = entry.client_order_id, entry.order_id
            if (entry.order.pair_name != pair or entry.status is not ACCEPTED or order_id is None
                    or not is_resting(entry.order) or coid in by_client or order_id in by_id
                    or self._cancelling(coid)
                    or order_id in self._queries or order_id in self._asking):  # fmt: skip
                continue
            if not self.queries_available:  # said once: it no longer rests, and no more is known
                if order_id not in told:
                    told.add(order_id)
                    missing += 1
                    newly += 1
                    log.warning("order %s: the venue no longer lists it as open and has no"
                                " queryOrder: whether it filled or was cancelled is unknown; it"
                                " stays ACCEPTED", coid)  # fmt: skip
                continue
            missing += 1
            self._queries[order_id] = entry  # asked again each round its query left it open
            if order_id not in told:
                told.add(order_id)
                newly += 1
        self._outcomes.counts["orders_missing"] += newly
        return {"listed": listed, "adopted": adopted, "missing": missing}

    def _unlisted(self, pair: str, listed: set[str], asked_ms: int, window_ms: int) -> None:
        """LOST intents of pair a list asked for late enough lacks: they do not rest."""
        until = self._now_ms() + window_ms
        for entry in self._ledger.lost.values():
            if (entry.order.pair_name == pair and entry.client_order_id not in listed
                    and asked_ms >= entry.unknown_since_ms + window_ms
                    and entry.until_ms > until):  # fmt: skip
                self._ledger.shorten(entry, until)

    def _floor(self, record: VenueOrder) -> None:
        """A listed ACCEPTED order's filled quantity, the least that has filled of it."""
        filled = record.filled_quantity
        if not filled or record.entrust_id is None:
            return
        entry = self._ledger.by_order_id.get(record.entrust_id)
        if (entry is not None and entry.status is ACCEPTED
                and record.client_order_id in (None, entry.client_order_id)):  # fmt: skip
            self._outcomes.raise_filled(entry, filled)

    def _cancelled(self, entries: list[LiveOrder], filled: Decimal | None, why: str) -> None:
        self._outcomes.canceled(entries, filled, why)
