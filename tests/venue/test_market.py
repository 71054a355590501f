"""Market frames and answers decoded leniently, malformed ones refused once and clearly."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.venue.errors import (
    BadResponse,
    DecodeError,
    ExtensionUnavailable,
    ParameterError,
    ServerFault,
    VenueError,
)
from framework.venue.market import (
    DEFAULT_MARKET_CODEC,
    Bar,
    Book,
    IndexPrice,
    MarketCodec,
    MarketFields,
    MarketPaths,
    MarkPrice,
    Trade,
    market_request,
    market_subscribe,
)
from framework.venue.models import SubscribeAck
from framework.venue.requests import RequestBuilder
from framework.venue.signing import make_signer

codec = DEFAULT_MARKET_CODEC
TS = 1_709_296_496_123

TRADE_WIRE: dict[str, Any] = {
    "contractMatchPairId": 901,
    "pair": "ETH-USD",
    "price": "1850.5",
    "quantity": 0.25,
    "amount": "462.625",
    "isLong": True,
    "time": "2024-03-01 12:34:56",
    "timestamp": TS,
    "contractPairId": 3,
}
KLINE_WIRE: dict[str, Any] = {
    "amount": "9250",
    "close": "1851",
    "count": 12,
    "high": 1852.5,
    "low": "1849",
    "open": "1850",
    "period": "1MIN",
    "quantity": "5",
    "time": 1_709_296_440_000,
    "contractPairId": 3,
}


def frame(event: str, data: Any, **extra: Any) -> bytes:
    """A market event's frame as the venue sends it."""
    return orjson.dumps({"event": event, "data": data, **extra})


def answer(data: Any, code: int = 200) -> bytes:
    """The venue's REST envelope around data."""
    return orjson.dumps({"code": code, "error": code != 200, "msg": "SUCCESS", "data": data})


def test_a_trade_frame_decodes_every_published_field() -> None:
    (trade,) = codec.frame(frame("api_trade", TRADE_WIRE))  # type: ignore[misc]
    assert trade == Trade(
        pair="ETH-USD",
        price=Decimal("1850.5"),
        quantity=Decimal("0.25"),
        is_long=True,
        time=TS,  # the ms timestamp is preferred to the second-precision date-time
        id="901",
        amount=Decimal("462.625"),
    )


def test_a_trade_array_is_several_trades_in_order_and_parsed_objects_decode_too() -> None:
    sell = {**TRADE_WIRE, "contractMatchPairId": "902", "isLong": False, "price": 1849}
    trades = codec.frame({"event": "api_trade", "data": [TRADE_WIRE, sell]})
    assert [(t.id, t.price, t.is_long) for t in trades] == [  # type: ignore[union-attr]
        ("901", Decimal("1850.5"), True),
        ("902", Decimal("1849"), False),
    ]
    assert codec.frame(frame("api_trade", [])) == ()


def test_absent_optional_fields_are_none_and_unknown_fields_are_ignored() -> None:
    (trade,) = codec.frame(  # type: ignore[misc]
        frame("api_trade", {"price": "1", "quantity": "2", "color": "red"}, pair="BTC-USD")
    )
    assert trade == Trade(pair="BTC-USD", price=Decimal(1), quantity=Decimal(2))


@pytest.mark.parametrize(
    ("time", "ms"),
    [
        (TS, TS),
        (str(TS), TS),
        (1_709_296_496, 1_709_296_496_000),  # below 10^11: seconds
        ("1709296496.5", 1_709_296_496_500),
        ("2024-03-01 12:34:56", 1_709_296_496_000),  # the venue's date-times are UTC
        ("2024-03-01T12:34:56+01:00", 1_709_292_896_000),
    ],
)
def test_a_time_is_ms_seconds_or_a_utc_date_time(time: Any, ms: int) -> None:
    (trade,) = codec.frame(  # type: ignore[misc]
        frame("api_trade", {"pair": "E", "price": 1, "quantity": 1, "time": time})
    )
    assert trade.time == ms


