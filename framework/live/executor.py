"""LiveExecutor: drives the pure execution engine against the venue over a RestClient.

The engine's ``on_ready`` (every submit) is :meth:`LiveExecutor.wake`, which schedules the
pump with ``loop.call_soon``: every intent a strategy submits in one call stack (a hook
calling submit five times) is queued before the pump runs, so they go as one batch, and the
pump runs right after that call stack, with no task hop. For each batch due, the pump
commits the buffered journal writes and the batch's 'sent' mark in ONE transaction
(:meth:`ExecutionEngine.begin_send`; ``after_commit("sent", batch)`` hook), signs the
request and writes it at once on an idle keep-alive connection of the order path
(:meth:`RestClient.write_batch`); then a task (started by the loop task: a callback cannot
start one in the task group) awaits the answer and hands it, or the failure, back to the
engine. With no idle connection that task connects and sends.

A loop task handles time: it sleeps until the engine's next deadline (linger, token bucket,
retry backoff, the UNKNOWN window) or until kicked (after each pump and each answer), and
commits what is buffered when idle or waiting, so intents queued behind batches in flight
are durable soon (a SIGKILL loses no intent submitted before that commit). The test hook
``after_commit`` is also called with ``("cut", batch)`` right before a batch's commit.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import secrets
from collections import deque
from collections.abc import Callable, Mapping
from decimal import Decimal

import anyio
import anyio.abc

from framework.engine.cancels import CancelAnswer, CancelBatch
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import Clock
from framework.engine.events import Event
from framework.engine.execution import Batch, ExecutionEngine, ExecutionSettings
from framework.live.journal import Journal
from framework.live.orderpath import Exchange
from framework.live.rest import RestClient
from framework.venue.errors import AmbiguousOutcome, ExtensionUnavailable, FrameworkError
from framework.venue.order_management import OrderRecord
from framework.venue.requests import PreparedRequest
from framework.venue.rules import PairRules

__all__ = ["AfterCommit", "EngineFactory", "LiveExecutor", "build_execution"]

log = logging.getLogger("framework.executor")

AfterCommit = Callable[[str, Batch], None]
"""Test hook: called with ("cut", batch) before a batch's commit, ("sent", batch) after it."""


EngineFactory = Callable[[Callable[[], None]], ExecutionEngine]
"""Builds the engine an executor drives, given the executor's wake (the engine's on_ready)."""


