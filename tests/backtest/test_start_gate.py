"""StartGate: the leading records a live node heard before it started its strategies."""

from __future__ import annotations

from framework.backtest.start_gate import StartGate
from framework.config import parse_config
from framework.recording import LineRecord, MarketLine, RestLine, WsLine

T0 = 1_700_000_000_000
STRATEGIES = """
  - {name: m, class: "tests.review.test_review_27:MarkCounter", pairs: [ETH-USD]}
"""
CONFIG = (
    """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
market:
  pairs:
    ETH-USD: {channels: [trade, kline], periods: [1MIN, 5MIN], mark_interval_s: 5}
    BTC-USD: {channels: [], index_interval_s: 5, mark_interval_s: 0}
strategies:"""
    + STRATEGIES
)
MARK = '{"error":false,"code":200,"msg":"SUCCESS","data":"2000"}'


def gate(text: str = CONFIG) -> StartGate:
    config = parse_config(text)
    found = StartGate.of(config.market, config.venue.timeout_s)
    assert found is not None
    return found


def ack(event: str, pair: str | None = "ETH-USD") -> str:
    named = f',"pair":"{pair}"' if pair else ""
    return f'{{"event":"{event}_res","success":true{named}}}'


def trade(ts: int) -> WsLine:
    return WsLine(ts=ts, frame=f'{{"event":"api_trade","pair":"ETH-USD","data":[],"t":{ts}}}')


def before(g: StartGate, records: list[LineRecord]) -> list[bool]:
    return [g.before_start(record) for record in records]


def test_the_stretch_ends_with_the_record_that_makes_the_feed_ready() -> None:
    records: list[LineRecord] = [
        RestLine(ts=T0, path="/api/third/order/positionList", body="{}"),  # the initial sync
        WsLine(ts=T0 + 50, frame=ack("api_trade")),
        trade(T0 + 51),
        WsLine(ts=T0 + 52, frame=ack("api_kline")),  # 1MIN
        MarketLine(ts=T0 + 53, kind="mark", pair="ETH-USD", body=MARK),
        MarketLine(ts=T0 + 54, kind="index", pair="BTC-USD", body=MARK),
        WsLine(ts=T0 + 55, frame=ack("api_kline", None)),  # 5MIN, naming no pair: ready
        trade(T0 + 56),
    ]
    assert before(gate(), records) == [True] * 7 + [False]


def test_a_private_frame_starts_the_strategies_at_once() -> None:
    private = WsLine(ts=T0 + 2, frame='{"event":"api_position_res","success":true}')
    records: list[LineRecord] = [trade(T0), private, trade(T0 + 3)]
    assert before(gate(), records) == [True, False, False]


def test_a_feed_never_ready_is_waited_for_venue_timeout_s_from_its_first_record() -> None:
    g = gate(CONFIG.replace("venue: {embedded: true}", "venue: {embedded: true, timeout_s: 2}"))
    records: list[LineRecord] = [trade(T0), trade(T0 + 2_000), trade(T0 + 2_001), trade(T0 + 3)]
    assert before(g, records) == [True, True, False, False]


def test_a_node_without_a_feed_has_no_gate() -> None:
    for market in ("", "market:\n  source: tests.review.test_review_27:RefSource\n"):
        config = parse_config(CONFIG.split("market:")[0] + market + "strategies:" + STRATEGIES)
        assert StartGate.of(config.market, config.venue.timeout_s) is None
