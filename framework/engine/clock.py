"""Time as the engine sees it: a Clock protocol and a VirtualClock for tests and backtests.

The engine never reads the wall clock; whoever builds it passes a clock in. Live trading
passes :class:`framework.live.wallclock.WallClock`; backtests (whose replay sets it from the
records) and tests pass the one :class:`VirtualClock`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

__all__ = ["EPOCH", "Clock", "VirtualClock", "datetime_of_ms"]

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def datetime_of_ms(ms: int) -> datetime:
    """A timezone-aware UTC datetime for milliseconds since the epoch (exact, no float)."""
    return EPOCH + timedelta(milliseconds=ms)


class Clock(Protocol):
    """A source of the current time."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def now_ms(self) -> int:
        """The current time in milliseconds since the epoch."""
        ...


class VirtualClock:
    """Virtual time, the one clock of tests and backtests: it moves only when told to.

    ``ms`` is public so a replay can set it per record at no cost; ``advance_to`` refuses to
    go back. ``now()`` makes its datetime only when asked, and reuses it within a ms.
    """

    __slots__ = ("_dt", "_dt_ms", "ms")

    def __init__(self, start_ms: int = 0) -> None:
        self.ms = int(start_ms)
        self._dt_ms = -1
        self._dt = EPOCH

    def __repr__(self) -> str:
        return f"VirtualClock({self.ms})"

    def now(self) -> datetime:
        """The current virtual time as a UTC datetime."""
        if self._dt_ms != self.ms:
            self._dt_ms = self.ms
            self._dt = datetime_of_ms(self.ms)
        return self._dt

    def now_ms(self) -> int:
        """The current virtual time in milliseconds since the epoch."""
        return self.ms

    def advance_to(self, ms: int) -> None:
        """Move forward to ms; a time in the past is an error (replays must be monotonic)."""
        if ms < self.ms:
            raise ValueError(f"VirtualClock.advance_to({ms}): time would go back from {self.ms}")
        self.ms = int(ms)

    def advance(self, delta_ms: int) -> None:
        """Move forward by delta_ms milliseconds."""
        self.advance_to(self.ms + delta_ms)

    def set(self, ms: int) -> None:
        """Set the time to ms, forward or backward (tests that model clock skew)."""
        self.ms = int(ms)
