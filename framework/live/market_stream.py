"""MarketStream: the venue's market WebSocket (trades, book snapshots, bars) for the node.

Strategies must hear the market (issue 27); the venue publishes it as WebSocket events
(api_trade, api_depth, api_kline) on a socket of its own, ``market.ws_path`` on the host of
``venue.ws_url`` (VENUE-FACTS "Market data"). One session: connect, send one signed subscribe
per pair and channel (and per bar period for api_kline) with a fresh timestamp each, and wait
for every acknowledgement (success false, or none within ``ack_timeout_s``, fails the
session). Frames are decoded with :class:`~framework.venue.market.MarketCodec` straight from
their text and each record goes to ``on_record`` (the kernel's intake), in the venue's order.

It fails and comes back as the private stream does (:mod:`framework.live.reconnect`: the same
keepalive, frame bound and backoff), subscribing everything again. A gap is told, never
papered over: when a subscribed session ends and a later one is subscribed, one WARNING names
the pairs and the seconds unheard, and the gap is counted (``gaps``, ``gap_s``). Nothing is
synthesized for that time; the next book snapshot simply replaces the one held, and a
strategy reading ``self.market.age(pair)`` sees the silence.

A frame naming no pair (a kline names only its ``contractPairId``) is its event's only pair's;
with several pairs subscribed to the event, the pair whose id the venue's pair list gives
(:class:`~framework.live.market_pairs.PairOf`: the list is read before the subscribes of a
session, until read). A frame nothing attributes is refused, counted and told as
``unattributable``: never guessed.

Bad input never stops the feed: a frame that is not JSON, of an unknown event or that does not
fit its record is counted per kind (``malformed``) and told in one line at most once a minute
per kind, with the count since it was last told (:class:`Told`). Every frame is bounded: at
most ``max_size`` bytes (a larger one ends the session, told as a lost connection), and the
codec bounds a frame's records and a book's levels.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Final

import anyio
import attrs
import orjson
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, WebSocketException

from framework.engine.clock import Clock
from framework.live.market_pairs import PairOf, listed_pair_ids
from framework.live.market_polls import Send
from framework.live.reconnect import (
    MAX_FRAME_BYTES,
    Backoff,
    ReconnectingClient,
    SubscribeRefused,
    SubscribeTimeout,
    describe,
    describe_close,
)
from framework.market_config import MarketConfig
from framework.venue.errors import DecodeError, FrameworkError
from framework.venue.market import (
    DEFAULT_MARKET_CODEC,
    DEPTH,
    KLINE,
    TRADE,
    Bar,
    Book,
    IndexPrice,
    MarketCodec,
    MarketRecord,
    MarkPrice,
    Trade,
    market_subscribe,
)
from framework.venue.models import SubscribeAck
from framework.venue.public_info import public_request
from framework.venue.requests import RequestBuilder, excerpt

__all__ = [
    "CHANNEL_OF",
    "TELL_EVERY_S",
    "MarketStats",
    "MarketStream",
    "SubscribeRefused",
    "SubscribeTimeout",
    "Subscription",
    "Told",
    "subscriptions_of",
]

log = logging.getLogger("framework.market")

TELL_EVERY_S: Final = 60.0
"""Bad input of one kind is told at most once per this many seconds."""
CHANNEL_OF: Final[dict[type, str]] = {
    Trade: "trade",
    Book: "depth",
    Bar: "kline",
    MarkPrice: "mark",
    IndexPrice: "index",
}
"""The metrics' channel of each market record."""
_EXCERPT: Final = 160


@attrs.frozen(slots=True)
class Subscription:
    """One market subscription: an event (api_trade...), its pair, and the period of bars."""

    event: str
    pair: str
    period: str | None = None

    def __str__(self) -> str:
        return f"{self.event} {self.pair}" + (f" {self.period}" if self.period else "")


