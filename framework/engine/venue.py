"""The venue port: what the engine asks of a venue, and the one executor that asks it.

Live trading and backtests differ in which venue receives batches: the REST venue
(:class:`framework.live.rest.RestClient`, over the network) or the simulated one
(:class:`framework.backtest.sim_venue.SimVenue`, in-process on virtual time). Both implement
:class:`Venue`, in the engine's vocabulary, and one :class:`Executor` drives the execution
engine against either: it sends what the engine cut and hands every answer back.

Every call returns an awaitable of its answer (collections.abc types: no I/O library here).
:meth:`Venue.send_batch` sends at once, from the caller's stack (the live tick-to-trade path
writes the bytes before returning); awaiting gives the answer. How an answer is awaited is the
runtime's: the live node starts a task per call, a backtest drives each call's coroutine
itself (:func:`run_now`: a simulated call never waits on a loop; one that models latency
suspends with the virtual time it resumes at, and the simulated venue resumes it then).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol

from framework.engine.cancel_calls import CancelAnswer, CancelBatch
from framework.engine.execution import ExecutionEngine
from framework.engine.open_orders import VenueOrder
from framework.engine.reconcile import Batch
from framework.venue.errors import AmbiguousOutcome, ExtensionUnavailable
from framework.venue.models import AccountBalance, MatchRecord, OrderInput, OrderResult, Position

__all__ = ["AfterCommit", "Answer", "EngineFactory", "Executor", "Venue", "run_now"]


class Venue(Protocol):
    """A venue the engine trades on: orders in, answers and account state out."""

    def send_batch(self, orders: Sequence[OrderInput]) -> Awaitable[list[OrderResult]]:
        """Send one batchCreate now; awaiting gives the accepted orders' results.

        Raises at once when nothing left (SendFailed) or the batch is refused locally; the
        awaitable raises the venue's refusal of the whole call, or AmbiguousOutcome.
        """
        ...

    def cancel(self, batch: CancelBatch) -> Awaitable[dict[int | str, CancelAnswer]]:
        """Cancel the batch's orders; the answer per orderId (per clientOrderId when by it)."""
        ...

    def cancel_all(
        self, pair: str | None = None, is_long: bool | None = None
    ) -> Awaitable[tuple[int, ...] | None]:
        """Cancel every open order (of pair, of one side); the ids named, or None."""
        ...

    def all_open_orders(self, pair: str) -> Awaitable[Sequence[VenueOrder]]:
        """Every open order of pair."""
        ...

    def query_order(self, entrust_id: int) -> Awaitable[VenueOrder | None]:
        """One order by the venue's id (None: the venue sent no record)."""
        ...

    def positions(
        self, pair: str, page_no: int | None = None, page_size: int | None = None
    ) -> Awaitable[list[Position]]:
        """One page of pair's positions."""
        ...

    def balance(self, symbol: str) -> Awaitable[AccountBalance]:
        """The balance of one settlement coin."""
        ...

    def matches(
        self,
        pair: str,
        match_id: int | None = None,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> Awaitable[list[MatchRecord]]:
        """Matched trades of pair, newest first; match_id is a strict upper bound."""
        ...

    def warm_up(self) -> Awaitable[None]:
        """Get ready for the first batch (open a connection ahead); raises if it cannot."""
        ...


AfterCommit = Callable[[str, Batch], None]
"""Test hook: called with ("cut", batch) before a batch's commit, ("sent", batch) after it."""

EngineFactory = Callable[[Callable[[], None]], ExecutionEngine]
"""Builds the engine an executor drives, given the executor's wake (the engine's on_ready)."""

Answer = Callable[[Any, Awaitable[Any]], Coroutine[Any, Any, None]]
"""One of the executor's answer handlers: (what was sent, the venue's awaitable) -> coroutine."""

Start = Callable[[Answer, Any, Awaitable[Any]], None]
Schedule = Callable[[int, Callable[[], None]], None]


def run_now(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that never waits (a simulated call) to its end, with no event loop."""
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
    raise RuntimeError("a venue call waited, and nothing here runs an event loop")


def _start_now(answer: Answer, sent: Any, reply: Awaitable[Any]) -> None:
    run_now(answer(sent, reply))


class Executor:
    """Drives the execution engine against one venue: sends what is due, answers back.

    ``wake`` is the engine's ``on_ready``: it sets ``pending`` (and calls ``on_wake``, the
    live loop's call_soon). :meth:`pump` sends every due batch, cancel call and query and
    expires what is overdue; each call's answer is handed to ``start`` with the handler that
    gives it to the engine (default: run at once, for a venue that never waits), then
    ``answered`` is called (default: ``wake``, so what the answer allows is sent next).
    With ``schedule`` (virtual time), pump also books the engine's next deadline.
    """

    def __init__(
        self,
        engine: EngineFactory,
        venue: Venue,
        *,
        start: Start | None = None,
        schedule: Schedule | None = None,
        after_commit: AfterCommit | None = None,
    ) -> None:
        self.venue = venue
        self.pending = False
        """True when the engine has work for pump."""
        self.start: Start = start or _start_now
        """How the answer of one call is awaited: start(handler, what was sent, awaitable)."""
        self.on_wake: Callable[[], None] | None = None
        self.answered: Callable[[], None] = self.wake
        """Called after each answer reached the engine."""
        self.after_commit = after_commit
        self._schedule = schedule
        self._wake_at: int | None = None
        self.engine = engine(self.wake)
        """The engine it drives, built by the factory with this executor's wake as on_ready."""

    def wake(self) -> None:
        """The engine has work: pump at the next opportunity (cheap; on every submit)."""
        if not self.pending:
            self.pending = True
            if self.on_wake is not None:
                self.on_wake()

    def send(self) -> None:
        """Commit and send every due batch (the bytes leave before this returns)."""
        self.pending = False
        engine, venue, hook, start = self.engine, self.venue, self.after_commit, self.start
        while (batch := engine.next_batch()) is not None:
            if hook is not None:
                hook("cut", batch)
            engine.begin_send(batch)  # rows + 'sent' mark durable: only now may bytes leave
            if hook is not None:
                hook("sent", batch)
            try:
                reply = venue.send_batch(batch.orders)
            except Exception as exc:  # SendFailed: not a byte left (retried); or refused locally
                engine.on_failure(batch, exc)
                continue
            start(self._created, batch, reply)

    def pump(self) -> None:
        """Send every due batch, cancel call and query; expire what is overdue."""
        self.send()
        engine, venue, start = self.engine, self.venue, self.start
        if engine.cancels.pending:
            while (cancels := engine.next_cancels()) is not None:
                start(self._cancelled, cancels, venue.cancel(cancels))
            for order_id in engine.cancels.take_queries():
                start(self._queried, order_id, venue.query_order(order_id))
        engine.tick()
        if self._schedule is not None:
            self._book()

    def _book(self) -> None:
        """Book the engine's next deadline on virtual time (once per deadline)."""
        wait = self.engine.next_wakeup_ms()
        if wait is None:
            return
        now = self.engine.now_ms()
        at = now + max(wait, 1)
        if self._wake_at is None or at < self._wake_at or self._wake_at <= now:
            self._wake_at = at
            assert self._schedule is not None
            self._schedule(at, self._timed_wake)

    def _timed_wake(self) -> None:
        if self._wake_at is not None and self._wake_at <= self.engine.now_ms():
            self._wake_at = None
        self.pending = True

    async def _created(self, batch: Batch, reply: Awaitable[list[OrderResult]]) -> None:
        engine = self.engine
        try:
            results = await reply
        except Exception as exc:
            engine.on_failure(batch, exc)
        except BaseException:  # cancelled mid-call (a stop without drain): the bytes may have left
            engine.on_failure(batch, AmbiguousOutcome("cancelled while in flight"))
            raise
        else:
            engine.on_results(batch, results)
        self.answered()

    async def _cancelled(
        self, batch: CancelBatch, reply: Awaitable[dict[int | str, CancelAnswer]]
    ) -> None:
        engine = self.engine
        try:
            answers = await reply
        except Exception as exc:
            engine.on_cancel_error(batch, exc)
        except BaseException:
            engine.on_cancel_error(batch, AmbiguousOutcome("cancelled while in flight"))
            raise
        else:
            engine.on_cancel_answers(batch, answers)
        self.answered()

    async def _queried(self, order_id: int, reply: Awaitable[VenueOrder | None]) -> None:
        """The venue's record of one order is evidence for the engine."""
        cancels = self.engine.cancels
        try:
            record = await reply
        except ExtensionUnavailable as exc:
            # The order keeps the state the engine knows; cancels go on (a cancel call's own
            # 404 turns them off). A 404 says the venue has no queryOrder: none is sent again.
            cancels.query_failed(order_id, str(exc), unavailable=exc.http_status == 404)
        except Exception as exc:
            cancels.query_failed(order_id, f"{type(exc).__name__}: {exc}")
        else:
            if record is None:
                cancels.query_failed(order_id, "the venue sent no record")
            elif record.entrust_id != order_id:  # not the order asked about: no evidence of it
                cancels.query_failed(
                    order_id, f"the venue's record names order {record.entrust_id}"
                )
            else:
                self.engine.apply_order_record(record)
        self.answered()