def test_floats_are_read_from_their_text_never_through_a_binary_float() -> None:
    body = b'{"event":"api_trade","data":{"pair":"E","price":0.1,"quantity":1e-3}}'
    (trade,) = codec.frame(body)  # type: ignore[misc]
    assert (trade.price, trade.quantity) == (Decimal("0.1"), Decimal("0.001"))
    assert str(trade.price) == "0.1"


def test_a_depth_frame_reads_object_and_array_levels_best_first_without_empty_ones() -> None:
    data = {
        "asks": [{"price": "1851", "quantity": "2"}, ["1850.5", 1], {"price": 1852, "quantity": 0}],
        "bids": [[1849, "3", 7], {"price": "1850", "quantity": "0.5"}],
    }
    (book,) = codec.frame(frame("api_depth", data, pair="ETH-USD"))  # type: ignore[misc]
    assert book == Book(
        pair="ETH-USD",
        bids=((Decimal(1850), Decimal("0.5")), (Decimal(1849), Decimal(3))),
        asks=((Decimal("1850.5"), Decimal(1)), (Decimal(1851), Decimal(2))),
    )
    assert (book.best_bid, book.best_ask, book.mid) == (
        Decimal(1850),
        Decimal("1850.5"),
        Decimal("1850.25"),
    )
    empty = Book(pair="E", bids=(), asks=())
    assert (empty.best_bid, empty.best_ask, empty.mid) == (None, None, None)


def test_a_book_beyond_max_levels_keeps_its_best_levels() -> None:
    small = MarketCodec(max_levels=2)
    asks = [[str(100 + i), 1] for i in range(5, 0, -1)]  # worst first on purpose
    bids = [[str(99 - i), 1] for i in range(5)]
    (book,) = small.frame(frame("api_depth", {"asks": asks, "bids": bids}, pair="E"))  # type: ignore[misc]
    assert [p for p, _ in book.asks] == [Decimal(101), Decimal(102)]
    assert [p for p, _ in book.bids] == [Decimal(99), Decimal(98)]
    (full,) = codec.frame(frame("api_depth", {"asks": asks, "bids": bids}, pair="E"))  # type: ignore[misc]
    assert len(full.asks) == 5


def test_a_trade_array_beyond_max_items_is_refused_whole() -> None:
    small = MarketCodec(max_items=3)
    trades = [{"pair": "E", "price": 1, "quantity": 1}] * 4
    with pytest.raises(DecodeError, match=r"4 records in one frame, at most 3 \(max_items\)"):
        small.frame(frame("api_trade", trades))
    assert len(small.frame(frame("api_trade", trades[:3]))) == 3  # type: ignore[arg-type]


def test_a_kline_takes_the_subscriptions_pair_and_the_frames_period() -> None:
    (bar,) = codec.frame(frame("api_kline", KLINE_WIRE), pair="ETH-USD")  # type: ignore[misc]
    assert bar == Bar(
        pair="ETH-USD",
        period="1MIN",
        open=Decimal(1850),
        high=Decimal("1852.5"),
        low=Decimal(1849),
        close=Decimal(1851),
        quantity=Decimal(5),
        amount=Decimal(9250),
        count=12,
        time=1_709_296_440_000,
    )
    bare = {k: v for k, v in KLINE_WIRE.items() if k != "period"}
    (bar,) = codec.frame(frame("api_kline", [bare], period="5MIN", pair="BTC-USD"))  # type: ignore[misc]
    assert (bar.pair, bar.period) == ("BTC-USD", "5MIN")


def test_a_subscribe_ack_of_a_market_event_is_returned_as_an_ack() -> None:
    ack = codec.frame(b'{"event":"api_kline_res","method":"SUBSCRIBE","success":true,"pair":"E"}')
    assert ack == SubscribeAck(event="api_kline_res", method="SUBSCRIBE", success=True, pair="E")


def test_field_names_are_configurable() -> None:
    names = MarketFields(trade_id="tradeId", is_long="buyerIsTaker", pair="symbol")
    custom = MarketCodec(names)
    data = {"tradeId": 5, "symbol": "E", "price": 1, "quantity": 1, "buyerIsTaker": "false"}
    (trade,) = custom.frame(frame("api_trade", data))  # type: ignore[misc]
    assert (trade.id, trade.pair, trade.is_long) == ("5", "E", False)
    with pytest.raises(DecodeError, match="no pair"):
        codec.frame(frame("api_trade", data))  # the default names see no pair