class Told:
    """Bad input told in one WARNING line at most once per ``every_s`` per kind, counted.

    Each line says how many of its kind came since the kind was last told, and in all; the
    ones in between are only counted. Kinds are few (a fixed set per caller), so memory is flat.
    """

    __slots__ = ("_log", "_monotonic", "_since", "_told_at", "counts", "every_s", "what")

    def __init__(
        self,
        what: str,
        *,
        every_s: float = TELL_EVERY_S,
        monotonic: Callable[[], float] = time.monotonic,
        logger: logging.Logger = log,
    ) -> None:
        self.what = what
        self.every_s = every_s
        self._monotonic = monotonic
        self._log = logger
        self.counts: dict[str, int] = {}
        """Kind -> how many in all."""
        self._since: dict[str, int] = {}
        self._told_at: dict[str, float] = {}

    def __call__(self, kind: str, detail: str) -> bool:
        """Count one of kind; tell it (True) unless its kind was told less than every_s ago."""
        total = self.counts[kind] = self.counts.get(kind, 0) + 1
        since = self._since[kind] = self._since.get(kind, 0) + 1
        now = self._monotonic()
        last = self._told_at.get(kind)
        if last is not None and now - last < self.every_s:
            return False
        self._told_at[kind] = now
        self._since[kind] = 0
        self._log.warning(
            "market: %s %s (%d since last told, %d in all; told at most once a minute): %s",
            self.what, kind, since, total, detail,
        )  # fmt: skip
        return True


@attrs.define
class MarketStats:
    """Counters of one MarketStream, for metrics and tests."""

    connects: int = 0
    """Sessions that got every subscription acknowledged."""
    reconnects: int = 0
    """Subscribed sessions after the first one."""
    disconnects: int = 0
    """Subscribed sessions that ended."""
    failures: int = 0
    """Sessions that failed before every subscription was acknowledged."""
    frames: int = 0
    acks: int = 0
    events: dict[str, int] = attrs.Factory(dict)
    """Channel (trade, depth, kline) -> records handed over."""
    gaps: int = 0
    """Times the feed came back after a subscribed session ended."""
    gap_s: float = 0.0
    """Seconds unheard in those gaps, summed."""
    intake_errors: int = 0
    unattributable: int = 0
    """Frames naming no pair that nothing attributed to one (refused, never guessed)."""


