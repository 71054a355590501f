"""Market records from a CSV file: prices or bars a strategy hears, live and in a backtest.

A user with a price history (another exchange's, a model's, a test's) and no recording of
the venue's market feeds it to strategies as a :class:`~framework.engine.strategy.Source`
(config ``sources:``)::

    sources:
      - name: eth-prices
        class: framework.market_csv:CsvMarket
        params: {file: data/eth.csv, pair: ETH-USD, record: mark}   # or record: trade
      - name: eth-bars
        class: framework.market_csv:CsvMarket
        params: {file: data/eth-1m.csv, pair: ETH-USD, period: 1MIN}

The header names the kind: ``time,price`` rows are MarkPrice records (``record: mark``, the
default: hooks hear them in on_mark, ``self.market.mark`` answers) or Trade records
(``record: trade``: on_trade, ``self.market.last``; of an optional ``quantity``, else 0); ``time,open,high,low,close`` with an
optional ``quantity`` are Bar records of ``period`` (on_bar, ``self.market.bar``). Other
columns are ignored. ``time`` is epoch milliseconds or ISO 8601 (UTC when it names no zone);
``ts`` may stand for it (the price track's CSV, :mod:`framework.backtest.prices`, is read by
the same rules: :func:`csv_rows`). Rows go forward in time.

When a row is fed (``align``): ``time`` (the default) at its own time, in a backtest on the
virtual clock (:meth:`CsvMarket.timed`) and live on the wall clock (:meth:`CsvMarket.run`);
of the rows older than the start only the last is fed, at the start (the price known then).
``start``: the rows keep their spacing from the start of the run, the first fed at once (a
history played as if it happened now); a record's time is the time it is fed.

Bounded: at most ``max_rows`` rows (a million by default), fields of the csv module's limit.
The whole file is checked when the source is built, so a bad row is one located line
(``file:line: what``) before anything runs; the rows are then read again as they are fed,
never held in memory all at once.
"""

from __future__ import annotations

import csv
import itertools
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final

import anyio
import attrs

from framework.venue.errors import ConfigError
from framework.venue.market import Bar, MarketRecord, MarkPrice, Trade

__all__ = ["MAX_ROWS", "CsvMarket", "CsvRow", "CsvRows", "csv_decimal", "csv_rows"]

MAX_ROWS: Final = 1_000_000
"""Rows a CSV may hold by default (more is refused, naming the line)."""
_BAR_COLUMNS: Final = ("open", "high", "low", "close")
_MAX_HEADER: Final = 256
_ZERO: Final = Decimal(0)


@attrs.frozen(slots=True)
class CsvRow:
    """One row of a CSV: its line number, its time (epoch ms) and its cells by column."""

    line: int
    ts: int
    cells: Mapping[str, str | None]


class CsvRows:
    """The rows of a CSV with a ``time`` (or ``ts``) column, read as iterated (one pass).

    A row whose time does not read, a file of more than max_rows rows, a line the csv module
    refuses, text that is not UTF-8, an unreadable file: a ConfigError naming ``file:line``.
    Closed at the end of the pass, or by close() / its with block.
    """

    def __init__(self, path: str | Path, *, max_rows: int = MAX_ROWS) -> None:
        self.path, self.max_rows = path, max_rows
        try:
            self._handle = open(path, newline="", encoding="utf-8")  # noqa: SIM115 (close())
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        self._reader = csv.DictReader(self._handle)
        try:
            names = self._reader.fieldnames or ()
        except (csv.Error, UnicodeDecodeError) as exc:
            self.close()
            raise ConfigError(f"{path}:1: {_why(exc)}") from None
        self.columns = [name.strip() for name in names][:_MAX_HEADER]
        """The header's column names."""
        if "time" not in self.columns and "ts" not in self.columns:
            self.close()
            raise ConfigError(f"{path}:1: no 'time' (or 'ts') column in the header {self.columns}")
        self._reader.fieldnames = self.columns
        self._key = "ts" if "ts" in self.columns else "time"

    def __enter__(self) -> CsvRows:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._handle.close()

    def __iter__(self) -> Iterator[CsvRow]:
        path, reader, key = self.path, self._reader, self._key
        with self:
            for count in itertools.count(1):
                try:
                    row = next(reader, None)
                except (csv.Error, UnicodeDecodeError) as exc:
                    raise ConfigError(f"{path}:{reader.line_num + 1}: {_why(exc)}") from None
                if row is None:
                    return
                if count > self.max_rows:
                    reason = f"more than {self.max_rows} rows (max_rows)"
                    raise ConfigError(f"{path}:{reader.line_num}: {reason}")
                line = reader.line_num
                yield CsvRow(line, _time(path, line, key, row.get(key)), row)


def csv_rows(path: str | Path, *, max_rows: int = MAX_ROWS) -> CsvRows:
    """The rows of a CSV by the module's rules (its ``columns``; iterate for the rows)."""
    return CsvRows(path, max_rows=max_rows)


def csv_decimal(
    path: str | Path, line: int, column: str, cell: str | None, *, positive: bool = True
) -> Decimal:
    """A cell as a finite Decimal above 0 (positive) or not below 0; ConfigError naming it."""
    text = (cell or "").strip()
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value < 0 or (positive and not value):
        kind = "a positive" if positive else "a non-negative"
        raise ConfigError(f"{path}:{line}: {column} {text!r} is not {kind} number")
    return value


