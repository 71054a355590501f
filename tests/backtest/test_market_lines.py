"""The market's price lines of the report: sampled, downsampled in bounded memory, extremes kept."""

from __future__ import annotations

from decimal import Decimal

from framework.backtest.market_lines import IDLE_STEP_MS, MAX_BUCKETS, MarketLine, MarketLines
from framework.engine.clock import VirtualClock
from framework.engine.market import MarketView
from framework.venue.market import Book, MarkPrice, Trade

D = Decimal


def test_a_short_line_keeps_every_point() -> None:
    line = MarketLine()
    prices = [(1_000 + 500 * i, D(2000 + i % 7)) for i in range(50)]  # one per 100 ms bucket
    for ts, price in prices:
        line.add(ts, price)
    assert line.points() == prices and line.count == 50


def test_a_long_line_is_bounded_and_keeps_its_spikes_first_and_last() -> None:
    line = MarketLine()
    n = 1_000_000
    spike_up, spike_down = 123_457, 876_543
    for i in range(n):
        price = D(2000) + D(i % 10) / 10
        if i == spike_up:
            price = D(3000)
        elif i == spike_down:
            price = D(1000)
        line.add(10 * i, price)
    points = line.points()
    assert line.count == n
    assert len(points) <= 4 * MAX_BUCKETS
    assert points[0] == (0, D(2000)) and points[-1] == (10 * (n - 1), D("2000.9"))
    assert (10 * spike_up, D(3000)) in points and (10 * spike_down, D(1000)) in points
    assert [ts for ts, _ in points] == sorted(ts for ts, _ in points)
    assert max(p for _, p in points) == D(3000) and min(p for _, p in points) == D(1000)


def test_prices_within_one_bucket_keep_first_low_high_last() -> None:
    line = MarketLine()
    for ts, price in ((0, D(5)), (10, D(9)), (20, D(1)), (30, D(4)), (40, D(6))):
        line.add(ts, price)
    assert line.points() == [(0, D(5)), (10, D(9)), (20, D(1)), (40, D(6))]


def test_the_lines_sample_the_read_model_for_configured_pairs_only() -> None:
    clock = VirtualClock(0)
    view = MarketView(clock)
    lines = MarketLines(view, ["ETH-USD"])
    assert lines.step_ms == IDLE_STEP_MS  # nothing heard yet: a sample a second
    lines.sample(0)
    assert lines.of("ETH-USD") == {}  # no market data: no line
    bid, ask = (D(1999), D(1)), (D(2001), D(1))
    for ms, record in (
        (1_000, Trade(pair="ETH-USD", price=D(2000), quantity=D(1))),
        (1_500, None),  # a sample with nothing new: no point
        (2_000, Book(pair="ETH-USD", bids=(bid,), asks=(ask,))),
        (2_500, Book(pair="ETH-USD", bids=(), asks=(ask,))),  # one-sided: no mid
        (3_000, MarkPrice(pair="ETH-USD", price=D("2000.5"))),
        (4_000, Trade(pair="BTC-USD", price=D(90000), quantity=D(1))),  # not configured
    ):
        clock.ms = ms
        if record is not None:
            view.apply(record)
        lines.sample(ms)
    assert lines.of("ETH-USD") == {
        "trades": [(1_000, D(2000))],
        "mid": [(2_000, D(2000))],
        "mark": [(3_000, D("2000.5"))],
    }
    assert lines.of("BTC-USD") == {}
    assert lines.step_ms == MarketLine().width  # a line has points: a sample a bucket


def test_a_record_between_two_samples_is_not_drawn_the_one_standing_is() -> None:
    clock = VirtualClock(0)
    view = MarketView(clock)
    lines = MarketLines(view, ["ETH-USD"])
    for ms, price in ((10, D(2000)), (20, D(2500)), (30, D(2001))):  # a spike between samples
        clock.ms = ms
        view.apply(Trade(pair="ETH-USD", price=price, quantity=D(1)))
    lines.sample(100)
    assert lines.of("ETH-USD") == {"trades": [(100, D(2001))]}
