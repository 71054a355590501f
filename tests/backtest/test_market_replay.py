"""Market data in recordings: kept beside the private pushes, replayed in recorded order."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from framework import AccountPush, OrderIntent, PositionPush, Strategy
from framework.backtest.replay import Replayer
from framework.backtest.runner import Backtest
from framework.backtest.timeline import Timeline
from framework.config import parse_config
from framework.engine.clock import VirtualClock
from framework.engine.strategy import BasicContext
from framework.recording import MarketLine, RecordingReader, RecordingWriter, WsRecord
from framework.venue.codec import decode_frame
from framework.venue.market import DEFAULT_MARKET_CODEC, Bar, Book, IndexPrice, MarkPrice, Trade
from tests.venue.frames import account_frame, position_frame

CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
strategies:
  - {name: listen, class: "tests.backtest.test_market_replay:Listener", pairs: [ETH-USD]}
logging: {level: WARNING}
"""
T0 = 1_700_000_000_000


def trade(pair: str, price: str, n: int, *, first: str = "event") -> str:
    data = {"contractMatchPairId": n, "pair": pair, "price": price, "quantity": "0.5",
            "amount": "1", "isLong": n % 2 == 0, "timestamp": T0 + n, "contractPairId": 1}  # fmt: skip
    frame = {"event": "api_trade", "pair": pair, "data": [data]}
    if first == "pair":  # keys in another order: found by the slower path, as correct
        frame = {"pair": pair, "data": [data], "event": "api_trade"}
    return orjson.dumps(frame).decode()


def depth(pair: str, mid: int, n: int) -> str:
    asks = [{"price": str(mid + 1 + i), "quantity": "1.5"} for i in range(10)]
    bids = [{"price": str(mid - 1 - i), "quantity": "2"} for i in range(10)]
    data = {"asks": asks, "bids": bids, "timestamp": T0 + n}
    return orjson.dumps({"event": "api_depth", "pair": pair, "data": data}).decode()


def kline(pair: str, close: str, n: int) -> str:
    data = {"amount": "10", "close": close, "count": 3, "high": "2010", "low": "1990",
            "open": "2000", "period": "1MIN", "quantity": "1", "time": T0 + n}  # fmt: skip
    return orjson.dumps({"event": "api_kline", "pair": pair, "data": data}).decode()


def answer(data: Any) -> str:
    return orjson.dumps({"error": False, "code": 200, "msg": "SUCCESS", "data": data}).decode()


class Listener(Strategy):
    """Every market hook and self.market, with the private pushes, in the order heard."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.heard: list[tuple[str, object]] = []
        self.views: list[tuple[Any, ...]] = []

    def _note(self, hook: str, record: object) -> None:
        self.heard.append((hook, record))
        m = self.market
        book = m.book("ETH-USD")
        self.views.append((m.last("ETH-USD"), m.mark("ETH-USD"), m.index("ETH-USD"),
                           book and book.best_bid, m.bar("ETH-USD", "1MIN"), m.age("ETH-USD")))  # fmt: skip

    def on_trade(self, trade: Trade) -> None:
        """Noted."""
        self._note("on_trade", trade)

    def on_book(self, book: Book) -> None:
        """Noted."""
        self._note("on_book", book)

    def on_bar(self, bar: Bar) -> None:
        """Noted."""
        self._note("on_bar", bar)

    def on_mark(self, mark: MarkPrice) -> None:
        """Noted."""
        self._note("on_mark", mark)

    def on_position(self, push: PositionPush) -> None:
        """Noted."""
        self._note("on_position", push)

    def on_account(self, push: AccountPush) -> None:
        """Noted."""
        self._note("on_account", push)


def listener(context: BasicContext) -> Listener:
    return Listener("listen", context, {}, pairs=["ETH-USD"])


def write_recording(path: Path) -> None:
    """Private pushes and market frames interleaved, with mark, index and REST answers."""
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0, '{"event":"api_trade_res","success":true}')
        w.write_ws(T0 + 1, trade("ETH-USD", "2000", 1))
        w.write_ws(T0 + 2, position_frame(1, "0.5"))
        w.write_ws(T0 + 3, depth("ETH-USD", 2000, 3))
        w.write_market(T0 + 4, "mark", "ETH-USD", answer("2000.25"))
        w.write_ws(T0 + 5, trade("BTC-USD", "40000", 5))  # a pair the strategy does not trade
        w.write_ws(T0 + 6, account_frame(10, "99"))
        w.write_market(T0 + 7, "index", "ETH-USD", answer({"indexPrice": "1999.5"}))
        w.write_ws(T0 + 8, kline("ETH-USD", "2003", 8))
        w.write_ws(T0 + 9, trade("ETH-USD", "2001", 9, first="pair"))
        w.write_ws(T0 + 10, '{"event":"api_depth","pair":"ETH-USD","data":{"asks":"x"}}')
        w.write_rest(T0 + 11, "/api/third/info/markPrice", "pairName=ETH-USD", answer("1"))
        w.write_market(T0 + 12, "depth", "ETH-USD", answer({"asks": [["2005", "1"]], "bids": []}))
        trades = [{"price": "2002", "quantity": "1", "timestamp": T0 + 12}]
        w.write_market(T0 + 13, "trades", "ETH-USD", answer(trades))
        bars = [{"open": "1", "high": "2", "low": "1", "close": "2", "time": T0}]
        w.write_market(T0 + 14, "kline", "ETH-USD", answer(bars), period="5MIN")
        w.write_ws(T0 + 15, depth("ETH-USD", 2010, 15))
        w.write_ws(T0 + 16, position_frame(1, "0", "CLOSE"))


def answer_records(line: MarketLine) -> tuple[Any, ...]:
    """The records of a market line's answer, decoded alone."""
    codec, body, pair = DEFAULT_MARKET_CODEC, line.body.encode(), line.pair
    if line.kind == "mark":
        return (codec.mark_price(200, body, pair),)
    if line.kind == "index":
        return (codec.index_price(200, body, pair),)
    if line.kind == "depth":
        return (codec.depth(200, body, pair),)
    if line.kind == "trades":
        return codec.trades(200, body, pair)
    return codec.klines(200, body, pair, line.period or "")


