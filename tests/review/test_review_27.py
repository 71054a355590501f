"""Review of issue 27's market data (session 14): each test fails at af13ec5 for the bug named.

These pin defects found by an adversarial review; the fixes are routed by the lead. Each test
says what it shows and where the defect sits.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from framework import Bar, Book, MarkPrice, OrderIntent, Strategy, Trade
from framework.backtest.runner import Backtest
from framework.config import parse_config
from framework.engine.clock import VirtualClock
from framework.engine.events import OrderUpdate
from framework.engine.kernel import Kernel
from framework.live.market_feed import MarketFeed
from framework.live.market_stream import MarketStream, Subscription
from framework.live.recorder import Recorder
from framework.recording import RecordingReader, RecordingWriter
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.venue.requests import PreparedRequest, RequestBuilder
from framework.venue.signing import make_signer

T0 = 1_700_000_000_000
PAIR = "ETH-USD"
BUILDER = RequestBuilder(DEMO_API_KEY, make_signer(2, DEMO_PRIVATE_KEY))


def answer(data: Any) -> str:
    """A public answer's envelope around data."""
    return orjson.dumps({"error": False, "code": 200, "msg": "SUCCESS", "data": data}).decode()


def depth(n: int, bid: int, ask: int) -> str:
    """An api_depth frame of one level a side, stamped T0 + n."""
    data = {
        "asks": [{"price": str(ask), "quantity": "5"}],
        "bids": [{"price": str(bid), "quantity": "5"}],
        "timestamp": T0 + n,
    }
    return orjson.dumps({"event": "api_depth", "pair": PAIR, "data": data}).decode()


def trade(n: int, price: str) -> str:
    """An api_trade frame of one trade, stamped T0 + n."""
    data = {"contractMatchPairId": n, "pair": PAIR, "price": price, "quantity": "0.5",
            "isLong": True, "timestamp": T0 + n}  # fmt: skip
    return orjson.dumps({"event": "api_trade", "pair": PAIR, "data": [data]}).decode()


# ---- 1. the backtest starts its strategies before the market the live node heard first


class OpensAtStart(Strategy):
    """On start: notes self.market's mark and sends a market buy; keeps its order updates."""

    runs: ClassVar[list[OpensAtStart]] = []

    def on_start(self) -> None:
        OpensAtStart.runs.append(self)
        self.mark_at_start = self.market.mark(PAIR)
        self.updates: list[OrderUpdate] = []
        self.submit(OrderIntent(pair=PAIR, is_long=True, quantity=Decimal("0.01")))

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update)


FED_CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
market:
  stale_after_s: 10
  pairs:
    ETH-USD: {channels: [trade, depth], mark_interval_s: 5}
strategies:
  - {name: opener, class: "tests.review.test_review_27:OpensAtStart", pairs: [ETH-USD]}
