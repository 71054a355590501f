"""Recordings: JSON lines, plain or gzip (known by its first bytes), written crash-safe and
read fast and tolerantly. The live node records with :class:`RecordingWriter` (through
:class:`framework.live.recorder.Recorder`); a backtest replays with :class:`RecordingReader`.

The format (a public contract) is one JSON object per line and per inbound message, in the
order they arrived::

    {"ts": 1700000000123, "source": "ws", "frame": "<raw WebSocket text frame>"}
    {"ts": 1700000000456, "source": "rest", "path": "/api/...", "query": "pageSize=50",
     "body": "<raw response text>"}

``ts`` is epoch milliseconds (a number); ``query`` never holds the timestamp (nor anything
secret). A file is gzip when it starts with gzip's magic bytes, whatever its name. The reader
decodes lines a piece of about 128 KB at a time with one msgspec ``decode_lines`` call into
:class:`WsLine` / :class:`RestLine` structs (a tagged union: msgspec checks in C that a line is
a record; no per-line I/O call, no dict per line). A plain file is read from a memory map; a
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

Writing: each line (or small batch, ``flush_every``) goes to the file in one unbuffered
write, so a killed process leaves every line written so far. A new file with a ``.gz`` name
is compressed and sync-flushed at the same points (``Z_SYNC_FLUSH``): a cut file lacks only
the gzip trailer and reads back up to its last line. An existing file is appended to in the
encoding it holds, whatever its name, as the reader finds it (a plain file's cut last line
is closed with a newline first; a gzip file gets a new member). Values the writer is told are
secret are replaced by ``***``, and credential keys an acknowledgement might echo (apiKey,
signature, secret) are dropped from it.

What a backtest learns from a recording before replaying it is :mod:`framework.backtest.scan`.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Final, TypeAlias

import attrs
import msgspec
import orjson

from framework.gzip_members import GZIP_MAGIC, inflate, is_gzip
from framework.venue.errors import FrameworkError

__all__ = [
    "CHUNK_SIZE",
    "CREDENTIAL_KEYS",
    "GZIP_MAGIC",
    "LINE_ERRORS",
    "MAX_LINE",
    "PIECE_SIZE",
    "BadLine",
    "LineRecord",
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


CREDENTIAL_KEYS: Final = frozenset({"apiKey", "signature", "secret", "apiSecret", "privateKey"})
"""Keys dropped from any recorded WebSocket frame that carries them (an echoing ack)."""

_NEWLINE: Final = orjson.OPT_APPEND_NEWLINE


class RecordingWriter:
    """Writes records to a JSON lines file (gzip, sync-flushed, for a new file named .gz)."""

    def __init__(
        self,
        path: str | Path,
        *,
        append: bool = True,
        flush_every: int = 1,
        level: int = 6,
        redact: Sequence[str] = (),
    ) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every must be at least 1, got {flush_every}")
        self.path = Path(path)
        self.flush_every = flush_every
        self._redact = tuple(s for s in redact if s)
        self._pending: list[bytes] = []
        self.lines = 0
        self.bytes_written = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existed = self.path.exists() and self.path.stat().st_size > 0
        if existed and not append:
            raise FileExistsError(f"{self.path} exists (pass append=True to add to it)")
        self.gzip = is_gzip(self.path) if existed else self.path.name.endswith(".gz")
        # Unbuffered: one os-level write per flush, so a kill never leaves half a buffer.
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 (closed in close())
        self._deflate = zlib.compressobj(level, zlib.DEFLATED, 31) if self.gzip else None
        if existed and not self.gzip and not _ends_with_newline(self.path):
            self._file.write(b"\n")

    def __repr__(self) -> str:
        return f"RecordingWriter({str(self.path)!r}, lines={self.lines})"

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return self._file.closed

    def redact(self, *values: str) -> None:
        """Never write these values (API key, secret): each is replaced by ``***``."""
        self._redact = tuple(dict.fromkeys((*self._redact, *(v for v in values if v))))

    def write_ws(self, ts: int, frame: str) -> None:
        """Record one WebSocket text frame received at ts (epoch ms)."""
        if self._redact or "_res" in frame:
            frame = self._scrub_frame(frame)
        self._add(orjson.dumps({"ts": ts, "source": "ws", "frame": frame}, option=_NEWLINE))

    def write_rest(self, ts: int, path: str, query: str, body: str | bytes) -> None:
        """Record one REST answer received at ts: path, query without timestamp, raw body."""
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        if self._redact:
            text = self._scrub(text)
            query = self._scrub(query)
        record = {"ts": ts, "source": "rest", "path": path, "query": query, "body": text}
        self._add(orjson.dumps(record, option=_NEWLINE))

    def write_line(self, line: bytes) -> None:
        """Append one already encoded record line (with its newline); used by generators."""
        self._add(line)

    def _add(self, line: bytes) -> None:
        self._pending.append(line)
        if len(self._pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write what is pending in one write (sync-flushed when compressing)."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        self.lines += len(self._pending)
        self._pending.clear()
        if self._deflate is not None:
            data = self._deflate.compress(data) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
        self._write(data)

    def close(self) -> None:
        """Flush, finish the gzip member, close the file (idempotent)."""
        if self._file.closed:
            return
        try:
            self.flush()
            if self._deflate is not None:
                self._write(self._deflate.flush(zlib.Z_FINISH))
        finally:
            self._file.close()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._file.write(view)
            if written is None:  # pragma: no cover - only for non-blocking files
                continue
            view = view[written:]
        self.bytes_written += len(data)

    def _scrub(self, text: str) -> str:
        for secret in self._redact:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def _scrub_frame(self, frame: str) -> str:
        frame = self._scrub(frame)
        if not any(key in frame for key in CREDENTIAL_KEYS):
            return frame
        try:
            obj = orjson.loads(frame)
        except orjson.JSONDecodeError:
            return frame
        if type(obj) is not dict or not CREDENTIAL_KEYS.intersection(obj):
            return frame
        return orjson.dumps({k: v for k, v in obj.items() if k not in CREDENTIAL_KEYS}).decode()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


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
    source: ClassVar[str] = "rest"
    frame: ClassVar[None] = None

    def typed(self) -> RestRecord:
        """The line as a RestRecord."""
        ts = self.ts if type(self.ts) is int else int(self.ts)
        return RestRecord(ts, self.path, self.query or "", self.body)


LineRecord: TypeAlias = WsLine | RestLine
"""One line as read: ``frame`` is None for a REST line (and path, query, body for a ws one)."""

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
        source not ws or rest, frame or path and body missing, a field of the wrong type,
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

    def records(self) -> Iterator[WsRecord | RestRecord]:
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