def expected(path: Path) -> list[tuple[str, object]]:
    """What a live node feeding these lines hears: each decoded alone, in file order."""
    hooks = {Trade: "on_trade", Book: "on_book", Bar: "on_bar", MarkPrice: "on_mark",
             PositionPush: "on_position", AccountPush: "on_account"}  # fmt: skip
    codec, out = DEFAULT_MARKET_CODEC, []
    for record in RecordingReader(path).records():
        records: tuple[Any, ...] = ()
        if isinstance(record, WsRecord):
            try:
                records = (decode_frame(record.frame),)
            except ValueError:
                try:
                    found = codec.frame(record.frame)
                except ValueError:
                    continue
                records = found if isinstance(found, tuple) else ()
        elif isinstance(record, MarketLine):
            records = answer_records(record)
        for item in records:
            if type(item) in hooks and getattr(item, "pair", getattr(item, "symbol", "")) in (
                "ETH-USD",
                "USD",
            ):
                out.append((hooks[type(item)], item))
    return out


def test_a_strategy_hears_the_recorded_market_and_pushes_in_recorded_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "market.jsonl"
    write_recording(path)
    result = Backtest(parse_config(CONFIG), path, strategies=[listener]).run()
    strategy = result.strategies[0]
    assert isinstance(strategy, Listener)
    want = expected(path)
    assert [hook for hook, _ in want] == [
        "on_trade", "on_position", "on_book", "on_mark", "on_account", "on_bar",
        "on_trade", "on_book", "on_trade", "on_bar", "on_book", "on_position",
    ]  # fmt: skip
    assert strategy.heard == want
    # self.market answers in the hooks as the records say, on the replay's clock
    last, mark, index, best_bid, bar, age = strategy.views[5]  # on_bar of the kline frame
    assert (str(last), str(mark), str(index), str(best_bid), bar, age) == (
        "2000", "2000.25", "1999.5", "1999", want[5][1], 0.0,
    )  # fmt: skip
    assert str(strategy.views[-1][0]) == "2002"  # the REST trade, the latest one
    stats = result.results["recording"]
    assert (stats["market_frames"], stats["market_answers"], stats["market_errors"]) == (6, 5, 1)
    assert stats["market_records"] == 11  # the BTC-USD trade and the index price included
    assert stats["acks"] == 1 and stats["rest_answers"] == 1 and stats["unknown_events"] == 0


def test_a_recording_without_market_data_reports_no_market_counters(tmp_path: Path) -> None:
    path = tmp_path / "private.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0, position_frame(1, "0.5"))
    result = Backtest(parse_config(CONFIG), path, strategies=[listener]).run()
    assert not any(key.startswith("market") for key in result.results["recording"])
    assert [hook for hook, _ in result.strategies[0].heard] == ["on_position"]  # type: ignore[attr-defined]


