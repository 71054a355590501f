"""Reading recordings: JSON lines, gzip when the name ends in .gz, fast and tolerant.

The format (a public contract, written by :mod:`framework.live.recorder`) is one JSON object
per line and per inbound message, in the order they arrived::

    {"ts": 1700000000123, "source": "ws", "frame": "<raw WebSocket text frame>"}
    {"ts": 1700000000456, "source": "rest", "path": "/api/...", "query": "pairName=ETH-USD",
     "body": "<raw response text>"}

``ts`` is epoch milliseconds (a number); ``query`` never holds the timestamp (nor anything
secret). The reader decompresses in large chunks and decodes lines a piece of about 128 KB at
a time with one msgspec ``decode_lines`` call into :class:`LineRecord` structs (no per-line
I/O call, no dict per line: as fast as ``orjson.loads`` per line, and the records are typed).
A piece holding a line that is not a record is decoded again line by line, that line counted
and skipped. It is tolerant where a killed writer leaves marks: an unterminated
last line that is not JSON is counted as truncated and skipped, a gzip member cut short
(the recorder sync-flushes each line, so what it wrote is readable) is read up to its cut,
and a later member appended by the next run is found again. Lines that are not records
are counted and skipped, never fatal.

:func:`scan` makes one quick pass for what a backtest needs to know before replaying: the
recorded node's own orders (from batchCreate answers), the matches and positions they made,
and every price the recording shows (match averagePrice, the openingPrice of new positions).
It parses only the lines that can hold those, found by substring search.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import operator
import zlib
from collections.abc import Collection, Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final, Literal

import attrs
import msgspec
import orjson

from framework.venue.peek import PEEK_ERRORS, PageHead, peek_batch_answer, peek_match_page
from framework.venue.requests import BATCH_CREATE_PATH, MATCHES_PATH

__all__ = [
    "CHUNK_SIZE",
    "PIECE_SIZE",
    "LineRecord",
    "PriceFinder",
    "PricePoint",
    "ReaderStats",
    "RecordingIndex",
    "RecordingReader",
    "RestRecord",
    "WsRecord",
    "scan",
]

log = logging.getLogger("framework.recording")

CHUNK_SIZE: Final = 4 << 20
"""Bytes of (decompressed) text split at once."""

PIECE_SIZE: Final = 128 << 10
"""Bytes of lines decoded by one call: small enough for the records to stay in the CPU cache."""

_GZIP_MAGIC: Final = b"\x1f\x8b\x08"


class LineRecord(msgspec.Struct, gc=False):
    """One line as read: a frame (WebSocket) or path, query and body (REST); see the format."""

    ts: int | float
    """Epoch milliseconds."""
    source: str | None = None
    """ws or rest."""
    frame: str | None = None
    """The raw WebSocket text frame (ws)."""
    path: str | None = None
    """The endpoint path (rest)."""
    query: str | None = None
    """The query string without timestamp (rest)."""
    body: str | None = None
    """The raw response text (rest)."""

    def typed(self) -> WsRecord | RestRecord | None:
        """The record as a WsRecord or RestRecord, or None when it is neither."""
        ts = self.ts if type(self.ts) is int else int(self.ts)
        if self.source == "ws":
            return None if self.frame is None else WsRecord(ts, self.frame)
        if self.source == "rest" and self.path is not None and self.body is not None:
            return RestRecord(ts, self.path, self.query or "", self.body)
        return None


_LINE: Final = msgspec.json.Decoder(LineRecord)
_LINE_ERRORS: Final = (msgspec.DecodeError,)


@attrs.frozen(slots=True)
class WsRecord:
    """A recorded WebSocket text frame."""

    ts: int
    frame: str


@attrs.frozen(slots=True)
class RestRecord:
    """A recorded REST answer: endpoint path, query string without timestamp, raw body."""

    ts: int
    path: str
    query: str
    body: str


@attrs.define
class ReaderStats:
    """What a reader saw: lines, records, lines skipped, and the marks of a cut file."""

    lines: int = 0
    bad_lines: int = 0
    truncated_tail: bool = False
    cut_members: int = 0
    bytes_read: int = 0

    def as_dict(self) -> dict[str, int | bool]:
        """The counters as a plain dict."""
        return attrs.asdict(self)


class RecordingReader:
    """One pass over a recording file: raw chunks, line batches, parsed objects or records."""

    def __init__(self, path: str | Path, *, chunk_size: int = CHUNK_SIZE) -> None:
        self.path = Path(path)
        self.chunk_size = chunk_size
        self.gzip = self.path.name.endswith(".gz")
        self.stats = ReaderStats()
        self.size = self.path.stat().st_size

    def __repr__(self) -> str:
        return f"RecordingReader({str(self.path)!r})"

    # ---- bytes

    def chunks(self) -> Iterator[bytes]:
        """The file's text in pieces of about chunk_size bytes (decompressed if gzip)."""
        with open(self.path, "rb") as handle:
            if not self.gzip:
                while data := handle.read(self.chunk_size):
                    self.stats.bytes_read += len(data)
                    yield data
                return
            yield from self._gunzip(handle)

    def _gunzip(self, handle: Any) -> Iterator[bytes]:
        stats = self.stats
        inflater = zlib.decompressobj(31)
        read = max(self.chunk_size // 4, 1 << 16)
        pending = b""
        while True:
            if pending:
                data, pending = pending, b""
            else:
                data = handle.read(read)
                stats.bytes_read += len(data)
            if not data:
                break
            saved = inflater.copy()
            try:
                out = inflater.decompress(data)
            except zlib.error:
                # A member cut short (killed writer) followed by the next run's member: keep
                # what the cut member still yields, then start again at the next gzip header.
                good, out = _longest_valid_prefix(saved, data)
                stats.cut_members += 1
                log.warning(
                    "%s: a gzip member is cut short; reading on from the next one", self.path
                )
                if out:
                    yield out
                found = data.find(_GZIP_MAGIC, good)
                while found < 0:
                    more = handle.read(read)
                    if not more:
                        return
                    stats.bytes_read += len(more)
                    data = data[-2:] + more
                    found = data.find(_GZIP_MAGIC)
                inflater = zlib.decompressobj(31)
                pending = data[found:]
                continue
            if out:
                yield out
            while inflater.eof:
                # Members are concatenated: a recording appended by a later run.
                rest = inflater.unused_data
                inflater = zlib.decompressobj(31)
                if not rest:
                    break
                out = inflater.decompress(rest)
                if out:
                    yield out
        if not inflater.eof:
            tail = inflater.flush()
            if tail:
                yield tail

    # ---- records

    def record_batches(self) -> Iterator[list[LineRecord]]:
        """The file's records, a list per piece of about PIECE_SIZE bytes; bad lines skipped.

        A line that is not a record (not JSON, not an object, ts missing or not a number, a
        field of the wrong type) is counted in stats.bad_lines; an unterminated last line
        that is not JSON is counted as truncated and dropped.
        """
        stats = self.stats
        decode_lines = _LINE.decode_lines
        for piece in self._pieces():
            try:
                records = decode_lines(piece)
            except _LINE_ERRORS:
                records = self._decode_each(piece)
            stats.lines += len(records)
            if records:
                yield records

    def _decode_each(self, piece: bytes | memoryview) -> list[LineRecord]:
        decode = _LINE.decode
        records = []
        for line in bytes(piece).split(b"\n"):
            if not line.strip():
                continue
            try:
                records.append(decode(line))
            except _LINE_ERRORS:
                self.stats.bad_lines += 1
                self.stats.lines += 1
        return records

    def _pieces(self) -> Iterator[bytes | memoryview]:
        """Whole lines in pieces of about PIECE_SIZE bytes (a longer line is a piece alone)."""
        tail = b""
        for chunk in self.chunks():
            start = 0
            if tail:  # the line cut at the last chunk's end: whole with this chunk's head
                head = chunk.find(b"\n") + 1
                if not head:
                    tail += chunk
                    continue
                yield tail + chunk[:head]
                start = head
            end = chunk.rfind(b"\n") + 1
            tail = chunk[max(end, start) :]
            view = memoryview(chunk)
            while start < end:
                stop = chunk.rfind(b"\n", start, min(start + PIECE_SIZE, end)) + 1
                if stop <= start:  # a line longer than a piece
                    stop = chunk.find(b"\n", start) + 1
                yield view[start:stop]
                start = stop
        if tail.strip() and self._complete(tail):
            yield tail

    def records(self) -> Iterator[WsRecord | RestRecord]:
        """Every line as a typed record; lines that are not records are counted and skipped."""
        for batch in self.record_batches():
            for line in batch:
                record = line.typed()
                if record is None:
                    self.stats.bad_lines += 1
                else:
                    yield record

    def _complete(self, line: bytes) -> bool:
        """Whether the file's unterminated last line is whole (JSON); counted when not."""
        if not line.strip():
            return False
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError:
            self.stats.truncated_tail = True
            log.warning("%s: the last line is cut short (killed writer?); skipped", self.path)
            return False
        return True


def _longest_valid_prefix(inflater: Any, data: bytes) -> tuple[int, bytes]:
    """How much of data inflates without error from inflater's state, and its output."""
    low, high = 0, len(data)
    best = b""
    while high - low > 1:
        middle = (low + high) // 2
        trial = inflater.copy()
        try:
            out = trial.decompress(data[:middle])
        except zlib.error:
            high = middle
        else:
            low, best = middle, out
    return low, best


# ------------------------------------------------------------------------------ the scan


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

    def __init__(self) -> None:
        self.matches: dict[int, tuple[int, str, Decimal, int | None, int | None]] = {}
        """Match id -> (ts, pair, price, entrustId, contractPositionId)."""
        self.new_positions: list[tuple[int, Any, Any]] = []
        """(record ts, pair, openingPrice as sent) of NEW position pushes, unchecked."""
        self.by_pair: dict[str, list[tuple[int, Decimal]]] = {}
        """Per pair, the (ts, price) of those matches, in the order found."""
        self._prices: dict[str, Decimal] = {}  # fill prices repeat: each text decoded once

    def page(self, record_ts: int, page: PageHead) -> None:
        """Take the matches of a match-result answer (a first look at its body)."""
        if page.code != 200 or not page.data:
            return
        matches = self.matches
        by_pair = self.by_pair
        known = self._prices
        for item in page.data:
            if item.id in matches:
                continue  # polls answer the newest page again and again: each match once
            raw = item.average_price
            price = known.get(raw) if type(raw) is str else None
            if price is None:
                price = _dec(raw)
                if price is not None and type(raw) is str and len(known) < 65536:
                    known[raw] = price
            pair = item.symbol
            if price is None or pair is None:
                continue
            ts = item.create_time_stamp
            if ts is None:
                ts = record_ts
            matches[item.id] = (ts, pair, price, item.entrust_id, item.contract_position_id)
            entries = by_pair.get(pair)
            if entries is None:
                entries = by_pair[pair] = []
            entries.append((ts, price))

    def frame(self, record_ts: int, frame: Any) -> None:
        """Take a parsed WebSocket frame: a NEW position push's openingPrice."""
        if type(frame) is not dict or frame.get("event") != "api_position":
            return
        data = frame.get("data")
        if type(data) is dict and data.get("changeType") == "NEW":
            self.new_positions.append((record_ts, data.get("symbol"), data.get("openingPrice")))

    def rows(
        self, positions: Literal["always", "fallback", "never"]
    ) -> list[tuple[int, str, Decimal, str]]:
        """Every price found as (ts, pair, price, source), by time then pair."""
        rows = [(ts, pair, price, "positions") for ts, pair, price in self._positions(positions)]
        rows.extend((ts, pair, price, "matches") for ts, pair, price, _, _ in self.matches.values())
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
        if positions == "always" or (positions == "fallback" and not self.matches):
            for ts, pair, raw in self.new_positions:
                price = _dec(raw)
                if price is not None and type(pair) is str:
                    rows.append((ts, pair, price))
        return rows


def scan(
    path: str | Path,
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
    """
    if not prices:
        index = RecordingIndex(prices_scanned=False)
        first_line, last_line = _scan_pass(path, [_BATCH_KEY], index, PriceFinder())
        if not index.own_order_ids:
            index.first_ts = _ts_of(first_line)
            index.last_ts = _ts_of(last_line)
            return index
    index = RecordingIndex()
    found = PriceFinder()
    keys = [_BATCH_KEY, _MATCHES_KEY]
    if positions == "always":
        keys.append(_NEW_KEY)
    first_line, last_line = _scan_pass(path, keys, index, found)
    if positions == "fallback" and not found.matches:
        _scan_pass(path, [_NEW_KEY], index, found)
    index.first_ts = _ts_of(first_line)
    index.last_ts = _ts_of(last_line)
    own = index.own_order_ids
    for match_id, (_, pair, _, entrust_id, position_id) in found.matches.items():
        if entrust_id is not None and entrust_id in own:
            index.own_match_ids.add(match_id)
            index.own_pairs.add(pair)
            if position_id is not None:
                index.own_position_ids.add(position_id)
    index.price_rows = found.rows(positions)
    return index


def _scan_pass(
    path: str | Path,
    keys: list[bytes],
    index: RecordingIndex,
    found: PriceFinder,
) -> tuple[bytes | None, bytes]:
    """Parse the lines holding any of keys; returns the first and last lines of the file."""
    reader = RecordingReader(path)
    if not reader.gzip and reader.size:
        return _scan_mapped(reader.path, keys, index, found)
    tail = b""
    first_line: bytes | None = None
    last_line = b""
    for chunk in reader.chunks():
        if tail:
            chunk = tail + chunk
        cut = chunk.rfind(b"\n")
        if cut < 0:
            tail = chunk
            continue
        tail = chunk[cut + 1 :]
        if first_line is None:
            first_line = chunk[: chunk.find(b"\n")]
        start = chunk.rfind(b"\n", 0, cut)
        last_line = chunk[start + 1 : cut]
        for key in keys:
            for line in _lines_with(chunk, key, cut):
                _scan_line(line, index, found)
    if tail.strip():
        last_line = tail
        if first_line is None:
            first_line = tail
        if any(key in tail for key in keys):
            _scan_line(tail, index, found)
    return first_line, last_line


def _scan_mapped(
    path: Path, keys: list[bytes], index: RecordingIndex, found: PriceFinder
) -> tuple[bytes | None, bytes]:
    """_scan_pass over a plain file mapped in memory: the searches read it in place."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        end = len(view)
        newline = view.find(b"\n")
        first_line = view[: newline if newline >= 0 else end]
        stop = end - 1 if view[end - 1 : end] == b"\n" else end
        last_line = view[view.rfind(b"\n", 0, stop) + 1 : stop]
        for key in keys:
            for line in _lines_with(view, key, end):
                _scan_line(line, index, found)
    return first_line, last_line


def _lines_with(chunk: bytes | mmap.mmap, key: bytes, end: int) -> Iterator[bytes]:
    """The lines of chunk[:end] that contain key, each once."""
    position = chunk.find(key, 0, end)
    while position >= 0:
        start = chunk.rfind(b"\n", 0, position) + 1
        stop = chunk.find(b"\n", position, end + 1)
        if stop < 0:
            stop = end
        yield chunk[start:stop]
        position = chunk.find(key, stop, end)


def _ts_of(line: bytes | None) -> int | None:
    if not line:
        return None
    try:
        record = _LINE.decode(line)
    except _LINE_ERRORS:
        return None
    return record.ts if type(record.ts) is int else int(record.ts)


def _dec(value: Any) -> Decimal | None:
    if type(value) is not str and type(value) is not int:
        return None  # None, or a float: not a price the venue sends
    try:
        result = Decimal(value)
    except InvalidOperation:
        return None
    return result if result.is_finite() and result > 0 else None


def _scan_line(line: bytes, index: RecordingIndex, found: PriceFinder) -> None:
    try:
        record = _LINE.decode(line).typed()
    except _LINE_ERRORS:
        return
    if isinstance(record, WsRecord):
        with contextlib.suppress(orjson.JSONDecodeError):
            found.frame(record.ts, orjson.loads(record.frame))
        return
    if record is None:
        return
    try:
        if record.path == BATCH_CREATE_PATH:
            answer = peek_batch_answer(record.body)
            if answer.code == 200 and answer.data:
                index.own_order_ids.update(
                    o.order_id for o in answer.data if o.order_id is not None
                )
        elif record.path == MATCHES_PATH:
            found.page(record.ts, peek_match_page(record.body))
    except PEEK_ERRORS:
        pass  # an answer the replay will count as an error too
