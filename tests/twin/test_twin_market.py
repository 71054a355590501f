"""The twin's public market over real sockets: REST answers and WebSocket frames that the
framework's market codec decodes, and user fills that agree with what the twin published."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect

from framework.sim.market import MarketSettings, MarketTick
from framework.twin import VenueTwin
from framework.twin.cli import _settings, build_parser
from framework.twin.settings import settings_from_mapping
from framework.venue.errors import ConfigError
from framework.venue.market import (
    DEFAULT_MARKET_CODEC,
    Bar,
    Book,
    MarketPaths,
    Trade,
    market_request,
    market_subscribe,
)
from framework.venue.models import SubscribeAck
from framework.venue.public_info import (
    PAIRS_PATH,
    TIME_PATH,
    parse_pair_list,
    parse_server_time,
)
from framework.venue.requests import RequestBuilder
from framework.venue.signing import Secp256k1Signer
from tests.twin.twin_client import TRADER_API_KEY, TRADER_KEY, Clock, TwinClient, order
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

PATHS = MarketPaths()
PAIR = "ETH-USD"
ON = MarketSettings(enabled=True)
CODEC = DEFAULT_MARKET_CODEC


async def get(http: httpx.AsyncClient, path: str, **params: object) -> httpx.Response:
    request = market_request(path, **params)
    return await http.get(request.target)


async def frames_until_pong(ws: ClientConnection) -> list[str]:
    """Every frame queued before a ping sent now (the twin answers in order)."""
    await ws.send("ping")
    out = []
    while (frame := await ws.recv()) != "pong":
        out.append(str(frame))
    return out


async def subscribe(ws: ClientConnection, message: str) -> dict[str, Any]:
    await ws.send(message)
    while (frame := await ws.recv()).startswith('{"event":"api_') and "_res" not in frame:
        pass  # a push queued before the ack
    ack: dict[str, Any] = orjson.loads(frame)
    assert type(CODEC.frame(frame)) is SubscribeAck
    return ack


async def test_every_public_answer_decodes_and_matches_the_published_market(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(market=ON) as (twin, trader):
        http: httpx.AsyncClient = trader.http
        twin.step(130)
        tape = twin.market.tapes[PAIR]
        response = await get(http, TIME_PATH)
        assert parse_server_time(response.status_code, response.content) == twin.now_ms()
        response = await get(http, PAIRS_PATH)
        assert set(parse_pair_list(response.status_code, response.content)) == {PAIR, "BTC-USD"}
        response = await get(http, PATHS.mark_price, pairName=PAIR)
        assert response.json()["code"] == 200 and response.json()["error"] is False
        mark = CODEC.mark_price(response.status_code, response.content, PAIR)
        assert (mark.pair, mark.price, mark.time) == (PAIR, twin.mark(PAIR), twin.now_ms())
        response = await get(http, PATHS.index_price, pairName=PAIR)
        index = CODEC.index_price(response.status_code, response.content, PAIR)
        assert index.price == tape.index
        response = await get(http, PATHS.trades, pairName=PAIR, limit=50)
        trades = CODEC.trades(response.status_code, response.content, PAIR)
        assert list(trades) == tape.last_trades(50) and len(trades) == 50
        response = await get(http, PATHS.depth, pairName=PAIR, limit=3)
        book = CODEC.depth(response.status_code, response.content, PAIR)
        assert tape.book is not None
        assert (book.bids, book.asks) == (tape.book.bids[:3], tape.book.asks[:3])
        response = await get(http, PATHS.kline, pairName=PAIR, period="1MIN", limit=5)
        bars = CODEC.klines(response.status_code, response.content, PAIR, "1MIN")
        assert list(bars) == tape.last_bars("1MIN", 5) and bars


async def test_with_the_market_off_prices_answer_and_the_market_is_empty(twin: VenueTwin) -> None:
    async with httpx.AsyncClient(base_url=twin.base_url) as http:
        twin.step(3)
        response = await get(http, PATHS.mark_price, pairName=PAIR)
        assert CODEC.mark_price(response.status_code, response.content, PAIR).price == twin.mark(
            PAIR
        )
        response = await get(http, PATHS.index_price, pairName=PAIR)
        index = CODEC.index_price(response.status_code, response.content, PAIR).price
        assert index == twin.market.tapes[PAIR].index and index != twin.mark(PAIR)
        response = await get(http, PATHS.trades, pairName=PAIR)
        assert CODEC.trades(response.status_code, response.content, PAIR) == ()
        response = await get(http, PATHS.depth, pairName=PAIR)
        book = CODEC.depth(response.status_code, response.content, PAIR)
        assert (book.bids, book.asks) == ((), ())
        response = await get(http, PATHS.kline, pairName=PAIR, period="1MIN")
        assert CODEC.klines(response.status_code, response.content, PAIR, "1MIN") == ()


@pytest.mark.parametrize(
    ("path", "query", "code", "msg"),
    [
        (PATHS.mark_price, "", 2002, "Required parameter:pairName"),
        (PATHS.index_price, "pairName=", 2002, "Required parameter:pairName"),
        (PATHS.trades, "pairName=XRP-USD", 2001, "Illegal parameter:pairName"),
        (PATHS.trades, "pairName=ETH-USD&limit=0", 2001, "Illegal parameter:limit"),
        (PATHS.trades, "pairName=ETH-USD&limit=1001", 2001, "Illegal parameter:limit"),
        (PATHS.depth, "pairName=ETH-USD&limit=ten", 2001, "Illegal parameter:limit"),
        (PATHS.kline, "pairName=ETH-USD", 2002, "Required parameter:period"),
        (PATHS.kline, "pairName=ETH-USD&period=1MONTH", 2001, "Illegal parameter:period"),
        (
            PATHS.kline,
            "pairName=ETH-USD&period=1MIN&end_time=-5",
            2001,
            "Illegal parameter:end_time",
        ),
    ],
)
async def test_bad_parameters_are_answered_with_the_venue_codes(
    twin: VenueTwin, path: str, query: str, code: int, msg: str
) -> None:
    async with httpx.AsyncClient(base_url=twin.base_url) as http:
        response = await http.get(f"{path}?{query}" if query else path)
    assert response.status_code == 200
    body = response.json()
    assert (body["code"], body["error"], body["msg"], body["data"]) == (code, True, msg, None)


async def test_frames_decode_into_the_records_and_unsubscribe_stops_them(
    make_twin: Callable[..., Any], clock: Clock
) -> None:
    async with make_twin(market=ON) as (twin, _):
        builder = RequestBuilder(TRADER_API_KEY, Secp256k1Signer(TRADER_KEY))

        def message(event: str, method: str = "SUBSCRIBE", **kw: Any) -> str:
            signed = market_subscribe(builder, event, PAIR, clock.ms(), method=method, **kw)
            return orjson.dumps(signed).decode()

        async with connect(twin.ws_url) as ws:
            ack = await subscribe(ws, message("api_depth"))
            assert ack == {
                "event": "api_depth_res",
                "method": "SUBSCRIBE",
                "msg": "Subscribe api_depth success",
                "success": True,
                "pair": PAIR,
            }
            assert (await subscribe(ws, message("api_trade")))["success"] is True
            ack = await subscribe(ws, message("api_kline", period="1MIN"))
            assert (ack["success"], ack["period"]) == (True, "1MIN")
            twin.step(5)
            kinds: dict[type, list[Any]] = {Book: [], Trade: [], Bar: []}
            for frame in await frames_until_pong(ws):
                for record in CODEC.frame(frame, pair=PAIR):  # type: ignore[union-attr]
                    kinds[type(record)].append(record)
            tape = twin.market.tapes[PAIR]
            assert len(kinds[Book]) == 5 and kinds[Book][-1] == tape.book
            assert kinds[Trade] == tape.last_trades(len(kinds[Trade])) and kinds[Trade]
            assert kinds[Bar][-1] == tape.last_bars("1MIN", 1)[0]
            ack = await subscribe(ws, message("api_depth", method="UNSUBSCRIBE"))
            assert (ack["event"], ack["method"], ack["success"]) == (
                "api_depth_res",
                "UNSUBSCRIBE",
                True,
            )
            twin.step(5)
            events = {orjson.loads(f)["event"] for f in await frames_until_pong(ws)}
            assert events == {"api_trade", "api_kline"}


async def test_market_subscriptions_are_checked_and_bounded(
    make_twin: Callable[..., Any],
) -> None:
    settings = MarketSettings(enabled=True, max_subscriptions=2)
    async with make_twin(market=settings) as (twin, trader), connect(twin.ws_url) as ws:
        trader_: TwinClient = trader
        refusals = [
            (trader_.subscribe_message("api_depth"), "Required parameter:pair"),
            (trader_.subscribe_message("api_depth", pair="XRP-USD"), "Illegal parameter:pair"),
            (trader_.subscribe_message("api_kline", pair=PAIR), "Required parameter:period"),
            (
                trader_.subscribe_message("api_kline", pair=PAIR, period="7MIN"),
                "Illegal parameter:period",
            ),
            (
                trader_.subscribe_message("api_kline", pair=PAIR, period=1),
                "Illegal parameter:period",
            ),
        ]
        for text, reason in refusals:
            ack = await subscribe(ws, text)
            assert (ack["success"], ack["msg"]) == (False, reason)
        good = trader_.sign
        trader_.sign = lambda text: good(text + "0")
        ack = await subscribe(ws, trader_.subscribe_message("api_trade", pair=PAIR))
        assert ack["success"] is False and "signature does not verify" in ack["msg"]
        trader_.sign = good
        # The SDK's api_trade subscribe carries a period too: accepted, not needed.
        ack = await subscribe(ws, trader_.subscribe_message("api_trade", pair=PAIR, period="1MIN"))
        assert ack["success"] is True
        ack = await subscribe(ws, trader_.subscribe_message("api_depth", pair=PAIR))
        assert ack["success"] is True
        ack = await subscribe(ws, trader_.subscribe_message("api_depth", pair="BTC-USD"))
        assert ack["success"] is False and "at most 2" in ack["msg"]
        assert twin.counters.subscriptions == 2
        assert twin.counters.subscribe_refusals == 7


async def test_a_slow_reader_of_market_frames_is_closed_as_for_private_pushes(
    make_twin: Callable[..., Any],
) -> None:
    async with (
        make_twin(market=ON, ws_queue_limit=5) as (twin, trader),
        connect(twin.ws_url) as ws,
    ):
        await subscribe(ws, trader.subscribe_message("api_depth", pair=PAIR))
        twin.step(50)  # 50 frames queued at once, the limit is 5
        await eventually(lambda: twin.counters.ws_overflows == 1)
        await eventually(lambda: len(twin.hub) == 0)
        assert twin.market.subscribers() == 0  # its subscriptions went with it


async def test_a_market_buy_fills_at_or_above_the_best_ask_it_published(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(market=ON) as (twin, trader):
        for step in range(20):
            twin.step()
            response = await get(trader.http, PATHS.depth, pairName=PAIR)
            book = CODEC.depth(response.status_code, response.content, PAIR)
            assert book.best_ask is not None and book.best_bid is not None
            long = step % 2 == 0
            answer = await trader.batch([order(f"m{step}", long=long, quantity="0.3")])
            assert answer["code"] == 200, answer
            (match, *_) = (await trader.matches(PAIR))["data"]
            price = Decimal(match["averagePrice"])
            assert price >= book.best_ask if long else price <= book.best_bid
            assert (match["isTaker"], Decimal(match["quantity"])) == (True, Decimal("0.3"))


async def test_a_resting_bid_waits_for_a_published_trade_through_it_then_fills(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(market=ON) as (twin, trader):
        bid = Decimal("1995")
        answer = await trader.batch(
            [order("bid", market=False, match_type=1, price=str(bid), quantity="0.5")]
        )
        assert answer["code"] == 200
        mark, lowest, filled = Decimal(2000), Decimal("Infinity"), False
        while not filled:
            mark -= Decimal("0.25")
            assert mark > 1900, "the mark fell far below the bid and nothing filled"
            twin.set_mark(PAIR, mark)
            response = await get(trader.http, PATHS.trades, pairName=PAIR, limit=1000)
            trades = CODEC.trades(response.status_code, response.content, PAIR)
            lowest = min([lowest, *(t.price for t in trades)])
            filled = bool((await trader.matches(PAIR))["data"])
            assert filled == (lowest <= bid), (mark, lowest)
        (match,) = (await trader.matches(PAIR))["data"]
        assert (match["averagePrice"], match["isTaker"], match["quantity"]) == (
            "1995",
            False,
            "0.5",
        )


async def test_a_mark_below_a_resting_bid_fills_nothing_until_a_trade_crosses_it(
    make_twin: Callable[..., Any], clock: Clock
) -> None:
    quiet = MarketSettings(enabled=True, trades_per_tick=0)  # books only: trades come by hand
    async with make_twin(market=quiet) as (twin, trader):
        answer = await trader.batch(
            [order("bid", market=False, match_type=1, price="1995", quantity="0.5")]
        )
        assert answer["code"] == 200
        twin.set_mark(PAIR, Decimal(1980))  # the old rule filled here
        assert (await trader.matches(PAIR))["data"] == []
        book = twin.market.tapes[PAIR].book
        assert book is not None and book.best_ask is not None and book.best_ask < 1995

        def trade(price: str, n: int) -> Trade:
            return Trade(pair=PAIR, price=Decimal(price), quantity=Decimal(1), id=str(n))

        twin.hub.publish(
            twin.market.publish(MarketTick(pair=PAIR, book=book, trades=(trade("1995.01", 1),)), 0)
        )
        assert (await trader.matches(PAIR))["data"] == []
        twin.hub.publish(
            twin.market.publish(MarketTick(pair=PAIR, book=book, trades=(trade("1995", 2),)), 0)
        )
        (match,) = (await trader.matches(PAIR))["data"]
        assert (match["averagePrice"], match["isTaker"]) == ("1995", False)


def test_the_market_is_a_setting_of_the_twin_and_of_a_node_config() -> None:
    settings = settings_from_mapping(
        {"market": {"enabled": True, "levels": 5, "periods": ["5MIN"]}}
    )
    assert settings.market == MarketSettings(enabled=True, levels=5, periods=["5MIN"])
    assert settings_from_mapping({}).market.enabled is False
    with pytest.raises(ConfigError, match=r"market\.levls"):
        settings_from_mapping({"market": {"levls": 5}})


def test_perpframe_venue_market_turns_the_market_on(tmp_path: Any) -> None:
    config = tmp_path / "venue.yaml"
    config.write_text("market:\n  levels: 3\n", encoding="utf-8")
    on = _settings(build_parser().parse_args(["--config", str(config), "--market"]))
    assert on.market == MarketSettings(enabled=True, levels=3)
    assert _settings(build_parser().parse_args([])).market.enabled is False