logging: {level: WARNING}
"""


def test_a_backtest_on_start_sees_the_market_a_live_node_heard_before_it(tmp_path: Path) -> None:
    """Live, the node starts its market feed and waits for it (MarketFeed.ready, node.py:414)
    before on_start, so on_start reads the mark and a market order in it passes 9007 (the
    live template's first order, tests/live/test_live_example.py). A recording of that run
    begins with those records (mark line, book frame) before anything else. The backtest
    (runner.py:335) runs kernel.starting() before the replay delivers any line, so the same
    strategy reads no mark and its first market order is refused 9007 'no market data yet'.
    """
    path = tmp_path / "run.jsonl"
    with RecordingWriter(path, append=False) as w:  # what the live node heard before on_start
        w.write_ws(T0, '{"event":"api_depth_res","success":true,"pair":"ETH-USD"}')
        w.write_market(T0 + 5, "mark", PAIR, answer("2000"))
        w.write_ws(T0 + 6, depth(6, 1999, 2001))
        w.write_ws(T0 + 2_000, depth(2_000, 1999, 2001))  # after the start
    OpensAtStart.runs.clear()
    Backtest(parse_config(FED_CONFIG), path).run()
    (strategy,) = OpensAtStart.runs
    refused = [u.msg for u in strategy.updates if u.code == 9007]
    assert (strategy.mark_at_start, refused) == (Decimal("2000"), [])


# ---- 2. a kline frame naming no pair: heard live (one pair), refused by the replay


def kline_without_pair() -> str:
    """An api_kline frame as VENUE-FACTS shows it: the data names only contractPairId."""
    data = {"amount": "100", "close": "2003", "count": 3, "high": "2010", "low": "1990",
            "open": "2000", "period": "1MIN", "quantity": "0.05", "time": T0,
            "contractPairId": 1}  # fmt: skip
    return orjson.dumps({"event": "api_kline", "data": data}).decode()


class BarCounter(Strategy):
    """Keeps the bars it hears."""

    runs: ClassVar[list[BarCounter]] = []

    def on_start(self) -> None:
        BarCounter.runs.append(self)
        self.bars: list[Bar] = []

    def on_bar(self, bar: Bar) -> None:
        self.bars.append(bar)


KLINE_CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
market:
  pairs:
    ETH-USD: {channels: [kline], periods: [1MIN], mark_interval_s: 0}
strategies:
  - {name: bars, class: "tests.review.test_review_27:BarCounter", pairs: [ETH-USD]}
logging: {level: WARNING}
"""


def test_a_kline_frame_without_a_pair_heard_live_is_heard_by_the_backtest(tmp_path: Path) -> None:
    """MarketStream gives a frame naming no pair its only subscribed pair
    (market_stream.py:216 and 371, _default_pair), so live hears the bar (as
    tests/live/test_market_feed.py's kline() frame shows). The recorder writes the raw frame;
    the Replayer decodes it with no pair (replay.py:314 ``self._market.frame(frame)``), the
    codec refuses it ('no pair in the record, its frame or the call'), it is counted in
    market_errors and the backtest's on_bar never hears it."""
    frame = kline_without_pair()
    live: list[Any] = []
    stream = MarketStream(
        "ws://127.0.0.1:9/api/market/ws",
        BUILDER,
        [Subscription("api_kline", PAIR, "1MIN")],
        on_record=live.append,
        clock=VirtualClock(T0),
    )
    stream._frame(frame)  # what the live socket does with the frame
    assert [type(r) for r in live] == [Bar]  # live: heard

    path = tmp_path / "run.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0, frame)
        w.write_ws(T0 + 1_000, depth(1_000, 1999, 2001))
    BarCounter.runs.clear()
    result = Backtest(parse_config(KLINE_CONFIG), path).run()
    (strategy,) = BarCounter.runs
    assert result.results["recording"]["market_errors"] == 0
    assert strategy.bars == live


# ---- 3. a poll answered after the feed stopped is recorded (not fed)


FEED_CONFIG = """\
venue:
  base_url: http://127.0.0.1:9
  ws_url: ws://127.0.0.1:9/ws
  api_key: ${KEY}
  api_secret: ${SECRET}
pairs:
  ETH-USD: {}
market:
  pairs:
    ETH-USD: {channels: [], mark_interval_s: 5}
journal: {path: JOURNAL}
strategies:
  - {name: marks, class: "tests.review.test_review_27:MarkCounter", pairs: [ETH-USD]}
"""


@pytest.mark.anyio
async def test_a_mark_poll_answered_after_the_feed_stopped_is_not_recorded(
    tmp_path: Path, anyio_backend: str
) -> None:
    """Commit 745736c says a poll answered after the feed stopped is 'neither fed nor
    recorded', and MarketFeed._recorded (market_feed.py:82) was written for that, but plug
    never uses it: PricePoll gets ``on_answer=recorder.on_market`` itself
    (market_feed.py:155). A poll in flight at stop is not fed (take() checks stopped) yet is
    written as a market line; the backtest of the recording then feeds a mark the live
    strategies never heard."""
    text = FEED_CONFIG.replace("JOURNAL", str(tmp_path / "journal.sqlite"))
    config = parse_config(text, env={"KEY": DEMO_API_KEY, "SECRET": DEMO_PRIVATE_KEY})
    kernel = Kernel(config, VirtualClock(T0))
    recorder = Recorder(tmp_path / "run.jsonl", now_ms=lambda: T0)
    fed: list[Any] = []

    async def send(request: PreparedRequest) -> tuple[int, bytes]:
        return 200, answer("2000").encode()  # the venue answers the poll sent before stop

    feed = MarketFeed.plug(
        config, kernel, ws_url=config.venue.ws_url, builder=BUILDER, send=send,
        intake=fed.append, recorder=recorder,
    )  # fmt: skip
    (poll,) = feed.polls
    feed.stop()
    await poll.poll()  # its answer arrives after the stop
    recorder.close()
    assert fed == []  # not fed: right
    reader = RecordingReader(tmp_path / "run.jsonl")
    try:
        lines = list(reader.records())
    finally:
        reader.close()
    assert lines == []  # yet recorded


# ---- 4. market.source is run live, never in a backtest


class RefSource:
    """A user source (``market: {source: ...}``): one mark a second from the start."""

    records = (MarkPrice,)

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params

    async def run(self, feed: Any) -> None:  # pragma: no cover - live only
        feed(MarkPrice(pair=PAIR, price=Decimal("2000")))

    def timed(self, start_ms: int) -> Iterator[tuple[int, Any]]:
        for i in range(1, 4):
            yield start_ms + i * 1000, MarkPrice(pair=PAIR, price=Decimal(2000 + i))


class MarkCounter(Strategy):
    """Keeps the marks it hears."""

    runs: ClassVar[list[MarkCounter]] = []

    def on_start(self) -> None:
        MarkCounter.runs.append(self)
        self.marks: list[MarkPrice] = []

    def on_mark(self, mark: MarkPrice) -> None:
        self.marks.append(mark)


SOURCE_CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
market:
  source: tests.review.test_review_27:RefSource
strategies:
  - {name: marks, class: "tests.review.test_review_27:MarkCounter", pairs: [ETH-USD]}
logging: {level: WARNING}
"""


def test_a_backtest_runs_the_market_sections_user_source(tmp_path: Path) -> None:
    """Live, MarketFeed.plug loads ``market.source`` and the node runs it
    (market_feed.py:126); its records go to the kernel's intake, not to the recorder. The
    backtest runner loads only ``config.sources`` (runner.py:298): the market source is never
    built, its ``timed`` never fed, so the strategy hears none of its marks. Worse, with
    ``market.source`` set every traded pair counts as fed (MarketConfig.stale_after), so each
    market order in such a backtest is refused 9007 'no market data yet'."""
    path = tmp_path / "run.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0, '{"event":"api_position_res","success":true}')
        w.write_ws(T0 + 5_000, '{"event":"api_position_res","success":true}')
    MarkCounter.runs.clear()
    Backtest(parse_config(SOURCE_CONFIG), path).run()
    (strategy,) = MarkCounter.runs
    assert [m.price for m in strategy.marks] == [Decimal(2001), Decimal(2002), Decimal(2003)]


# ---- 5. the reference price is a mark far older than stale_after_s while trades are fresh


REF_CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
execution:
  risk: {max_notional: "2500"}
market:
  stale_after_s: 10
  pairs:
    ETH-USD: {channels: [trade], mark_interval_s: 5}
strategies:
  - {name: marks, class: "tests.review.test_review_27:MarkCounter", pairs: [ETH-USD]}
"""


def test_a_mark_older_than_stale_after_does_not_price_a_market_order_over_fresh_trades() -> None:
    """The mark poll fails from t=0 on (500s are told once a minute, the old mark stays), while
    trades keep coming. MarketView.age is the pair's newest record of any kind, so the pair is
    never stale; ReferencePrices.price takes the mark first whatever its age
    (engine/market.py:121, reference.py:71). Two minutes on, a market order is valued at the
    2-minute-old mark of 2000 although the market trades at 3000: max_notional 2500 admits a
    1-lot buy worth 3000, and 9007 (meant for 'a market order on a price older than
    stale_after_s') does not fire."""
    clock = VirtualClock(T0)
    kernel = Kernel(parse_config(REF_CONFIG), clock)
    kernel.intake(MarkPrice(pair=PAIR, price=Decimal(2000), time=T0))
    for second in range(1, 121):
        clock.ms = T0 + second * 1000
        kernel.intake(Trade(pair=PAIR, price=Decimal(3000), quantity=Decimal(1), time=clock.ms))
    assert kernel.references.stale(PAIR) is None  # fresh: trades every second
    assert kernel.market.age(PAIR) == 0.0
    # the price a market order is judged by: 2 minutes old (stale_after_s is 10)
    assert kernel.references.price(PAIR) == Decimal(3000)


# ---- 6. the backtest hears its paper fill before the recorded trade that caused it


class RestingBid(Strategy):
    """Places a bid below the market at the first book; notes hooks in order."""

    runs: ClassVar[list[RestingBid]] = []

    def on_start(self) -> None:
        RestingBid.runs.append(self)
        self.heard: list[tuple[str, Any]] = []
        self.sent = False

    def on_book(self, book: Book) -> None:
        if not self.sent:
            self.sent = True
            self.submit(
                OrderIntent(pair=PAIR, is_long=True, quantity=Decimal("0.1"), price=Decimal(1990))
            )

    def on_trade(self, trade: Trade) -> None:
        self.heard.append(("trade", trade.price))

    def on_position(self, push: Any) -> None:
        self.heard.append(("position", self.market.last(PAIR)))


BID_CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
strategies:
  - {name: bid, class: "tests.review.test_review_27:RestingBid", pairs: [ETH-USD]}
logging: {level: WARNING}
"""


def test_the_trade_that_fills_a_resting_bid_is_heard_before_the_fill(tmp_path: Path) -> None:
    """The twin publishes a tick's trade frame, then makes the fills it causes and pushes
    them (twin/market_feed.py:93-106): a live strategy hears on_trade of the crossing trade,
    then its position push, and self.market.last is the crossing price in on_position. The
    replay taps the paper venue first (replay.py:364, ``tap(record)`` before the route): the
    paper fill's position push is delivered, and on_position runs, before the strategy hears
    the trade; self.market.last there is still the older price."""
    path = tmp_path / "run.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0 + 1_000, depth(1_000, 1999, 2001))
        w.write_ws(T0 + 2_000, trade(2_000, "1995"))
        w.write_ws(T0 + 4_000, trade(4_000, "1990"))  # reaches the bid
        w.write_ws(T0 + 9_000, depth(9_000, 1989, 1991))
    RestingBid.runs.clear()
    Backtest(parse_config(BID_CONFIG), path).run()
    (strategy,) = RestingBid.runs
    first_position = next(i for i, (kind, _) in enumerate(strategy.heard) if kind == "position")
    assert strategy.heard[first_position - 1] == ("trade", Decimal(1990))
    assert strategy.heard[first_position] == ("position", Decimal(1990))


# ---- 7. market data on one pair switches every pair off its price track


class TwoPairs(Strategy):
    """3 s after the start: a market buy of BTC-USD (whose market is not recorded)."""

    runs: ClassVar[list[TwoPairs]] = []

    def on_start(self) -> None:
        TwoPairs.runs.append(self)
        self.updates: list[OrderUpdate] = []
        self.sent = False
        self.schedule("buy", 3.0)

    def on_timer(self, name: str) -> None:
        if not self.sent:
            self.sent = True
            self.submit(OrderIntent(pair="BTC-USD", is_long=True, quantity=Decimal("0.001")))

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update)


TWO_PAIRS_CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
strategies:
  - {name: two, class: "tests.review.test_review_27:TwoPairs", pairs: [ETH-USD, BTC-USD]}
logging: {level: WARNING}
"""


def test_a_pair_without_recorded_market_data_keeps_its_price_track(tmp_path: Path) -> None:
    """PaperVenue.on_market turns ``exchange.book_fills`` and ``market_fills`` on for the whole
    venue at the first recorded book or trade of ANY pair (paper.py:276-279); from then on
    the price track is applied to no pair (``_feed`` and ``_catch_up`` return when
    market_fills, paper.py:227 and 239). BTC-USD, whose market the recording does not hold,
    has its price only in the track (its position push's openingPrice 40000): without
    ETH-USD's book in the recording, a BTC-USD market buy fills at 40000; with it, BTC-USD
    never gets a mark and the buy is refused 2331 (no price) for the rest of the backtest."""
    from tests.venue.frames import position_frame

    def run(eth_market: bool) -> tuple[list[tuple[int | None, str | None]], list[Any]]:
        path = tmp_path / f"run{eth_market}.jsonl"
        with RecordingWriter(path, append=False) as w:
            if eth_market:
                w.write_ws(T0 + 1_000, depth(1_000, 1999, 2001))
            else:
                w.write_ws(T0 + 1_000, '{"event":"api_position_res","success":true}')
            w.write_ws(T0 + 2_000, position_frame(9, "0.01", pair="BTC-USD", opening_price="40000"))
            w.write_ws(T0 + 9_000, '{"event":"api_position_res","success":true}')
        TwoPairs.runs.clear()
        result = Backtest(parse_config(TWO_PAIRS_CONFIG), path).run()
        (strategy,) = TwoPairs.runs
        refused = [(u.code, u.msg) for u in strategy.updates if u.code is not None]
        return refused, [(f.pair, f.price) for f in result.paper.fills]

    without = run(eth_market=False)
    assert without[0] == [] and [pair for pair, _ in without[1]] == ["BTC-USD"]  # the control
    assert run(eth_market=True) == without


# ---- 8. doctor: a mark path the venue does not serve (404) passes as ok


@pytest.mark.anyio
async def test_doctor_does_not_pass_a_mark_poll_the_venue_answers_404(anyio_backend: str) -> None:
    """README's market-data row: 'warn: a mark poll fails'. The doctor collects failures
    through the poll's ``told`` (doctor_market.py:64), but PricePoll tells only
    FrameworkError/OSError failures; a 404 (ExtensionUnavailable) is logged and the poll
    turned off without ``told`` (market_polls.py:98-104). With the socket's pairs heard, the
    finding is 'ok' although no mark was read: the node then has no mark to price by."""
    from framework.live.doctor_market import _finding
    from framework.live.market_polls import PricePoll

    failures: list[str] = []
    heard: list[Any] = []

    async def send(request: PreparedRequest) -> tuple[int, bytes]:
        return 404, b"Not Found"

    poll = PricePoll(send, "mark", PAIR, 5.0, on_record=heard.append,
                     told=lambda kind, detail: failures.append(f"{kind} price: {detail}"))  # fmt: skip
    await poll.poll()
    assert poll.off and heard == []  # the mark was not read
    first = {PAIR: {"trade": Trade(pair=PAIR, price=Decimal(2000), quantity=Decimal(1))}}
    state, _, text = _finding(first, {PAIR}, {PAIR: 0.1}, [("connected", "")], failures, None, 10)
    assert state != "ok", text


# ---- 9. a pair under market.pairs that hears nothing is 'fed': every market order 9007


def test_a_market_pair_that_hears_nothing_is_refused_as_a_config_or_is_not_stale() -> None:
    """``ETH-USD: {channels: [], mark_interval_s: 0}`` subscribes nothing and polls nothing,
    yet check_market accepts it (market_config.py:118-160) and MarketConfig.stale_after
    gives it the section's bound (market_config.py:85-89): the kernel counts the pair as fed,
    nothing ever comes, and every market order on it is refused 9007 'no market data yet'
    for the life of the node. Either the config should be one located line, or the pair
    should count as not fed (README: 'A pair nothing feeds is never stale')."""
    from framework.venue.errors import ConfigError

    text = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
market:
  pairs:
    ETH-USD: {channels: [], mark_interval_s: 0, index_interval_s: 0}
strategies:
  - {name: marks, class: "tests.review.test_review_27:MarkCounter", pairs: [ETH-USD]}
"""
    try:
        config = parse_config(text)
    except ConfigError:
        return  # told as a config problem: fine
    kernel = Kernel(config, VirtualClock(T0))
    assert kernel.references.stale(PAIR) is None, config.market.stale_after(PAIR)


# ---- 10. one record stamped in the future freezes self.market and makes the pair stale


def test_one_record_stamped_far_in_the_future_does_not_freeze_the_view() -> None:
    """MarketView keeps a record only when it is not stamped earlier than the one held
    (engine/market.py:37-39, 82), with no bound on how far ahead of the clock a stamp may be.
    One trade stamped a day ahead (a bad venue time, seconds/ms mixed up by a source...)
    is held; every later trade, correctly stamped, is 'older' and dropped: last() stays at
    the bad trade's price and age() grows while trades flow, so 30 s on the pair is stale
    and every market order is refused 9007, for a day."""
    clock = VirtualClock(T0)
    kernel = Kernel(parse_config(REF_CONFIG), clock)
    kernel.intake(Trade(pair=PAIR, price=Decimal(1), quantity=Decimal(1), time=T0 + 86_400_000))
    for second in range(1, 31):
        clock.ms = T0 + second * 1000
        kernel.intake(Trade(pair=PAIR, price=Decimal(2), quantity=Decimal(1), time=clock.ms))
    assert (kernel.market.last(PAIR), kernel.references.stale(PAIR)) == (Decimal(2), None)
