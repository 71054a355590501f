"""The generated market (framework.sim.market) and the fills that follow it (market_fills)."""

from __future__ import annotations

from decimal import Decimal

import msgspec
import pytest

from framework.sim.exchange import Exchange
from framework.sim.fill_model import FillRule
from framework.sim.market import MarketGenerator, MarketSettings, MarketTape, MarketTick, tapes
from framework.sim.state import ExchangeSettings, FeeSettings
from framework.venue.market import Book, Trade
from framework.venue.models import MatchType, OrderInput, PositionType

NOW = 1_800_000_000_000
PAIR = "ETH-USD"


def exchange(**kw: object) -> Exchange:
    ex = Exchange(ExchangeSettings(fees=FeeSettings()), book_fills=True, **kw)  # type: ignore[arg-type]
    ex.open_account(1, None, {"USD": Decimal(100000)})
    return ex


def generated(seed: int, ticks: int, **settings: object) -> list[MarketTick]:
    ex = Exchange(ExchangeSettings())
    gen = MarketGenerator(MarketSettings(enabled=True, **settings), ex.markets, seed)  # type: ignore[arg-type]
    out = []
    for i in range(ticks):
        ex.markets[PAIR].mark = Decimal(2000 + i % 7)
        out.append(gen.tick(PAIR, NOW + i * 1000))
    return out


def order(cid: str, *, long: bool, qty: str, price: str | None = None, mt: int = 1) -> OrderInput:
    return OrderInput(
        client_order_id=cid,
        is_long=long,
        is_market=price is None,
        lever=10,
        match_type=MatchType(mt),
        pair_name=PAIR,
        position_type=PositionType(3),
        price=None if price is None else Decimal(price),
        quantity=Decimal(qty),
    )


def book(asks: list[tuple[str, str]], bids: list[tuple[str, str]]) -> Book:
    return Book(
        pair=PAIR,
        asks=tuple((Decimal(p), Decimal(q)) for p, q in asks),
        bids=tuple((Decimal(p), Decimal(q)) for p, q in bids),
        time=NOW,
    )


def trade(price: str, *, long: bool = False) -> Trade:
    return Trade(pair=PAIR, price=Decimal(price), quantity=Decimal("0.1"), is_long=long, time=NOW)


def test_same_seed_same_books_and_trades_another_seed_others() -> None:
    first, again, other = generated(7, 50), generated(7, 50), generated(8, 50)
    assert first == again
    assert first != other
    assert sum(len(t.trades) for t in first) > 0


def test_a_book_sits_around_the_mark_on_the_price_grid() -> None:
    ticks = generated(1, 20, levels=5, spread_ticks=4, level_step_ticks=2)
    for tick in ticks:
        b = tick.book
        assert len(b.bids) == len(b.asks) == 5
        assert b.best_ask is not None and b.best_bid is not None
        assert b.best_ask - b.best_bid == Decimal("0.04")
        assert [p for p, _ in b.asks] == sorted(p for p, _ in b.asks)
        assert all(q > 0 and q == q.quantize(Decimal("0.001")) for _, q in b.bids + b.asks)
        assert b.asks[1][0] - b.asks[0][0] == Decimal("0.02")
        for t in tick.trades:  # a buy takes the best ask, a sell the best bid
            assert t.price == (b.best_ask if t.is_long else b.best_bid)
    ids = [int(t.id or 0) for tick in ticks for t in tick.trades]
    assert ids == list(range(1, len(ids) + 1))
    sides = {t.is_long for tick in ticks for t in tick.trades}
    assert sides == {True, False}


