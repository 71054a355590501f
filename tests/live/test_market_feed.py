"""The live node hears the market (issue 27): WebSocket channels and REST price polls.

A real Node runs against a venue twin over real sockets on 127.0.0.1. The twin's market is
not used: a small market server written here is mounted in front of the twin's own routes
(a WebSocket at ``/test/market/ws`` acking subscribes and sending api_trade, api_depth and
api_kline frames in the shapes of VENUE-FACTS "Market data", and the markPrice/indexPrice
GETs), so each test plays what it needs: a dropped connection, a malformed frame, a failing
poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
from prometheus_client import generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.server import ServerConnection, serve

from framework import Strategy
from framework.config import Config, parse_config
from framework.engine.clock import VirtualClock
from framework.live.market_stream import MarketStream, Subscription
from framework.live.metrics import MarketGauges, Metrics
from framework.live.node import Node
from framework.recording import MarketLine, RecordingReader, RestRecord, WsRecord
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from framework.venue.market import Bar, Book, MarketPaths, MarkPrice, Trade
from framework.venue.requests import RequestBuilder
from framework.venue.signing import make_signer
from tests.live.conftest import eventually
from tests.node_running import running

pytestmark = pytest.mark.anyio

PAIR = "ETH-USD"
WS_PATH = "/test/market/ws"
T0 = 1_700_000_000_000
DROP = "drop"
BUILDER = RequestBuilder(DEMO_API_KEY, make_signer(2, DEMO_PRIVATE_KEY))


class Listener(Strategy):
    """Keeps what its market hooks hear, and what self.market answers in them."""

    def on_start(self) -> None:
        self.trades: list[Trade] = []
        self.books: list[Book] = []
        self.bars: list[Bar] = []
        self.marks: list[MarkPrice] = []
        self.seen: list[tuple[str, Any]] = []  # what self.market answered in each hook

    def on_trade(self, trade: Trade) -> None:
        self.trades.append(trade)
        self.seen.append(("last", self.market.last(trade.pair)))

    def on_book(self, book: Book) -> None:
        self.books.append(book)
        held = self.market.book(book.pair)
        self.seen.append(("mid", held.mid if held is not None else None))

    def on_bar(self, bar: Bar) -> None:
        self.bars.append(bar)
        held = self.market.bar(bar.pair, bar.period)
        self.seen.append(("close", held.close if held is not None else None))

    def on_mark(self, mark: MarkPrice) -> None:
        self.marks.append(mark)
        self.seen.append(("mark", self.market.mark(mark.pair)))


def trade(price: str, n: int) -> dict[str, Any]:
    """An api_trade frame (data an array, as the docs allow)."""
    return {
        "event": "api_trade",
        "pair": PAIR,
        "data": [
            {
                "contractMatchPairId": n,
                "pair": PAIR,
                "price": price,
                "quantity": "0.5",
                "amount": str(Decimal(price) / 2),
                "isLong": True,
                "time": T0 + n,
                "timestamp": T0 + n,
                "contractPairId": 1,
            }
        ],
    }


def depth(bid: str, ask: str, n: int) -> dict[str, Any]:
    """An api_depth frame: a snapshot of one level a side."""
    return {
        "event": "api_depth",
        "pair": PAIR,
        "data": {
            "pair": PAIR,
            "bids": [{"price": bid, "quantity": "2"}],
            "asks": [{"price": ask, "quantity": "1"}],
            "time": T0 + n,
        },
    }


def kline(close: str, n: int) -> dict[str, Any]:
    """An api_kline frame as the docs show it: no pair, only contractPairId."""
    return {
        "event": "api_kline",
        "data": {
            "amount": "100", "close": close, "count": 3, "high": "2010", "low": "1990",
            "open": "2000", "period": "1MIN", "quantity": "0.05", "time": T0 + n,
            "contractPairId": 1,
        },
    }  # fmt: skip


class MarketServer:
    """The venue's market as a test plays it, mounted in front of a twin's routes."""

    def __init__(self) -> None:
        self.connections = 0
        self.subscribes: list[dict[str, Any]] = []
        self.outbox: asyncio.Queue[str] = asyncio.Queue()
        self.mark_status = 200
        self.mark = "2000.25"
        self.index = "2000.10"
        self.price_asks = 0

    def mount(self, twin: VenueTwin) -> None:
        """Put the market's routes first in the twin's app."""
        paths = MarketPaths()
        routes = twin.app.starlette.router.routes
        routes.insert(0, WebSocketRoute(WS_PATH, self.serve))
        routes.insert(0, Route(paths.mark_price, self.price, methods=["GET"]))
        routes.insert(0, Route(paths.index_price, self.price, methods=["GET"]))

    def send(self, *frames: dict[str, Any] | str) -> None:
        """Queue frames (objects, or raw text) for the connected client, in order."""
        for frame in frames:
            self.outbox.put_nowait(
                frame if isinstance(frame, str) else orjson.dumps(frame).decode()
            )

    async def serve(self, ws: WebSocket) -> None:
        """Ack every subscribe; send the outbox; DROP closes the connection."""
        await ws.accept()
        self.connections += 1

        async def ack() -> None:
            try:
                while True:
                    message = orjson.loads(await ws.receive_text())
                    self.subscribes.append(message)
                    reply = {
                        "event": message["event"] + "_res",
                        "method": "SUBSCRIBE",
                        "msg": "subscribed",
                        "success": True,
                        "pair": message["pair"],
                    }
                    await ws.send_text(orjson.dumps(reply).decode())
            except (WebSocketDisconnect, RuntimeError):
                pass

        async def send() -> None:
            while True:
                frame = await self.outbox.get()
                if frame == DROP:
                    await ws.close(1011)
                    return
                await ws.send_text(frame)

        # Until the client goes or the test drops it, whichever comes first.
        tasks = [asyncio.create_task(ack()), asyncio.create_task(send())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()

    async def price(self, request: Request) -> Response:
        """markPrice and indexPrice: the envelope with the price, or HTTP mark_status."""
        self.price_asks += 1
        assert request.query_params["pairName"] == PAIR
        if self.mark_status != 200:
            return Response(b"Internal Server Error", status_code=self.mark_status)
        value = self.mark if request.url.path.endswith("markPrice") else self.index
        body = {"code": 200, "error": False, "msg": "", "data": value}
        return Response(orjson.dumps(body), media_type="application/json")


def config(
    twin: VenueTwin,
    tmp_path: Path,
    *,
    interval_s: float = 0.05,
    extra: str = "",
    market: str | None = None,
) -> Config:
    """A node on the twin hearing ETH-USD's trades, book, 1MIN bars, mark and index."""
    section = (
        market
        or f"""\
market:
  ws_path: {WS_PATH}
  pairs:
    ETH-USD:
      channels: [trade, depth, kline]
      periods: [1MIN]
      mark_interval_s: {interval_s}
      index_interval_s: {interval_s}
"""
    )
    text = f"""\
venue:
  base_url: {twin.base_url}
  ws_url: {twin.ws_url}
  api_key: ${{KEY}}
  api_secret: ${{SECRET}}
pairs:
  ETH-USD: {{}}
polling:
  match_interval_s: 0.1
stream:
  backoff_initial_s: 0.01
  backoff_max_s: 0.05
journal:
  path: {tmp_path / "journal.sqlite"}
metrics: {{enabled: true, host: 127.0.0.1, port: 0}}
{section}strategies:
  - name: listener
    class: tests.live.test_market_feed:Listener
    params: {{pair: ETH-USD}}
{extra}"""
    return parse_config(text, env={"KEY": DEMO_API_KEY, "SECRET": DEMO_PRIVATE_KEY})


