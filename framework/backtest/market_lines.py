"""The market's price lines of the report's price charts: trades, the book's mid, the mark.

A recording with market data can hold millions of trades and books; the chart needs a few
thousand points to show them. So each line is kept downsampled while the replay runs, in
bounded memory: time is cut into buckets of one width, and a bucket keeps only its first,
lowest, highest and last price (with their times), so no sampled spike is lost. When a line reaches
:data:`MAX_BUCKETS` buckets the width doubles and neighbouring buckets merge, so a line never
holds more than ``MAX_BUCKETS`` buckets, nor draws more than ``4 * MAX_BUCKETS`` points,
however long the recording. Lines are kept for the configured pairs only (the paper venue's
markets), so their number is bounded by the config.

The lines are sampled, not fed every record: :meth:`MarketLines.sample` reads the read
model's latest trade, book and mark of each pair :data:`SAMPLES` times over the recording's
span (see :attr:`MarketLines.step_ms`). Fed by the bus, one line per record cost a replay a
third of its time (measured on bench_replay --market: 0.7 us a trade, 2.1 us a book, whose
mid makes two best prices), for a chart that draws at most four points a bucket. So a
trade or a book that came and went between two samples is not drawn; each drawn point is
the market's price as it stood at the sample's time. The fills are drawn at their own times.

Times are the replay's virtual times (of the sample), the time of the fills.
"""

from __future__ import annotations

from collections.abc import Collection
from decimal import Decimal
from typing import Final, Protocol

from framework.venue.market import Book, Trade

__all__ = [
    "IDLE_STEP_MS",
    "KINDS",
    "MAX_BUCKETS",
    "SAMPLES",
    "MarketLine",
    "MarketLines",
    "MarketReader",
]

MAX_BUCKETS: Final = 1000
"""Buckets a line keeps at most (each draws at most 4 points)."""

KINDS: Final = ("trades", "mid", "mark")
"""The lines of a pair: last trade prices, the book's mid, the polled mark."""

_FIRST_WIDTH_MS: Final = 100

SAMPLES: Final = 2 * MAX_BUCKETS
"""Samples taken over a recording whose span is known, however long it is (a line keeps half
to all of MAX_BUCKETS buckets: two to four samples a bucket)."""

IDLE_STEP_MS: Final = 1000
"""Virtual ms between samples while no line has a point (a recording without market data
pays a sample a second)."""


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

    @property
    def width(self) -> int:
        """The width of a bucket now, in ms (doubles as the line coarsens)."""
        return self._width

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


class MarketReader(Protocol):
    """What the lines read the market from (the kernel's MarketView)."""

    def trade(self, pair: str) -> Trade | None:
        """The pair's last trade."""

    def book(self, pair: str) -> Book | None:
        """The pair's latest book."""

    def mark(self, pair: str) -> Decimal | None:
        """The pair's latest mark price."""


class MarketLines:
    """The market's price lines of each configured pair, sampled from the read model.

    :meth:`sample` reads each pair's latest trade, book and mark from the read model and adds
    a point to a line when its record is another than at the last sample; the replay calls
    it every :attr:`step_ms` of virtual time. The book's mid is kept as best bid + best ask
    and halved when drawn.
    """

    def __init__(
        self, market: MarketReader, pairs: Collection[str], *, span_ms: int | None = None
    ) -> None:
        self._market = market
        self._span_step = None if span_ms is None else max(1, span_ms // SAMPLES)
        self._pairs = tuple(pairs)
        self._trades = {pair: MarketLine() for pair in pairs}
        self._mids = {pair: MarketLine() for pair in pairs}  # best bid + best ask: 2 x mid
        self._marks = {pair: MarketLine() for pair in pairs}
        self._lines = [*self._trades.values(), *self._mids.values(), *self._marks.values()]
        self._seen: dict[tuple[str, str], object] = {}
        self.samples = 0
        """How many times the lines were sampled."""

    @property
    def step_ms(self) -> int:
        """Virtual ms to the next sample: the recording's span over SAMPLES when it is known,
        else the finest bucket of a line with points (IDLE_STEP_MS while none has one)."""
        if self._span_step is not None:
            return self._span_step
        widths = [line.width for line in self._lines if line.count]
        return min(widths) if widths else IDLE_STEP_MS

    def sample(self, ts: int) -> None:
        """Add, at virtual time ts, each pair's price whose record changed since the last sample."""
        self.samples += 1
        market, seen = self._market, self._seen
        for pair in self._pairs:
            trade = market.trade(pair)
            if trade is not None and seen.get((pair, "trades")) is not trade:
                seen[(pair, "trades")] = trade
                self._trades[pair].add(ts, trade.price)
            book = market.book(pair)
            if book is not None and seen.get((pair, "mid")) is not book:
                seen[(pair, "mid")] = book
                bid, ask = book.best_bid, book.best_ask
                if bid is not None and ask is not None:
                    self._mids[pair].add(ts, bid + ask)
            mark = market.mark(pair)  # the latest record's own Decimal: a new one is another
            if mark is not None and seen.get((pair, "mark")) is not mark:
                seen[(pair, "mark")] = mark
                self._marks[pair].add(ts, mark)

    def of(self, pair: str) -> dict[str, list[tuple[int, Decimal]]]:
        """A pair's lines that have points, by kind (KINDS; empty without market data)."""
        out: dict[str, list[tuple[int, Decimal]]] = {}
        for kind, lines in zip(KINDS, (self._trades, self._mids, self._marks), strict=True):
            line = lines.get(pair)
            if line is not None and line.count:
                points = line.points()
                out[kind] = [(ts, p / 2) for ts, p in points] if kind == "mid" else points
        return out
