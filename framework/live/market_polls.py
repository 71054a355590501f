"""The market's REST polls: a pair's mark or index price every few seconds.

The venue pushes no mark or index price (VENUE-FACTS "Market data"), and the mark is the risk
gate's first reference price, so the node asks for it: one apscheduler job per pair and kind
(:class:`~framework.live.interval_job.IntervalJob`: a slow poll is never run twice at once)
every ``mark_interval_s`` / ``index_interval_s``, through the node's REST client (so a
recording keeps the answers beside the rest), decoded with
:class:`~framework.venue.market.MarketCodec`, the record handed to the kernel's intake.

A failed poll (no answer, HTTP 500, an answer that does not read as a price) is counted and
told in one line at most once a minute per pair and kind (``told``), and the next poll tries
again: it never stops the node. HTTP 404 says the venue does not offer the path: told once,
and that poll stops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from framework.live.interval_job import IntervalJob
from framework.venue.errors import ExtensionUnavailable, FrameworkError
from framework.venue.market import (
    DEFAULT_MARKET_CODEC,
    IndexPrice,
    MarketCodec,
    MarketPaths,
    MarkPrice,
    market_request,
)
from framework.venue.requests import PreparedRequest

__all__ = ["KINDS", "PricePoll"]

KINDS: Final = ("mark", "index")
"""What a PricePoll asks: the mark price or the index price."""

Send = Callable[[PreparedRequest], Awaitable[tuple[int, bytes]]]
"""RestClient.send: (status, body) of a prepared request, or a TransportError."""


class PricePoll(IntervalJob):
    """Polls one pair's mark or index price every interval_s; each price goes to on_record."""

    def __init__(
        self,
        send: Send,
        kind: str,
        pair: str,
        interval_s: float,
        *,
        on_record: Callable[[MarkPrice | IndexPrice], None],
        told: Callable[[str, str], object],
        on_answer: Callable[[str, str, bytes], None] | None = None,
        codec: MarketCodec = DEFAULT_MARKET_CODEC,
        paths: MarketPaths | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"PricePoll kind: expected one of {KINDS}, got {kind!r}")
        super().__init__(interval_s)
        self.JOB_ID = f"market-{kind}:{pair}"
        self.JOB_NAME = f"{kind} price poll of {pair}"
        self.kind = kind
        self.pair = pair
        self._send = send
        self._on_record = on_record
        self._told = told
        self._on_answer = on_answer
        """(kind, pair, body) of each answer fed: the recorder's market line."""
        paths = paths if paths is not None else MarketPaths()
        self.path = paths.mark_price if kind == "mark" else paths.index_price
        self._decode = codec.mark_price if kind == "mark" else codec.index_price
        self.polls = 0
        """Polls answered with a price."""
        self.errors = 0
        """Polls that failed."""
        self.off = False
        """True once the venue answered 404: the path is not offered, polls stopped."""

    def __repr__(self) -> str:
        return f"PricePoll({self.kind!r}, {self.pair!r}, interval_s={self.interval_s})"

    def round(self) -> Callable[[], Awaitable[Any]]:
        """The job's round: poll."""
        return self.poll

    async def poll(self) -> bool:
        """Ask once; True when a price was handed over (a failure is told, never raised)."""
        if self.off:
            return False
        request = market_request(self.path, pairName=self.pair)
        try:
            status, body = await self._send(request)
            record = self._decode(status, body, self.pair, path=self.path)
        except ExtensionUnavailable as exc:
            self.errors += 1
            self.off = True
            self.shutdown()
            # Told as every failure is (the doctor's finding collects them), once: no more polls.
            self._told(f"{self.kind} {self.pair}", f"not offered ({exc}): polls stopped")
            return False
        except (FrameworkError, OSError) as exc:
            self.errors += 1
            self._told(f"{self.kind} {self.pair}", str(exc))
            return False
        self.polls += 1
        if self._on_answer is not None:
            self._on_answer(self.kind, self.pair, body)
        self._on_record(record)
        return True
