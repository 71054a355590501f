"""Mark price models: a seeded random walk in whole price ticks, or a CSV price track.

Both are deterministic: the walk draws integers from the ``random.Random`` it is given (no
floats reach a price), and the track replays its file. ``step()`` returns the new marks of
the pairs that moved; the server applies them to the exchange once per tick interval, and
tests call :meth:`VenueTwin.step` to advance by hand.

CSV track format: a header row naming pairs (other columns such as ``time`` are ignored),
then one row per tick with a decimal price per pair; an empty cell leaves that pair's price
unchanged. The first row gives the starting marks. At the end the track loops (default) or
holds its last prices.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Protocol

from framework.twin.settings import TwinSettings
from framework.venue.errors import ConfigError

__all__ = ["CsvTrack", "PriceModel", "RandomWalk", "build_price_model"]


class PriceModel(Protocol):
    """Something that moves mark prices one tick at a time."""

    def start(self) -> dict[str, Decimal]:
        """The marks before the first tick."""
        ...

    def step(self) -> dict[str, Decimal]:
        """Advance one tick; the new marks of the pairs that moved."""
        ...


class RandomWalk:
    """Each tick moves each pair by a whole number of price ticks in [-max, +max]."""

    def __init__(
        self,
        start: Mapping[str, Decimal],
        ticks: Mapping[str, Decimal],
        rng: random.Random,
        *,
        max_step_ticks: int,
    ) -> None:
        """start: first marks; ticks: smallest price step of each pair."""
        self._marks = dict(start)
        self._ticks = dict(ticks)
        self._rng = rng
        self._max = max_step_ticks

    def start(self) -> dict[str, Decimal]:
        """The configured initial prices."""
        return dict(self._marks)

    def step(self) -> dict[str, Decimal]:
        """Move every pair; a price never goes below one tick."""
        moved: dict[str, Decimal] = {}
        for pair, mark in self._marks.items():
            tick = self._ticks[pair]
            offset = self._rng.randint(-self._max, self._max)
            if offset:
                new = max(tick, mark + offset * tick)
                if new != mark:
                    self._marks[pair] = moved[pair] = new
        return moved

    def set(self, pair: str, price: Decimal) -> None:
        """Continue the walk from a price set by hand."""
        if pair in self._marks:
            self._marks[pair] = price


class CsvTrack:
    """Replays per-pair price columns, one row per tick."""

    def __init__(self, rows: list[dict[str, Decimal]], *, loop: bool) -> None:
        """rows: for each tick, the prices of the pairs given on that row."""
        if not rows:
            raise ValueError("a price track needs at least one row")
        self._rows = rows
        self._loop = loop
        self._index = 0

    @classmethod
    def from_file(cls, path: str | Path, pairs: Iterable[str], *, loop: bool) -> CsvTrack:
        """Read a CSV track; ConfigError names the file and line of a bad cell."""
        wanted = set(pairs)
        try:
            with open(path, newline="", encoding="utf-8") as handle:
                reader = csv.DictReader(handle)
                columns = [c for c in reader.fieldnames or () if c in wanted]
                if not columns:
                    raise ConfigError(f"{path}: no column names a configured pair")
                rows: list[dict[str, Decimal]] = []
                for row in reader:
                    prices: dict[str, Decimal] = {}
                    for column in columns:
                        cell = (row.get(column) or "").strip()
                        if not cell:
                            continue
                        try:
                            price = Decimal(cell)
                        except InvalidOperation:
                            price = Decimal(0)
                        if not price.is_finite() or price <= 0:
                            raise ConfigError(
                                f"{path}: line {reader.line_num}: bad price {cell!r} for {column}"
                            )
                        prices[column] = price
                    rows.append(prices)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read price track: {exc.strerror}") from None
        if not rows:
            raise ConfigError(f"{path}: the price track has no rows")
        return cls(rows, loop=loop)

    def start(self) -> dict[str, Decimal]:
        """The first row."""
        return dict(self._rows[0])

    def step(self) -> dict[str, Decimal]:
        """The next row (looping or holding at the end)."""
        if self._index + 1 >= len(self._rows):
            if not self._loop:
                return {}
            self._index = -1
        self._index += 1
        return dict(self._rows[self._index])


def build_price_model(settings: TwinSettings, rng: random.Random) -> RandomWalk | CsvTrack:
    """The price model the settings ask for."""
    prices = settings.prices
    if prices.model == "csv":
        assert prices.csv_path is not None
        return CsvTrack.from_file(prices.csv_path, settings.pairs, loop=prices.loop)
    return RandomWalk(
        {name: pair.initial_price for name, pair in settings.pairs.items()},
        {
            name: Decimal(1).scaleb(-pair.rules.price_decimals)
            for name, pair in settings.pairs.items()
        },
        rng,
        max_step_ticks=prices.max_step_ticks,
    )
