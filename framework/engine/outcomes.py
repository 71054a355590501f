"""Outcomes: how an intent's status changes are recorded (journal) and told (OrderUpdate).

Every transition of an intent goes through one :class:`Outcomes`: it moves the engine's
record, releases what the risk gate booked for it, buffers the journal row and publishes the
OrderUpdate addressed to the strategy that submitted it. The execution engine (answers,
deadlines, restart) and the fill linker (matches) share one instance, so a status change is
written one way whoever causes it. Pure: no I/O, time passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from decimal import Decimal
from typing import Final

from framework.engine.events import Event, OrderUpdate
from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.journaling import JournalProtocol, StatusRow
from framework.engine.open_orders import NO_OWNER
from framework.engine.reconcile import (
    Done,
    DoubtGroup,
    Ledger,
    LiveOrder,
    order_input,
    revive,
)
from framework.engine.risk import RiskGate, is_resting

__all__ = ["COUNTER_NAMES", "Outcomes"]

log = logging.getLogger("framework.execution")

_ZERO: Final = Decimal(0)
REFUSALS_TOLD_EVERY_MS: Final = 60_000
"""How often at most the log tells of intents one strategy had refused with one code, at
first; the interval doubles while refusals go on, up to REFUSALS_TOLD_MAX_MS."""
REFUSALS_TOLD_MAX_MS: Final = 3_600_000
"""The longest interval between two lines about one strategy's refusals with one code."""

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
    "orders_canceled",
    "cancels_sent",
    "cancels_rejected",
    "orders_adopted",
    "orders_missing",
)
"""Every counter ``ExecutionEngine.counters()`` reports."""

REJECTED: Final = OrderStatus.REJECTED
UNKNOWN: Final = OrderStatus.UNKNOWN
FILLED: Final = OrderStatus.FILLED
AMBIGUOUS: Final = OrderStatus.AMBIGUOUS
LOST: Final = OrderStatus.LOST
ACCEPTED: Final = OrderStatus.ACCEPTED
CANCELED: Final = OrderStatus.CANCELED


