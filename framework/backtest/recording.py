"""Reading recordings: JSON lines, gzip when the name ends in .gz, fast and tolerant.

The format (a public contract, written by :mod:`framework.live.recorder`) is one JSON object
per line and per inbound message, in the order they arrived::

    {"ts": 1700000000123, "source": "ws", "frame": "<raw WebSocket text frame>"}
    {"ts": 1700000000456, "source": "rest", "path": "/api/...", "query": "pairName=ETH-USD",
     "body": "<raw response text>"}

``ts`` is epoch milliseconds (a number); ``query`` never holds the timestamp (nor anything
secret). The reader decompresses and splits in large chunks (one ``bytes.split`` per few MB,
no per-line I/O call), and it is tolerant where a killed writer leaves marks: an unterminated
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

import logging
import zlib
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final, Literal

import attrs
import orjson

from framework.venue.requests import BATCH_CREATE_PATH, MATCHES_PATH

__all__ = [
    "CHUNK_SIZE",
    "PricePoint",
    "ReaderStats",
    "RecordingIndex",
    "RecordingReader",
    "RestRecord",
    "WsRecord",
    "parse_record",
    "scan",
]

log = logging.getLogger("framework.recording")

CHUNK_SIZE: Final = 4 << 20
"""Bytes of (decompressed) text split at once."""

_GZIP_MAGIC: Final = b"\x1f\x8b\x08"


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


def parse_record(obj: Any) -> WsRecord | RestRecord | None:
    """A typed record from one parsed line, or None when the line is not a record."""
    if type(obj) is not dict:
        return None
    ts = obj.get("ts")
    if type(ts) is float:
        ts = int(ts)
    elif type(ts) is not int:
        return None
    source = obj.get("source")
    if source == "ws":
        frame = obj.get("frame")
        return WsRecord(ts, frame) if type(frame) is str else None
    if source == "rest":
        path, query, body = obj.get("path"), obj.get("query", ""), obj.get("body")
        if type(path) is str and type(query) is str and type(body) is str:
            return RestRecord(ts, path, query, body)
    return None


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

    # ---- lines

    def line_batches(self) -> Iterator[list[bytes]]:
        """Lists of lines (a plain file's keep their newline); a cut last line is dropped.

        Blank lines may be included (callers skip what does not parse). The last line of
        the file, if it has no newline and is not JSON, is counted as truncated and dropped.
        """
        stats = self.stats
        batches = self._split(self.chunks()) if self.gzip else self._readlines()
        for lines in batches:
            last = lines[-1]
            if not last.endswith(b"\n") and not self._complete(last):
                lines.pop()
                if not lines:
                    continue
            stats.lines += len(lines)
            yield lines

    def _readlines(self) -> Iterator[list[bytes]]:
        # readlines(hint) splits in C straight from the buffer: the fastest way to lines.
        stats = self.stats
        with open(self.path, "rb") as handle:
            while lines := handle.readlines(self.chunk_size):
                stats.bytes_read = handle.tell()
                yield lines

    @staticmethod
    def _split(chunks: Iterator[bytes]) -> Iterator[list[bytes]]:
        tail = b""
        for chunk in chunks:
            lines = chunk.split(b"\n")
            if tail:
                lines[0] = tail + lines[0]
            tail = lines.pop()
            if lines:
                yield lines
        if tail.strip():
            yield [tail]

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

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every line parsed as a JSON object; other lines are counted and skipped."""
        loads = orjson.loads
        stats = self.stats
        for batch in self.line_batches():
            for line in batch:
                try:
                    obj = loads(line)
                except orjson.JSONDecodeError:
                    if line.strip():
                        stats.bad_lines += 1
                    continue
                if type(obj) is dict:
                    yield obj
                else:
                    stats.bad_lines += 1

    def records(self) -> Iterator[WsRecord | RestRecord]:
        """Every line as a typed record; lines that are not records are counted and skipped."""
        for obj in self:
            record = parse_record(obj)
            if record is None:
                self.stats.bad_lines += 1
            else:
                yield record


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
    prices: list[PricePoint] = attrs.field(factory=list)
    lines: int = 0

    @property
    def has_own_orders(self) -> bool:
        """True when the recorded node placed orders (batchCreate answers were recorded)."""
        return bool(self.own_order_ids)


_BATCH_KEY: Final = BATCH_CREATE_PATH.encode()
_MATCHES_KEY: Final = MATCHES_PATH.encode()
_NEW_KEY: Final = b'\\"NEW\\"'


def scan(
    path: str | Path, *, positions: Literal["always", "fallback", "never"] = "fallback"
) -> RecordingIndex:
    """One quick pass: time span, the recorded node's own orders and fills, price points.

    Own orders are the orderIds of recorded batchCreate answers; their matches (entrustId)
    name own positions (contractPositionId). Prices: every distinct match's averagePrice at
    its createTimeStamp, and the openingPrice of NEW position pushes at their record time
    (``always``, or with ``fallback`` only when the recording holds no match at all: the
    same fills' prices, found by a second pass). Only lines holding those keys are parsed.
    """
    index = RecordingIndex()
    matches: dict[int, tuple[int, str, Decimal, int | None, int | None]] = {}
    keys = [_BATCH_KEY, _MATCHES_KEY]
    if positions == "always":
        keys.append(_NEW_KEY)
    first_line, last_line = _scan_pass(path, keys, index, matches)
    if positions == "fallback" and not matches:
        _scan_pass(path, [_NEW_KEY], index, matches)
    index.first_ts = _ts_of(first_line)
    index.last_ts = _ts_of(last_line)
    own = index.own_order_ids
    for match_id, (ts, pair, price, entrust_id, position_id) in matches.items():
        index.prices.append(PricePoint(ts, pair, price, "matches"))
        if entrust_id is not None and entrust_id in own:
            index.own_match_ids.add(match_id)
            index.own_pairs.add(pair)
            if position_id is not None:
                index.own_position_ids.add(position_id)
    index.prices.sort(key=PricePoint.key)
    return index


def _scan_pass(
    path: str | Path,
    keys: list[bytes],
    index: RecordingIndex,
    matches: dict[int, tuple[int, str, Decimal, int | None, int | None]],
) -> tuple[bytes | None, bytes]:
    """Parse the lines holding any of keys; returns the first and last lines of the file."""
    reader = RecordingReader(path)
    tail = b""
    first_line: bytes | None = None
    last_line = b""
    lines = 0
    for chunk in reader.chunks():
        if tail:
            chunk = tail + chunk
        cut = chunk.rfind(b"\n")
        if cut < 0:
            tail = chunk
            continue
        tail = chunk[cut + 1 :]
        lines += chunk.count(b"\n", 0, cut + 1)
        if first_line is None:
            first_line = chunk[: chunk.find(b"\n")]
        start = chunk.rfind(b"\n", 0, cut)
        last_line = chunk[start + 1 : cut]
        for key in keys:
            for line in _lines_with(chunk, key, cut):
                _scan_line(line, index, matches)
    if tail.strip():
        last_line = tail
        lines += 1
        if first_line is None:
            first_line = tail
        if any(key in tail for key in keys):
            _scan_line(tail, index, matches)
    index.lines = lines
    return first_line, last_line


def _lines_with(chunk: bytes, key: bytes, end: int) -> Iterator[bytes]:
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
        record = parse_record(orjson.loads(line))
    except orjson.JSONDecodeError:
        return None
    return None if record is None else record.ts


def _dec(value: Any) -> Decimal | None:
    if type(value) is not str and type(value) is not int:
        return None
    try:
        result = Decimal(value)
    except InvalidOperation:
        return None
    return result if result.is_finite() and result > 0 else None


def _scan_line(
    line: bytes,
    index: RecordingIndex,
    matches: dict[int, tuple[int, str, Decimal, int | None, int | None]],
) -> None:
    try:
        record = parse_record(orjson.loads(line))
    except orjson.JSONDecodeError:
        return
    if isinstance(record, WsRecord):
        try:
            frame = orjson.loads(record.frame)
        except orjson.JSONDecodeError:
            return
        data = frame.get("data") if type(frame) is dict else None
        if frame.get("event") == "api_position" and type(data) is dict:
            price = _dec(data.get("openingPrice"))
            pair = data.get("symbol")
            if price is not None and type(pair) is str and data.get("changeType") == "NEW":
                index.prices.append(PricePoint(record.ts, pair, price, "positions"))
        return
    if record is None:
        return
    try:
        body = orjson.loads(record.body)
    except orjson.JSONDecodeError:
        return
    if type(body) is not dict or body.get("code") != 200 or type(body.get("data")) is not list:
        return
    if record.path == BATCH_CREATE_PATH:
        for item in body["data"]:
            if type(item) is dict and type(item.get("orderId")) is int:
                index.own_order_ids.add(item["orderId"])
    elif record.path == MATCHES_PATH:
        for item in body["data"]:
            if type(item) is not dict or type(item.get("id")) is not int or item["id"] in matches:
                continue  # polls answer the newest page again and again: each match once
            price = _dec(item.get("averagePrice"))
            pair = item.get("symbol")
            ts = item.get("createTimeStamp")
            if price is None or type(pair) is not str:
                continue
            entrust = item.get("entrustId")
            position = item.get("contractPositionId")
            matches.setdefault(
                item["id"],
                (
                    ts if type(ts) is int else record.ts,
                    pair,
                    price,
                    entrust if type(entrust) is int else None,
                    position if type(position) is int else None,
                ),
            )
