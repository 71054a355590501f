"""The market a live node hears, as its config's ``market:`` section says: one object to plug in.

The node makes three calls (issue 27: "Sources ... the venue: WebSocket channels per pair plus
REST polls of mark and index on intervals"): :meth:`MarketFeed.plug` while it starts up,
:meth:`MarketFeed.start` and :meth:`MarketFeed.ready` before its strategies start (so that
``on_start`` reads a market: a mark to price a first market order by, a fresh price that is
not stale), and :meth:`MarketFeed.stop` when it stops. Records heard before the strategies
start are kept by the kernel's market view at once and reach the hooks right after
``on_start``, in order (the kernel holds them).
Plugging in declares the market records to the kernel (``kernel.feeds("market", ...)``),
loads the optional user source (``market.source``, built as ``cls("market", market.params)``
and run by the node as every source is), builds the WebSocket client
(:class:`~framework.live.market_stream.MarketStream`, for the pairs with channels) and the
price polls (:class:`~framework.live.market_polls.PricePoll`, for each pair and kind with an
interval above 0), and registers the market's metrics. Every record goes to the kernel's
intake; every raw WebSocket frame to the recorder when the node records (REST answers are
recorded by the REST client). Starting opens the socket and polls every price once at once
(the mark is the risk gate's reference: waiting a whole interval for it would delay a first
market order), then on the intervals.

Without a ``market:`` section (or with no pairs and no source) the feed does nothing.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.config import Config
from framework.engine.clock import Clock
from framework.engine.events import ConnectionChanged
from framework.engine.kernel import Kernel
from framework.engine.strategy import load_source
from framework.live.market_polls import PricePoll, Send
from framework.live.market_stream import (
    CHANNEL_OF,
    MarketStream,
    Told,
    subscriptions_of,
)
from framework.live.metrics import MarketGauges, Metrics
from framework.live.recorder import Recorder
from framework.venue.market import MarketRecord
from framework.venue.requests import RequestBuilder

__all__ = ["MARKET_RECORDS", "MarketFeed", "market_url"]

log = logging.getLogger("framework.market")

MARKET_RECORDS = tuple(CHANNEL_OF)
"""The record types the market feeds the kernel: Trade, Book, Bar, MarkPrice, IndexPrice."""


def market_url(ws_url: str, path: str) -> str:
    """The market socket's URL: the scheme and host of ws_url with path."""
    parts = urlsplit(ws_url)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class MarketFeed:
    """The node's market: a WebSocket client, the price polls and their metrics."""

    def __init__(self, intake: Callable[[MarketRecord], None]) -> None:
        self._intake = intake
        self.stream: MarketStream | None = None
        """The WebSocket client, None when no pair has a channel."""
        self.polls: list[PricePoll] = []
        self.poll_told = Told("failed poll:")
        """Failed polls per pair and kind (``mark ETH-USD``)."""
        self.stopped = False
        self._scope: anyio.CancelScope | None = None
        self._subscribed = anyio.Event()
        self._first_polls = anyio.Event()
        self._polls_out = 0

    def _recorded(self, recorder: Recorder | None) -> Callable[[str, str, bytes], None] | None:
        """A poll's answer to the recorder, unless the feed was stopped (then not fed either)."""
        if recorder is None:
            return None

        def record(kind: str, pair: str, body: bytes) -> None:
            if not self.stopped:
                recorder.on_market(kind, pair, body)

        return record

    def take(self, record: MarketRecord) -> None:
        """Hand one record to the intake, unless the feed was stopped (a poll still in flight)."""
        if not self.stopped:
            self._intake(record)

    def __repr__(self) -> str:
        return f"MarketFeed(stream={self.stream!r}, polls={len(self.polls)})"

    @classmethod
    def plug(
        cls,
        config: Config,
        kernel: Kernel,
        *,
        ws_url: str,
        builder: RequestBuilder,
        send: Send,
        intake: Callable[[MarketRecord], None] | None = None,
        recorder: Recorder | None = None,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> MarketFeed:
        """The feed of config's ``market:`` section, plugged into kernel (see the module).

        intake: where records go (default kernel.intake; the node passes it timed for its
        latency histogram). A user source that cannot be loaded raises ConfigError.
        """
        market, stream_cfg = config.market, config.stream
        clock = clock if clock is not None else kernel.clock
        feed = cls(intake if intake is not None else kernel.intake)
        if market.pairs:
            kernel.feeds("market", MARKET_RECORDS)
        if market.source is not None:
            kernel.add_source(load_source(market.source)("market", market.params))
        subscriptions = subscriptions_of(market)
        if subscriptions:
            feed.stream = MarketStream(
                market_url(ws_url, market.ws_path),
                builder,
                subscriptions,
                on_record=feed.take,
                clock=clock,
                on_raw=recorder.on_ws if recorder is not None else None,
                on_state=_state_reporter(kernel, metrics, feed),
                ack_timeout_s=stream_cfg.ack_timeout_s,
                ping_interval_s=stream_cfg.ping_interval_s,
                silence_timeout_s=stream_cfg.silence_timeout_s,
                backoff_initial_s=stream_cfg.backoff_initial_s,
                backoff_max_s=stream_cfg.backoff_max_s,
                rng=rng,
                send=send,  # the pair list's ids, for frames naming no pair
            )
        for pair, rules in market.pairs.items():
            intervals = {"mark": rules.mark_interval_s, "index": rules.index_interval_s}
            feed.polls += [
                PricePoll(
                    send,
                    kind,
                    pair,
                    every_s,
                    on_record=feed.take,
                    told=feed.poll_told,
                    on_answer=feed._recorded(recorder),
                )
                for kind, every_s in intervals.items()
                if every_s > 0
            ]
        if metrics is not None and (market.pairs or market.source is not None):
            feed.watch(metrics, kernel, list(market.pairs))
        return feed

    def watch(self, metrics: Metrics, kernel: Kernel, pairs: list[str]) -> None:
        """Expose the feed's metrics, with the age of pairs and of any other pair heard."""
        stream, view = self.stream, kernel.market

        def ages() -> dict[str, float | None]:
            return {pair: view.age(pair) for pair in (*pairs, *view.pairs())}

        metrics.watch_market(
            MarketGauges(
                events=self.events,
                ages=ages,
                gaps=lambda: stream.stats.gaps if stream is not None else 0,
                gap_seconds=lambda: stream.stats.gap_s if stream is not None else 0.0,
                malformed=lambda: stream.told.counts if stream is not None else {},
                poll_errors=self.poll_errors,
            ),
            websocket=stream is not None,
        )

    def events(self) -> dict[str, int]:
        """Channel (trade, depth, kline, mark, index) -> records handed to the intake."""
        out = dict(self.stream.stats.events) if self.stream is not None else {}
        for poll in self.polls:
            out[poll.kind] = out.get(poll.kind, 0) + poll.polls
        return out

    def poll_errors(self) -> Mapping[str, int]:
        """Kind (mark, index) -> polls that failed."""
        out: dict[str, int] = {}
        for poll in self.polls:
            out[poll.kind] = out.get(poll.kind, 0) + poll.errors
        return out

    async def ready(self, timeout_s: float) -> bool:
        """Wait until the socket is subscribed and every price was polled once (answered or
        failed), at most timeout_s; False when the time ran out (told in one line)."""
        with anyio.move_on_after(timeout_s):
            if self.stream is not None:
                await self._subscribed.wait()
            if self.polls:
                await self._first_polls.wait()
            return True
        log.warning("market: not ready within %g s; strategies start without it", timeout_s)
        return False

    def on_state(self, state: str) -> None:
        """The socket's state: subscribed ("connected") makes the feed ready."""
        if state == "connected":
            self._subscribed.set()

    def start(self, tg: anyio.abc.TaskGroup, scheduler: AsyncIOScheduler) -> None:
        """Open the socket and poll each price now, then on its interval (tg, scheduler)."""
        self._polls_out = len(self.polls)
        if not self.polls:
            self._first_polls.set()
        if self.stream is None and not self.polls:
            return
        self._scope = anyio.CancelScope()
        tg.start_soon(self._run, scheduler)
        if self.stream is not None:
            log.info("market stream starting", extra={"ws_url": self.stream.url})

    async def _run(self, scheduler: AsyncIOScheduler) -> None:
        """The socket and the first polls, until stop()."""
        assert self._scope is not None
        with self._scope:
            async with anyio.create_task_group() as tg:
                if self.stream is not None:
                    tg.start_soon(self.stream.run)
                for poll in self.polls:
                    tg.start_soon(self._first_poll, poll, scheduler)

    async def _first_poll(self, poll: PricePoll, scheduler: AsyncIOScheduler) -> None:
        """Poll now; then the poll's job, its first run one interval later (never two at once)."""
        await poll.poll()
        self._polls_out -= 1
        if not self._polls_out:
            self._first_polls.set()
        if not poll.off and not self.stopped:
            poll.start(scheduler)

    def stop(self) -> None:
        """Stop the polls and close the socket (idempotent): no market record comes after."""
        self.stopped = True
        for poll in self.polls:
            poll.shutdown()
        if self._scope is not None and not self._scope.cancel_called:
            self._scope.cancel()
            if self.stream is not None:
                self.stream.tell_open_gap()


def _state_reporter(
    kernel: Kernel, metrics: Metrics | None, feed: MarketFeed
) -> Callable[[str, str], None]:
    """The market socket's on_state: a log line, the metrics' component, ConnectionChanged."""

    def on_state(state: str, detail: str) -> None:
        feed.on_state(state)
        log.info("market %s", state, extra={"detail": detail} if detail else None)
        if metrics is not None:
            metrics.set_state("market", state)
        kernel.bus.publish(ConnectionChanged("market", state, detail))

    return on_state
