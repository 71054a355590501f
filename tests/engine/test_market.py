"""The market read model: latest record per pair, ages from the clock passed in, bounded."""

from __future__ import annotations

from decimal import Decimal

import pytest

from framework.engine.clock import VirtualClock
from framework.engine.market import MarketView
from framework.venue.market import Bar, Book, IndexPrice, MarkPrice, Trade

T0 = 1_709_296_496_000


def trade(price: str, time: int | None = T0, pair: str = "ETH-USD") -> Trade:
    """A trade of one unit."""
    return Trade(pair=pair, price=Decimal(price), quantity=Decimal(1), time=time)


def bar(period: str, close: str, time: int | None = T0) -> Bar:
    """An ETH-USD bar closing at close."""
    c = Decimal(close)
    return Bar(pair="ETH-USD", period=period, open=c, high=c, low=c, close=c, time=time)


def test_a_market_not_heard_from_has_no_prices_no_age_and_is_stale() -> None:
    view = MarketView(VirtualClock(T0))
    assert view.last("ETH-USD") is None and view.trade("ETH-USD") is None
    assert view.mark("ETH-USD") is None and view.index("ETH-USD") is None
    assert view.book("ETH-USD") is None and view.bar("ETH-USD", "1MIN") is None
    assert view.reference_price("ETH-USD") is None
    assert view.age("ETH-USD") is None
    assert view.stale("ETH-USD", 3600)
    assert view.pairs() == []


def test_each_record_kind_is_read_back_per_pair() -> None:
    view = MarketView(VirtualClock(T0))
    book = Book(
        pair="ETH-USD", bids=((Decimal(99), Decimal(1)),), asks=((Decimal(101), Decimal(2)),)
    )
    for record in (
        trade("100"),
        trade("60000", pair="BTC-USD"),
        book,
        MarkPrice(pair="ETH-USD", price=Decimal("100.5")),
        IndexPrice(pair="ETH-USD", price=Decimal("100.25")),
        bar("1MIN", "100"),
        bar("5MIN", "98"),
    ):
        assert view.apply(record)
    assert view.last("ETH-USD") == Decimal(100) and view.last("BTC-USD") == Decimal(60000)
    assert view.trade("BTC-USD") == trade("60000", pair="BTC-USD")
    assert view.mark("ETH-USD") == Decimal("100.5") and view.mark("BTC-USD") is None
    assert view.index("ETH-USD") == Decimal("100.25")
    assert view.book("ETH-USD") is book and view.book("BTC-USD") is None
    held = view.book("ETH-USD")
    assert held is not None and (held.best_bid, held.best_ask) == (Decimal(99), Decimal(101))
    assert view.bar("ETH-USD", "1MIN") == bar("1MIN", "100")
    assert view.bar("ETH-USD", "5MIN") == bar("5MIN", "98")
    assert view.bar("ETH-USD", "1HOUR") is None and view.bar("BTC-USD", "1MIN") is None
    assert view.pairs() == ["ETH-USD", "BTC-USD"]


def test_the_reference_price_is_the_mark_else_the_last_trade() -> None:
    view = MarketView(VirtualClock(T0))
    view.apply(trade("100"))
    assert view.reference_price("ETH-USD") == Decimal(100)
    view.apply(MarkPrice(pair="ETH-USD", price=Decimal("100.5")))
    view.apply(trade("101", T0 + 1))
    assert view.reference_price("ETH-USD") == Decimal("100.5")
    view.apply(IndexPrice(pair="BTC-USD", price=Decimal(60000)))
    assert view.reference_price("BTC-USD") is None  # the index is no reference


def test_a_mark_heard_longer_than_stale_after_ago_gives_way_to_a_later_trade() -> None:
    clock = VirtualClock(T0)
    view = MarketView(clock)
    view.apply(trade("100"))
    view.apply(MarkPrice(pair="ETH-USD", price=Decimal("100.5")))
    clock.ms = T0 + 11_000  # the mark is 11 s old; no trade since it
    assert view.reference_price("ETH-USD", 10) == Decimal("100.5")
    view.apply(trade("130", T0 + 11_000))
    assert view.reference_price("ETH-USD", 12) == Decimal("100.5")  # the mark is not stale
    assert view.reference_price("ETH-USD", 10) == Decimal(130)
    assert view.reference_price("ETH-USD") == Decimal("100.5")  # no bound: the mark first
    view.apply(MarkPrice(pair="ETH-USD", price=Decimal("131")))  # the poll answers again
    assert view.reference_price("ETH-USD", 10) == Decimal(131)


