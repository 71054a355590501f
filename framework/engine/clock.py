"""Time as the engine sees it: a Clock protocol and a VirtualClock for tests and backtests.

The engine never reads the wall clock; whoever builds it passes a clock in. Live trading
passes :class:`framework.live.wallclock.WallClock`; backtests and tests pass a
:class:`VirtualClock` they move by hand.
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
    """A clock that only moves when told to; time never goes backward through advance_to."""

    __slots__ = ("_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        self._ms = int(start_ms)

    def __repr__(self) -> str:
        return f"VirtualClock({self._ms})"

    def now(self) -> datetime:
        """The current virtual time as a UTC datetime."""
        return datetime_of_ms(self._ms)

    def now_ms(self) -> int:
        """The current virtual time in milliseconds since the epoch."""
        return self._ms

    def advance_to(self, ms: int) -> None:
        """Move forward to ms; a time in the past is an error (replays must be monotonic)."""
        if ms < self._ms:
            raise ValueError(f"VirtualClock.advance_to({ms}): time would go back from {self._ms}")
        self._ms = int(ms)

    def advance(self, delta_ms: int) -> None:
        """Move forward by delta_ms milliseconds."""
        self.advance_to(self._ms + delta_ms)

    def set(self, ms: int) -> None:
        """Set the time to ms, forward or backward (tests that model clock skew)."""
        self._ms = int(ms)
