"""What a backtest learns from a recording: its own orders, time span and prices.

:func:`scan` makes one quick pass before replaying: the recorded node's own orders (from
batchCreate answers), the matches and positions they made, and every price the recording
shows (match averagePrice, the openingPrice of new positions). It parses only the lines
that can hold those, found by substring search (in place, for a plain file mapped in
memory). With ``prices=False`` it looks only for batchCreate answers when there are none to
find. :class:`PriceFinder` holds the rule for prices, shared with the replay, which notes
them on the way.
"""

from __future__ import annotations

import mmap
import operator
from collections.abc import Collection, Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Final, Literal

import attrs

from framework.recording import (
    LINE_ERRORS,
    RecordingReader,
    WsRecord,
    decode_line,
)
from framework.venue.codec import decode_batch_answer, decode_frame, decode_match_answer
from framework.venue.errors import DecodeError
from framework.venue.models import ChangeType, MatchRecord, PositionPush
from framework.venue.requests import BATCH_CREATE_PATH, MATCHES_PATH

__all__ = ["PriceFinder", "PricePoint", "RecordingIndex", "scan"]


@attrs.frozen(slots=True)
class PricePoint:
    """A price the recording shows for a pair at a time (ms)."""

    ts: int
    pair: str
    price: Decimal
    source: str

    def key(self) -> tuple[int, str]:
        """The sort key: time, then pair."""
        return (self.ts, self.pair)


@attrs.define
class RecordingIndex:
    """What a backtest learns from a recording before replaying it (see :func:`scan`)."""

    first_ts: int | None = None
    last_ts: int | None = None
    own_order_ids: set[int] = attrs.field(factory=set)
    own_match_ids: set[int] = attrs.field(factory=set)
    own_position_ids: set[int] = attrs.field(factory=set)
    own_pairs: set[str] = attrs.field(factory=set)
    price_rows: list[tuple[int, str, Decimal, str]] = attrs.field(factory=list)
    """Every price found, as (ts, pair, price, source), by time then pair."""
    prices_scanned: bool = True
    """False when scan(prices=False) left the prices out."""

    @property
    def prices(self) -> list[PricePoint]:
        """The prices found, as PricePoints, by time then pair."""
        return [PricePoint(*row) for row in self.price_rows]

    @property
    def has_own_orders(self) -> bool:
        """True when the recorded node placed orders (batchCreate answers were recorded)."""
        return bool(self.own_order_ids)


_TIME_PAIR: Final = operator.itemgetter(0, 1)
_BATCH_KEY: Final = BATCH_CREATE_PATH.encode()
_MATCHES_KEY: Final = MATCHES_PATH.encode()
_NEW_KEY: Final = b'\\"NEW\\"'


