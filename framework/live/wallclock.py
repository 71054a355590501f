"""WallClock: the system clock behind the engine's Clock protocol, for live trading."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from framework.engine.clock import EPOCH

__all__ = ["WallClock"]


class WallClock:
    """Reads time.time_ns(); the only clock live code hands to the engine."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WallClock()"

    def now(self) -> datetime:
        """The current time as a timezone-aware UTC datetime (microsecond resolution)."""
        return EPOCH + timedelta(microseconds=time.time_ns() // 1_000)

    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        return time.time_ns() // 1_000_000