def test_bars_aggregate_trades_per_period_and_memory_is_bounded() -> None:
    tape = MarketTape(PAIR, periods=["1MIN"], keep_trades=5, keep_bars=2)
    minute = 60_000
    start = NOW - NOW % minute
    prices = [("10", 0), ("12", 1000), ("9", 2000), ("11", minute), ("13", 2 * minute)]
    for price, offset in prices:
        t = Trade(pair=PAIR, price=Decimal(price), quantity=Decimal(2), time=start + offset)
        tape.record(MarketTick(pair=PAIR, book=book([], []), trades=(t,)), start + offset)
    first, second, third = [*tape.bars["1MIN"].closed, tape.last_bars("1MIN", 9)[-1]]
    bars = tape.last_bars("1MIN", 9)
    assert len(bars) == 3 and len(tape.bars["1MIN"].closed) == 2  # keep_bars closed + the open
    assert (first.open, first.high, first.low, first.close) == (10, 12, 9, 9)
    assert (first.quantity, first.amount, first.count, first.time) == (6, 62, 3, start)
    assert (second.open, second.time, third.close) == (11, start + minute, 13)
    assert tape.last_bars("1MIN", 9, end_ms=start + minute) == [first, second]
    for i in range(20):
        t = Trade(pair=PAIR, price=Decimal(10), quantity=Decimal(1), id=str(i))
        tape.record(MarketTick(pair=PAIR, book=book([], []), trades=(t,)), start)
    assert [t.id for t in tape.last_trades(100)] == ["15", "16", "17", "18", "19"]
    assert [t.id for t in tape.last_trades(2)] == ["18", "19"]


def test_the_index_is_the_mark_smoothed() -> None:
    tape = tapes(MarketSettings(), [PAIR])[PAIR]
    grid = Decimal("0.01")
    assert tape.smooth(Decimal(100), Decimal("0.5"), grid) == 100
    assert tape.smooth(Decimal(110), Decimal("0.5"), grid) == 105
    assert tape.smooth(Decimal(110), Decimal("0.5"), grid) == Decimal("107.50")


