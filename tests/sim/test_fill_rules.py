"""The fill rules of resting orders against a published market (touch, through, queue)."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from framework.sim.exchange import Exchange
from framework.sim.fill_model import FillRule, QueueParams
from framework.sim.latency import LatencySettings
from framework.sim.state import ExchangeSettings, FeeSettings
from framework.venue.market import Book, Trade
from framework.venue.models import MatchType, OrderInput, PositionType

NOW = 1_800_000_000_000
PAIR = "ETH-USD"
D = Decimal


def exchange(rule: str = "queue", **params: object) -> Exchange:
    fill_rule = FillRule(rule=rule, params=QueueParams(**params))  # type: ignore[arg-type]
    ex = Exchange(ExchangeSettings(fees=FeeSettings()), book_fills=True, fill_rule=fill_rule)
    ex.open_account(1, None, {"USD": D(100000)})
    return ex


def bid(ex: Exchange, cid: str, price: str, qty: str = "1") -> None:
    order = OrderInput(
        client_order_id=cid,
        is_long=True,
        is_market=False,
        lever=10,
        match_type=MatchType.GTC,
        pair_name=PAIR,
        position_type=PositionType(3),
        price=D(price),
        quantity=D(qty),
    )
    assert ex.submit(1, [order], NOW, atomic=False).accepted


def book(bids: list[tuple[str, str]], asks: tuple[tuple[str, str], ...] = (("2010", "5"),)) -> Book:
    return Book(
        pair=PAIR,
        bids=tuple((D(p), D(q)) for p, q in bids),
        asks=tuple((D(p), D(q)) for p, q in asks),
    )


def trade(price: str, qty: str) -> Trade:
    return Trade(pair=PAIR, price=D(price), quantity=D(qty))


def filled(ex: Exchange) -> list[tuple[Decimal, Decimal, bool]]:
    return [(m.price, m.quantity, m.is_taker) for m in ex.accounts[1].matches.get(PAIR, ())]


def ahead(ex: Exchange) -> Decimal | None:
    (order,) = ex.resting_orders(PAIR)
    return order.ahead


def test_touch_fills_whole_at_the_price_and_through_only_beyond_it() -> None:
    touch, through = exchange("touch"), exchange("through")
    for ex in (touch, through):
        ex.set_book(PAIR, book([("2000", "3")]))
        bid(ex, "b", "2000")
        ex.market_trades(PAIR, [trade("2000", "0.1")], NOW)
    assert filled(touch) == [(D(2000), D(1), False)]  # whole, by a trade of 0.1
    assert filled(through) == [] and len(through.resting_orders(PAIR)) == 1
    through.market_trades(PAIR, [trade("1999.99", "0.1")], NOW)
    assert filled(through) == [(D(2000), D(1), False)]


def test_queue_starts_at_the_displayed_size_and_trades_at_the_price_reduce_it() -> None:
    ex = exchange()
    ex.set_book(PAIR, book([("2000", "3"), ("1999", "1")]))
    bid(ex, "b", "2000")
    assert ahead(ex) == 3
    ex.market_trades(PAIR, [trade("2000", "1"), trade("2000", "1.5")], NOW)
    assert ahead(ex) == D("0.5") and filled(ex) == []


def test_trade_size_beyond_the_queue_fills_in_part_each_part_a_maker_match() -> None:
    ex = exchange()
    ex.set_book(PAIR, book([("2000", "2")]))
    bid(ex, "b", "2000", qty="1")
    ex.market_trades(PAIR, [trade("2000", "2.4")], NOW)  # 2 ahead, then 0.4 of ours
    assert filled(ex) == [(D(2000), D("0.4"), False)]
    (order,) = ex.resting_orders(PAIR)
    assert (order.remaining, order.ahead) == (D("0.6"), 0)
    record = ex.accounts[1].orders.get(order.order_id)
    assert record is not None and (record.status, record.filled) == ("OPEN", D("0.4"))
    ex.market_trades(PAIR, [trade("2000", "0.25")], NOW)
    assert filled(ex)[-1] == (D(2000), D("0.25"), False)
    ex.market_trades(PAIR, [trade("2000", "5")], NOW)  # the rest, and no more
    assert sum(q for _, q, _ in filled(ex)) == 1 and ex.resting_orders(PAIR) == []
    balance = ex.accounts[1].balances["USD"]
    position = ex.accounts[1].positions[PAIR]
    assert balance.frozen == position.margin  # every part's reserve share went to margin


def test_a_trade_beyond_the_price_fills_the_rest_whatever_the_queue() -> None:
    ex = exchange()
    ex.set_book(PAIR, book([("2000", "50")]))
    bid(ex, "b", "2000", qty="1")
    ex.market_trades(PAIR, [trade("1999.5", "0.01")], NOW)
    assert filled(ex) == [(D(2000), D(1), False)]


def test_cancels_shrink_the_queue_pro_rata_or_behind_first() -> None:
    pro, behind = exchange(), exchange(cancels="behind_first")
    for ex in (pro, behind):
        ex.set_book(PAIR, book([("2000", "4")]))
        bid(ex, "b", "2000")
        ex.set_book(PAIR, book([("2000", "6")]))  # 2 joined behind us
        assert ahead(ex) == 4
        ex.set_book(PAIR, book([("2000", "3")]))  # 3 cancelled without a trade
    assert ahead(pro) == 2  # 4 x 3/6: the share of the shrink ahead of us was 4/6
    assert ahead(behind) == 3  # cancels from behind first: at most the level is ahead
    ex = exchange()
    ex.set_book(PAIR, book([("2000", "4")]))
    bid(ex, "b", "2000")
    ex.market_trades(PAIR, [trade("2000", "1")], NOW)  # level 3, ahead 3: a trade, no cancel
    ex.set_book(PAIR, book([("2000", "3")]))
    assert ahead(ex) == 3
    ex.set_book(PAIR, book([("2000.5", "1"), ("1999", "1")]))  # the level is gone: 0 ahead
    assert ahead(ex) == 0


def test_a_price_beyond_the_displayed_depth_is_unseen_until_a_book_shows_it() -> None:
    ex = exchange()
    ex.set_book(PAIR, book([("2005", "1"), ("2004", "1")]))
    bid(ex, "b", "2000")
    assert ahead(ex) is None
    ex.set_book(PAIR, book([("2001", "1"), ("2000", "0.7")]))
    assert ahead(ex) == D("0.7")
    ex.market_trades(PAIR, [trade("2000", "0.7")], NOW)
    assert filled(ex) == []


def test_two_orders_at_one_price_share_a_trade_oldest_first() -> None:
    ex = exchange()
    ex.set_book(PAIR, book([("2000", "1")]))
    bid(ex, "a", "2000", qty="0.5")
    ex.set_book(PAIR, book([("2000", "2")]))  # 1 more joined between a and b
    bid(ex, "b", "2000", qty="0.5")
    ex.market_trades(PAIR, [trade("2000", "2.7")], NOW)  # 1 ahead, a 0.5, 1 between, b 0.2
    assert [q for _, q, _ in filled(ex)] == [D("0.5"), D("0.2")]


@pytest.mark.parametrize(
    "settings",
    [
        LatencySettings(model="lognormal", median_ms=20, sigma=0.6, max_ms=500),
        LatencySettings(model="empirical", samples_ms=(5, 9, 40, 300)),
    ],
)
def test_a_seeded_latency_model_draws_the_same_delays(settings: LatencySettings) -> None:
    model = settings.build()
    first = [model.sample(random.Random(7)) for _ in range(3)]
    rng_a, rng_b = random.Random("x:latency"), random.Random("x:latency")
    a = [model.sample(rng_a) for _ in range(200)]
    assert a == [model.sample(rng_b) for _ in range(200)] and len(set(a)) > 3
    assert len(set(first)) == 1 and all(0 <= ms <= settings.max_ms for ms in a)
    assert LatencySettings.constant(25).build().sample(rng_a) == 25


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"model": "lognormal", "median_ms": 20}, "model lognormal needs sigma"),
        ({"model": "constant", "ms": 5, "sigma": 1.0}, "sigma is a key of model lognormal"),
        ({"model": "empirical", "samples_ms": ()}, "between 1 and"),
        ({"model": "lognormal", "median_ms": 0, "sigma": 1.0}, "median_ms must be above 0"),
        ({"ms": 5, "min_ms": 10, "max_ms": 2}, "must not be below min_ms"),
    ],
)
def test_latency_settings_refuse_what_cannot_work(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LatencySettings(**kw)  # type: ignore[arg-type]


def fills_with_chance(chance: str, seed: int, orders: int = 400) -> list[str]:
    """Which of many touch bids one trade at their price fills, under a fill probability."""
    ex = Exchange(
        ExchangeSettings(fees=FeeSettings()),
        book_fills=True,
        fill_rule=FillRule(rule="touch", fill_probability=D(chance), seed=seed),
    )
    ex.open_account(1, None, {"USD": D(100000)})
    ex.set_book(PAIR, book([("2000", "3")]))
    for i in range(orders):
        bid(ex, f"b{i}", "2000", qty="0.01")
    ex.market_trades(PAIR, [trade("2000", "0.1")], NOW)
    resting = {o.client_order_id for o in ex.resting_orders(PAIR)}
    return [f"b{i}" for i in range(orders) if f"b{i}" not in resting]


def test_a_fill_probability_fills_that_share_of_the_reached_orders_the_same_each_replay() -> None:
    once, again = fills_with_chance("0.3", seed=5), fills_with_chance("0.3", seed=5)
    assert once == again  # no random state: the same seed and orders draw the same
    assert 0.22 * 400 < len(once) < 0.38 * 400  # about 0.3 of 400 (a binomial's 4 sd)
    assert fills_with_chance("0.3", seed=6) != once
    assert fills_with_chance("1", seed=5, orders=10) == [f"b{i}" for i in range(10)]
    assert fills_with_chance("0", seed=5, orders=10) == []


def test_a_fill_probability_is_the_touch_and_through_rules_only() -> None:
    with pytest.raises(ValueError, match="not queue"):
        FillRule(rule="queue", fill_probability=D("0.5"))
    with pytest.raises(ValueError, match="between 0 and 1"):
        FillRule(rule="touch", fill_probability=D("1.5"))
