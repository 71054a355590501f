"""IntervalJob: a stop during a round ends it quietly, as the poller's jobs do."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.live.interval_job import IntervalJob


class _Blocking(IntervalJob):
    JOB_ID = "blocking"
    JOB_NAME = "a round that never ends"

    def __init__(self) -> None:
        super().__init__(0.01)
        self.began = asyncio.Event()

    def round(self) -> Callable[[], Awaitable[Any]]:
        async def run() -> None:
            self.began.set()
            await asyncio.Event().wait()

        return run


def test_a_stop_mid_round_logs_no_failed_job(caplog: pytest.LogCaptureFixture) -> None:
    job = _Blocking()

    async def main() -> None:
        scheduler = AsyncIOScheduler(timezone="UTC")
        scheduler.start()
        job.start(scheduler)
        await asyncio.wait_for(job.began.wait(), timeout=10)
        job.shutdown()
        scheduler.shutdown(wait=False)
        # the round is still running: asyncio.run cancels it on the way out, as at a stop

    with caplog.at_level(logging.DEBUG):
        asyncio.run(main())
    failed = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert failed == []
    assert any("cancelled" in r.getMessage() for r in caplog.records)