@pytest.mark.parametrize("bad", [{"levels": 0}, {"periods": ["1MONTH"]}, {"spread_ticks": 0}])
def test_settings_refuse_what_cannot_work(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        MarketSettings(**bad)  # type: ignore[arg-type]


def test_a_market_buy_walks_the_asks_and_fills_at_or_above_the_best_ask() -> None:
    ex = exchange()
    ex.set_book(PAIR, book([("2001", "0.5"), ("2002", "1"), ("2005", "9")], [("1999", "1")]))
    outcome = ex.submit(1, [order("a", long=True, qty="1")], NOW, atomic=False)
    assert outcome.accepted
    match = ex.accounts[1].matches[PAIR][-1]
    assert match.quantity == 1 and match.price == Decimal("2001.50")  # (0.5x2001 + 0.5x2002)
    assert match.is_taker
    left = ex.markets[PAIR].quotes
    assert left is not None and left.asks[0] == (Decimal(2002), Decimal("0.5"))
    ex.submit(1, [order("b", long=True, qty="20")], NOW, atomic=False)  # more than the book
    match = ex.accounts[1].matches[PAIR][-1]
    assert match.quantity == Decimal("9.5") and match.price >= Decimal(2002)
    assert ex.markets[PAIR].quotes.asks == ()  # type: ignore[union-attr]
    ex.submit(1, [order("c", long=True, qty="1")], NOW, atomic=False)  # nothing left to take
    assert len(ex.accounts[1].matches[PAIR]) == 2
    assert ex.accounts[1].orders.by_client_id("c") is not None


def test_a_limit_order_takes_only_levels_within_its_price_and_rests_the_rest() -> None:
    ex = exchange()
    ex.set_book(PAIR, book([("2001", "0.5"), ("2003", "1")], [("1999", "1"), ("1998", "2")]))
    ex.submit(1, [order("s", long=False, qty="2", price="1998.5")], NOW, atomic=False)
    match = ex.accounts[1].matches[PAIR][-1]
    assert (match.quantity, match.price, match.is_long) == (1, 1999, False)
    (resting,) = ex.resting_orders(PAIR)
    assert (resting.price, resting.remaining) == (Decimal("1998.5"), 1)
    ex.submit(1, [order("f", long=True, qty="2", price="2003", mt=3)], NOW, atomic=False)  # FOK
    assert len(ex.accounts[1].matches[PAIR]) == 1  # 1.5 within 2003: all or nothing
    refused = ex.submit(1, [order("p", long=True, qty="1", price="2001", mt=4)], NOW, atomic=False)
    assert refused.error is not None and refused.error[0] == 2001  # POST_ONLY would cross


def test_a_resting_bid_fills_only_when_a_trade_crosses_it() -> None:
    ex = exchange(fill_rule=FillRule(rule="touch"))  # whole, on a trade at its price
    ex.set_book(PAIR, book([("2001", "1")], [("1999", "1")]))
    ex.submit(1, [order("bid", long=True, qty="1", price="1990")], NOW, atomic=False)
    assert ex.set_mark(PAIR, Decimal(1980), NOW) == []  # the mark alone fills nothing
    assert ex.market_trades(PAIR, [trade("1995"), trade("1990.01", long=True)], NOW) == []
    assert len(ex.resting_orders(PAIR)) == 1
    events = ex.market_trades(PAIR, [trade("1990")], NOW)
    assert events and ex.resting_orders(PAIR) == []
    match = ex.accounts[1].matches[PAIR][-1]
    assert (match.price, match.quantity, match.is_taker) == (1990, 1, False)


def test_a_resting_ask_fills_when_a_trade_reaches_it() -> None:
    ex = exchange()
    ex.set_book(PAIR, book([("2001", "1")], [("1999", "1")]))
    ex.submit(1, [order("ask", long=False, qty="1", price="2010")], NOW, atomic=False)
    assert ex.market_trades(PAIR, [trade("2009.99", long=True)], NOW) == []
    assert ex.market_trades(PAIR, [trade("2010.5", long=True)], NOW)
    assert ex.accounts[1].matches[PAIR][-1].price == 2010


def test_an_atomic_batch_refused_gives_back_the_levels_it_took() -> None:
    ex = exchange()
    start = book([("2001", "1")], [("1999", "1")])
    ex.set_book(PAIR, start)
    items = [order("a", long=True, qty="0.5"), order("a", long=True, qty="0.5")]
    outcome = ex.submit(1, items, NOW, atomic=True)
    assert outcome.error is not None
    assert ex.markets[PAIR].quotes == start


def test_without_book_fills_trades_fill_nothing_and_the_mark_rule_holds() -> None:
    ex = Exchange(ExchangeSettings())
    ex.open_account(1, None, {"USD": Decimal(100000)})
    ex.set_book(PAIR, book([("2100", "1")], []))
    ex.submit(1, [order("bid", long=True, qty="1", price="1990")], NOW, atomic=False)
    assert ex.market_trades(PAIR, [trade("1900")], NOW) == []
    assert ex.set_mark(PAIR, Decimal(1990), NOW)  # today's rule: the mark crossed it


def test_follow_market_turns_book_fills_on_for_one_pair_only() -> None:
    """A pair whose market is published follows it; the other pair keeps the mark rule."""
    ex = Exchange(ExchangeSettings())
    ex.open_account(1, None, {"USD": Decimal(100000)})
    ex.follow_market(PAIR)
    assert ex.follows_market(PAIR) and not ex.follows_market("BTC-USD")
    ex.set_book(PAIR, book([("2100", "1")], [("1980", "1")]))
    ex.submit(1, [order("bid", long=True, qty="1", price="1990")], NOW, atomic=False)
    assert ex.set_mark(PAIR, Decimal(1985), NOW) == []  # the mark fills nothing here
    assert ex.market_trades(PAIR, [trade("1900")], NOW)  # a trade through it does
    btc = msgspec.structs.replace(
        order("btc", long=True, qty="0.01", price="39000"), pair_name="BTC-USD"
    )
    ex.submit(1, [btc], NOW, atomic=False)
    assert ex.market_trades("BTC-USD", [trade("38000")], NOW) == []
    assert ex.set_mark("BTC-USD", Decimal(38900), NOW)  # the mark rule still holds
