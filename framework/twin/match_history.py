"""One account's matches on one pair, oldest first: the newest ``limit`` of them.

What selectContractMatchPairList pages through (:mod:`framework.twin.match_list`) and what
tests read as ground truth (``Account.matches[pair]``, a read-only sequence of
:class:`~framework.twin.events.Match` in id order).

How far back the match list reaches is not in the venue's documentation; the twin's choice
is the newest ``match_history_limit`` matches per account and pair (default 100000). Older
ones are forgotten: they are no longer listed, they simply drop off the bottom of the list.
Ids of the kept matches do not change, so paging by a ``matchId`` bound stays right; a page
that reaches below the oldest kept match is short or empty.

Cost: :meth:`MatchHistory.append` and :meth:`MatchHistory.trim` are amortized O(1) per
match. Trimming moves an offset; the forgotten matches are deleted in one slice once they
number a quarter of the limit, so at most ``limit + limit // 4`` matches are held.

Trimming is explicit: :class:`~framework.twin.exchange.Exchange` calls :meth:`trim` once an
operation can no longer be rolled back, never while an atomic batch is open, so that a
savepoint (:attr:`end`) and :meth:`truncate` restore the list exactly.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Final, overload

from framework.twin.events import Match

__all__ = ["DEFAULT_MATCH_HISTORY_LIMIT", "MatchHistory"]

DEFAULT_MATCH_HISTORY_LIMIT: Final = 100_000
"""Matches kept per account and pair unless settings say otherwise."""

_NONE: Final[tuple[Match, ...]] = ()


class MatchHistory(Sequence[Match]):
    """The kept matches of one account and pair, in id order (oldest first)."""

    __slots__ = ("_compact_at", "_dropped", "_items", "_start", "limit")

    def __init__(self, limit: int = DEFAULT_MATCH_HISTORY_LIMIT) -> None:
        """Start empty; limit is how many matches trim() keeps."""
        if limit < 1:
            raise ValueError(f"a match history limit must be positive, got {limit}")
        self.limit = limit
        self._items: list[Match] = []
        self._start = 0  # index in _items of the oldest kept match
        self._dropped = 0  # matches forgotten since the start
        self._compact_at = max(1, limit // 4)

    def __len__(self) -> int:
        """How many matches are kept."""
        return len(self._items) - self._start

    def __iter__(self) -> Iterator[Match]:
        """The kept matches, oldest first."""
        return islice(self._items, self._start, None)

    @overload
    def __getitem__(self, index: int) -> Match: ...

    @overload
    def __getitem__(self, index: slice) -> list[Match]: ...

    def __getitem__(self, index: int | slice) -> Match | list[Match]:
        """A kept match by position (0: the oldest kept), or a list of them."""
        size = len(self)
        if isinstance(index, slice):
            low, high, step = index.indices(size)
            if step == 1:
                return self._items[self._start + low : self._start + max(low, high)]
            return [self._items[self._start + i] for i in range(low, high, step)]
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("match history index out of range")
        return self._items[self._start + index]

    def __repr__(self) -> str:
        """Size, limit and id range, not every match."""
        if not len(self):
            return f"MatchHistory(0 of limit {self.limit})"
        return f"MatchHistory({len(self)} of limit {self.limit}, ids {self[0].id}..{self[-1].id})"

    @property
    def end(self) -> int:
        """How many matches were ever appended and not truncated: a savepoint of the list."""
        return self._dropped + len(self)

    def count_below(self, match_id: int) -> int:
        """How many kept matches have an id below match_id (ids increase with position)."""
        return bisect_left(self._items, match_id, lo=self._start, key=_match_id) - self._start

    def append(self, match: Match) -> None:
        """Add the newest match (its id above every kept one); trim() bounds the list."""
        self._items.append(match)

    def trim(self) -> Sequence[Match]:
        """Forget the oldest matches beyond the limit; returns those forgotten, oldest first."""
        excess = len(self) - self.limit
        if excess <= 0:
            return _NONE
        start = self._start
        forgotten = self._items[start : start + excess]
        self._start = start + excess
        self._dropped += excess
        if self._start >= self._compact_at:
            del self._items[: self._start]
            self._start = 0
        return forgotten

    def truncate(self, end: int) -> None:
        """Undo the appends since the savepoint end (see :attr:`end`)."""
        keep = max(end - self._dropped, 0)
        del self._items[self._start + keep :]


def _match_id(match: Match) -> int:
    return match.id
