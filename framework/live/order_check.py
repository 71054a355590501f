"""The periodic check of the open orders: what rests at the venue against what the node tracks.

The node learns of its orders from create answers, cancel answers and match polls. An order
cancelled behind its back (a person at the venue's website, the venue itself) produces none
of these, so without a look at the venue it would stay ACCEPTED in ``open_orders()`` for
ever. Every ``polling.open_orders_interval_s`` this job lists each pair's open orders (an
extension beyond SPEC.md, as at start) and hands them to the engine
(:meth:`framework.engine.execution.ExecutionEngine.check_open_orders`): an UNKNOWN or LOST
intent the list names by its clientOrderId is ACCEPTED with the list's orderId (an open order
again), and a tracked resting order the list lacks is queried and ends as the venue's record
says (see :meth:`framework.engine.cancels.Canceller.check`). One apscheduler job (``max_instances=1``,
``coalesce``): a slow check is never run twice at once. A failure to read a pair's list is
one warning, and the next round tries again; cancels stay as they are (the start-up listing
worked, so a 404 now says little about the venue).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from framework.engine.execution import ExecutionEngine
from framework.engine.venue import Venue
from framework.live.interval_job import IntervalJob
from framework.venue.errors import FrameworkError

__all__ = ["OpenOrderCheck"]

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