class LiveExecutor:
    """Sends the engine's batches until cancelled; wake() is the engine's on_ready."""

    def __init__(
        self,
        engine: EngineFactory,
        rest: RestClient,
        *,
        clock: Clock,
        journal: Journal | None = None,
        after_commit: AfterCommit | None = None,
    ) -> None:
        self.engine = engine(self.wake)
        """The engine it drives, built by the factory with this executor's wake as on_ready."""
        self.journal = journal
        self.rest = rest
        self.clock = clock
        self.after_commit = after_commit
        self._event = anyio.Event()
        self._kicked = False
        self._progress = anyio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._pump_due = False
        self._written: deque[tuple[Batch, PreparedRequest, Exchange | None]] = deque()
        self._error: BaseException | None = None
        self.running = False

    def wake(self) -> None:
        """Pump right after the current call stack (cheap; called on every submit)."""
        if self._pump_due:
            return
        loop = self._loop
        if loop is None:  # not running yet: run() pumps when it starts
            return
        self._pump_due = True
        loop.call_soon(self._pump_soon)

    def _kick(self) -> None:
        """Have the loop task look at the engine's deadlines and buffered writes."""
        if not self._kicked:
            self._kicked = True
            self._event.set()

    def _pump_soon(self) -> None:
        self._pump_due = False
        if self._tg is None:
            return
        try:
            self._pump()
        except BaseException as exc:  # a callback's error would only be logged: the loop raises it
            self._error = exc
        self._kick()

    async def run(self) -> None:
        """Recover the journal's open intents, then send batches until cancelled."""
        engine = self.engine
        engine.recover()
        self.running = True
        self._loop = asyncio.get_running_loop()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._warm)
                while True:
                    if self._error is not None:
                        error, self._error = self._error, None
                        raise error
                    self._kicked = False
                    self._event = anyio.Event()
                    self._pump()
                    written = self._written
                    while written:
                        tg.start_soon(self._answer, *written.popleft())
                    while (cancels := engine.next_cancels()) is not None:
                        tg.start_soon(self._cancel, cancels)
                    for order_id in engine.cancels.take_queries():
                        tg.start_soon(self._query, order_id)
                    engine.tick()
                    delay_ms = engine.next_wakeup_ms()
                    if engine.idle or delay_ms != 0:
                        engine.flush()
                        if self.journal is not None and engine.idle:
                            self.journal.compact_if_due()
                    if self._kicked:
                        continue
                    timeout = math.inf if delay_ms is None else max(delay_ms, 1) / 1000
                    with anyio.move_on_after(timeout):
                        await self._event.wait()
        finally:
            self._tg = None
            self._loop = None
            self._pump_due = False
            self.running = False
            while self._written:  # written, and no task came to read the answer
                batch = self._written.popleft()[0]
                engine.on_failure(batch, AmbiguousOutcome("cancelled while in flight"))
            engine.flush()

    async def _warm(self) -> None:
        """Open an order-path connection ahead of the first batch (best effort)."""
        try:
            await self.rest.orders.connect()
        except (FrameworkError, OSError) as exc:
            log.info("order path: no connection ahead of the first batch (%s)", exc)

    def _pump(self) -> None:
        engine = self.engine
        hook = self.after_commit
        rest = self.rest
        while (batch := engine.next_batch()) is not None:
            if hook is not None:
                hook("cut", batch)
            engine.begin_send(batch)  # rows + 'sent' mark durable: only now may bytes leave
            if hook is not None:
                hook("sent", batch)
            try:
                request = rest.prepare_batch(batch.orders)
                exchange = rest.write_batch(request)
            except Exception as exc:  # SendFailed: not a byte left (retried); or refused locally
                engine.on_failure(batch, exc)
                continue
            # The answer is awaited by a task the loop task starts (a callback cannot start
            # one in the task group): a hop after the bytes left, not before.
            self._written.append((batch, request, exchange))

    async def _answer(
        self, batch: Batch, request: PreparedRequest, exchange: Exchange | None
    ) -> None:
        engine = self.engine
        try:
            results = await self.rest.finish_batch(request, exchange)
        except anyio.get_cancelled_exc_class():
            # Cancelled mid-call (shutdown without drain): the bytes may have left.
            engine.on_failure(batch, AmbiguousOutcome("cancelled while in flight"))
            raise
        except Exception as exc:
            engine.on_failure(batch, exc)
        else:
            engine.on_results(batch, results)
        engine.flush()  # the outcome is durable now, before anything else is cut
        self._progress.set()
        self._kick()

    async def _cancel(self, batch: CancelBatch) -> None:
        """Send one cancel call and hand what the venue said to the engine."""
        engine, rest = self.engine, self.rest
        answers: dict[int | str, CancelAnswer] = {}
        try:
            if batch.by_client_id:
                (coid,) = batch.client_order_ids
                record = await rest.cancel_by_client_id(coid)
                answers[coid] = _answer_of(record)
            elif len(batch.order_ids) == 1:
                (order_id,) = batch.order_ids
                answers[order_id] = _answer_of(await rest.cancel_order(order_id))
            else:
                report = await rest.batch_cancel(
                    batch.order_ids, chunk_size=engine.settings.cancel_batch
                )
                for result in report.results:
                    code = 200 if result.ok else (result.code if result.code is not None else 0)
                    answers[result.entrust_id] = CancelAnswer(code, result.msg or "")
        except anyio.get_cancelled_exc_class():
            engine.on_cancel_error(batch, AmbiguousOutcome("cancelled while in flight"))
            raise
        except Exception as exc:
            engine.on_cancel_error(batch, exc)
        else:
            engine.on_cancel_answers(batch, answers)
        self._progress.set()
        self._kick()

    async def _query(self, order_id: int) -> None:
        """Ask the venue for one order's state; the record is evidence for the engine."""
        engine = self.engine
        try:
            record = await self.rest.query_order(order_id)
        except ExtensionUnavailable as exc:
            # The order keeps the state the engine knows; cancels go on (a cancel call's own
            # 404 turns them off). A 404 says the venue has no queryOrder: none is sent again.
            engine.cancels.query_failed(order_id, str(exc), unavailable=exc.http_status == 404)
        except Exception as exc:
            engine.cancels.query_failed(order_id, f"{type(exc).__name__}: {exc}")
        else:
            if record is None:
                engine.cancels.query_failed(order_id, "the venue sent no record")
            elif record.entrust_id != order_id:  # not the order asked about: no evidence of it
                engine.cancels.query_failed(
                    order_id, f"the venue's record names order {record.entrust_id}"
                )
            else:
                engine.apply_order_record(record)
        self._progress.set()
        self._kick()

    async def drain(self, timeout_s: float) -> None:
        """Wait (up to timeout_s) until nothing is queued, in flight or awaiting a retry."""
        engine = self.engine
        self._kick()
        with anyio.move_on_after(timeout_s):
            while not engine.idle:
                self._progress = anyio.Event()
                # An answer sets _progress; the timeout bounds a loop that is not running.
                with anyio.move_on_after(0.05):
                    await self._progress.wait()
        if not engine.idle:
            log.warning("drain: timed out after %.1f s with work outstanding", timeout_s)
        engine.flush()


def _answer_of(record: OrderRecord | None) -> CancelAnswer:
    """A single cancel the venue accepted: code 200, with what its record tells."""
    if record is None:
        return CancelAnswer(200)
    return CancelAnswer(200, "", record.filled_quantity, record.entrust_id)


def build_execution(
    settings: ExecutionSettings,
    *,
    rest: RestClient,
    publish: Callable[[Event], None],
    rules: Mapping[str, PairRules],
    clock: Clock,
    journal: Journal | None,
    node: str = "pf",
    mark_price: Callable[[str], Decimal | None] | None = None,
) -> tuple[ExecutionEngine, LiveExecutor]:
    """An engine (ids from the journal's blocks) driven by a LiveExecutor sending over rest.

    For tools and tests that run the execution layer without a config; the node builds its
    engine through the kernel.
    """
    if journal is not None:
        ids = ClientIdGenerator(node, journal)
    else:
        ids = ClientIdGenerator.ephemeral(
            node, now_ms=clock.now_ms(), random_bits=secrets.randbits(20)
        )

    def engine(wake: Callable[[], None]) -> ExecutionEngine:
        return ExecutionEngine(
            settings,
            rules=rules,
            publish=publish,
            now_ms=clock.now_ms,
            ids=ids,
            journal=journal,
            mark_price=mark_price,
            random=random.SystemRandom().random,
            on_ready=wake,
        )

    executor = LiveExecutor(engine, rest, clock=clock, journal=journal)
    return executor.engine, executor
