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

What a backtest learns from a recording before replaying it is :mod:`framework.backtest.scan`.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec
import orjson

__all__ = [
    "CHUNK_SIZE",
    "LINE_ERRORS",
    "PIECE_SIZE",
    "LineRecord",
    "ReaderStats",
    "RecordingReader",
    "RestRecord",
    "WsRecord",
    "decode_line",
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
        self._mapping: mmap.mmap | None = None

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
        if not self.gzip and self.size:
            yield from self._mapped_pieces()
            return
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
                    stop = mapped.find(b"\n", start) + 1
                    if not stop:
                        tail = bytes(view[start:])
                        if tail.strip() and self._complete(tail):
                            yield tail
                        break
                self.stats.bytes_read = stop
                yield view[start:stop]
                start = stop
        finally:
            self.stats.bytes_read = end
            view.release()
            with contextlib.suppress(BufferError):  # a piece still held: closed when freed
                mapped.close()

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