class Outcomes:
    """Records and tells intents' transitions; holds the engine's counters and dirty flag."""

    __slots__ = (
        "_held",
        "_journal",
        "_now_ms",
        "_publish",
        "_told",
        "counts",
        "dirty",
        "ledger",
        "lost_memory_ms",
        "risk",
    )

    def __init__(
        self,
        *,
        ledger: Ledger,
        risk: RiskGate,
        journal: JournalProtocol | None,
        publish: Callable[[Event], None],
        now_ms: Callable[[], int],
        lost_memory_ms: int = 3_600_000,
    ) -> None:
        self.ledger = ledger
        self.risk = risk
        self.lost_memory_ms = lost_memory_ms
        """How long an intent ended in doubt (LOST, AMBIGUOUS) that may rest stays adoptable."""
        self._journal = journal
        self._publish = publish
        self._now_ms = now_ms
        self.counts = dict.fromkeys(COUNTER_NAMES, 0)
        self.dirty = False  # journal writes buffered since the last commit
        self._held: list[OrderUpdate] | None = None
        # (strategy, code) -> (when last told, refused alike since, interval): see
        # refused_before_sending
        self._told: dict[tuple[str, int], tuple[int, int, int]] = {}

    def now(self) -> int:
        """The engine's clock, in ms."""
        return self._now_ms()

    def refused_before_sending(self, strategy: str, coid: str, code: int, msg: str) -> None:
        """Say in the log that a check refused an intent (the strategy gets it as REJECTED).

        Per strategy and code: the first at once, then at most one line per interval with how
        many were refused alike meanwhile; the interval doubles while refusals go on (a minute
        up to an hour: a strategy refused all day long writes a line an hour, not a minute).
        """
        now = self._now_ms()
        key = (strategy, code)
        told = self._told.get(key)
        if told is not None:
            last, alike, interval = told
            if now - last < interval:
                self._told[key] = (last, alike + 1, interval)
                return
            going_on = alike and now - last < 2 * interval  # else they had stopped a while
            interval = (
                min(interval * 2, REFUSALS_TOLD_MAX_MS) if going_on else REFUSALS_TOLD_EVERY_MS
            )
        else:
            alike, interval = 0, REFUSALS_TOLD_EVERY_MS
        self._told[key] = (now, 0, interval)
        since = f" ({alike} more refused alike since the last word)" if alike else ""
        log.warning(
            "order %s of %s refused before sending: %d %s%s", coid, strategy, code, msg, since
        )

    def hold(self) -> None:
        """Keep the updates made from now on until release() (restart, before on_start)."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        """Publish the held updates in the order they were made; publish at once again."""
        held, self._held = self._held, None
        for event in held or ():
            self._publish(event)

    def flush(self) -> None:
        """Commit buffered journal writes."""
        if self.dirty and self._journal is not None:
            self._journal.commit()
        self.dirty = False

    def emit(self, rows: list[StatusRow], events: list[OrderUpdate]) -> None:
        """Buffer the journal rows, then publish the updates."""
        if self._journal is not None and rows:
            self._journal.update(rows)
            self.dirty = True
        if self._held is not None:
            self._held.extend(events)
            return
        publish = self._publish
        for event in events:
            publish(event)

    @staticmethod
    def mark(
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

    def forget(self, entries: list[LiveOrder]) -> None:
        """LOST intents no longer possible owners (their time is over): the risk gate gives
        back what it held for them."""
        for e in entries:
            self.unbook(e)

    def unbook(self, e: LiveOrder) -> None:
        """Give back what the risk gate still holds for e's order (its fills gave back theirs)."""
        if e.booked:
            left = e.order.quantity - e.filled
            if left > 0:
                self.risk.release(e.order.pair_name, left, e.price)
            e.booked = False

    def reject(
        self,
        entries: list[LiveOrder],
        code: int,
        msg: str,
        now: int,
        rows: list[StatusRow],
        events: list[OrderUpdate],
    ) -> None:
        """REJECTED with a code: the intents leave the ledger, their bookings are released."""
        self.mark(entries, REJECTED, code, msg, now, rows, events)
        for e in entries:
            self.ledger.drop(e)
            self.unbook(e)
        self.counts["orders_rejected"] += len(entries)

    def to_unknown(
        self, entries: list[LiveOrder], now: int, rows: list[StatusRow], events: list[OrderUpdate]
    ) -> None:
        """UNKNOWN: the intents are in doubt from now on (their window starts)."""
        self.mark(entries, UNKNOWN, None, None, now, rows, events)
        for e in entries:
            self.ledger.doubt(e, now)
        self.counts["orders_unknown"] += len(entries)

    def filled(self, entry: LiveOrder) -> None:
        """FILLED: every match of the order adds up to its quantity, or evidence resolved it."""
        entry.status = FILLED
        entry.booked = False
        self.ledger.drop(entry)
        self.counts["orders_filled"] += 1
        row: StatusRow = (FILLED, entry.order_id, None, None, self._now_ms(), entry.client_order_id)
        event = OrderUpdate(
            entry.client_order_id, FILLED, entry.strategy, entry.order_id, None, None, entry.intent
        )
        self.emit([row], [event])

    def canceled(self, entries: list[LiveOrder], filled: Decimal | None, why: str) -> None:
        """CANCELED: the orders leave the book; what had filled stays filled (matches tell).

        ``filled``: what the venue's answer or record says had filled (None: it did not say;
        the message then says what is known so far, and that fills listed later still come).
        """
        now = self._now_ms()
        rows: list[StatusRow] = []
        events: list[OrderUpdate] = []
        for e in entries:
            self.unbook(e)  # before the answer's filled: what it adds was booked too
            if filled is not None:
                self.raise_filled(e, filled)
            e.status = CANCELED
            self.ledger.drop(e)
            q = e.order.quantity
            if filled is not None:
                msg = f"{why}; filled {e.filled} of {q}"
            elif e.order_id is None:
                msg = (f"{why}; {e.filled} of {q} known to have filled (the answer named neither"
                       " its orderId nor its fill: a fill listed later cannot be told apart)")  # fmt: skip
            else:
                msg = (f"{why}; {e.filled} of {q} known to have filled (the answer did not say;"
                       " a fill listed later comes as a match of this order)")  # fmt: skip
            rows.append((CANCELED, e.order_id, None, msg, now, e.client_order_id))
            events.append(
                OrderUpdate(e.client_order_id, CANCELED, e.strategy, e.order_id, None, msg,
                            e.intent)
            )  # fmt: skip
        self.counts["orders_canceled"] += len(entries)
        self.emit(rows, events)

    def late_fill(self, done: Done, quantity: Decimal) -> None:
        """A match of a CANCELED order listed after its cancel: what has filled of it grows
        (the engine's memory and the journal; the strategy hears the match itself)."""
        before = done.filled
        done.matched += quantity
        after = done.filled
        if after > before and self._journal is not None:
            matched = done.matched if done.reported else None
            self._journal.set_filled(done.client_order_id, after, matched)
            self.dirty = True

    def settle_filled(self, entry: LiveOrder, why: str) -> None:
        """FILLED on the venue's word for the order itself (its matches link to it later)."""
        self.unbook(entry)
        self.raise_filled(entry, entry.order.quantity)  # journaled: the record's word
        log.info("order %s: %s -> FILLED", entry.client_order_id, why)
        self.filled(entry)

    def found_open(self, entry: LiveOrder, filled: Decimal | None) -> None:
        """An UNKNOWN, LOST or AMBIGUOUS order the venue lists by its clientOrderId: ACCEPTED
        on that evidence, an open order again (a LOST or AMBIGUOUS one is tracked and booked
        in the risk gate anew).

        What its record says has filled is the least that has: matches of it found external
        before (its order id was unknown then) are its own now, and its matches count beyond
        the record as far as their sum goes past it (:meth:`raise_filled`). A doubt group it
        leaves is judged again once the evidence at hand is all taken (:meth:`settle_touched`).
        """
        was = entry.status
        ledger = self.ledger
        gone = was is LOST or was is AMBIGUOUS
        if gone:
            ledger.found(entry)
        else:
            ledger.clear_doubt(entry)
        entry.status = ACCEPTED
        if filled is not None:
            self.raise_filled(entry, filled)
        if gone and not entry.booked and self.risk.tracks_exposure:  # it rests: open again
            entry.booked = True
            left = entry.order.quantity - entry.filled
            self.risk.book(entry.order.pair_name, left if left > 0 else _ZERO, entry.price)
        msg = "found resting at the venue by its clientOrderId"
        log.warning("%s order %s %s -> ACCEPTED", was, entry.client_order_id, msg)
        self.counts["orders_adopted"] += 1
        row: StatusRow = (ACCEPTED, entry.order_id, None, msg, self._now_ms(),
                          entry.client_order_id)  # fmt: skip
        event = OrderUpdate(
            entry.client_order_id, ACCEPTED, entry.strategy, entry.order_id, None, msg,
            entry.intent,
        )  # fmt: skip
        self.emit([row], [event])
        if entry.filled >= entry.order.quantity:  # its matches, found before, add up
            self.filled(entry)

    def settle_touched(self) -> None:
        """Settle the doubt groups members left (named by evidence) that have counted a match
        for each member left; stop keeping the matches of groups that emptied."""
        ledger = self.ledger
        if ledger.released:
            if self._journal is not None:
                for match in ledger.released:
                    self._journal.drop_match(match.id)
                self.dirty = True
            ledger.released.clear()
        if not ledger.touched:
            return
        keys = list(ledger.touched)
        ledger.touched.clear()
        for key in keys:
            group = ledger.groups.get(key)
            if group is not None and group.claimed and group.complete:
                self.ambiguous(group, "every member left is accounted for")

    def retire(self, entry: LiveOrder) -> None:
        """An ACCEPTED order that can no longer change but by a late match: no longer tracked
        (its status stays as told), nor read back at restart; its late matches still link."""
        self.ledger.retire(entry)
        if self._journal is not None:
            self._journal.retire(entry.client_order_id)
            self.dirty = True

    def orphan(
        self, node: str, coid: str, intent: OrderIntent, order_id: int, filled: Decimal | None
    ) -> None:
        """Track a resting order an earlier journal of this node placed (see Canceller.adopt):
        ACCEPTED, of no strategy, journaled from now on, booked in the risk gate."""
        now = self._now_ms()
        risk = self.risk
        journal = self._journal
        saved = journal.load_intent(node, coid) if journal is not None else None
        if saved is not None:  # this journal's, ended long ago (LOST, AMBIGUOUS): its own
            entry = revive(saved, risk.reference_price, False)
            msg = f"{saved.status} order found resting at the venue by its clientOrderId"
        else:
            order = order_input(coid, intent)
            entry = LiveOrder(coid, NO_OWNER, intent, order, ACCEPTED, now,
                              risk.reference_price(order), False)  # fmt: skip
            msg = "found resting at the venue under this node's client ids; no strategy owns it"
        entry.status = ACCEPTED
        order = entry.order
        self.ledger.add(entry)
        if journal is not None:
            if saved is None:
                journal.add(coid, node, NO_OWNER, intent, ACCEPTED, now, None, msg)
            journal.update([(ACCEPTED, order_id, None, msg, now, coid)])
            self.dirty = True
        self.bind(entry, order_id)
        if filled is not None:
            self.raise_filled(entry, filled)
        if risk.tracks_exposure:
            entry.booked = True
            left = order.quantity - entry.filled
            risk.book(order.pair_name, left if left > 0 else _ZERO, entry.price)
        self.counts["orders_adopted"] += 1
        if saved is not None:  # its strategy is told, as of any order a list finds
            log.warning("%s order %s %s -> ACCEPTED", saved.status, coid, msg)
            event = OrderUpdate(coid, ACCEPTED, entry.strategy, order_id, None, msg, entry.intent)
            self.emit([], [event])

    def bind(self, entry: LiveOrder, order_id: int) -> bool:
        """The venue named entry's order id: its matches found external before count for it.
        True when there were any (what has filled grew: the caller checks for FILLED)."""
        taken = self.ledger.bind(entry, order_id)
        if not taken:
            return False
        total = _ZERO
        for match in taken:
            if self._journal is not None:
                self._journal.drop_match(match.id)  # counted in what has filled from now on
            total += match.quantity or _ZERO
        self.add_matched(entry, total)
        return True

    def add_matched(self, entry: LiveOrder, quantity: Decimal) -> None:
        """A match linked to entry: its matches' sum grows, and what has filled with it."""
        entry.matched += quantity
        if not self._grow(entry) and entry.reported and self._journal is not None:
            self._keep_filled(entry)  # within the record's word: the sum is kept all the same

    def raise_filled(self, entry: LiveOrder, filled: Decimal) -> None:
        """A venue record of the order says so much has filled: the least that has.

        Its matches count from then on only as far as their sum goes beyond it: a match
        listed after the record may be one the record counted already.
        """
        filled = min(filled, entry.order.quantity)
        if filled > entry.reported:
            entry.reported = filled
            if not self._grow(entry) and self._journal is not None:
                self._keep_filled(entry)  # the record's word is kept: the sum is less

    def _grow(self, entry: LiveOrder) -> bool:
        """What has filled is the more of the matches' sum and the record's word; what the
        risk gate held for the part that grew is given back. True when it grew."""
        known = entry.matched if entry.matched >= entry.reported else entry.reported
        grown = known - entry.filled
        if grown <= 0:
            return False
        if entry.booked:
            left = entry.order.quantity - entry.filled
            if left > 0:
                self.risk.release(entry.order.pair_name, min(grown, left), entry.price)
        entry.filled = known
        if self._journal is not None:
            self._keep_filled(entry)
        return True

    def _keep_filled(self, entry: LiveOrder) -> None:
        """Journal what has filled, and the matches' sum when a record said more."""
        assert self._journal is not None
        matched = entry.matched if entry.reported else None
        self._journal.set_filled(entry.client_order_id, entry.filled, matched)
        self.dirty = True

    def lost(self, expired: list[LiveOrder], window_s: float, until_ms: int) -> None:
        """LOST: no answer and no evidence within the window; said loudly. Each stays a
        possible owner of same-looking matches, and adoptable, until until_ms (an order that
        cannot rest: one window more, for its fills listed late), and counted by the risk
        limits as it was while in doubt until then (forget gives its booking back)."""
        rows: list[StatusRow] = []
        events: list[OrderUpdate] = []
        now = self._now_ms()
        self.mark(expired, LOST, None, None, now, rows, events)
        ledger = self.ledger
        for e in expired:
            # Still booked in the risk gate: it may rest, or fill, for as long as it is a
            # possible owner (released when it is forgotten: forget).
            rests = is_resting(e.order)
            for forgotten in ledger.lose(e, until_ms if rests else now + int(window_s * 1000)):
                self.unbook(forgotten)
            log.error(
                "order LOST: %s (strategy %s, %s %s %s @ %s): no answer and no evidence within"
                " %.0f s; %s",
                e.client_order_id,
                e.strategy,
                e.order.pair_name,
                "long" if e.order.is_long else "short",
                e.order.quantity,
                e.order.price if e.order.price is not None else "market",
                window_s,
                "it may rest on the venue or have filled (an open-order list naming it makes"
                " it ACCEPTED again)"
                if rests
                else "it may have filled",
            )
        self.counts["orders_lost"] += len(expired)
        self.emit(rows, events)

    def ambiguous(self, group: DoubtGroup, why: str) -> int:
        """Settle a doubt group by count: every member AMBIGUOUS, k of n filled (k at most n:
        a counted order beyond the members' number was another's of the same looks)."""
        filled = min(len(group.claimed), len(group.members))
        kept = [m.id for matches in group.claimed.values() for m in matches]
        candidates = group.candidates
        pair, is_long, quantity = group.key
        members = self.ledger.settle(group, self._now_ms() + self.lost_memory_ms)
        for e in members:
            self.unbook(e)
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
        self.counts["orders_ambiguous"] += len(members)
        self.emit(rows, events)
        return len(members)
