"""The recorder: the live node's hooks writing every inbound WebSocket frame and REST answer.

The file, its format and its crash safety are :mod:`framework.recording` (its
:class:`~framework.recording.RecordingWriter`). Here: what the node records. Only what came
in is written: frames and response bodies, plus the request's path and query (which carry no
signature: that travels in headers); values the node knows to be secret (API key, API
secret) never. A newest-page match-list answer (no ``matchId``) equal to the last one written
for its query, but for its ``sid``, is not written: it carries no information, and the replay
reads the gap as that same answer (nothing new to deliver). Readers of older recordings are
unaffected. Market data: WebSocket market frames are ``ws`` lines (``on_ws``); a mark or index
price the market feed polled and fed is a ``market`` line (``on_market``), and its REST
answer is not written a second time as a ``rest`` line. The hooks never raise: a write failure is logged once, counted, and recording
stops.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from framework.recording import RecordingWriter
from framework.venue.market import MarketPaths
from framework.venue.requests import MATCHES_PATH

__all__ = ["Recorder"]

_SID: Final = re.compile(rb'"sid"\s*:\s*("[^"]*"|\d+|null)')

log = logging.getLogger("framework.recorder")
_MARKET_PATHS: Final = frozenset(attrs.astuple(MarketPaths()))


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

    def on_rest(self, path: str, query: str, body: bytes, /, request: bytes | None = None) -> None:
        """RestClient observer: record one answer (path, query without timestamp, body).

        ``request``: the JSON body a batchCreate sent (orders and the ``timestamp`` they left
        at), written beside its answer so calibration sees what was asked and when.

        A newest-page match-list answer equal to the last one of its query (but for its
        ``sid``) is not written: it carries no information, and a replay reads the gap as
        that same answer (it would deliver nothing new). About 98% of a recording was such
        pages.
        """
        if self.failed or path in _MARKET_PATHS:  # fed market answers: on_market's lines
            return
        if self.dedupe and path == MATCHES_PATH and "matchId=" not in query:
            key = _SID.sub(b"", body)
            if self._last_page.get(query) == key:
                self.skipped += 1
                self.skipped_bytes += len(body)
                return
            self._last_page[query] = key  # one entry per pair and page size
        try:
            self.writer.write_rest(self._now_ms(), path, query, body, request=request)
        except (OSError, ValueError) as exc:
            self._failed(exc)

    def on_market(self, kind: str, pair: str, body: bytes) -> None:
        """A public market answer the live feed fed (a mark or index poll): a market line."""
        if self.failed:
            return
        try:
            self.writer.write_market(self._now_ms(), kind, pair, body)
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