@pytest.mark.parametrize(
    ("body", "where", "words"),
    [
        (frame("api_trade", [TRADE_WIRE, {**TRADE_WIRE, "price": "abc"}]), "Trade.price", "$.data[1].price"),
        (frame("api_trade", {**TRADE_WIRE, "price": "-1"}), "Trade.price", "positive finite"),
        (frame("api_trade", {**TRADE_WIRE, "quantity": "NaN"}), "Trade.quantity", "finite"),
        (frame("api_trade", {**TRADE_WIRE, "quantity": None}), "Trade.quantity", "missing or null"),
        (frame("api_trade", {**TRADE_WIRE, "timestamp": "soon", "time": None}), "Trade.timestamp", "expected a time (ms, s or a date-time), got 'soon' - at `$.data.timestamp`"),
        (frame("api_trade", {**TRADE_WIRE, "isLong": "maybe"}), "Trade.isLong", "bool"),
        (frame("api_trade", {k: v for k, v in TRADE_WIRE.items() if k != "pair"}), "Trade.pair", "no pair"),
        (frame("api_trade", None), "Trade.data", "got `null` - at `$.data`"),
        (frame("api_trade", "text"), "Trade.data", "got `str` - at `$.data`"),
        (frame("api_depth", {"bids": [[1]]}, pair="E"), "Book.bids", "$.data.bids[0]"),
        (frame("api_depth", {"asks": [{"price": 0, "quantity": 1}]}, pair="E"), "Book.price", "$.data.asks[0].price"),
        (frame("api_depth", {"asks": "x"}, pair="E"), "Book.asks", "$.data.asks"),
        (frame("api_depth", {}, pair=5), "frame.pair", "$.pair"),
        (frame("api_kline", {**KLINE_WIRE, "period": None}, pair="E"), "Bar.period", "no period"),
        (frame("api_kline", {**KLINE_WIRE, "count": -1}, pair="E"), "Bar.count", ">= 0"),
        (frame("api_kline", {**KLINE_WIRE, "high": None}, pair="E"), "Bar.high", "missing"),
        (frame("api_nope", {}), "frame.event", "unknown event str 'api_nope'"),
        (b'{"data": 1}', "frame.event", "unknown event NoneType"),
        (b"[1, 2]", "frame", "Expected `object`"),
        (b"not json", "frame", "not JSON"),
    ],
)  # fmt: skip
def test_a_malformed_frame_is_one_decode_error_naming_the_field(
    body: bytes, where: str, words: str
) -> None:
    with pytest.raises(DecodeError) as caught:
        codec.frame(body)
    message = str(caught.value)
    assert message.startswith(f"cannot decode {where}:"), message
    assert words in message
    assert caught.value.__cause__ is None  # one error, no chain shown
    assert caught.value.__context__ is None or caught.value.__suppress_context__


# ----------------------------------------------------------------------------- REST answers


@pytest.mark.parametrize(
    ("data", "time"),
    [
        ("1850.25", None),
        (1850.25, None),
        ({"price": "1850.25", "time": TS}, TS),
        ({"markPrice": 1850.25, "indexPrice": None, "timestamp": str(TS)}, TS),
    ],
)
def test_a_mark_price_answer_is_a_number_a_string_or_an_object(data: Any, time: int | None) -> None:
    assert codec.mark_price(200, answer(data), "ETH-USD") == MarkPrice(
        pair="ETH-USD", price=Decimal("1850.25"), time=time
    )


def test_a_rest_answers_numbers_are_read_from_their_text() -> None:
    body = b'{"code":200,"error":false,"data":{"markPrice":1850.123456789012345678}}'
    got = codec.mark_price(200, body, "ETH-USD")
    assert str(got.price) == "1850.123456789012345678"
    body = b'{"code":200,"error":false,"data":[{"price":0.30000000000000001,"quantity":1}]}'
    assert str(codec.trades(200, body, "ETH-USD")[0].price) == "0.30000000000000001"


