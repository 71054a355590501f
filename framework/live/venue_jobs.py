"""The node's periodic reads of the venue: the open-order check and the position refresh.

Each is one apscheduler job (:class:`~framework.live.interval_job.IntervalJob`: a slow round
is never run twice at once). A failure to read a pair is one warning, and the next round
tries again.

The open-order check (:class:`OpenOrderCheck`): the node learns of its orders from create
answers, cancel answers and match polls. An order cancelled behind its back (a person at
the venue's website, the venue itself) produces none of these, so without a look at the
venue it would stay ACCEPTED in ``open_orders()`` for ever. Every
``polling.open_orders_interval_s`` it lists each pair's open orders (an extension beyond
SPEC.md, as at start) and hands them to the engine
(:meth:`framework.engine.execution.ExecutionEngine.check_open_orders`): an UNKNOWN or LOST
intent the list names by its clientOrderId is ACCEPTED with the list's orderId (an open order
again), and a tracked resting order the list lacks is queried and ends as the venue's record
says (see :meth:`framework.engine.cancels.Canceller.check`). Cancels stay as they are when a
list cannot be read (the start-up listing worked, so a 404 now says little about the venue).

The position refresh (:class:`PositionRefresh`): the venue's position pushes carry no
unrealized PnL; only its REST position list does. The stream's resync reads that list at
start-up and after every reconnect, so without more, the unrealized PnL of a position opened
later (the summary's ``pnl``, the ``perp_pnl`` gauge) stays unknown until the next reconnect.
Every ``polling.positions_interval_s`` this job reads each pair's positions the same way
(:meth:`framework.live.stream.RestResync.refresh_positions`: applied only if no push arrived
meanwhile, PositionsSynced when they changed, each applied snapshot handed to the trading
state).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.config import Config
from framework.engine.execution import ExecutionEngine
from framework.engine.venue import Venue
from framework.live.interval_job import IntervalJob
from framework.live.stream import RestResync
from framework.venue.errors import FrameworkError
from framework.venue.models import Position

__all__ = ["OpenOrderCheck", "PositionRefresh"]

log = logging.getLogger("framework.node")


class OpenOrderCheck(IntervalJob):
    """Lists each pair's open orders every interval_s and reconciles the engine with them."""

    JOB_ID = "open-orders-check"
    JOB_NAME = "open orders check"

    def __init__(
        self,
        engine: ExecutionEngine,
        venue: Venue,
        *,
        pairs: Sequence[str],
        interval_s: float,
    ) -> None:
        super().__init__(interval_s)
        self.engine = engine
        self.venue = venue
        self.pairs = list(pairs)
        self.rounds = 0
        """Checks completed (every pair looked at, read or not)."""
        self.queried = 0
        """Tracked resting orders the venue did not list, queried."""

    def __repr__(self) -> str:
        return f"OpenOrderCheck(pairs={self.pairs}, interval_s={self.interval_s})"

    def round(self) -> Callable[[], Awaitable[Any]]:
        """The job's round: check."""
        return self.check

    async def check(self) -> dict[str, int]:
        """One round over every pair; the counts summed (listed, adopted, missing)."""
        engine = self.engine
        total = {"listed": 0, "adopted": 0, "missing": 0}
        for pair in self.pairs:
            if not engine.cancels.available:  # turned off by a cancel or query call
                self.shutdown()
                break
            asked_ms = engine.now_ms()
            try:
                records = await self.venue.all_open_orders(pair)
            except (FrameworkError, OSError) as exc:
                log.warning("open orders of %s not read (%s); checked next round", pair, exc)
                continue
            counts = engine.check_open_orders(pair, list(records), asked_ms)
            total["listed"] += counts["listed"]
            total["missing"] += counts["missing"]
            total["adopted"] += counts["adopted"]
            if counts["missing"]:
                log.info("open orders of %s: %d missing, queried", pair, counts["missing"])
        self.queried += total["missing"]
        self.rounds += 1
        return total


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
