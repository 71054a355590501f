"""The price track of a backtest: prices per pair over time, looked up by time.

Its points come from the recording (what :class:`framework.backtest.scan.PriceFinder`
finds: match averagePrice at the match's time, the openingPrice of NEW position pushes) or
from a CSV file. Of two prices for a pair in one millisecond the later one counts. A track
made with :meth:`PriceTrack.later` reads its points on first use, so a backtest whose
strategies never trade never reads the recording's prices for them.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Final

from framework.backtest.scan import PricePoint
from framework.market_csv import csv_decimal, csv_rows
from framework.venue.errors import ConfigError

__all__ = ["PriceTrack"]

_TIME_PAIR: Final = operator.itemgetter(0, 1)
_TIME: Final = operator.itemgetter(0)

PairPrices = Mapping[str, list[tuple[int, Decimal]]]
"""Per pair, (ts, price) entries in the order they were found (sorted here, in place)."""


class PriceTrack:
    """Prices per pair over time: sorted points, looked up by time."""

    _load: Callable[[], PriceTrack] | None
    _times: dict[str, list[int]]
    _prices: dict[str, list[Decimal]]
    _rows: list[tuple[int, str, Decimal]] | None
    _points: list[PricePoint] | None

    def __init__(self, points: Iterable[PricePoint]) -> None:
        self._load = None
        self._index(_by_pair((p.ts, p.pair, p.price) for p in points))

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, str, Decimal]]) -> PriceTrack:
        """A track from (ts, pair, price) rows, in any order (what a scan finds)."""
        return cls.from_pairs(_by_pair(rows))

    @classmethod
    def from_pairs(cls, pairs: PairPrices) -> PriceTrack:
        """A track from each pair's (ts, price) entries, in the order they were found."""
        track = cls.__new__(cls)
        track._load = None
        track._index(pairs)
        return track

    @classmethod
    def later(cls, load: Callable[[], PriceTrack]) -> PriceTrack:
        """A track that is load()'s, made when it is first used."""
        track = cls.__new__(cls)
        track._load = load
        return track

    @property
    def loaded(self) -> bool:
        """False while a track made with later() has not been used."""
        return self._load is None

    def _ready(self) -> None:
        if self._load is not None:
            load, self._load = self._load, None
            made = load()
            made._ready()
            self._times, self._prices, self._rows = made._times, made._prices, made._rows
            self._points = made._points

    def _index(self, pairs: PairPrices) -> None:
        self._times = {}
        self._prices = {}
        for pair, entries in pairs.items():
            entries.sort(key=_TIME)  # stable: of two prices in one ms, the later one counts
            times = [ts for ts, _ in entries]
            prices = [price for _, price in entries]
            if len(set(times)) != len(times):
                times, prices = _last_of_each_ms(times, prices)
            if times:
                self._times[pair] = times
                self._prices[pair] = prices
        self._rows = None
        self._points = None

    @property
    def rows(self) -> list[tuple[int, str, Decimal]]:
        """Every point as (ts, pair, price), by time then pair."""
        self._ready()
        if self._rows is None:
            self._rows = sorted(
                (
                    (ts, pair, price)
                    for pair, times in self._times.items()
                    for ts, price in zip(times, self._prices[pair], strict=True)
                ),
                key=_TIME_PAIR,
            )
        return self._rows

    def first_after(self, ts: int) -> int:
        """The index in rows of the first point after ts."""
        return bisect_right(self.rows, ts, key=_TIME)

    @property
    def points(self) -> list[PricePoint]:
        """Every point, by time then pair."""
        self._ready()
        if self._points is None:
            self._points = [PricePoint(t, pair, price, "track") for t, pair, price in self.rows]
        return self._points

    def __len__(self) -> int:
        self._ready()
        return sum(len(times) for times in self._times.values())

    def pairs(self) -> list[str]:
        """The pairs with at least one price."""
        self._ready()
        return sorted(self._times)

    def first(self, pair: str) -> Decimal | None:
        """The earliest price of pair."""
        self._ready()
        prices = self._prices.get(pair)
        return prices[0] if prices else None

    def last_at(self, pair: str, ts: int) -> Decimal | None:
        """The price of the last point at or before ts."""
        self._ready()
        times = self._times.get(pair)
        if not times:
            return None
        i = bisect_right(times, ts)
        return self._prices[pair][i - 1] if i else None

    def next_at(self, pair: str, ts: int, max_wait_ms: int) -> Decimal | None:
        """The price of the first point at or after ts, if within max_wait_ms."""
        self._ready()
        times = self._times.get(pair)
        if not times:
            return None
        i = bisect_left(times, ts)
        if i < len(times) and times[i] - ts <= max_wait_ms:
            return self._prices[pair][i]
        return None

    @classmethod
    def from_csv(cls, path: str | Path, pairs: Iterable[str]) -> PriceTrack:
        """Read a CSV: a ``ts`` (epoch ms) or ``time`` (epoch ms or ISO 8601) column, one
        column per pair (:func:`framework.market_csv.csv_rows`'s rules; bad rows located)."""
        wanted = set(pairs)
        rows = csv_rows(path)
        columns = [c for c in rows.columns if c in wanted]
        if not columns:
            rows.close()
            raise ConfigError(f"{path}: no column names a configured pair")
        points: list[PricePoint] = []
        for row in rows:
            for column in columns:
                cell = (row.cells.get(column) or "").strip()
                if cell:
                    price = csv_decimal(path, row.line, column, cell)
                    points.append(PricePoint(row.ts, column, price, "csv"))
        if not points:
            raise ConfigError(f"{path}: the price track has no prices")
        return cls(points)


def _by_pair(rows: Iterable[tuple[int, str, Decimal]]) -> dict[str, list[tuple[int, Decimal]]]:
    out: dict[str, list[tuple[int, Decimal]]] = {}
    for ts, pair, price in rows:
        entries = out.get(pair)
        if entries is None:
            entries = out[pair] = []
        entries.append((ts, price))
    return out


def _last_of_each_ms(times: list[int], prices: list[Decimal]) -> tuple[list[int], list[Decimal]]:
    kept_times: list[int] = []
    kept_prices: list[Decimal] = []
    for ts, price in zip(times, prices, strict=True):
        if kept_times and kept_times[-1] == ts:
            kept_prices[-1] = price
        else:
            kept_times.append(ts)
            kept_prices.append(price)
    return kept_times, kept_prices