def test_a_recording_of_market_data_alone_shows_its_pairs(tmp_path: Path) -> None:
    path = tmp_path / "market.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0, trade("ETH-USD", "2000", 1))
    result = Backtest(parse_config(CONFIG), path, strategies=[listener]).run()
    assert result.warnings == []  # not "none of the config's pairs is in it"
    assert [hook for hook, _ in result.strategies[0].heard] == ["on_trade"]  # type: ignore[attr-defined]


def test_the_replay_hands_market_records_to_its_tap_after_delivering(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0, depth("ETH-USD", 2000, 0))
        w.write_ws(T0 + 1, trade("ETH-USD", "2000", 1))
    order: list[str] = []
    declared: list[tuple[type, ...]] = []

    def route(record: object) -> None:
        order.append(f"route {type(record).__name__}")

    routes = dict.fromkeys(
        (PositionPush, AccountPush, Trade, Book, Bar, MarkPrice, IndexPrice), route
    )
    clock = VirtualClock(T0)
    replayer = Replayer(
        clock=clock,
        timeline=Timeline(clock),
        routes=routes,
        on_match=lambda m: None,
        declare=lambda types: declared.append(tuple(types)),
        on_market=lambda r: order.append(f"tap {type(r).__name__}"),
    )
    replayer.run(RecordingReader(path))
    assert order == ["route Book", "tap Book", "route Trade", "tap Trade"]
    assert len(declared) == 1  # once, at the first market record


@pytest.mark.parametrize(("kline_pairs", "heard"), [(["ETH-USD"], 1), (["ETH-USD", "BTC-USD"], 0)])
def test_a_kline_frame_naming_no_pair_is_the_only_kline_pairs(
    tmp_path: Path, kline_pairs: list[str], heard: int
) -> None:
    path = tmp_path / "k.jsonl"
    frame = orjson.loads(kline("ETH-USD", "2003", 1))
    del frame["pair"]  # as the venue sends it: only contractPairId
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0, orjson.dumps(frame).decode())
    market = "".join(
        f"    {pair}: {{channels: [kline, trade], mark_interval_s: 0}}\n" for pair in kline_pairs
    )
    text = CONFIG.replace("strategies:", f"market:\n  pairs:\n{market}strategies:")
    result = Backtest(parse_config(text), path, strategies=[listener]).run()
    bars = [r for hook, r in result.strategies[0].heard if hook == "on_bar"]  # type: ignore[attr-defined]
    assert len(bars) == heard and result.results["recording"]["market_errors"] == 1 - heard


@pytest.mark.parametrize(("kind", "period"), [("kline", None), ("mark", "1MIN"), ("quote", None)])
def test_write_market_refuses_a_kind_or_period_that_does_not_fit(
    tmp_path: Path, kind: str, period: str | None
) -> None:
    with (
        RecordingWriter(tmp_path / "r.jsonl") as w,
        pytest.raises(ValueError, match="write_market"),
    ):
        w.write_market(1, kind, "ETH-USD", "{}", period=period)


def test_a_market_line_reads_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl.gz"
    with RecordingWriter(path, redact=["s3cret"]) as w:
        w.write_market(5, "kline", "ETH-USD", b'{"data":[],"k":"s3cret"}', period="1MIN")
        w.write_market(6, "mark", "BTC-USD", "{}")
    assert list(RecordingReader(path).records()) == [
        MarketLine(5, "kline", "ETH-USD", '{"data":[],"k":"***"}', "1MIN"),
        MarketLine(6, "mark", "BTC-USD", "{}"),
    ]


