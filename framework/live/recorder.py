"""The recorder: every inbound WebSocket frame and REST answer, as JSON lines, crash-safe.

Format (a public contract; read back by :mod:`framework.backtest.recording`): one JSON object
per line and per inbound message, in arrival order::

    {"ts": <epoch ms>, "source": "ws", "frame": "<raw text frame>"}
    {"ts": <epoch ms>, "source": "rest", "path": "<endpoint path>",
     "query": "<query string without timestamp>", "body": "<raw response text>"}

A newest-page match-list answer (no ``matchId``) equal to the last one written for its query,
but for its ``sid``, is not written: it carries no information, and the replay reads the gap
as that same answer (nothing new to deliver). Readers of older recordings are unaffected.

Only what came in is written: frames and response bodies, plus the request's path and query
(which carry no signature: that travels in headers). Values the node knows to be secret
(API key, API secret) are replaced by ``***`` wherever they would appear, and credential
keys an acknowledgement might echo (apiKey, signature, secret) are dropped from it.

Crash safety: each line (or small batch, ``flush_every``) goes to the file in one unbuffered
write, so a killed process leaves every line written so far. A new file with a ``.gz`` name
is compressed and sync-flushed at the same points (``Z_SYNC_FLUSH``): a cut file lacks only
the gzip trailer and reads back up to its last line. An existing file is appended to in the
encoding it holds, whatever its name, as the reader finds it (a plain file's cut last line
is closed with a newline first; a gzip file gets a new member).
The live hooks never raise: a write failure is logged once, counted, and recording stops.
"""

from __future__ import annotations

import logging
import os
import re
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import orjson

from framework.recording_format import is_gzip
from framework.venue.requests import MATCHES_PATH

__all__ = ["CREDENTIAL_KEYS", "Recorder", "RecordingWriter"]

_SID: Final = re.compile(rb'"sid"\s*:\s*("[^"]*"|\d+|null)')

log = logging.getLogger("framework.recorder")

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


class Recorder:
    """The live hooks: StreamClient's ``on_raw`` and RestClient's ``observer``; never raise."""

    def __init__(
        self,
        path: str | Path,
        *,
        now_ms: Callable[[], int],
        redact: Sequence[str] = (),
        flush_every: int = 1,
        dedupe: bool = True,
    ) -> None:
        self.writer = RecordingWriter(path, append=True, flush_every=flush_every, redact=redact)
        self._now_ms = now_ms
        self.errors = 0
        self.failed = False
        self.dedupe = dedupe
        self.skipped = 0
        """Match-list answers not written: the same as the last one of their query."""
        self.skipped_bytes = 0
        self._last_page: dict[str, bytes] = {}  # newest-page query -> its last answer, sid out
        log.info("recording to %s", self.writer.path)

    def redact(self, *values: str) -> None:
        """Never write these values (the node passes its API key and secret)."""
        self.writer.redact(*values)

    @property
    def path(self) -> Path:
        """Where the recording goes."""
        return self.writer.path

    @property
    def lines(self) -> int:
        """Lines written so far."""
        return self.writer.lines + len(self.writer._pending)

    def on_ws(self, frame: str) -> None:
        """StreamClient on_raw: record one inbound text frame."""
        if self.failed:
            return
        try:
            self.writer.write_ws(self._now_ms(), frame)
        except (OSError, ValueError) as exc:
            self._failed(exc)

    def on_rest(self, path: str, query: str, body: bytes) -> None:
        """RestClient observer: record one answer (path, query without timestamp, body).

        A newest-page match-list answer equal to the last one of its query (but for its
        ``sid``) is not written: it carries no information, and a replay reads the gap as
        that same answer (it would deliver nothing new). About 98% of a recording was such
        pages.
        """
        if self.failed:
            return
        if self.dedupe and path == MATCHES_PATH and "matchId=" not in query:
            key = _SID.sub(b"", body)
            if self._last_page.get(query) == key:
                self.skipped += 1
                self.skipped_bytes += len(body)
                return
            self._last_page[query] = key  # one entry per pair and page size
        try:
            self.writer.write_rest(self._now_ms(), path, query, body)
        except (OSError, ValueError) as exc:
            self._failed(exc)

    def close(self) -> None:
        """Flush and close the file."""
        try:
            self.writer.close()
        except OSError as exc:
            self._failed(exc)
        else:
            log.info(
                "recording closed",
                extra={
                    "path": str(self.path),
                    "lines": self.lines,
                    "bytes": self.writer.bytes_written,
                    "repeated_pages_skipped": self.skipped,
                    "skipped_bytes": self.skipped_bytes,
                },
            )

    def _failed(self, exc: Any) -> None:
        self.errors += 1
        if not self.failed:
            self.failed = True
            log.error("recording to %s failed, recording stopped: %s", self.writer.path, exc)
