"""LiveExecutor: the one executor (:class:`framework.engine.venue.Executor`) on the event loop.

The engine's ``on_ready`` (every submit) schedules :meth:`Executor.send` with
``loop.call_soon``: every intent a strategy submits in one call stack (a hook calling submit
five times) is queued before it runs, so they go as one batch, and it runs right after that
call stack, with no task hop. For each batch due it commits the buffered journal writes and
the batch's 'sent' mark in ONE transaction (:meth:`ExecutionEngine.begin_send`;
``after_commit("sent", batch)`` hook) and has the venue send it at once (the REST venue
signs it and writes it on an idle keep-alive connection: :meth:`RestClient.send_batch`);
then a task (started by the loop task: a callback cannot start one in the task group)
awaits the answer and hands it, or the failure, back to the engine.

A loop task handles time: it sleeps until the engine's next deadline (linger, token bucket,
retry backoff, the UNKNOWN window) or until kicked (after each send and each answer), and
commits what is buffered when idle or waiting, so intents queued behind batches in flight
are durable soon (a SIGKILL loses no intent submitted before that commit). The test hook
``after_commit`` is also called with ``("cut", batch)`` right before a batch's commit.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Awaitable
from typing import Any

import anyio
import anyio.abc

from framework.engine.venue import AfterCommit, Answer, EngineFactory, Executor, Venue, run_now
from framework.live.journal import Journal
from framework.venue.errors import AmbiguousOutcome, FrameworkError

__all__ = ["AfterCommit", "EngineFactory", "LiveExecutor"]

log = logging.getLogger("framework.executor")


class LiveExecutor(Executor):
    """The executor run by a loop task until cancelled; wake() is the engine's on_ready."""

    def __init__(
        self,
        engine: EngineFactory,
        venue: Venue,
        *,
        journal: Journal | None = None,
        after_commit: AfterCommit | None = None,
    ) -> None:
        super().__init__(engine, venue, after_commit=after_commit)
        self.journal = journal
        self.start = self._later
        self.answered = self._answered
        self._event = anyio.Event()
        self._kicked = False
        self._progress = anyio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._calls: deque[tuple[Answer, Any, Awaitable[Any]]] = deque()
        self._error: BaseException | None = None
        self.running = False

    def _later(self, answer: Answer, sent: Any, reply: Awaitable[Any]) -> None:
        """An answer to await: a task the loop task starts (a hop after the bytes left)."""
        self._calls.append((answer, sent, reply))

    def _call_soon(self) -> None:
        assert self._loop is not None
        self._loop.call_soon(self._send_soon)

    def _kick(self) -> None:
        """Have the loop task look at the engine's deadlines and buffered writes."""
        if not self._kicked:
            self._kicked = True
            self._event.set()

    def _answered(self) -> None:
        self.engine.flush()  # the outcome is durable now, before anything else is cut
        self._progress.set()
        self._kick()

    def _send_soon(self) -> None:
        if not self.running:
            return
        try:
            self.send()
        except BaseException as exc:  # a callback's error would only be logged: the loop raises it
            self._error = exc
        self._kick()

    async def run(self) -> None:
        """Recover the journal's open intents, then send and answer until cancelled."""
        engine = self.engine
        engine.recover()
        self.running = True
        self._loop = asyncio.get_running_loop()
        self.on_wake = self._call_soon
        calls = self._calls
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._warm)
                while True:
                    if self._error is not None:
                        error, self._error = self._error, None
                        raise error
                    self._kicked = False
                    self._event = anyio.Event()
                    self.pump()
                    while calls:
                        answer, sent, reply = calls.popleft()
                        tg.start_soon(answer, sent, reply)
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
            self.on_wake = None
            self._loop = None
            self.pending = False
            self.running = False
            while calls:  # sent, and no task came to read the answer
                answer, sent, reply = calls.popleft()
                close = getattr(reply, "close", None)
                if close is not None:
                    close()
                run_now(answer(sent, _cut_off()))
            engine.flush()

    async def _warm(self) -> None:
        """Have the venue get ready ahead of the first batch (best effort)."""
        try:
            await self.venue.warm_up()
        except (FrameworkError, OSError) as exc:
            log.info("order path: no connection ahead of the first batch (%s)", exc)

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


async def _cut_off() -> Any:
    """The answer of a call no task came to read: its bytes may have left."""
    raise AmbiguousOutcome("cancelled while in flight")