class MarketStream(ReconnectingClient):
    """The market WebSocket of a set of subscriptions; run() until cancelled."""

    name = "market"
    url_key = "market.ws_path"
    _log = log

    def __init__(
        self,
        url: str,
        builder: RequestBuilder,
        subscriptions: Sequence[Subscription],
        *,
        on_record: Callable[[MarketRecord], None],
        clock: Clock,
        on_raw: Callable[[str], None] | None = None,
        on_state: Callable[[str, str], None] | None = None,
        ack_timeout_s: float = 5.0,
        ping_interval_s: float = 10.0,
        silence_timeout_s: float = 30.0,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 10.0,
        open_timeout_s: float = 10.0,
        close_timeout_s: float = 2.0,
        max_size: int = MAX_FRAME_BYTES,
        codec: MarketCodec = DEFAULT_MARKET_CODEC,
        rng: random.Random | None = None,
        told: Told | None = None,
        send: Send | None = None,
    ) -> None:
        if not subscriptions:
            raise ValueError("MarketStream needs at least one subscription")
        self.url = url
        self._builder = builder
        self.subscriptions = tuple(dict.fromkeys(subscriptions))
        self.pairs = tuple(dict.fromkeys(s.pair for s in self.subscriptions))
        # A frame naming no pair (a kline names only contractPairId) is the only pair's; with
        # several, its event's only pair's or its pair id's (PairOf), else refused.
        self._default_pair = self.pairs[0] if len(self.pairs) == 1 else None
        self.pair_of = PairOf((s.event, s.pair) for s in self.subscriptions)
        self._send = send
        self._on_record = on_record
        self._on_raw = on_raw
        self._on_state = on_state
        self._clock = clock
        self.ack_timeout_s = ack_timeout_s
        self.ping_interval_s = ping_interval_s
        self.silence_timeout_s = silence_timeout_s
        self.backoff_max_s = backoff_max_s
        self.open_timeout_s = open_timeout_s
        self.close_timeout_s = close_timeout_s
        self.max_size = max_size
        self._codec = codec
        self.backoff = Backoff(
            backoff_initial_s, backoff_max_s, rng if rng is not None else random.Random()
        )
        self.told = told if told is not None else Told("malformed frame")
        """Bad frames per kind (not_json, unknown_event, trade, book, bar, frame, unattributable)."""
        self.stats = MarketStats()
        self.state = "idle"
        self.lost_at_ms: int | None = None
        """When the last subscribed session ended, until a new one is subscribed."""

    def __repr__(self) -> str:
        return f"MarketStream({self.url!r}, {len(self.subscriptions)} subscriptions)"

    # ---- one session (ReconnectingClient: connect, subscribe, serve)

    @property
    def endpoint(self) -> str:
        """The market socket's URL."""
        return self.url

    def _ended(self, reason: str) -> None:
        self.stats.disconnects += 1
        self.lost_at_ms = self._clock.now_ms()

    async def _serve(self, ws: ClientConnection) -> str:
        """A subscribed session: count it, then hand frames over until it ends."""
        self._subscribed()
        return await self._receive(ws)

    def _failed(self, why: str) -> None:
        self.stats.failures += 1
        self._set_state("failed", why)

    def _subscribed(self) -> None:
        """A session got every ack: count it, and tell the gap since the last one ended."""
        stats = self.stats
        self.backoff.reset()
        stats.connects += 1
        if stats.connects > 1:
            stats.reconnects += 1
        lost, self.lost_at_ms = self.lost_at_ms, None
        if lost is not None:
            now = self._clock.now_ms()
            seconds = max(0, now - lost) / 1000
            stats.gaps += 1
            stats.gap_s += seconds
            log.warning(
                "market: gap of %.3f s on %s (disconnected %s to %s): nothing heard then, "
                "nothing made up",
                seconds, ", ".join(self.pairs), _utc(lost), _utc(now),
            )  # fmt: skip
        self._set_state("connected", f"{len(self.subscriptions)} subscriptions")

    async def _subscribe(self, ws: ClientConnection) -> None:
        if self.pair_of.needs_ids and self._send is not None:
            await self._read_pair_ids(self._send)
        pending: dict[Subscription, None] = {}
        for sub in self.subscriptions:
            message = market_subscribe(
                self._builder, sub.event, sub.pair, self._clock.now_ms(), period=sub.period
            )
            await ws.send(orjson.dumps(message).decode())
            pending[sub] = None
        try:
            with anyio.fail_after(self.ack_timeout_s):
                while pending:
                    ack = self._frame(await ws.recv())
                    if ack is not None:
                        self._settle(pending, ack)
        except TimeoutError:
            missing = ", ".join(map(str, pending))
            raise SubscribeTimeout(
                f"no subscribe acknowledgement within {self.ack_timeout_s} s for {missing}"
            ) from None

    async def _read_pair_ids(self, send: Send) -> None:
        """The venue's pair ids, for frames naming no pair; a failure is told, never fatal."""
        pair_of = self.pair_of
        try:
            status, body = await send(public_request(pair_of.PATH))
            pair_of.learn(listed_pair_ids(status, body))
        except (FrameworkError, OSError) as exc:
            log.warning(
                "market: the pair list (%s) was not read (%s): %s frames naming no pair are "
                "refused until it is", pair_of.PATH, exc, ", ".join(pair_of.shared),
            )  # fmt: skip
            return
        unlisted = sorted(pair_of.pairs - set(pair_of.ids.values()))
        if unlisted:
            log.warning(
                "market: the pair list gives no id of %s: their frames naming no pair are "
                "refused", ", ".join(unlisted),
            )  # fmt: skip

    def _settle(self, pending: dict[Subscription, None], ack: SubscribeAck) -> None:
        """Settle the subscription an ack names (its event and pair; else its event's oldest)."""
        event = ack.event.removesuffix("_res")
        if not ack.success:
            what = f"{event} {ack.pair or '?'}"
            raise SubscribeRefused(
                f"subscribe {what} refused by the venue: {ack.msg or 'no reason'}"
            )
        for sub in pending:
            if sub.event == event and (ack.pair is None or ack.pair == sub.pair):
                del pending[sub]
                return
        log.info("market: unexpected acknowledgement %s %s ignored", ack.event, ack.pair)

    async def _receive(self, ws: ClientConnection) -> str:
        """Hand records over until the connection ends; returns why it ended."""
        frame = self._frame
        try:
            async for message in ws:
                frame(message)
        except (ConnectionClosed, OSError, WebSocketException) as exc:
            return describe(exc)
        return describe_close(ws)

    def _frame(self, message: str | bytes) -> SubscribeAck | None:
        """Record, decode and deliver one frame; an ack is returned, bad input told."""
        stats = self.stats
        stats.frames += 1
        if self._on_raw is not None:
            text = message if isinstance(message, str) else message.decode("utf-8", "replace")
            try:
                self._on_raw(text)
            except Exception:
                log.exception("market: on_raw callback failed")
        decoded: tuple[MarketRecord, ...] | SubscribeAck | None
        try:
            decoded = self._codec.frame(message, pair=self._default_pair)
        except DecodeError as exc:
            decoded = self._pairless(message, exc)
            if decoded is None:
                return None
        if type(decoded) is SubscribeAck:
            stats.acks += 1
            return decoded
        events, on_record = stats.events, self._on_record
        for record in decoded:  # type: ignore[union-attr]
            channel = CHANNEL_OF[type(record)]
            events[channel] = events.get(channel, 0) + 1
            try:
                on_record(record)
            except Exception:
                stats.intake_errors += 1
                log.exception("market: a %s record could not be taken", type(record).__name__)
        return None

    def _pairless(
        self, message: str | bytes, exc: DecodeError
    ) -> tuple[MarketRecord, ...] | SubscribeAck | None:
        """A frame that did not decode: again with its pair if it only lacked one (PairOf),
        else told and counted (None)."""
        if self._default_pair is None and _names_no_pair(exc, self._codec):
            pair = self.pair_of.of(message)
            if pair is None:
                self.stats.unattributable += 1
                self.told(
                    "unattributable",
                    f"names no pair and nothing says which of {', '.join(self.pairs)} it is "
                    f"(its contractPairId is not in the venue's pair list): "
                    f"{excerpt(message, _EXCERPT)!r}",
                )
                return None
            try:
                return self._codec.frame(message, pair=pair)
            except DecodeError as again:
                exc = again
        self.told(_kind(exc), f"{exc}: {excerpt(message, _EXCERPT)!r}")
        return None

    def tell_open_gap(self) -> None:
        """At stop: say so if the feed is down (a gap that never closed)."""
        if self.lost_at_ms is not None:
            seconds = max(0, self._clock.now_ms() - self.lost_at_ms) / 1000
            log.warning(
                "market: stopped while disconnected: %s unheard for the last %.1f s (since %s)",
                ", ".join(self.pairs), seconds, _utc(self.lost_at_ms),
            )  # fmt: skip


def _kind(exc: DecodeError) -> str:
    """The kind a bad frame is counted and told under."""
    if exc.unknown_event:
        return "unknown_event"
    if exc.record == "frame" and exc.reason.startswith("not JSON"):
        return "not_json"
    return exc.record.lower()


def _names_no_pair(exc: DecodeError, codec: MarketCodec) -> bool:
    """True for a frame refused only because neither it nor its records name a pair."""
    return exc.field == codec.fields.pair and exc.reason.startswith("no pair")


def _utc(ms: int) -> str:
    """ms since the epoch as HH:MM:SS.mmm UTC."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3] + " UTC"


def subscriptions_of(market: MarketConfig) -> list[Subscription]:
    """The subscriptions a ``market:`` section asks: per pair and channel, klines per period."""
    events = {"trade": TRADE, "depth": DEPTH}
    out: list[Subscription] = []
    for pair, rules in market.pairs.items():
        for channel in rules.channels:
            if channel == "kline":
                out.extend(Subscription(KLINE, pair, period) for period in rules.periods)
            else:
                out.append(Subscription(events[channel], pair))
    return out