def test_an_index_price_answer_names_its_pair_or_takes_the_one_asked() -> None:
    got = codec.index_price(200, answer({"pair": "BTC-USD", "indexPrice": "60000"}), "ETH-USD")
    assert got == IndexPrice(pair="BTC-USD", price=Decimal(60000))


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (None, "IndexPrice.data: required field is missing or null - at `$.data`"),
        ({"other": 1}, "IndexPrice.price: required field is missing or null - at `$.data.price`"),
        ("cheap", "IndexPrice.data: Invalid decimal string - at `$.data`"),
        ("0", "IndexPrice.data: expected a positive finite decimal, got 0 - at `$.data`"),
    ],
)
def test_a_price_answer_without_a_price_is_a_decode_error(data: Any, words: str) -> None:
    with pytest.raises(DecodeError) as caught:
        codec.index_price(200, answer(data), "ETH-USD")
    assert str(caught.value) == f"cannot decode {words}"


@pytest.mark.parametrize(
    "data",
    [[TRADE_WIRE], {"list": [TRADE_WIRE]}, {"records": [TRADE_WIRE], "total": 1}, TRADE_WIRE],
)
def test_a_trades_answer_is_a_list_a_list_in_an_object_or_one_trade(data: Any) -> None:
    (trade,) = codec.trades(200, answer(data), "ETH-USD")
    assert (trade.id, trade.price, trade.time) == ("901", Decimal("1850.5"), TS)


def test_depth_and_kline_answers_decode_with_the_pair_and_period_asked() -> None:
    book = codec.depth(200, answer({"bids": [["1", "2"]], "asks": []}), "ETH-USD")
    assert book == Book(pair="ETH-USD", bids=((Decimal(1), Decimal(2)),), asks=())
    bare = {k: v for k, v in KLINE_WIRE.items() if k != "period"}
    bars = codec.klines(200, answer([bare, bare]), "ETH-USD", "1MIN")
    assert [(b.pair, b.period, b.close) for b in bars] == [("ETH-USD", "1MIN", Decimal(1851))] * 2
    assert codec.klines(200, answer(None), "ETH-USD", "1MIN") == ()
    with pytest.raises(DecodeError, match=r"cannot decode Bar.close: .* at `\$.data\[1\].close`"):
        codec.klines(200, answer([bare, {**bare, "close": "x"}]), "ETH-USD", "1MIN")


def test_rest_failures_raise_as_the_other_public_calls_do() -> None:
    with pytest.raises(ExtensionUnavailable, match="/api/third/info/markPrice"):
        codec.mark_price(404, b"Not Found", "ETH-USD")
    with pytest.raises(ServerFault):
        codec.depth(502, answer(None), "ETH-USD")
    with pytest.raises(VenueError) as refused:
        codec.trades(200, answer(None, code=2001), "ETH-USD")
    assert refused.value.code == 2001
    with pytest.raises(BadResponse, match="not JSON"):
        codec.klines(200, b"<html>", "ETH-USD", "1MIN")


# ----------------------------------------------------------------------------- requests


def test_market_gets_are_unsigned_with_unset_parameters_left_out() -> None:
    paths = MarketPaths()
    request = market_request(
        paths.kline, pairName="ETH-USD", period="1MIN", end_time=TS, limit=None
    )
    assert (request.method, request.target) == (
        "GET",
        f"/api/third/info/kline?pairName=ETH-USD&period=1MIN&end_time={TS}",
    )
    assert request.headers == {} and request.body == b"" and request.signed_text == ""
    depth = market_request(paths.depth, pairName="ETH/USD x", limit=20)
    assert depth.target == "/api/third/info/depth?pairName=ETH%2FUSD%20x&limit=20"
    assert market_request(paths.mark_price, pairName="ETH-USD").query == "pairName=ETH-USD"


@pytest.mark.parametrize(
    "params",
    [{"pairName": ""}, {"pairName": None}, {"pairName": "E", "limit": 0}, {"limit": "5"},
     {"end_time": -1}, {"period": 5}],
)  # fmt: skip
def test_a_bad_get_parameter_is_refused_locally(params: dict[str, Any]) -> None:
    with pytest.raises(ParameterError):
        market_request("/p", **params)


