"""LiveExecutor: drives the pure execution engine against the venue over a RestClient.

One loop cuts due batches, commits their journal rows, sends each in a task of its own (up
to ``max_inflight`` at once) and hands the answer or the failure back to the engine; it
sleeps until the engine's next deadline (linger, token bucket, retry backoff, the UNKNOWN
window) or until :meth:`LiveExecutor.wake` (the engine's ``on_ready``) or an answer.
Before each batch: buffered journal rows committed (``after_commit("pending", batch)`` hook),
then the batch's 'sent' mark committed (``after_commit("sent", batch)``), then the send.
"""

from __future__ import annotations

import logging
import math
import random
import secrets
from collections.abc import Callable, Mapping
from decimal import Decimal

import anyio
import anyio.abc

from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import Clock
from framework.engine.events import Event
from framework.engine.execution import Batch, ExecutionEngine, ExecutionSettings
from framework.live.journal import Journal
from framework.live.rest import RestClient
from framework.venue.errors import AmbiguousOutcome
from framework.venue.rules import PairRules

__all__ = ["AfterCommit", "LiveExecutor", "build_execution"]

log = logging.getLogger("framework.executor")

AfterCommit = Callable[[str, Batch], None]
"""Test hook: called with ("pending" | "sent", batch) right after each journal commit."""


class LiveExecutor:
    """Sends the engine's batches until cancelled; wake() is the engine's on_ready."""

    def __init__(
        self,
        engine: ExecutionEngine,
        rest: RestClient,
        *,
        clock: Clock,
        journal: Journal | None = None,
        after_commit: AfterCommit | None = None,
    ) -> None:
        self.engine = engine
        self.journal = journal
        self.rest = rest
        self.clock = clock
        self.after_commit = after_commit
        self._event = anyio.Event()
        self._woken = False
        self._progress = anyio.Event()
        self.running = False

    def wake(self) -> None:
        """Ask the loop to look for work (cheap; called on every submit)."""
        if not self._woken:
            self._woken = True
            self._event.set()

    async def run(self) -> None:
        """Recover the journal's open intents, then send batches until cancelled."""
        engine = self.engine
        engine.recover()
        self.running = True
        try:
            async with anyio.create_task_group() as tg:
                while True:
                    self._woken = False
                    self._event = anyio.Event()
                    self._pump(tg)
                    engine.tick()
                    delay_ms = engine.next_wakeup_ms()
                    if engine.idle or delay_ms != 0:
                        engine.flush()
                        if self.journal is not None and engine.idle:
                            self.journal.compact_if_due()
                    if self._woken:
                        continue
                    timeout = math.inf if delay_ms is None else max(delay_ms, 1) / 1000
                    with anyio.move_on_after(timeout):
                        await self._event.wait()
        finally:
            self.running = False
            engine.flush()

    def _pump(self, tg: anyio.abc.TaskGroup) -> None:
        engine = self.engine
        hook = self.after_commit
        while (batch := engine.next_batch()) is not None:
            if hook is not None:
                hook("pending", batch)
            engine.begin_send(batch)
            if hook is not None:
                hook("sent", batch)
            tg.start_soon(self._send, batch)

    async def _send(self, batch: Batch) -> None:
        engine = self.engine
        try:
            results = await self.rest.batch_create(batch.orders)
        except anyio.get_cancelled_exc_class():
            # Cancelled mid-call (shutdown without drain): the bytes may have left.
            engine.on_failure(batch, AmbiguousOutcome("cancelled while in flight"))
            raise
        except Exception as exc:
            engine.on_failure(batch, exc)
        else:
            engine.on_results(batch, results)
        self._progress.set()
        self.wake()

    async def drain(self, timeout_s: float) -> None:
        """Wait (up to timeout_s) until nothing is queued, in flight or awaiting a retry."""
        engine = self.engine
        self.wake()
        with anyio.move_on_after(timeout_s):
            while not engine.idle:
                self._progress = anyio.Event()
                # An answer sets _progress; the timeout bounds a loop that is not running.
                with anyio.move_on_after(0.05):
                    await self._progress.wait()
        if not engine.idle:
            log.warning("drain: timed out after %.1f s with work outstanding", timeout_s)
        engine.flush()


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
    """Wire an engine (ids from the journal's blocks) to a LiveExecutor sending over rest."""
    if journal is not None:
        ids = ClientIdGenerator(node, journal)
    else:
        ids = ClientIdGenerator.ephemeral(
            node, now_ms=clock.now_ms(), random_bits=secrets.randbits(20)
        )
    engine = ExecutionEngine(
        settings,
        rules=rules,
        publish=publish,
        now_ms=clock.now_ms,
        ids=ids,
        journal=journal,
        mark_price=mark_price,
        random=random.SystemRandom().random,
    )
    executor = LiveExecutor(engine, rest, clock=clock, journal=journal)
    engine.on_ready = executor.wake
    return engine, executor