def _time(path: str | Path, line: int, column: str, cell: str | None) -> int:
    """Epoch ms of a time cell: a number of ms, or ISO 8601 (UTC when it names no zone)."""
    text = (cell or "").strip()
    try:
        return int(Decimal(text)) if text.lstrip("-").replace(".", "", 1).isdigit() else _iso(text)
    except (ValueError, InvalidOperation):
        raise ConfigError(
            f"{path}:{line}: {column} {text!r} is not a time (epoch ms or ISO 8601)"
        ) from None


def _iso(text: str) -> int:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _why(exc: Exception) -> str:
    return "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"not CSV: {exc}"


class CsvMarket:
    """A Source of MarkPrice, Trade or Bar records read from a CSV (see the module).

    params: file, pair; record (mark or trade) for ``time,price`` files; period for bar
    files; align (time or start); max_rows. now_ms and sleep: the live clock (default the
    wall clock and anyio.sleep; tests pass their own).
    """

    def __init__(
        self,
        name: str,
        params: Mapping[str, Any],
        *,
        now_ms: Callable[[], int] | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self.name = name
        self._now_ms = now_ms if now_ms is not None else _wall_ms
        self._sleep = sleep if sleep is not None else anyio.sleep
        where = f"source {name}"
        self.path = Path(str(_param(params, "file", where)))
        self.pair = str(_param(params, "pair", where))
        self.align = str(params.get("align", "time"))
        if self.align not in ("time", "start"):
            raise ConfigError(f"{where}: align {self.align!r}: expected time or start")
        self.max_rows = int(params.get("max_rows", MAX_ROWS))
        with csv_rows(self.path, max_rows=self.max_rows) as rows:
            fields = rows.columns
        self.bars = all(column in fields for column in _BAR_COLUMNS)
        if self.bars:
            self.period = str(_param(params, "period", where))
            self.record = "bar"
        elif "price" in fields:
            self.record = str(params.get("record", "mark"))
            if self.record not in ("mark", "trade"):
                raise ConfigError(f"{where}: record {self.record!r}: expected mark or trade")
        else:
            raise ConfigError(
                f"{self.path}:1: expected columns time,price or time,open,high,low,close"
                f"[,quantity], got {fields}"
            )
        self.records: tuple[type[Any], ...] = (
            (Bar,) if self.bars else (MarkPrice,) if self.record == "mark" else (Trade,)
        )
        self.first_ts: int | None = None
        self.rows = 0
        for ts, _ in self._read(0):  # every row checked now: a bad one stops the build
            if self.first_ts is None:
                self.first_ts = ts
            self.rows += 1

    def __repr__(self) -> str:
        return f"CsvMarket({self.name!r}, {str(self.path)!r}, {self.record} rows of {self.pair})"

    def _read(self, shift: int) -> Iterator[tuple[int, MarketRecord]]:
        """(row time + shift, its record stamped so), in file order; time never goes back."""
        path, pair, last = self.path, self.pair, None
        for row in csv_rows(path, max_rows=self.max_rows):
            if last is not None and row.ts < last:
                raise ConfigError(f"{path}:{row.line}: time goes back (rows go forward in time)")
            last, ts, cells = row.ts, row.ts + shift, row.cells
            record: MarketRecord
            size = cells.get("quantity")
            quantity = (
                csv_decimal(path, row.line, "quantity", size, positive=False) if size else None
            )
            if self.bars:
                o, h, low, c = (csv_decimal(path, row.line, k, cells.get(k)) for k in _BAR_COLUMNS)
                record = Bar(pair=pair, period=self.period, open=o, high=h, low=low, close=c,
                             quantity=quantity, time=ts)  # fmt: skip
            elif self.record == "mark":
                price = csv_decimal(path, row.line, "price", cells.get("price"))
                record = MarkPrice(pair=pair, price=price, time=ts)
            else:
                price = csv_decimal(path, row.line, "price", cells.get("price"))
                record = Trade(pair=pair, price=price, quantity=quantity or _ZERO, time=ts)
            yield ts, record

    def timed(self, start_ms: int) -> Iterator[tuple[int, MarketRecord]]:
        """Backtest: (virtual ms, record) in time order from start_ms (see align)."""
        if self.align == "start":
            first = start_ms if self.first_ts is None else self.first_ts
            yield from self._read(start_ms - first)
            return
        held: MarketRecord | None = None
        for ts, record in self._read(0):
            if ts < start_ms:
                held = record  # only the last of the rows before the start is fed
                continue
            if held is not None:
                yield start_ms, held
                held = None
            yield ts, record
        if held is not None:
            yield start_ms, held

    async def run(self, feed: Callable[[Any], None]) -> None:
        """Live: each record fed when the wall clock reaches its time (see align)."""
        for ms, record in self.timed(self._now_ms()):
            wait = ms - self._now_ms()
            if wait > 0:
                await self._sleep(wait / 1000)
            feed(record)


def _wall_ms() -> int:
    """The wall clock in epoch ms (the live edge's time)."""
    return time.time_ns() // 1_000_000


def _param(params: Mapping[str, Any], name: str, where: str) -> Any:
    value = params.get(name)
    if value is None or value == "":
        raise ConfigError(f"{where}: params.{name} is required")
    return value