def test_a_record_stamped_far_ahead_of_the_clock_gives_way_to_the_next() -> None:
    clock = VirtualClock(T0)
    view = MarketView(clock)
    assert view.apply(trade("1", T0 + 86_400_000))  # a bad stamp: held until the next trade
    assert view.apply(trade("2", T0 + 1))
    assert view.apply(trade("3", T0 + 30_000))  # the venue's clock a little ahead of ours
    assert not view.apply(trade("4", T0 + 2))  # still older than one held: not taken
    assert view.last("ETH-USD") == Decimal(3)


def test_an_earlier_record_does_not_replace_a_later_one_of_its_kind() -> None:
    view = MarketView(VirtualClock(T0))
    assert view.apply(trade("101", T0 + 2))
    assert not view.apply(trade("100", T0 + 1))  # a poll listing trades newest first
    assert view.last("ETH-USD") == Decimal(101)
    assert view.apply(trade("102", T0 + 2))  # the same ms: the later arrival wins
    assert view.apply(trade("103", None))  # unstamped: taken as it comes
    assert view.apply(trade("104", T0))  # nothing stamped held to compare with
    assert view.last("ETH-USD") == Decimal(104)
    assert view.apply(bar("1MIN", "100", T0 + 60_000))
    assert not view.apply(bar("1MIN", "90", T0))
    assert view.apply(bar("1MIN", "101", T0 + 60_000))  # the forming bar updated
    assert view.bar("ETH-USD", "1MIN") == bar("1MIN", "101", T0 + 60_000)
    assert view.apply(MarkPrice(pair="ETH-USD", price=Decimal(5), time=T0))
    assert not view.apply(MarkPrice(pair="ETH-USD", price=Decimal(4), time=T0 - 1))
    assert view.mark("ETH-USD") == Decimal(5)


def test_age_and_staleness_follow_the_clock_passed_in() -> None:
    clock = VirtualClock(T0)
    view = MarketView(clock)
    view.apply(trade("100", time=T0 - 10_000))  # the venue's stamp is not the age's
    assert view.age("ETH-USD") == 0
    clock.advance(2_500)
    assert view.age("ETH-USD") == 2.5
    assert view.stale("ETH-USD", 2) and not view.stale("ETH-USD", 3)
    assert not view.stale("ETH-USD", 2.5)  # older than, not as old as
    view.apply(MarkPrice(pair="ETH-USD", price=Decimal(100)))  # any kind refreshes the pair
    assert view.age("ETH-USD") == 0 and not view.stale("ETH-USD", 0)
    clock.advance(1_000)
    assert not view.apply(trade("99", time=T0 - 20_000))  # an older trade: no fresher price
    assert view.age("ETH-USD") == 1
    assert view.age("BTC-USD") is None


def test_memory_is_bounded_by_pairs_and_periods() -> None:
    view = MarketView(VirtualClock(T0), max_pairs=2, max_periods=2)
    assert view.apply(trade("1", pair="A")) and view.apply(trade("1", pair="B"))
    assert not view.apply(trade("1", pair="C"))
    assert view.last("C") is None and view.age("C") is None and view.pairs() == ["A", "B"]
    assert view.apply(trade("2", T0 + 1, pair="A"))  # known pairs go on
    bars = [bar(period, "1") for period in ("1MIN", "5MIN", "1HOUR")]
    assert [view.apply(b) for b in bars] == [False, False, False]  # ETH-USD: a third pair
    wide = MarketView(VirtualClock(T0), max_periods=2)
    assert [wide.apply(b) for b in bars] == [True, True, False]
    assert wide.bar("ETH-USD", "1HOUR") is None
    assert wide.apply(bar("1MIN", "2", T0 + 1))  # a held period is still updated


def test_something_that_is_not_a_market_record_is_a_type_error() -> None:
    view = MarketView(VirtualClock(T0))
    with pytest.raises(TypeError, match="not a market record: str"):
        view.apply("ETH-USD 100")  # type: ignore[arg-type]
