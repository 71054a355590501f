"""The match cursor: which match-result pages to fetch and which matches are new (pure logic).

The venue lists matches newest first and takes ``matchId`` as a strict upper bound (SPEC 4.4).
A poll round fetches the newest page, then pages backward with ``matchId`` = the smallest id
seen so far, until a page reaches the newest id already published (the cursor) or comes back
empty. Paging by id, not by page number, is stable while new matches arrive. The round then
yields the new matches oldest first, each once, and the cursor moves to the newest of them.

A short page is not taken as the end of history (the venue may cap page sizes below what was
asked); only an empty page or reaching the cursor ends a round.

On a first start (no cursor) the round only finds the newest existing id, so history is not
replayed, unless backfill is asked for; with no history at all the cursor becomes 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import attrs

from framework.venue.models import MatchRecord

__all__ = ["Identified", "MatchCursor", "MatchRound", "run_round"]


class Identified(Protocol):
    """What a round reads of a match: its id (a MatchRecord, or a replay's first look)."""

    @property
    def id(self) -> int:
        """The match id."""
        ...


M = TypeVar("M", bound=Identified)


@attrs.define
class MatchRound(Generic[M]):
    """One poll of one pair: feed it pages until it says done, then read new_matches()."""

    floor: int | None
    """Newest id already published; None when the pair has no cursor yet."""
    initialise: bool = False
    """First start without backfill: only learn the newest id, publish nothing."""
    request_id: int | None = attrs.field(default=None, init=False)
    """The matchId of the next page to request (None: the newest page)."""
    done: bool = attrs.field(default=False, init=False)
    pages: int = attrs.field(default=0, init=False)
    ignored: int = attrs.field(default=0, init=False)
    """Records a page returned at or above its own bound, or repeated: venue slips, skipped."""
    _found: dict[int, M] = attrs.field(factory=dict, init=False)
    _newest: int | None = attrs.field(default=None, init=False)

    def feed(self, page: Sequence[M]) -> bool:
        """Take the page fetched with request_id; True when another page is needed."""
        if self.done:
            raise RuntimeError("MatchRound.feed after the round is done")
        self.pages += 1
        bound = self.request_id
        floor = self.floor
        initialise = self.initialise
        found = self._found
        newest = self._newest
        lowest: int | None = None
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
            if floor is not None and mid <= floor:
                reached = True
            elif not initialise:
                if mid in found:
                    self.ignored += 1
                else:
                    found[mid] = match
        self._newest = newest
        if lowest is None or reached or initialise:
            self.done = True
            return False
        self.request_id = lowest
        return True

    def new_matches(self) -> list[M]:
        """The matches newer than the floor, oldest first, each once."""
        return [self._found[k] for k in sorted(self._found)]

    def cursor_after(self) -> int | None:
        """The cursor once every new match is published (None: leave it as it was)."""
        if self.initialise:
            return self._newest if self._newest is not None else 0
        if self._found:
            return max(self._found)
        if self.floor is None:  # backfill over an empty history
            return 0
        return None


@attrs.define
class MatchCursor:
    """The newest match id published for one pair, and how to start a round from it."""

    last_id: int | None = None
    backfill: bool = False

    def start(self) -> MatchRound[Any]:
        """A new poll round from the current cursor."""
        return MatchRound(self.last_id, initialise=self.last_id is None and not self.backfill)

    def advance(self, match_id: int) -> None:
        """Record that every match up to match_id was published; never moves backward."""
        if self.last_id is None or match_id > self.last_id:
            self.last_id = match_id


def run_round(
    cursor: MatchCursor, fetch: Callable[[int | None], Sequence[MatchRecord]]
) -> list[MatchRecord]:
    """Run one round synchronously with fetch(match_id) -> page; returns new matches in order.

    The cursor is advanced to the newest returned match (or set on a first start).
    """
    rnd = cursor.start()
    while rnd.feed(fetch(rnd.request_id)):
        pass
    new = rnd.new_matches()
    after = rnd.cursor_after()
    if after is not None:
        cursor.advance(after)
    return new
