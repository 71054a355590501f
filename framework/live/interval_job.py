"""A node's periodic REST job on the apscheduler: one job, never run twice at once.

What the open-order check and the position refresh (:mod:`framework.live.venue_jobs`)
share: ``interval`` trigger, ``max_instances=1`` and ``coalesce`` (a slow round is never run
twice at once, missed runs become one), no misfire grace, the first run one interval from
now, and removal at the node's stop. A round still running when the loop ends is
cancelled; it ends quietly (logged at DEBUG), where apscheduler would log the cancellation
as a failed job with its traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

__all__ = ["IntervalJob"]

log = logging.getLogger("framework.node")


class IntervalJob:
    """One scheduled round every interval_s seconds: subclasses set JOB_ID and JOB_NAME."""

    JOB_ID = ""
    """The apscheduler job id (one job of a kind per scheduler)."""
    JOB_NAME = ""
    """The job's name in apscheduler's logs."""

    def __init__(self, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s: expected > 0, got {interval_s}")
        self.interval_s = interval_s
        self._scheduler: AsyncIOScheduler | None = None

    def round(self) -> Callable[[], Awaitable[Any]]:
        """The coroutine function the job runs each interval."""
        raise NotImplementedError

    def start(self, scheduler: AsyncIOScheduler) -> None:
        """Add the job to a running scheduler; its first run is one interval from now."""
        self._scheduler = scheduler
        each_round = self.round()

        async def job() -> None:
            try:
                await each_round()
            except asyncio.CancelledError:
                # the top frame of a task apscheduler started and nobody awaits: a stop
                log.debug("%s cancelled mid-round", self.JOB_NAME)

        scheduler.add_job(
            job,
            "interval",
            seconds=self.interval_s,
            id=self.JOB_ID,
            name=self.JOB_NAME,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            next_run_time=datetime.now(UTC) + timedelta(seconds=self.interval_s),
            replace_existing=True,
        )

    def shutdown(self) -> None:
        """Remove the job (the scheduler is the caller's)."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            job: Any = scheduler.get_job(self.JOB_ID)
            if job is not None:
                job.remove()
