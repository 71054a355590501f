"""StreamClient: the venue's WebSocket (SPEC 6) with subscribe, keepalive, reconnect and resync.

One session: connect, send one signed subscribe per pair (api_position) and per settlement
coin (api_account), each with a fresh timestamp, and wait for every acknowledgement (an ack
with success false, or none within ``ack_timeout_s``, fails the session). Then the resync
coroutine runs (REST snapshots and an immediate match poll, see :class:`RestResync`) while
pushes keep flowing to ``on_frame``, each decoded once with the venue codec: every push it
decodes, of the venue's two types or a registered one
(:func:`framework.venue.codec.push_types`), is handed over.

Keepalive is the WebSocket protocol's own: a ping every ``ping_interval_s``; a connection that
leaves a ping unanswered for ``silence_timeout_s`` counts as dead. Any failure or disconnect
ends the session and a new one starts after a capped exponential backoff with full jitter
(delay drawn uniformly from 0 to min(backoff_max_s, backoff_initial_s * 2**n), n counting
failures since the last session that got subscribed), driven by stamina's retry loop. These
pieces are :mod:`framework.live.reconnect`'s, shared with the market feed.

The subscription protocol itself (subscribe messages, acknowledgement matching, duplicate
position pushes with bounded memory) is :class:`framework.venue.push.PushProtocol`, sans-I/O
and tested by feeding it frames; this module keeps the socket, keepalive and backoff. A
duplicate push is dropped and counted (``duplicates``).

A frame that is not JSON or does not fit its record, or carries an unknown event, is logged
with a bounded excerpt, counted and skipped: it never stops the stream. This module is the one
place where websockets errors become framework errors.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol

import anyio
import attrs
import orjson
import stamina
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, WebSocketException

from framework.engine.clock import Clock
from framework.engine.events import BalanceSynced, Event, PositionsSynced
from framework.engine.portfolio import Portfolio
from framework.engine.venue import Venue
from framework.live.reconnect import (
    Backoff,
    ReconnectingClient,
    StreamError,
    StreamLost,
    SubscribeRefused,
    SubscribeTimeout,
    describe,
    describe_close,
)
from framework.venue.codec import DEFAULT_CODEC, Codec
from framework.venue.errors import DecodeError
from framework.venue.models import (
    Position,
    PositionPush,
    SubscribeAck,
)
from framework.venue.push import PushProtocol
from framework.venue.push import SubscribeRefused as AckRefused
from framework.venue.requests import MAX_PAGE_SIZE, RequestBuilder, excerpt

__all__ = [
    "RestResync",
    "StreamClient",
    "StreamError",
    "StreamLost",
    "StreamStats",
    "SubscribeRefused",
    "SubscribeTimeout",
]

log = logging.getLogger("framework.stream")

_EXCERPT: Final = 160
_LOG_FIRST: Final = 20  # bad frames logged one by one; after that one line per _LOG_EVERY
_LOG_EVERY: Final = 1000
_MAX_POSITION_PAGES: Final = 50

FrameCallback = Callable[[object], None]
StateCallback = Callable[[str, str], None]


@attrs.define
class StreamStats:
    """Counters of one StreamClient, for metrics and the summary line."""

    connects: int = 0
    """Sessions that got every subscription acknowledged."""
    reconnects: int = 0
    """Subscribed sessions after the first one."""
    disconnects: int = 0
    failures: int = 0
    """Sessions that failed before every subscription was acknowledged."""
    frames: int = 0
    pushes: int = 0
    duplicates: int = 0
    acks: int = 0
    malformed: int = 0
    unknown_events: int = 0
    callback_errors: int = 0
    resyncs: int = 0
    resync_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return attrs.asdict(self)


class StreamClient(ReconnectingClient):
    """The venue's push stream for a set of pairs and coins; run() until cancelled."""

    name = "stream"
    url_key = "venue.ws_url"
    _log = log

    def __init__(
        self,
        ws_url: str,
        builder: RequestBuilder,
        *,
        pairs: Sequence[str],
        coins: Sequence[str],
        on_frame: FrameCallback,
        on_state: StateCallback | None = None,
        on_raw: Callable[[str], None] | None = None,
        resync: Callable[[], Awaitable[None]] | None = None,
        clock: Clock,
        ack_timeout_s: float = 5.0,
        ping_interval_s: float = 10.0,
        silence_timeout_s: float = 30.0,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 10.0,
        open_timeout_s: float = 10.0,
        close_timeout_s: float = 2.0,
        codec: Codec = DEFAULT_CODEC,
        rng: random.Random | None = None,
    ) -> None:
        if not pairs and not coins:
            raise ValueError("StreamClient needs at least one pair or coin to subscribe")
        self.protocol = PushProtocol(builder, pairs=pairs, coins=coins)
        """The subscription protocol (sans-I/O): messages, acks, duplicate pushes."""
        for name, value in (
            ("ack_timeout_s", ack_timeout_s),
            ("ping_interval_s", ping_interval_s),
            ("silence_timeout_s", silence_timeout_s),
            ("backoff_initial_s", backoff_initial_s),
            ("backoff_max_s", backoff_max_s),
        ):
            if not value > 0:
                raise ValueError(f"StreamClient {name}: expected a positive number, got {value!r}")
        self.ws_url = ws_url
        self._builder = builder
        self.pairs = tuple(dict.fromkeys(pairs))
        self.coins = tuple(dict.fromkeys(coins))
        self._on_frame = on_frame
        self._on_state = on_state
        self._on_raw = on_raw
        self._resync = resync
        self._clock = clock
        self.ack_timeout_s = ack_timeout_s
        self.ping_interval_s = ping_interval_s
        self.silence_timeout_s = silence_timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.open_timeout_s = open_timeout_s
        self.close_timeout_s = close_timeout_s
        self._codec = codec
        self._rng = rng if rng is not None else random.Random()
        self.backoff = Backoff(backoff_initial_s, backoff_max_s, self._rng)
        """The reconnect delays (failures since the last subscribed session)."""
        self.stats = StreamStats()
        self.state = "idle"
        self.last_error = ""

    def __repr__(self) -> str:
        return f"StreamClient({self.ws_url!r}, pairs={self.pairs!r}, coins={self.coins!r})"

    @property
    def _failures(self) -> int:
        """Failures since the last subscribed session (the backoff's exponent)."""
        return self.backoff.failures

    @_failures.setter
    def _failures(self, value: int) -> None:
        self.backoff.failures = value

    # ---- one session (ReconnectingClient: connect, subscribe, serve)

    @property
    def endpoint(self) -> str:
        """The stream's URL (venue.ws_url)."""
        return self.ws_url

    def _ended(self, reason: str) -> None:
        self.stats.disconnects += 1
        self.last_error = reason

    async def _serve(self, ws: ClientConnection) -> str:
        """A subscribed session: count it, resync alongside, hand frames over until it ends."""
        self.backoff.reset()
        self.stats.connects += 1
        if self.stats.connects > 1:
            self.stats.reconnects += 1
        self._set_state("connected", f"{len(self.pairs)} pairs, {len(self.coins)} coins")
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._run_resync)
            reason = await self._receive(ws)
            tg.cancel_scope.cancel()
        return reason

    def _failed(self, why: str) -> None:
        self.stats.failures += 1
        self.last_error = why
        self._set_state("failed", why)

    async def _subscribe(self, ws: ClientConnection) -> None:
        protocol = self.protocol
        for message in protocol.connect(self._clock.now_ms):
            await ws.send(orjson.dumps(message).decode())
        try:
            with anyio.fail_after(self.ack_timeout_s):
                while not protocol.subscribed:
                    frame = self._decode(await ws.recv())
                    if frame is None:
                        continue
                    if isinstance(frame, SubscribeAck):
                        self.stats.acks += 1
                        try:
                            protocol.ack(frame)
                        except AckRefused as exc:
                            raise SubscribeRefused(str(exc)) from None
                    else:
                        self._deliver(frame)
        except TimeoutError:
            missing = ", ".join(protocol.pending)
            raise SubscribeTimeout(
                f"no subscribe acknowledgement within {self.ack_timeout_s} s for {missing}"
            ) from None

    async def _run_resync(self) -> None:
        """Resync after subscribing; a failure is retried with backoff while connected."""
        if self._resync is None:
            return
        delays = Backoff(self.backoff_initial_s, self.backoff_max_s, self._rng)

        def backoff(exc: Exception) -> float:
            self.stats.resync_errors += 1
            delay = delays.delay()
            log.warning("stream: resync failed (%s); retrying in %.2f s", describe(exc), delay)
            self._set_state("resync_failed", describe(exc))
            return delay

        try:
            async for attempt in stamina.retry_context(on=backoff, attempts=None, timeout=None):
                with attempt:
                    self.stats.resyncs += 1
                    await self._resync()
        except Exception as exc:  # only when stamina is in test mode with capped attempts
            log.error("stream: resync gave up: %s", describe(exc))
            return
        if delays.failures:
            self._set_state("connected", f"resynced after {delays.failures} failed attempts")

    async def _receive(self, ws: ClientConnection) -> str:
        """Deliver frames until the connection ends; returns why it ended."""
        decode = self._decode
        deliver = self._deliver
        try:
            async for message in ws:
                frame = decode(message)
                if frame is not None:
                    if isinstance(frame, SubscribeAck):
                        self.stats.acks += 1
                    else:
                        deliver(frame)
        except (ConnectionClosed, OSError, WebSocketException) as exc:
            return describe(exc)
        return describe_close(ws)

    # ---- frames

    def _decode(self, message: str | bytes) -> object:
        stats = self.stats
        stats.frames += 1
        if self._on_raw is not None:
            text = message if isinstance(message, str) else message.decode("utf-8", "replace")
            try:
                self._on_raw(text)
            except Exception:
                stats.callback_errors += 1
                log.exception("stream: on_raw callback failed")
        try:
            return self._codec.decode_frame(message)  # straight from the text
        except DecodeError as exc:
            if exc.unknown_event:
                stats.unknown_events += 1
                self._log_bad("unknown event", message, stats.unknown_events)
            elif exc.record == "frame" and exc.reason.startswith("not JSON"):
                stats.malformed += 1
                self._log_bad("malformed frame (not JSON)", message, stats.malformed)
            else:
                stats.malformed += 1
                self._log_bad(f"malformed frame ({exc})", message, stats.malformed)
            return None

    def _deliver(self, push: object) -> None:
        self.stats.pushes += 1
        if type(push) is PositionPush and not self.protocol.fresh(push):
            self.stats.duplicates += 1
            return
        try:
            self._on_frame(push)
        except Exception:
            self.stats.callback_errors += 1
            log.exception("stream: on_frame callback failed")

    def _log_bad(self, what: str, message: str | bytes, count: int) -> None:
        if count <= _LOG_FIRST or count % _LOG_EVERY == 0:
            log.warning("stream: %s skipped (#%d): %r", what, count, excerpt(message, _EXCERPT))