@pytest.fixture
async def venue(anyio_backend: str) -> AsyncIterator[tuple[VenueTwin, MarketServer]]:
    """A twin on 127.0.0.1 with the test's market in front of it."""
    settings = TwinSettings(prices=PriceSettings(tick_interval=0))
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        market = MarketServer()
        market.mount(twin)
        yield twin, market


def listener(node: Node) -> Listener:
    """The node's one strategy."""
    strategy = node.strategies[0]
    assert isinstance(strategy, Listener)
    return strategy


def subscribed(node: Node, times: int = 1) -> bool:
    """Whether the market socket has had every subscription acknowledged `times` times."""
    feed = node.market_feed
    return feed is not None and feed.stream is not None and feed.stream.stats.connects >= times


async def scrape(node: Node) -> str:
    """The node's /metrics text."""
    async with httpx.AsyncClient() as client:
        answer = await client.get(f"http://127.0.0.1:{node.metrics_port}/metrics")
    return answer.text


async def test_market_records_reach_the_hooks_and_self_market_and_are_recorded(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path
) -> None:
    twin, market = venue
    recording = tmp_path / "run.jsonl"
    node = Node(config(twin, tmp_path, extra=f"recording: {{path: {recording}}}\n"))
    async with running(node):
        await eventually(lambda: subscribed(node))
        events = sorted((m["event"], m.get("period")) for m in market.subscribes)
        assert events == [("api_depth", None), ("api_kline", "1MIN"), ("api_trade", None)]
        assert all(m["pair"] == PAIR and m["signature"] for m in market.subscribes)
        market.send(trade("2000.5", 1), depth("1999", "2001", 2), kline("2003", 3))
        strategy = listener(node)
        await eventually(lambda: strategy.trades and strategy.books and strategy.bars)
        await eventually(lambda: strategy.marks)
        await eventually(lambda: node.kernel.market.index(PAIR) == Decimal("2000.10"))
        text = await scrape(node)
    assert strategy.trades[0] == Trade(
        pair=PAIR, price=Decimal("2000.5"), quantity=Decimal("0.5"), is_long=True,
        time=T0 + 1, id="1", amount=Decimal("1000.25"),
    )  # fmt: skip
    assert strategy.books[0].mid == Decimal("2000")
    assert strategy.bars[0].pair == PAIR and strategy.bars[0].close == Decimal("2003")
    assert strategy.marks[0] == MarkPrice(pair=PAIR, price=Decimal("2000.25"))
    assert ("last", Decimal("2000.5")) in strategy.seen  # self.market answers in the hooks
    assert ("mid", Decimal("2000")) in strategy.seen
    assert ("close", Decimal("2003")) in strategy.seen
    assert ("mark", Decimal("2000.25")) in strategy.seen
    for channel in ("trade", "depth", "kline"):
        assert f'perp_market_events_total{{channel="{channel}"}} 1.0' in text
    assert 'perp_market_events_total{channel="mark"}' in text
    assert 'perp_market_age_seconds{pair="ETH-USD"}' in text
    assert "perp_market_gaps_total 0.0" in text
    # The market frames are recorded beside the private pushes; the polls fed are market lines.
    reader = RecordingReader(recording)
    try:
        records = list(reader.records())
    finally:
        reader.close()
    frames = [orjson.loads(r.frame) for r in records if isinstance(r, WsRecord)]
    assert {"api_trade", "api_depth", "api_kline"} <= {f["event"] for f in frames}
    fed = {(r.kind, r.pair) for r in records if isinstance(r, MarketLine)}
    assert {("mark", PAIR), ("index", PAIR)} <= fed
    rest = {r.path for r in records if isinstance(r, RestRecord)}
    assert not {MarketPaths().mark_price, MarketPaths().index_price} & rest  # not twice


