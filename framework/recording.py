"""Recordings: JSON lines, plain or gzip (known by its first bytes), written crash-safe and
read fast and tolerantly. The live node records with :class:`RecordingWriter`
(:mod:`framework.recording_writer`, through :class:`framework.live.recorder.Recorder`); a
backtest replays with :class:`RecordingReader`.

The format (a public contract) is one JSON object per line and per inbound message, in the
order they arrived::

    {"ts": 1700000000123, "source": "ws", "frame": "<raw WebSocket text frame>"}
    {"ts": 1700000000456, "source": "rest", "path": "/api/...", "query": "pageSize=50",
     "body": "<raw response text>"}
    {"ts": 1700000000789, "source": "market", "kind": "mark", "pair": "ETH-USD",
     "body": "<raw response text>"}

``ts`` is epoch milliseconds (a number); ``query`` never holds the timestamp (nor anything
secret). Market data (issue 27) is kept beside the private pushes, in the order it came:

* A WebSocket market frame (``api_trade``, ``api_depth``, ``api_kline``) is a ``ws`` line
  like any frame (``Recorder.on_ws``); the replay tells it by its event.
* A public REST answer the live market feed handed to its strategies (a mark or index price
  poll, a depth, trades or kline answer) is a ``market`` line: ``kind`` names the answer
  (:data:`MARKET_KINDS`: mark, index, depth, trades, kline), ``pair`` the pair asked for,
  ``period`` a kline's period (the line has one only then), ``body`` the raw answer. The
  live feed writes it with :meth:`RecordingWriter.write_market` ``(ts, kind, pair, body,
  period=None)`` when it feeds the answer's records, and only then: a replay feeds every
  record of every market line, decoded as live (:class:`framework.venue.market.MarketCodec`).
  A market answer also written as a ``rest`` line (by the REST client's observer) is not
  replayed as market data: only the ``market`` line says it was fed.

Readers before market lines count a ``market`` line as one that is not a record; every
older recording reads as it did. A file is gzip when it starts with gzip's magic bytes,
whatever its name. The reader
decodes lines a piece of about 128 KB at a time with one msgspec ``decode_lines`` call into
:class:`WsLine` / :class:`RestLine` / :class:`MarketLine` structs (a tagged union: msgspec
checks in C that a line is a record; no per-line I/O call, no dict per line). A plain file
is read from a memory map; a
gzip one is inflated CHUNK_SIZE bytes at a time (zlib's ``max_length``), so memory is bounded
by that and MAX_LINE, never by the decompressed size. A piece holding a line that is not a
record is decoded again line by line, that line counted (with the number of the first) and
skipped, or refused in strict mode. Line numbers are found only when asked (a first bad line,
a first step back in time), by reading the file again up to that line: counting every line on
the way would cost a fifth of the inflating.

It is tolerant where a killed writer leaves marks: an unterminated last line that is not JSON
is counted as truncated and skipped, a gzip member cut short (the recorder sync-flushes each
line, so what it wrote is readable) is read up to its cut, and a later member appended by the
next run is found again. These, and the counts, are the reader's stats: it logs nothing (the
backtest says what it found in one line each).

What a backtest learns from a recording before replaying it is :mod:`framework.backtest.scan`.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Final, TypeAlias

import attrs
import msgspec
import orjson

from framework.gzip_members import GZIP_MAGIC, inflate, is_gzip
from framework.recording_writer import CREDENTIAL_KEYS, MARKET_KINDS, RecordingWriter
from framework.venue.errors import FrameworkError

__all__ = [
    "CHUNK_SIZE",
    "CREDENTIAL_KEYS",
    "GZIP_MAGIC",
    "LINE_ERRORS",
    "MARKET_KINDS",
    "MAX_LINE",
    "PIECE_SIZE",
    "BadLine",
    "LineRecord",
    "MarketLine",
    "ReaderStats",
    "RecordingReader",
    "RecordingWriter",
    "RestLine",
    "RestRecord",
    "WsLine",
    "WsRecord",
    "decode_line",
    "is_gzip",
]

CHUNK_SIZE: Final = 4 << 20
"""Bytes of (decompressed) text split at once."""

PIECE_SIZE: Final = 128 << 10
"""Bytes of lines decoded by one call: small enough for the records to stay in the CPU cache."""

MAX_LINE: Final = 64 << 20
"""Bytes of the longest line read (a recorded answer is at most 16 MB, escaped): a longer
one is not a record, counted and skipped unread."""


class WsLine(msgspec.Struct, tag_field="source", tag="ws", gc=False):
    """A WebSocket line as read: its time and the raw text frame."""

    ts: int | float
    """Epoch milliseconds."""
    frame: str
    """The raw WebSocket text frame."""
    source: ClassVar[str] = "ws"
    path: ClassVar[None] = None
    query: ClassVar[None] = None
    body: ClassVar[None] = None
    kind: ClassVar[None] = None

    def typed(self) -> WsRecord:
        """The line as a WsRecord."""
        return WsRecord(self.ts if type(self.ts) is int else int(self.ts), self.frame)


class RestLine(msgspec.Struct, tag_field="source", tag="rest", gc=False):
    """A REST line as read: its time, endpoint path, query and raw response body."""

    ts: int | float
    """Epoch milliseconds."""
    path: str
    """The endpoint path."""
    body: str
    """The raw response text."""
    query: str | None = None
    """The query string without timestamp."""
    request: str | None = None
    """The JSON body sent, where it is kept (batchCreate; absent in older recordings)."""
    source: ClassVar[str] = "rest"
    frame: ClassVar[None] = None
    kind: ClassVar[None] = None

    def typed(self) -> RestRecord:
        """The line as a RestRecord."""
        ts = self.ts if type(self.ts) is int else int(self.ts)
        return RestRecord(ts, self.path, self.query or "", self.body, self.request)


class MarketLine(msgspec.Struct, tag_field="source", tag="market", frozen=True, gc=False):
    """A market line as read (and as typed): a public answer the live market feed fed."""

    ts: int | float
    """Epoch milliseconds."""
    kind: str
    """Which answer: mark, index, depth, trades or kline (MARKET_KINDS)."""
    pair: str
    """The pair asked for."""
    body: str
    """The raw response text."""
    period: str | None = None
    """A kline answer's period."""
    source: ClassVar[str] = "market"
    frame: ClassVar[None] = None
    path: ClassVar[None] = None
    query: ClassVar[None] = None

    def typed(self) -> MarketLine:
        """The line itself, its ts an int."""
        return self if type(self.ts) is int else msgspec.structs.replace(self, ts=int(self.ts))


