"""Virtual time for a replay: a clock set by the recording, and callbacks due at virtual times.

:class:`framework.engine.clock.VirtualClock` is the clock of a backtest: its time is the
record being replayed. :class:`Timeline` runs what is due in between records, in time
order: strategies' timers, the virtual match polls, the paper venue's price points, report
samples, the execution engine's answers and deadlines. Callbacks of one ms run by rank
(:data:`PRICES`, :data:`SAMPLES`, then :data:`NORMAL`), then in the order they were booked.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Final

import attrs

from framework.engine.clock import VirtualClock

__all__ = ["NORMAL", "PRICES", "SAMPLES", "Repeating", "Timeline"]

_NEVER: Final = 1 << 62

PRICES: Final = 0
"""Timeline rank of the paper venue's price points: first in their ms."""
SAMPLES: Final = 1
"""Timeline rank of report samples: after the prices of their ms, before everything else."""
NORMAL: Final = 2
"""Timeline rank of everything else (timers, polls, the engine's answers and deadlines)."""


class Timeline:
    """Callbacks due at virtual times, run in time order (then by rank, then as booked)."""

    __slots__ = ("_heap", "_seq", "clock", "due", "ran")

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._heap: list[tuple[int, int, int, Callable[[], None]]] = []
        self._seq = 0
        self.ran = 0
        self.due = _NEVER
        """When the next callback is due (a huge number when none is): kept as callbacks are
        booked and run, so a replay reads it per record, whatever booked one meanwhile."""

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, ms: int, callback: Callable[[], None], *, rank: int = NORMAL) -> None:
        """Run callback when virtual time reaches ms (at once, in order, if ms is past).

        Callbacks of one ms run by rank (PRICES, then SAMPLES, then NORMAL), then in the
        order they were booked: a price of time T is in effect for whatever happens at T.
        """
        self._seq += 1
        heapq.heappush(self._heap, (ms, rank, self._seq, callback))
        if ms < self.due:
            self.due = ms

    def every(
        self, interval_ms: int, callback: Callable[[], None], *, first_ms: int, rank: int = NORMAL
    ) -> Repeating:
        """Run callback at first_ms and every interval_ms after it, until cancelled."""
        if interval_ms < 1:
            raise ValueError(f"interval must be at least 1 ms, got {interval_ms}")
        repeat = Repeating(self, interval_ms, first_ms, callback, rank=rank)
        self.at(first_ms, repeat, rank=rank)
        return repeat

    @property
    def due_at(self) -> int:
        """When the next callback is due (a huge number when none is): ``due``."""
        return self.due

    def run_until(self, ms: int, after_each: Callable[[], None] | None = None) -> None:
        """Run every callback due at or before ms, moving the clock to each one's time."""
        heap = self._heap
        clock = self.clock
        while heap and heap[0][0] <= ms:
            at, _, _, callback = heapq.heappop(heap)
            self.due = heap[0][0] if heap else _NEVER
            if at > clock.ms:
                clock.ms = at
            self.ran += 1
            callback()
            if after_each is not None:
                after_each()


@attrs.define(slots=True, eq=False)
class Repeating:
    """A callback the timeline runs every interval_ms; cancel() stops it.

    pause() skips the runs from the next one on until resume(), which books the first run
    after now again: for a callback that knows it has nothing to do until something
    happens (ranked before NORMAL, so that the run at the ms of a resume() from a NORMAL
    callback has been made already).
    """

    timeline: Timeline
    interval_ms: int
    next_ms: int
    callback: Callable[[], None]
    rank: int = NORMAL
    cancelled: bool = False
    paused: bool = False
    _booked: bool = True

    def cancel(self) -> None:
        """Run no more."""
        self.cancelled = True

    def pause(self) -> None:
        """Skip the runs after this one until resume()."""
        self.paused = True

    def resume(self) -> None:
        """Run again from the first of its times after now (nothing when not paused)."""
        if not self.paused or self.cancelled:
            return
        self.paused = False
        if self._booked:
            return  # the run booked before the pause is still ahead
        now, step = self.timeline.clock.ms, self.interval_ms
        if self.next_ms <= now:
            self.next_ms += ((now - self.next_ms) // step + 1) * step
        self._booked = True
        self.timeline.at(self.next_ms, self, rank=self.rank)

    def __call__(self) -> None:
        """Run the callback and book the next run."""
        self._booked = False
        if self.cancelled or self.paused:
            return
        self.next_ms += self.interval_ms
        self._booked = True
        self.timeline.at(self.next_ms, self, rank=self.rank)
        self.callback()
