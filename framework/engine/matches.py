"""The match cursor: which match-result pages to fetch and which matches are new (pure logic).

The venue lists matches newest first and takes ``matchId`` as a strict upper bound (SPEC 4.4).
A poll round fetches the newest page, then pages backward with ``matchId`` = the smallest id
seen so far. Paging by id, not by page number, is stable while new matches arrive. A short
page is not taken as the end of history (the venue may cap page sizes below what was asked);
only an empty page or the end of the window ends a round.

SPEC.md promises no order in which matches become visible: a fill may be listed seconds late,
after a higher id was already read. So a round does not stop at the high-water mark (the
newest id delivered): it re-reads a window below it and delivers every match of the window
it has not delivered yet. The window ends at the first match at or below the high-water mark
that is ``reread_ids`` ids below it, or whose ``createTimeStamp`` is more than
``reread_age_ms`` older than the newest match the round read (the venue's clock, not ours;
a match without a time ends it too); a bound of 0 is not used, and with both 0 there is no
window: a round stops at the high-water mark;
matches at or below that point (the window's floor) are never delivered again. Ids delivered
above the floor are remembered (``seen``), so each match is delivered once; the caller makes
``seen``, the floor and the high-water mark durable (the live poller's journal).

A round whose newest page lists nothing at or above the high-water mark while the cursor has
one was answered by a venue that is not the one the cursor knew (a fresh venue twin, say):
the round says so (``reset``) and starts over as on a first start.

On a first start (no cursor) the round only finds the newest existing id, so history is not
replayed, unless backfill is asked for; with no history at all the cursor becomes 0.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Generic, Protocol, TypeVar

import attrs

from framework.venue.models import MatchRecord

__all__ = ["Identified", "MatchCursor", "MatchRound", "run_round"]


class Identified(Protocol):
    """What a round reads of a match: its id and time (a MatchRecord, or a replay's look)."""

    @property
    def id(self) -> int:
        """The match id."""
        ...

    @property
    def create_time_stamp(self) -> int | None:
        """When it matched, epoch milliseconds (None: unknown)."""
        ...


M = TypeVar("M", bound=Identified)


@attrs.define
class MatchRound(Generic[M]):
    """One poll of one pair: feed it pages until it says done, then read new_matches()."""

    high: int | None
    """Newest id already delivered (the high-water mark); None when the pair has no cursor."""
    floor: int | None = None
    """Ids at or below it are never delivered (older than any window); None: same as high."""
    seen: Collection[int] = ()
    """Ids above the floor already delivered."""
    reread_ids: int = 0
    reread_age_ms: int = 0
    initialise: bool = False
    """First start without backfill: only learn the newest id, publish nothing."""
    request_id: int | None = attrs.field(default=None, init=False)
    """The matchId of the next page to request (None: the newest page)."""
    done: bool = attrs.field(default=False, init=False)
    reset: bool = attrs.field(default=False, init=False)
    """The venue's newest match is below the high-water mark: it is not the venue we knew."""
    pages: int = attrs.field(default=0, init=False)
    ignored: int = attrs.field(default=0, init=False)
    """Records a page returned at or above its own bound, or repeated: venue slips, skipped."""
    late: int = attrs.field(default=0, init=False)
    """New matches found below the high-water mark (listed after a higher id was read)."""
    _found: dict[int, M] = attrs.field(factory=dict, init=False)
    _newest: int | None = attrs.field(default=None, init=False)
    _newest_ms: int | None = attrs.field(default=None, init=False)
    _stop: int | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self.floor is None or (self.high is not None and self.floor > self.high):
            self.floor = self.high

    def feed(self, page: Sequence[M]) -> bool:
        """Take the page fetched with request_id; True when another page is needed."""
        if self.done:
            raise RuntimeError("MatchRound.feed after the round is done")
        self.pages += 1
        bound = self.request_id
        page_newest = self._look(page, bound)
        if self._other_venue(bound, page_newest):
            self._start_over()
        lowest, reached = self._take(page, bound)
        if lowest is None or reached or self.initialise:
            self._finish()
            return False
        self.request_id = lowest
        return True

    def _look(self, page: Sequence[M], bound: int | None) -> int | None:
        """One look over the page first: its newest id (returned: is this the venue we
        knew?) and the newest time below the bound (where the window by age ends)."""
        newest_ms = self._newest_ms
        page_newest: int | None = None
        for match in page:
            mid = match.id
            if page_newest is None or mid > page_newest:
                page_newest = mid
            ms = match.create_time_stamp
            if (
                ms is not None
                and (bound is None or mid < bound)
                and (newest_ms is None or ms > newest_ms)
            ):
                newest_ms = ms
        self._newest_ms = newest_ms
        return page_newest

    def _other_venue(self, bound: int | None, page_newest: int | None) -> bool:
        """The newest page lists nothing at or above the high-water mark (see module)."""
        high = self.high
        return (
            bound is None
            and high is not None
            and high > 0
            and not self.initialise
            and (page_newest is None or page_newest < high)
        )

    def _floors(self) -> tuple[int | None, int | None]:
        """Where the re-read window ends: (by ids, by age); None where that bound is off."""
        high, newest_ms = self.high, self._newest_ms
        by_age = self.reread_age_ms > 0
        age_floor = newest_ms - self.reread_age_ms if by_age and newest_ms is not None else None
        if high is None:
            id_floor = None
        elif self.reread_ids > 0:
            id_floor = high - self.reread_ids
        else:  # no window by ids: only by age, or (neither set) none at all
            id_floor = None if by_age else high
        return id_floor, age_floor

    def _take(self, page: Sequence[M], bound: int | None) -> tuple[int | None, bool]:
        """Keep the page's new matches; returns its lowest id below the bound (None: none)
        and whether it reached the end of the window."""
        high, floor, seen, found = self.high, self.floor, self.seen, self._found
        id_floor, age_floor = self._floors()
        by_age = self.reread_age_ms > 0
        newest, lowest, stop = self._newest, None, self._stop
        reached = False
        for match in page:
            mid = match.id
            if bound is not None and mid >= bound:
                self.ignored += 1
                continue
            if lowest is None or mid < lowest:
                lowest = mid
            if newest is None or mid > newest:
                newest = mid
            if self.initialise:
                continue
            if high is not None and mid <= high:
                assert floor is not None
                if mid <= floor:
                    reached = True
                    continue
                ms = match.create_time_stamp
                if (id_floor is not None and mid <= id_floor) or (
                    by_age and (ms is None or age_floor is None or ms < age_floor)
                ):
                    reached = True
                    if stop is None or mid > stop:
                        stop = mid
                    continue
                if mid in seen:
                    continue
            if mid in found:
                self.ignored += 1
            else:
                found[mid] = match
        self._newest, self._stop = newest, stop
        return lowest, reached

    def _finish(self) -> None:
        """The round is done: nothing at or below the window's end is new."""
        self.done = True
        found, stop, high = self._found, self._stop, self.high
        if stop is not None:
            for mid in [k for k in found if k <= stop]:
                del found[mid]
        self.late = sum(1 for k in found if high is not None and k <= high)

    def _start_over(self) -> None:
        """The venue lists nothing at or above the high-water mark: a first start again."""
        self.reset = True
        self.high = self.floor = None
        self.seen = ()
        self.initialise = True

    def new_matches(self) -> list[M]:
        """The matches not delivered yet, oldest first, each once."""
        return [self._found[k] for k in sorted(self._found)]

    def cursor_after(self) -> int | None:
        """The high-water mark once every new match is delivered (None: leave it)."""
        if self.initialise:
            return self._newest if self._newest is not None else 0
        newest = max(self._found, default=None)
        if newest is not None and (self.high is None or newest > self.high):
            return newest
        if self.high is None:  # backfill over an empty history
            return 0
        return None

    def floor_after(self) -> int | None:
        """The window's floor once the round is done: ids at or below it are never new."""
        if self.initialise:
            return self.cursor_after()
        if self.high is None:  # backfill: every id read was delivered, the window starts low
            return 0
        if self._stop is not None and (self.floor is None or self._stop > self.floor):
            return self._stop
        return self.floor


@attrs.define
class MatchCursor:
    """One pair's high-water mark, window floor and delivered ids; starts and closes rounds."""

    last_id: int | None = None
    backfill: bool = False
    floor: int | None = None
    seen: set[int] = attrs.field(factory=set)
    reread_ids: int = 0
    reread_age_ms: int = 0

    def start(self) -> MatchRound[Any]:
        """A new poll round from the current cursor."""
        return MatchRound(
            self.last_id,
            self.floor,
            self.seen,
            self.reread_ids,
            self.reread_age_ms,
            initialise=self.last_id is None and not self.backfill,
        )

    def deliver(self, match_id: int) -> None:
        """Record that a match was delivered."""
        if self.last_id is None or match_id > self.last_id:
            self.last_id = match_id
        self.seen.add(match_id)

    def advance(self, match_id: int) -> None:
        """Move the high-water mark up to match_id (never backward)."""
        if self.last_id is None or match_id > self.last_id:
            self.last_id = match_id

    def publish(
        self,
        rnd: MatchRound[M],
        deliver: Callable[[M], None],
        mark_seen: Callable[[int], None] | None = None,
    ) -> tuple[int, bool]:
        """The one poll-round publisher: every new match of a finished round, in id order, goes
        to deliver and is marked delivered (``mark_seen`` makes it durable), then the cursor is
        closed on the round. Returns (matches published, whether the cursor moved).

        ``deliver`` must not raise (a live caller isolates its callback's failures).
        """
        matches = rnd.new_matches()
        seen = self.seen
        for match in matches:
            deliver(match)
            match_id = match.id  # as deliver(match_id), inline: this is once per match
            if self.last_id is None or match_id > self.last_id:
                self.last_id = match_id
            seen.add(match_id)
            if mark_seen is not None:
                mark_seen(match_id)
        return len(matches), self.close(rnd)

    def close(self, rnd: MatchRound[Any]) -> bool:
        """Apply a finished round (after delivering its matches); True when anything moved."""
        before = (self.last_id, self.floor, len(self.seen))
        if rnd.reset:
            self.last_id = None
            self.seen.clear()
        after = rnd.cursor_after()
        if after is not None:
            self.advance(after)
        floor = rnd.floor_after()
        if floor is None:
            floor = self.last_id
        if floor is not None and (self.floor is None or floor > self.floor or rnd.reset):
            self.floor = floor
            self.seen.difference_update([i for i in self.seen if i <= floor])
        return (self.last_id, self.floor, len(self.seen)) != before


def run_round(
    cursor: MatchCursor, fetch: Callable[[int | None], Sequence[MatchRecord]]
) -> list[MatchRecord]:
    """Run one round synchronously with fetch(match_id) -> page; returns new matches in order.

    Every new match is delivered to the cursor, which is then closed on the round.
    """
    rnd = cursor.start()
    while rnd.feed(fetch(rnd.request_id)):
        pass
    new: list[MatchRecord] = []
    cursor.publish(rnd, new.append)
    return new