LineRecord: TypeAlias = WsLine | RestLine | MarketLine
"""One line as read: ``frame`` is None but for a ws line, ``kind`` but for a market line."""

_LINE: Final = msgspec.json.Decoder(LineRecord)
_LINE_ERRORS: Final = (msgspec.DecodeError,)

decode_line: Final = _LINE.decode
"""decode_line(line) is the LineRecord of one line; raises one of LINE_ERRORS when it is none."""
LINE_ERRORS: Final = _LINE_ERRORS
"""What decode_line raises for a line that is not a record."""


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
    request: str | None = None
    """The JSON body sent (batchCreate lines of recordings that keep it), else None."""


class BadLine(FrameworkError):
    """A line that is not a record, in strict mode: the file, its line number and why."""


@attrs.define
class ReaderStats:
    """What a reader saw: lines, records, lines skipped, and the marks of a cut file."""

    lines: int = 0
    bad_lines: int = 0
    first_bad_line: int | None = None
    """The line number of the first line that is not a record."""
    truncated_tail: bool = False
    cut_members: int = 0
    bytes_read: int = 0

    def as_dict(self) -> dict[str, int | bool | None]:
        """The counters as a plain dict."""
        return attrs.asdict(self)


class RecordingReader:
    """One pass over a recording file: raw chunks, line batches, parsed objects or records.

    strict: a line that is not a record raises :class:`BadLine` (naming file and line)
    instead of being counted and skipped.
    """

    def __init__(
        self, path: str | Path, *, chunk_size: int = CHUNK_SIZE, strict: bool = False
    ) -> None:
        self.path = Path(path)
        self.chunk_size = min(chunk_size, MAX_LINE)
        self.strict = strict
        self.stats = ReaderStats()
        self.size = self.path.stat().st_size
        self.gzip = bool(self.size) and is_gzip(self.path)
        self._mapping: mmap.mmap | None = None
        self._piece: bytes | memoryview = b""  # the piece decoded last, for line_of()
        self._piece_at = 0  # its offset in the (decompressed) text
        self._block_at = 0  # offset of the block line_blocks() yielded last
        self._counter: _LineCounter | None = None

    def __repr__(self) -> str:
        return f"RecordingReader({str(self.path)!r})"

    def mapping(self) -> mmap.mmap | None:
        """A plain, non-empty file mapped in memory (None for gzip or empty), kept open.

        A search over it before the pass (:func:`framework.backtest.scan.scan`) shares the
        pass's mapping, so the pages are mapped once. The pass closes it when done.
        """
        if self.gzip or not self.size:
            return None
        if self._mapping is None or self._mapping.closed:
            with open(self.path, "rb") as handle:
                self._mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        return self._mapping

    def close(self) -> None:
        """Close the mapping of the file, if a search left it open (a pass closes its own)."""
        if self._mapping is not None:
            with contextlib.suppress(BufferError):  # a piece still held: closed when freed
                self._mapping.close()
            self._mapping = None

    # ---- bytes

    def chunks(self) -> Iterator[bytes]:
        """The file's text in pieces of at most chunk_size bytes (inflated if gzip)."""
        with open(self.path, "rb") as handle:
            if not self.gzip:
                while data := handle.read(self.chunk_size):
                    self.stats.bytes_read += len(data)
                    yield data
                return
            yield from inflate(handle, self.chunk_size, self.stats)

    def line_blocks(self) -> Iterator[tuple[bytes, int, int]]:
        """The text as (buffer, start, end): buffer[start:end] holds whole lines.

        Only the file's last line may lack its newline. A line longer than MAX_LINE is
        counted as bad and left out, never held whole: memory stays within a chunk and
        MAX_LINE whatever the file holds.
        """
        parts: list[bytes] = []  # the start of a line cut at a chunk's end
        held = 0  # its length
        skipping = False  # that line is longer than MAX_LINE: dropped as it comes
        line_at = at = 0  # text offsets of that line and of the chunk
        for chunk in self.chunks():
            start = 0
            if parts or skipping:
                head = chunk.find(b"\n") + 1
                held += head or len(chunk)
                if held > MAX_LINE and not skipping:
                    skipping, parts = True, []
                if not head:  # the line goes on past this chunk
                    if not skipping:
                        parts.append(chunk)
                    at += len(chunk)
                    continue
                if skipping:
                    skipping = False
                    self._bad_line(line_at, 0, f"longer than {MAX_LINE} bytes")
                else:
                    parts.append(chunk[:head])
                    self._block_at = line_at
                    yield b"".join(parts), 0, held
                parts, held, start = [], 0, head
            end = chunk.rfind(b"\n") + 1
            if end > start:
                self._block_at = at + start
                yield chunk, start, end
                start = end
            if start < len(chunk):  # a line cut at this chunk's end
                parts, held, line_at = [chunk[start:]], len(chunk) - start, at + start
            at += len(chunk)
        if skipping:
            self._bad_line(line_at, 0, f"longer than {MAX_LINE} bytes")
        elif parts:
            tail = b"".join(parts)
            self._block_at = line_at
            yield tail, 0, len(tail)

    # ---- records

    def record_batches(self) -> Iterator[list[LineRecord]]:
        """The file's records, a list per piece of about PIECE_SIZE bytes; bad lines skipped.

        A line that is not a record (not JSON, not an object, ts missing or not a number,
        source not ws, rest or market, frame or path and body missing, a field of the wrong type,
        longer than MAX_LINE) is counted in stats.bad_lines (raises BadLine when strict); an
        unterminated last line that is not JSON is counted as truncated and dropped.
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

    def line_of(self, index: int) -> int:
        """The line number in the file of the index-th record of the last batch given."""
        number = self._line_at(self._piece_at)
        seen = 0
        for line in bytes(self._piece).split(b"\n"):
            if line.strip():
                try:
                    _LINE.decode(line)
                except _LINE_ERRORS:
                    pass
                else:
                    if seen == index:
                        return number
                    seen += 1
            number += 1
        raise IndexError(f"no record {index} in the last batch")

    def _decode_each(self, piece: bytes | memoryview) -> list[LineRecord]:
        decode = _LINE.decode
        records = []
        for number, line in enumerate(bytes(piece).split(b"\n")):
            if not line.strip():
                continue
            try:
                records.append(decode(line))
            except _LINE_ERRORS as exc:
                self._bad_line(self._piece_at, number, str(exc))
        return records

    def _bad_line(self, offset: int, index: int, why: str) -> None:
        """Count a line that is not a record: the index-th line from text offset offset."""
        stats = self.stats
        stats.bad_lines += 1
        stats.lines += 1
        if stats.first_bad_line is None or self.strict:
            number = self._line_at(offset) + index
            if stats.first_bad_line is None:
                stats.first_bad_line = number
            if self.strict:
                raise BadLine(f"recording {self.path}: line {number} is not a record ({why})")

    def _line_at(self, offset: int) -> int:
        counter = self._counter
        if counter is None or offset < counter.start:
            reread = RecordingReader(self.path, chunk_size=self.chunk_size)
            counter = self._counter = _LineCounter(reread.chunks())
        return counter.line_at(offset)

    def _pieces(self) -> Iterator[bytes | memoryview]:
        """Whole lines in pieces of about PIECE_SIZE bytes (a longer line is a piece alone)."""
        if not self.gzip and self.size:
            yield from self._mapped_pieces()
            return
        for block, start, end in self.line_blocks():
            base = self._block_at - start
            if block[end - 1] != 10:  # the file's unterminated last line, alone
                if self._complete(block[start:end]):
                    self._piece, self._piece_at = block, base + start
                    yield block[start:end]
                return
            view = memoryview(block)
            while start < end:
                stop = block.rfind(b"\n", start, min(start + PIECE_SIZE, end)) + 1
                if stop <= start:  # a line longer than a piece
                    stop = block.find(b"\n", start) + 1
                piece = self._piece = view[start:stop]
                self._piece_at = base + start
                yield piece
                start = stop

    def _mapped_pieces(self) -> Iterator[bytes | memoryview]:
        """_pieces of a plain file mapped in memory: views into the page cache, no copy."""
        mapped = self.mapping()
        assert mapped is not None  # a plain, non-empty file
        self._mapping = None  # this pass owns it now, and closes it
        view = memoryview(mapped)
        try:
            end, start = len(mapped), 0
            while start < end:
                stop = mapped.rfind(b"\n", start, min(start + PIECE_SIZE, end)) + 1
                if stop <= start:  # a line longer than a piece, or the unterminated last one
                    stop = mapped.find(b"\n", start) + 1 or end
                    if stop - start > MAX_LINE:
                        self._bad_line(start, 0, f"longer than {MAX_LINE} bytes")
                        start = stop
                        continue
                    if mapped[stop - 1] != 10:
                        tail = bytes(view[start:])
                        if self._complete(tail):
                            self._piece, self._piece_at = tail, start
                            yield tail
                        break
                self.stats.bytes_read = stop
                piece = self._piece = view[start:stop]
                self._piece_at = start
                yield piece
                start = stop
        finally:
            self.stats.bytes_read = end
            self._piece = b""
            view.release()
            with contextlib.suppress(BufferError):  # a piece still held: closed when freed
                mapped.close()

    def records(self) -> Iterator[WsRecord | RestRecord | MarketLine]:
        """Every line as a typed record; lines that are not records are counted and skipped."""
        for batch in self.record_batches():
            for line in batch:
                yield line.typed()

    def _complete(self, line: bytes) -> bool:
        """Whether the file's unterminated last line is whole (JSON); counted when not."""
        if not line.strip():
            return False
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError:
            self.stats.truncated_tail = True
            return False
        return True


class _LineCounter:
    """Line numbers of text offsets, from a second read of the file going no further."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._chunk = b""
        self.start = 0
        """The text offset of the chunk held (offsets before it need a new counter)."""
        self._line = 1  # the line number at start

    def line_at(self, offset: int) -> int:
        """The number of the line holding text offset offset (of a line's first byte)."""
        while offset > self.start + len(self._chunk):
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._line += self._chunk.count(b"\n")
            self.start += len(self._chunk)
            self._chunk = chunk
        return self._line + self._chunk.count(b"\n", 0, offset - self.start)