def test_a_replay_leaving_an_idle_paper_account_out_ends_as_one_handing_it_every_record(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """While nothing rests and nothing is held, the replay hands the paper venue no market
    record (it reads the read model when it needs the market): a taker that is flat a third
    of the time trades the same orders, fills and money as with every record handed over."""
    from framework.backtest.paper import PaperVenue
    from tests.benchmarks.bench_replay import market_frames

    path = tmp_path / "market.jsonl"
    with RecordingWriter(path, append=False) as w:
        for ts, frame in market_frames(6_000):  # about 60 s of books and trades, two pairs
            w.write_ws(ts, frame)
    text = CONFIG.replace(
        '  - {name: listen, class: "tests.backtest.test_market_replay:Listener", pairs: [ETH-USD]}',
        "  - {name: pulse, class: strategies.pulse:Pulse,"
        " params: {pair: ETH-USD, quantity: '0.5', every_s: 1, hold: 1}}",
    )
    heard = [0]
    on_market = PaperVenue.on_market

    def counted(self: PaperVenue, record: Any) -> None:
        heard[0] += 1
        on_market(self, record)

    monkeypatch.setattr(PaperVenue, "on_market", counted)

    def run() -> tuple[Any, ...]:
        heard[0] = 0
        result = Backtest(parse_config(text), path).run()
        paper = result.collector.paper
        fills = [(f.ts, f.pair, f.price, f.quantity) for f in paper.fills]  # type: ignore[attr-defined]
        return (fills, result.results["orders"], result.results["fills"], paper.equity(), heard[0])

    *skipping, heard_skipping = run()
    monkeypatch.setattr(Replayer, "_idle", lambda self: False)  # hand over every record
    *every, heard_every = run()
    assert skipping == every
    assert len(skipping[0]) > 40  # it traded, in and out
    assert 0 < heard_skipping < heard_every, (heard_skipping, heard_every)  # left out, some


class Timed(Strategy):
    """Books a 5 ms timer from its first on_trade; notes trades and timer runs in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.noted: list[str] = []

    def on_trade(self, trade: Trade) -> None:
        """Noted; the first books the timer."""
        self.noted.append(f"trade {trade.time and trade.time - T0}")
        if len(self.noted) == 1:
            self.schedule("tick", 0.005)

    def on_timer(self, name: str) -> None:
        """Noted."""
        self.noted.append(name)


def test_a_timer_a_hook_books_runs_at_its_time_before_later_records(tmp_path: Path) -> None:
    """The replay reads when the timeline is next due at every record: a timer booked from a
    hook is not left for whatever the timeline had booked before (here a report sample of
    the long recording's span, 50 ms ahead)."""
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        for n in range(12):
            w.write_ws(T0 + n, trade("ETH-USD", "2000", n))
        w.write_ws(T0 + 100_000, trade("ETH-USD", "2000", 100_000))
    result = Backtest(
        parse_config(CONFIG), path, strategies=[lambda c: Timed("listen", c, {}, pairs=["ETH-USD"])]
    ).run()
    noted = result.strategies[0].noted  # type: ignore[attr-defined]
    assert noted[:13] == [
        *(f"trade {n}" for n in range(5)), "tick", *(f"trade {n}" for n in range(5, 10)), "tick",
        "trade 10",
    ]  # fmt: skip


class Taker3(Strategy):
    """Buys 1 on the trade of id 2, sells 1 on id 3, buys 1 on id 4 (market orders)."""

    def on_trade(self, trade: Trade) -> None:
        """Trades on the three."""
        side = {"2": True, "3": False, "4": True}.get(str(trade.id))
        if side is not None:
            self.submit(OrderIntent(pair="ETH-USD", is_long=side, quantity=Decimal(1)))


def test_in_a_replay_a_level_an_order_took_stays_taken_until_the_next_book(tmp_path: Path) -> None:
    """Found by review: the third buy got the 100 ask the first had taken back, because a
    trade (not a book) came in between and the idle pair's book was read anew."""
    path = tmp_path / "r.jsonl"
    book = {"asks": [{"price": "100", "quantity": "1"}, {"price": "101", "quantity": "1"}],
            "bids": [{"price": "99", "quantity": "1"}, {"price": "98", "quantity": "1"}],
            "timestamp": T0 + 1}  # fmt: skip
    with RecordingWriter(path, append=False) as w:
        w.write_ws(
            T0 + 1, orjson.dumps({"event": "api_depth", "pair": "ETH-USD", "data": book}).decode()
        )
        for n in (2, 3, 4, 1000):
            w.write_ws(T0 + n, trade("ETH-USD", "100", n))
    text = CONFIG.replace(
        '  - {name: listen, class: "tests.backtest.test_market_replay:Listener", pairs: [ETH-USD]}',
        '  - {name: t3, class: "tests.backtest.test_market_replay:Taker3", pairs: [ETH-USD]}',
    )
    paper = Backtest(parse_config(text), path).run().collector.paper
    fills = [("buy" if f.is_long else "sell", f.price) for f in paper.fills]  # type: ignore[attr-defined]
    assert fills == [("buy", Decimal(100)), ("sell", Decimal(99)), ("buy", Decimal(101))]