class PriceFinder:
    """The prices a recording shows, by one rule for the scan and the replay.

    Every match of a good match-result answer once, at its first sight: its averagePrice
    at its createTimeStamp (the record's time when it has none). The openingPrice of every
    NEW position push at its record's time; rows() adds those with ``always``, or with
    ``fallback`` only when the recording shows no match at all.
    """

    def __init__(self, *, keep_matches: bool = False) -> None:
        self.seen: set[int] = set()
        """The ids of the matches taken (with a price and a pair)."""
        self.matches: dict[int, MatchRecord] = {}
        """With keep_matches (the scan's): match id -> the match as first seen. A replay keeps
        ids only: holding every match record of a long recording costs memory and time."""
        self._keep = keep_matches
        self.new_positions: list[tuple[int, str, Decimal | None]] = []
        """(record ts, pair, openingPrice) of NEW position pushes, unchecked."""
        self.by_pair: dict[str, list[tuple[int, Decimal]]] = {}
        """Per pair, the (ts, price) of those matches, in the order found."""

    def page(self, record_ts: int, page: Sequence[MatchRecord]) -> None:
        """Take the matches of a good match-result answer."""
        seen = self.seen
        matches = self.matches if self._keep else None
        by_pair = self.by_pair
        for item in page:
            match_id = item.id
            if match_id in seen:
                continue  # polls answer the newest page again and again: each match once
            price = item.average_price  # a record's decimals are finite (decoding checks)
            pair = item.symbol
            if price is None or price <= 0 or pair is None:
                continue
            ts = item.create_time_stamp
            seen.add(match_id)
            if matches is not None:
                matches[match_id] = item
            entries = by_pair.get(pair)
            if entries is None:
                entries = by_pair[pair] = []
            entries.append((record_ts if ts is None else ts, price))

    def push(self, record_ts: int, push: PositionPush) -> None:
        """Take a position push: a NEW one's openingPrice."""
        if push.change_type is ChangeType.NEW:
            self.new_positions.append((record_ts, push.symbol, push.opening_price))

    def rows(
        self, positions: Literal["always", "fallback", "never"]
    ) -> list[tuple[int, str, Decimal, str]]:
        """Every price found as (ts, pair, price, source), by time then pair."""
        rows = [(ts, pair, price, "positions") for ts, pair, price in self._positions(positions)]
        rows.extend(
            (ts, pair, price, "matches")
            for pair, entries in self.by_pair.items()
            for ts, price in entries
        )
        rows.sort(key=_TIME_PAIR)
        return rows

    def track_pairs(
        self, positions: Literal["always", "fallback", "never"], sources: Collection[str]
    ) -> dict[str, list[tuple[int, Decimal]]]:
        """Per pair, the (ts, price) of rows() whose source is in sources, in the order found.

        Sorted by time (stably), they are rows()'s points of each pair.
        """
        out: dict[str, list[tuple[int, Decimal]]] = {}
        if "positions" in sources:
            for ts, pair, price in self._positions(positions):
                out.setdefault(pair, []).append((ts, price))
        if "matches" in sources:
            for pair, entries in self.by_pair.items():
                out[pair] = out.get(pair, []) + entries
        return out

    def _positions(
        self, positions: Literal["always", "fallback", "never"]
    ) -> list[tuple[int, str, Decimal]]:
        rows = []
        if positions == "always" or (positions == "fallback" and not self.seen):
            for ts, pair, raw in self.new_positions:
                price = _price(raw)
                if price is not None:
                    rows.append((ts, pair, price))
        return rows


def scan(
    path: str | Path | RecordingReader,
    *,
    positions: Literal["always", "fallback", "never"] = "fallback",
    prices: bool = True,
) -> RecordingIndex:
    """One quick pass: time span, the recorded node's own orders and fills, price points.

    Own orders are the orderIds of recorded batchCreate answers; their matches (entrustId)
    name own positions (contractPositionId). Prices: every distinct match's averagePrice at
    its createTimeStamp, and the openingPrice of NEW position pushes at their record time
    (``always``, or with ``fallback`` only when the recording holds no match at all: the
    same fills' prices, found by a second pass). Only lines holding those keys are parsed.

    prices=False: when the recording holds no batchCreate answer (found by a substring
    search, nothing parsed), the index has the time span only and prices_scanned False.

    Given the RecordingReader that will replay it, the scan searches the reader's mapping of
    the file (mapped once for both).
    """
    if isinstance(path, RecordingReader):
        return _scan(path, positions, prices)
    reader = RecordingReader(path)
    try:
        return _scan(reader, positions, prices)
    finally:
        reader.close()


def _scan(
    reader: RecordingReader, positions: Literal["always", "fallback", "never"], prices: bool
) -> RecordingIndex:
    if not prices:
        index = RecordingIndex(prices_scanned=False)
        first_line, last_line = _scan_pass(reader, [_BATCH_KEY], index, PriceFinder())
        if not index.own_order_ids:
            index.first_ts = _ts_of(first_line)
            index.last_ts = _ts_of(last_line)
            return index
    index = RecordingIndex()
    found = PriceFinder(keep_matches=True)
    keys = [_BATCH_KEY, _MATCHES_KEY]
    if positions == "always":
        keys.append(_NEW_KEY)
    first_line, last_line = _scan_pass(reader, keys, index, found)
    if positions == "fallback" and not found.seen:
        _scan_pass(reader, [_NEW_KEY], index, found)
    index.first_ts = _ts_of(first_line)
    index.last_ts = _ts_of(last_line)
    own = index.own_order_ids
    for match_id, match in found.matches.items():
        if match.entrust_id is not None and match.entrust_id in own:
            index.own_match_ids.add(match_id)
            index.own_pairs.add(match.symbol)  # type: ignore[arg-type]  # kept ones have one
            if match.contract_position_id is not None:
                index.own_position_ids.add(match.contract_position_id)
    index.price_rows = found.rows(positions)
    return index