async def test_a_dropped_market_socket_reconnects_resubscribes_and_tells_the_gap(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    twin, market = venue
    node = Node(config(twin, tmp_path, interval_s=0))
    async with running(node):
        await eventually(lambda: subscribed(node))
        strategy = listener(node)
        market.send(depth("1999", "2001", 1))
        await eventually(lambda: len(strategy.books) == 1)
        market.send(DROP)
        await eventually(lambda: subscribed(node, times=2))
        assert market.connections == 2
        assert len(market.subscribes) == 6  # everything subscribed again
        market.send(depth("1995", "1997", 2))
        await eventually(lambda: len(strategy.books) == 2)
        text = await scrape(node)
    held = node.kernel.market.book(PAIR)
    assert held is not None and held.mid == Decimal("1996")  # the new snapshot replaced it
    assert len(strategy.books) == 2  # nothing was made up for the gap
    gaps = [r for r in caplog.records if "market: gap of" in r.getMessage()]
    assert len(gaps) == 1 and gaps[0].levelno == logging.WARNING
    assert PAIR in gaps[0].getMessage()
    assert "perp_market_gaps_total 1.0" in text
    assert 'perp_component_up{component="market"} 1.0' in text


async def test_a_malformed_frame_is_counted_and_told_once_a_minute_and_the_feed_goes_on(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    twin, market = venue
    node = Node(config(twin, tmp_path, interval_s=0))
    async with running(node):
        await eventually(lambda: subscribed(node))
        strategy = listener(node)
        bad_trade = trade("-1", 2)
        market.send("not json {", "also not json", {"event": "api_weather", "data": 1})
        market.send(bad_trade, trade("2001", 3))
        await eventually(lambda: len(strategy.trades) == 1)
        text = await scrape(node)
    assert strategy.trades[0].price == Decimal("2001")
    told = [r.getMessage() for r in caplog.records if "market: malformed frame" in r.getMessage()]
    assert len([t for t in told if "not_json" in t]) == 1  # the second is only counted
    assert len([t for t in told if "unknown_event" in t]) == 1
    assert len([t for t in told if "malformed frame trade" in t]) == 1
    assert 'perp_market_malformed_total{kind="not_json"} 2.0' in text
    assert 'perp_market_malformed_total{kind="unknown_event"} 1.0' in text
    assert 'perp_market_malformed_total{kind="trade"} 1.0' in text
    assert 'perp_market_events_total{channel="trade"} 1.0' in text


async def test_a_failing_mark_poll_is_told_and_the_node_goes_on(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    twin, market = venue
    market.mark_status = 500
    node = Node(config(twin, tmp_path))
    async with running(node):
        feed = node.market_feed
        assert feed is not None
        await eventually(lambda: feed.poll_errors().get("mark", 0) >= 3)
        text = await scrape(node)
        market.mark_status = 200
        strategy = listener(node)
        await eventually(lambda: strategy.marks)
        assert not node.bus.stopped
    told = [r for r in caplog.records if "failed poll: mark ETH-USD" in r.getMessage()]
    assert len(told) == 1 and told[0].levelno == logging.WARNING  # at most once a minute
    assert "HTTP 500" in told[0].getMessage()
    assert 'perp_market_poll_errors_total{kind="mark"}' in text
    assert strategy.marks[-1].price == Decimal("2000.25")


class RefPrice:
    """A user source (``market: {source: ...}``): one mark price, from its params."""

    records = (MarkPrice,)

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

    async def run(self, feed: Callable[[Any], None]) -> None:
        feed(MarkPrice(pair=PAIR, price=Decimal(self.params["price"])))
        await anyio.sleep_forever()

    def timed(self, start_ms: int) -> Iterator[tuple[int, Any]]:
        return iter(())


async def test_a_user_source_named_in_the_market_section_feeds_the_strategies(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path
) -> None:
    twin, market = venue
    section = """\
market:
  source: tests.live.test_market_feed:RefPrice
  params: {price: "1234.5"}
"""
    node = Node(config(twin, tmp_path, market=section))
    async with running(node):
        strategy = listener(node)
        await eventually(lambda: strategy.marks)
    assert strategy.marks == [MarkPrice(pair=PAIR, price=Decimal("1234.5"))]
    assert [source.name for source in node.kernel.sources] == ["market"]
    assert market.connections == 0 and market.price_asks == 0  # nothing asked of the venue


async def test_a_price_path_the_venue_lacks_stops_its_poll_in_one_line(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    twin, market = venue
    market.mark_status = 404
    node = Node(config(twin, tmp_path, interval_s=0.01))
    async with running(node):
        feed = node.market_feed
        assert feed is not None
        await eventually(lambda: all(poll.off for poll in feed.polls))
        asked = market.price_asks
        await eventually(lambda: subscribed(node))  # the node goes on
    assert asked == 2  # one mark, one index: then never again
    told = [r.getMessage() for r in caplog.records if "not offered" in r.getMessage()]
    assert len(told) == 2 and "polls stopped" in told[0]


# ---- MarketStream alone, against a plain websockets server


@contextlib.asynccontextmanager
async def plain_server(
    handler: Callable[[ServerConnection, int], Awaitable[None]],
) -> AsyncIterator[str]:
    """Serve handler(ws, connection number) on 127.0.0.1; yields the ws:// URL."""
    connections = 0

    async def handle(ws: ServerConnection) -> None:
        nonlocal connections
        connections += 1
        await handler(ws, connections)

    async with serve(handle, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}{WS_PATH}"
        server.close()


async def acks(ws: ServerConnection, count: int, *, success: bool = True) -> None:
    """Read count subscribes and answer each (success as given)."""
    for _ in range(count):
        message = orjson.loads(await ws.recv())
        reply = {"event": message["event"] + "_res", "success": success, "msg": "bad signature"}
        await ws.send(orjson.dumps({**reply, "pair": message["pair"]}).decode())


def market_stream(url: str, got: list[Any], clock: VirtualClock, **kwargs: Any) -> MarketStream:
    """A MarketStream of ETH-USD trades and book, fast backoff."""
    subs = [Subscription("api_trade", PAIR), Subscription("api_depth", PAIR)]
    options: dict[str, Any] = {"backoff_initial_s": 0.01, "backoff_max_s": 0.02, **kwargs}
    return MarketStream(url, BUILDER, subs, on_record=got.append, clock=clock, **options)


@contextlib.asynccontextmanager
async def streaming(stream: MarketStream) -> AsyncIterator[MarketStream]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream.run)
        try:
            yield stream
        finally:
            tg.cancel_scope.cancel()


async def test_a_refused_subscribe_fails_the_session_and_is_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(ws: ServerConnection, n: int) -> None:
        await acks(ws, 2, success=n > 1)
        await ws.send(orjson.dumps(trade("2000", 1)).decode())
        await ws.wait_closed()

    got: list[Any] = []
    async with plain_server(handler) as url:
        stream = market_stream(url, got, VirtualClock(T0))
        async with streaming(stream):
            await eventually(lambda: got)
    assert stream.stats.failures == 1 and stream.stats.connects == 1
    assert stream.stats.gaps == 0  # never subscribed before: nothing was heard, no gap
    assert "subscribe api_trade ETH-USD refused by the venue: bad signature" in caplog.text


async def test_a_frame_over_max_size_ends_the_session_and_the_gap_is_timed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = anyio.Event()

    async def handler(ws: ServerConnection, n: int) -> None:
        if n == 1:
            await acks(ws, 2)
            big = trade("2000", 1)
            big["padding"] = "x" * 5000
            await ws.send(orjson.dumps(big).decode())
        else:
            await release.wait()  # the test moves the clock while the feed is down
            await acks(ws, 2)
            await ws.send(orjson.dumps(trade("2001", 2)).decode())
        await ws.wait_closed()

    got: list[Any] = []
    clock = VirtualClock(T0)
    async with plain_server(handler) as url:
        stream = market_stream(url, got, clock, max_size=4096)
        async with streaming(stream):
            await eventually(lambda: stream.stats.disconnects == 1)
            clock.ms += 2500
            release.set()
            await eventually(lambda: got)
    assert [t.price for t in got] == [Decimal("2001")]  # the oversized frame never decoded
    assert stream.stats.gaps == 1 and stream.stats.gap_s == 2.5
    assert "market: gap of 2.500 s on ETH-USD" in caplog.text


def test_with_a_market_socket_healthz_wants_it_connected() -> None:
    metrics = Metrics(lambda: {})
    metrics.set_state("stream", "connected")
    metrics.set_state("poller", "running")
    assert metrics.healthy()
    gauges = MarketGauges(
        events=lambda: {"trade": 3},
        ages=lambda: {PAIR: 1.5, "BTC-USD": None},
        gaps=lambda: 2,
        gap_seconds=lambda: 4.25,
        malformed=lambda: {"not_json": 1},
        poll_errors=lambda: {},
    )
    metrics.watch_market(gauges, websocket=True)
    assert not metrics.healthy() and metrics.health()["market"] == "starting"
    metrics.set_state("market", "connected")
    assert metrics.healthy()
    text = generate_latest(metrics.registry).decode()
    assert 'perp_market_events_total{channel="trade"} 3.0' in text
    assert 'perp_market_age_seconds{pair="ETH-USD"} 1.5' in text
    assert 'pair="BTC-USD"' not in text  # never heard: no age
    assert "perp_market_gaps_total 2.0" in text
    assert "perp_market_gap_seconds_total 4.25" in text
    assert 'perp_market_malformed_total{kind="not_json"} 1.0' in text
