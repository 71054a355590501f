"""The periodic position snapshot: unrealized PnL kept fresh between reconnects.

The venue's position pushes carry no unrealized PnL; only its REST position list does. The
stream's resync reads that list at start-up and after every reconnect, so without more, the
unrealized PnL of a position opened later (the summary's ``pnl``, the ``perp_pnl`` gauge)
stays unknown until the next reconnect. Every ``polling.positions_interval_s`` this job
reads each pair's positions the same way (:meth:`framework.live.stream.RestResync.
refresh_positions`: applied only if no push arrived meanwhile, PositionsSynced when they
changed, each applied snapshot handed to the trading state). One apscheduler job
(``max_instances=1``, ``coalesce``); a failure to read a pair is one warning, and the next
round tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.config import Config
from framework.live.interval_job import IntervalJob
from framework.live.stream import RestResync
from framework.venue.errors import FrameworkError
from framework.venue.models import Position

__all__ = ["PositionRefresh"]

log = logging.getLogger("framework.node")


class PositionRefresh(IntervalJob):
    """Reads each pair's positions every interval_s (through the resync's refresh)."""

    JOB_ID = "positions-refresh"
    JOB_NAME = "positions refresh"

    def __init__(
        self,
        refresh: Callable[[str], Awaitable[tuple[Position, ...] | None]],
        *,
        pairs: Sequence[str],
        interval_s: float,
    ) -> None:
        super().__init__(interval_s)
        self._refresh = refresh
        self.pairs = list(pairs)
        self.rounds = 0
        """Rounds completed (every pair looked at, read or not)."""

    @classmethod
    def started(
        cls,
        scheduler: AsyncIOScheduler,
        resync: RestResync,
        config: Config,
    ) -> PositionRefresh | None:
        """The job of config (polling.positions_interval_s) started, or None when it is 0."""
        interval = config.polling.positions_interval_s
        if interval <= 0:
            return None
        job = cls(resync.refresh_positions, pairs=list(config.pairs), interval_s=interval)
        job.start(scheduler)
        return job

    def __repr__(self) -> str:
        return f"PositionRefresh(pairs={self.pairs}, interval_s={self.interval_s})"

    def round(self) -> Callable[[], Awaitable[Any]]:
        """The job's round: refresh."""
        return self.refresh

    async def refresh(self) -> int:
        """One round over every pair; how many snapshots were applied."""
        applied = 0
        for pair in self.pairs:
            try:
                positions = await self._refresh(pair)
            except (FrameworkError, OSError) as exc:
                log.warning("positions of %s not read (%s); read next round", pair, exc)
                continue
            if positions is not None:  # else a push came meanwhile: next round
                applied += 1
        self.rounds += 1
        return applied
