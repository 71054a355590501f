"""Writing recordings: each inbound message as one JSON line, crash-safe (the format and its
reader are :mod:`framework.recording`). Apart from the reader because the live node writes
and the backtest reads: neither needs the other's half.

Each line (or small batch, ``flush_every``) goes to the file in one unbuffered write, so a
killed process leaves every line written so far. A new file with a ``.gz`` name is
compressed and sync-flushed at the same points (``Z_SYNC_FLUSH``): a cut file lacks only the
gzip trailer and reads back up to its last line. An existing file is appended to in the
encoding it holds, whatever its name (a plain file's cut last line is closed with a newline
first; a gzip file gets a new member). Values the writer is told are secret are replaced by
``***``, and credential keys an acknowledgement might echo (apiKey, signature, secret) are
dropped from it.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Final

import orjson

from framework.gzip_members import is_gzip

__all__ = ["CREDENTIAL_KEYS", "MARKET_KINDS", "RecordingWriter"]

CREDENTIAL_KEYS: Final = frozenset({"apiKey", "signature", "secret", "apiSecret", "privateKey"})
"""Keys dropped from any recorded WebSocket frame that carries them (an echoing ack)."""

MARKET_KINDS: Final = frozenset({"mark", "index", "depth", "trades", "kline"})
"""The public answers a market line may hold: mark and index price polls, a depth (book), a
trades and a kline (bars, with their period) answer."""

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

    def write_rest(
        self,
        ts: int,
        path: str,
        query: str,
        body: str | bytes,
        *,
        request: str | bytes | None = None,
    ) -> None:
        """Record one REST answer received at ts: path, query without timestamp, raw body.

        request: the JSON body sent, for the calls that keep it (batchCreate); a ``request``
        key of the line.
        """
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        sent = request.decode("utf-8", "replace") if isinstance(request, bytes) else request
        if self._redact:
            text = self._scrub(text)
            query = self._scrub(query)
            sent = None if sent is None else self._scrub(sent)
        record = {"ts": ts, "source": "rest", "path": path, "query": query, "body": text}
        if sent is not None:
            record["request"] = sent
        self._add(orjson.dumps(record, option=_NEWLINE))

    def write_market(
        self, ts: int, kind: str, pair: str, body: str | bytes, *, period: str | None = None
    ) -> None:
        """Record a public answer the live market feed fed its strategies (a ``market`` line).

        kind: mark, index, depth, trades or kline (MARKET_KINDS); pair: the pair asked for;
        period: a kline answer's (and only its); body: the raw answer text. E.g. a mark poll:
        ``write_market(now_ms, "mark", "ETH-USD", body)``.
        """
        if kind not in MARKET_KINDS:
            raise ValueError(f"write_market: kind {kind!r} is not one of {sorted(MARKET_KINDS)}")
        if (kind == "kline") != bool(period):
            raise ValueError(f"write_market: a period goes with kline only, got {period!r}")
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        if self._redact:
            text = self._scrub(text)
        record = {"ts": ts, "source": "market", "kind": kind, "pair": pair, "body": text}
        if period is not None:
            record["period"] = period
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
