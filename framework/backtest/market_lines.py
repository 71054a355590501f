"""The market's price lines of the report's price charts: trades, the book's mid, the mark.

A recording with market data can hold millions of trades and books; the chart needs a few
thousand points to show them. So each line is kept downsampled while the replay runs, in
bounded memory: time is cut into buckets of one width, and a bucket keeps only its first,
lowest, highest and last price (with their times), so no spike is lost. When a line reaches
:data:`MAX_BUCKETS` buckets the width doubles and neighbouring buckets merge, so a line never
holds more than ``MAX_BUCKETS`` buckets, nor draws more than ``4 * MAX_BUCKETS`` points,
however long the recording. Lines are kept for the configured pairs only (the paper venue's
markets), so their number is bounded by the config.

Times are the replay's virtual times (when the record was heard), the time of the fills.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from decimal import Decimal
from typing import Final

from framework.engine.bus import Bus
from framework.venue.market import Book, MarkPrice, Trade

__all__ = ["KINDS", "MAX_BUCKETS", "MarketLine", "MarketLines"]

MAX_BUCKETS: Final = 1000
"""Buckets a line keeps at most (each draws at most 4 points)."""

KINDS: Final = ("trades", "mid", "mark")
"""The lines of a pair: last trade prices, the book's mid, the polled mark."""

_FIRST_WIDTH_MS: Final = 100


class MarketLine:
    """One price line, downsampled into time buckets as it comes (bounded, see the module)."""

    __slots__ = (
        "_closed",
        "_first",
        "_high",
        "_key",
        "_last",
        "_low",
        "_until",
        "_width",
        "count",
    )

    def __init__(self) -> None:
        self._width = _FIRST_WIDTH_MS
        self._closed: list[tuple[int, tuple[tuple[int, Decimal], ...]]] = []
        self._key = -1
        self._until = -1  # the current bucket takes ts < _until; -1: no bucket yet
        self._first: tuple[int, Decimal] = (0, Decimal(0))
        self._low = self._high = self._last = self._first
        self.count = 0
        """Prices added (all of them, not only the ones kept)."""

    def add(self, ts: int, price: Decimal) -> None:
        """Take the price at virtual time ts (times do not go back; one that does joins the
        current bucket)."""
        self.count += 1
        if ts < self._until:
            point = (ts, price)
            if price < self._low[1]:
                self._low = point
            elif price > self._high[1]:
                self._high = point
            self._last = point
            return
        if self._until != -1:
            self._close()
        self._key = ts // self._width
        self._until = (self._key + 1) * self._width
        self._first = self._low = self._high = self._last = (ts, price)

    def _bucket(self) -> tuple[tuple[int, Decimal], ...]:
        return (self._first, self._low, self._high, self._last)

    def _close(self) -> None:
        self._closed.append((self._key, self._bucket()))
        while len(self._closed) >= MAX_BUCKETS:
            self._coarsen()

    def _coarsen(self) -> None:
        """Double the width: buckets whose keys halve alike merge into one."""
        self._width *= 2
        merged: list[tuple[int, tuple[tuple[int, Decimal], ...]]] = []
        for key, (first, low, high, last) in self._closed:
            key //= 2
            if merged and merged[-1][0] == key:
                had = merged[-1][1]
                merged[-1] = (
                    key,
                    (
                        had[0],
                        low if low[1] < had[1][1] else had[1],
                        high if high[1] > had[2][1] else had[2],
                        last,
                    ),
                )
            else:
                merged.append((key, (first, low, high, last)))
        self._closed = merged

    def points(self) -> list[tuple[int, Decimal]]:
        """The kept points in time order: each bucket's first, lowest, highest and last."""
        buckets = [bucket for _, bucket in self._closed]
        if self._until != -1:
            buckets.append(self._bucket())
        out: list[tuple[int, Decimal]] = []
        for bucket in buckets:
            for point in sorted(set(bucket), key=lambda p: p[0]):
                out.append(point)
        return out


class MarketLines:
    """The market's price lines of each configured pair, fed by the bus's market records.

    Per record: one dict look-up and one :meth:`MarketLine.add` (the book's mid is kept as
    best bid + best ask and halved when drawn), so a replay of market frames pays little.
    """

    def __init__(self, bus: Bus, pairs: Collection[str], now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self._trades = {pair: MarketLine() for pair in pairs}
        self._mids = {pair: MarketLine() for pair in pairs}  # best bid + best ask: 2 x mid
        self._marks = {pair: MarketLine() for pair in pairs}
        bus.subscribe(Trade, self._on_trade)
        bus.subscribe(Book, self._on_book)
        bus.subscribe(MarkPrice, self._on_mark)

    def _on_trade(self, trade: Trade) -> None:
        line = self._trades.get(trade.pair)
        if line is not None:
            line.add(self._now_ms(), trade.price)

    def _on_book(self, book: Book) -> None:
        line = self._mids.get(book.pair)
        if line is not None:
            # best_bid/best_ask, not bids[0]: a decoded book's best prices are read alone,
            # its levels are not made (a replay hears hundreds of thousands of books).
            bid, ask = book.best_bid, book.best_ask
            if bid is not None and ask is not None:
                line.add(self._now_ms(), bid + ask)

    def _on_mark(self, mark: MarkPrice) -> None:
        line = self._marks.get(mark.pair)
        if line is not None:
            line.add(self._now_ms(), mark.price)

    def of(self, pair: str) -> dict[str, list[tuple[int, Decimal]]]:
        """A pair's lines that have points, by kind (KINDS; empty without market data)."""
        out: dict[str, list[tuple[int, Decimal]]] = {}
        for kind, lines in zip(KINDS, (self._trades, self._mids, self._marks), strict=True):
            line = lines.get(pair)
            if line is not None and line.count:
                points = line.points()
                out[kind] = [(ts, p / 2) for ts, p in points] if kind == "mid" else points
        return out