def _scan_pass(
    reader: RecordingReader,
    keys: list[bytes],
    index: RecordingIndex,
    found: PriceFinder,
) -> tuple[bytes | None, bytes]:
    """Parse the lines holding any of keys; returns the first and last lines of the file."""
    view = reader.mapping()
    if view is not None:
        return _scan_mapped(view, keys, index, found)
    first_line: bytes | None = None
    last_line = b""
    # A reader of its own: the replay's byte count untouched. Lines longer than MAX_LINE are
    # left out (the replay counts them).
    for block, start, end in RecordingReader(reader.path).line_blocks():
        cut = end - 1 if block[end - 1] == 10 else end  # the last line's end
        if cut == end and not block[start:end].strip():
            continue  # blanks after the last newline
        if first_line is None:
            first_line = block[start : block.find(b"\n", start, end) if cut < end else end]
        last_line = block[block.rfind(b"\n", start, cut) + 1 or start : cut]
        for key in keys:
            for line in _lines_with(block, key, cut, start):
                _scan_line(line, index, found)
    return first_line, last_line


def _scan_mapped(
    view: mmap.mmap, keys: list[bytes], index: RecordingIndex, found: PriceFinder
) -> tuple[bytes | None, bytes]:
    """_scan_pass over a plain file mapped in memory: the searches read it in place."""
    end = len(view)
    newline = view.find(b"\n")
    first_line = view[: newline if newline >= 0 else end]
    stop = end - 1 if view[end - 1 : end] == b"\n" else end
    last_line = view[view.rfind(b"\n", 0, stop) + 1 : stop]
    for key in keys:
        for line in _lines_with(view, key, end):
            _scan_line(line, index, found)
    return first_line, last_line


def _lines_with(chunk: bytes | mmap.mmap, key: bytes, end: int, begin: int = 0) -> Iterator[bytes]:
    """The lines of chunk[begin:end] that contain key, each once (begin: a line's start)."""
    position = chunk.find(key, begin, end)
    while position >= 0:
        start = chunk.rfind(b"\n", begin, position) + 1 or begin
        stop = chunk.find(b"\n", position, end + 1)
        if stop < 0:
            stop = end
        yield chunk[start:stop]
        position = chunk.find(key, stop, end)


def _ts_of(line: bytes | None) -> int | None:
    if not line:
        return None
    try:
        record = decode_line(line)
    except LINE_ERRORS:
        return None
    return record.ts if type(record.ts) is int else int(record.ts)


def _price(value: Decimal | None) -> Decimal | None:
    """A usable price: finite and positive."""
    if value is None or not value.is_finite() or value <= 0:
        return None
    return value


def _scan_line(line: bytes, index: RecordingIndex, found: PriceFinder) -> None:
    try:
        record = decode_line(line).typed()
    except LINE_ERRORS:
        return
    if isinstance(record, WsRecord):
        try:
            push = decode_frame(record.frame)
        except DecodeError:
            return
        if type(push) is PositionPush:
            found.push(record.ts, push)
        return
    if record is None:
        return
    try:
        if record.path == BATCH_CREATE_PATH:
            results = decode_batch_answer(record.body)
            if results:
                index.own_order_ids.update(o.order_id for o in results)
        elif record.path == MATCHES_PATH:
            page = decode_match_answer(record.body)
            if page is not None:
                found.page(record.ts, page)
    except DecodeError:
        pass  # an answer the replay will count as an error too