def test_market_subscribes_are_signed_as_api_positions_are() -> None:
    builder = RequestBuilder("st_test", make_signer(2, "0x" + "11" * 32))
    position = builder.subscribe("api_position", TS, pair="ETH-USD")
    depth = market_subscribe(builder, "api_depth", "ETH-USD", TS)
    assert depth == {**position, "event": "api_depth"}
    kline = market_subscribe(builder, "api_kline", "ETH-USD", TS, period="1MIN")
    assert kline == {**position, "event": "api_kline", "period": "1MIN"}
    gone = market_subscribe(builder, "api_trade", "ETH-USD", TS, method="UNSUBSCRIBE")
    assert gone["method"] == "UNSUBSCRIBE" and gone["signature"] == position["signature"]
    for event, period in (("api_kline", None), ("api_trade", "1MIN"), ("api_position", None)):
        with pytest.raises(ValueError, match="subscribe"):
            market_subscribe(builder, event, "ETH-USD", TS, period=period)


# ----------------------------------------------------------------------------- round trips

prices = st.decimals(min_value=Decimal("1e-8"), max_value=Decimal("1e12"), places=8)
amounts = st.decimals(min_value=Decimal(0), max_value=Decimal("1e12"), places=8)
times = st.integers(min_value=10**11, max_value=4 * 10**12) | st.none()
pairs = st.sampled_from(["ETH-USD", "BTC-USD"])
encoders = st.sampled_from([msgspec.json.Encoder(), msgspec.json.Encoder(decimal_format="number")])


@given(
    st.builds(
        Trade,
        pair=pairs,
        price=prices,
        quantity=amounts,
        is_long=st.booleans() | st.none(),
        time=times,
        id=st.integers(min_value=1).map(str) | st.none(),
        amount=amounts | st.none(),
    ),
    encoders,
)
def test_a_trade_round_trips_through_the_venue_shape(trade: Trade, encoder: Any) -> None:
    wire = {
        "contractMatchPairId": trade.id,
        "pair": trade.pair,
        "price": trade.price,
        "quantity": trade.quantity,
        "amount": trade.amount,
        "isLong": trade.is_long,
        "timestamp": trade.time,
    }
    assert codec.frame(encoder.encode({"event": "api_trade", "data": [wire]})) == (trade,)


@given(
    st.lists(st.tuples(prices, amounts.filter(bool)), max_size=5, unique_by=lambda x: x[0]),
    st.lists(st.tuples(prices, amounts.filter(bool)), max_size=5, unique_by=lambda x: x[0]),
    times,
    encoders,
)
def test_a_book_round_trips_through_the_venue_shape(
    bids: list[tuple[Decimal, Decimal]],
    asks: list[tuple[Decimal, Decimal]],
    time: int | None,
    encoder: Any,
) -> None:
    bids.sort(reverse=True)
    asks.sort()
    book = Book(pair="ETH-USD", bids=tuple(bids), asks=tuple(asks), time=time)
    data = {
        "bids": [{"price": p, "quantity": q} for p, q in reversed(bids)],  # any order
        "asks": [[p, q] for p, q in asks],
        "time": time,
    }
    assert codec.frame(encoder.encode({"event": "api_depth", "pair": "ETH-USD", "data": data})) == (
        book,
    )


@given(
    st.builds(
        Bar,
        pair=pairs,
        period=st.sampled_from(["1SECOND", "1MIN", "1YEAR"]),
        open=prices,
        high=prices,
        low=prices,
        close=prices,
        quantity=amounts | st.none(),
        amount=amounts | st.none(),
        count=st.integers(min_value=0, max_value=10**9) | st.none(),
        time=times,
    ),
    encoders,
)
def test_a_bar_round_trips_through_the_venue_shape(bar: Bar, encoder: Any) -> None:
    wire = {k: getattr(bar, k) for k in ("amount", "close", "count", "high", "low", "open")}
    wire |= {"period": bar.period, "quantity": bar.quantity, "time": bar.time}
    assert codec.frame(encoder.encode({"event": "api_kline", "data": wire}), pair=bar.pair) == (
        bar,
    )