class MatchPolling(Protocol):
    """What a resync needs of the match poller."""

    async def poll_now(self, pair: str | None = None) -> int:
        """Poll now; returns how many new matches were published."""
        ...


class RestResync:
    """The resync a StreamClient runs after each subscribe: REST snapshots, then a match poll.

    Positions of every pair and the balance of every coin are fetched; what changed in the
    portfolio is published as PositionsSynced / BalanceSynced. A snapshot is applied only if
    no push for that pair or coin arrived while it was fetched (pushes are newer), and every
    applied position snapshot goes to on_snapshot (the trading state's unrealized PnL). One
    pair's positions are read by one caller at a time (the resync, the periodic refresh): a
    slow answer read before a newer one was applied never replaces it.
    """

    def __init__(
        self,
        venue: Venue,
        *,
        pairs: Sequence[str],
        coins: Sequence[str],
        portfolio: Portfolio,
        publish: Callable[[Event], None],
        poller: MatchPolling | None = None,
        on_snapshot: Callable[[str, tuple[Position, ...]], None] | None = None,
    ) -> None:
        self._venue = venue
        self.pairs = tuple(pairs)
        self.coins = tuple(coins)
        self._portfolio = portfolio
        self._publish = publish
        self._poller = poller
        self._on_snapshot = on_snapshot
        self._reading: dict[str, anyio.Lock] = {}
        self.runs = 0

    async def __call__(self) -> None:
        """Fetch snapshots, publish what changed, then poll matches once."""
        self.runs += 1
        portfolio = self._portfolio
        for pair in self.pairs:
            await self.refresh_positions(pair)
        for coin in self.coins:
            mark = portfolio.account_mark(coin)
            balance = await self._venue.balance(coin)
            if portfolio.apply_balance(balance, coin=coin, mark=mark):
                self._publish(BalanceSynced(balance))
        if self._poller is not None:
            await self._poller.poll_now()

    async def refresh_positions(self, pair: str) -> tuple[Position, ...] | None:
        """Fetch pair's positions and apply them (see the class); the snapshot, else None.

        None: a push arrived meanwhile (it is newer); the snapshot is set aside and counted.
        """
        lock = self._reading.get(pair)
        if lock is None:
            lock = self._reading[pair] = anyio.Lock()
        async with lock:
            portfolio = self._portfolio
            mark = portfolio.position_mark(pair)
            positions = tuple(await self._all_positions(pair))
            if mark != portfolio.position_mark(pair):
                portfolio.apply_positions(pair, positions, mark=mark)  # counted as ignored
                return None
            if portfolio.apply_positions(pair, positions, mark=mark):
                self._publish(PositionsSynced(pair, positions))
            if self._on_snapshot is not None:
                self._on_snapshot(pair, positions)
            return positions

    async def _all_positions(self, pair: str) -> list[Position]:
        found: dict[int, Position] = {}
        for page_no in range(1, _MAX_POSITION_PAGES + 1):
            page = await self._venue.positions(pair, page_no=page_no, page_size=MAX_PAGE_SIZE)
            before = len(found)
            for position in page:
                found.setdefault(position.id, position)
            # A short page ends the list; so does a page with nothing new (pageNo ignored).
            if len(page) < MAX_PAGE_SIZE or len(found) == before:
                break
        return list(found.values())
