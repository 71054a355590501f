"""The position ``max_position`` counts: the portfolio's, or the fills the node read ahead of it.

The portfolio keeps a pair's position from the venue's position pushes and REST snapshots;
the node reads the same fills a second time, as match records (the match poll). Either may
come first. A push usually arrives before its match is listed: the order the match fills is
then still one of the engine's open orders, counted as what could fill, and the position
shows the fill as well (counted twice, on the safe side, until the match is read). A match
listed before its push (the stream lagging, reconnecting or down) is a fill the portfolio does
not show yet, while its order has already left the engine's open orders: counted by neither,
an intent could take the position past the limit.

So :class:`HeldPosition` keeps, per pair, a tally: the portfolio's position when the pair was
first checked, moved by every match read on the pair since (a buy up, a sell down, whoever
placed the order). For a buy it counts the greater of the portfolio's position and the tally,
for a sell the lesser: a fill counts once whichever of its push and its match came first.
When the two disagree and neither has moved for ``window_ms`` (a change of the position the
node read no match for, or a match read the portfolio never showed), the tally is set to the
portfolio's position.

Written here: no library keeps a venue's two views of one position in step. Pure: no I/O,
time passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import attrs

from framework.engine.events import MatchFilled
from framework.venue.models import MatchRecord

__all__ = ["HeldPosition"]


@attrs.define(slots=True)
class _Tally:
    tally: Decimal  # the portfolio's position at the start, moved by every match read since
    seen: Decimal  # the portfolio's position when last looked at
    still_ms: int  # since when neither has moved


class HeldPosition:
    """The signed position of a pair as the risk gate counts it (see the module docstring)."""

    __slots__ = ("_pairs", "_position", "_window_ms")

    def __init__(self, position: Callable[[str], Decimal], *, window_ms: int) -> None:
        self._position = position
        self._window_ms = window_ms
        self._pairs: dict[str, _Tally] = {}

    def held(self, pair: str, is_long: bool, now_ms: int) -> Decimal:
        """The position counted for an order on that side: long positive, short negative."""
        position = self._position(pair)
        t = self._pairs.get(pair)
        if t is None:
            self._pairs[pair] = _Tally(position, position, now_ms)
            return position
        if position != t.seen:
            t.seen = position
            t.still_ms = now_ms
        if t.tally == position:
            return position
        if now_ms - t.still_ms > self._window_ms:
            t.tally = position  # the portfolio's word, after a window with neither moving
            return position
        if is_long:
            return t.tally if t.tally > position else position
        return t.tally if t.tally < position else position

    def read(self, match: MatchRecord, now_ms: int) -> None:
        """A match read on its pair: the tally moves by its quantity (a buy up, a sell down)."""
        pair, quantity = match.symbol, match.quantity
        if pair is None or quantity is None or match.is_long is None:
            return
        t = self._pairs.get(pair)
        if t is None:  # not checked yet: the tally starts at the first check
            return
        t.tally += quantity if match.is_long else -quantity
        t.still_ms = now_ms

    def reading(
        self,
        attribute: Callable[[MatchRecord], MatchFilled | None],
        now_ms: Callable[[], int],
    ) -> Callable[[MatchRecord], MatchFilled | None]:
        """attribute, reading each match first (before linking it may end its order)."""

        def read_then_attribute(match: MatchRecord) -> MatchFilled | None:
            self.read(match, now_ms())
            return attribute(match)

        return read_then_attribute
