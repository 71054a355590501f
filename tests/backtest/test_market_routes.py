"""The market routes a replay feeds (engine.market.market_routes): each trade, book and mark
is kept by the read model exactly as MarketView.apply keeps it, and then published, also one
the view keeps no newer record for."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from framework.engine.clock import VirtualClock
from framework.engine.market import MarketView, market_routes
from framework.venue.market import Book, MarketRecord, MarkPrice, Trade

T0 = 1_709_296_496_000


def records(seed: int) -> list[MarketRecord]:
    """Trades, books and marks of four pairs, times going back and forth, some unstamped."""
    rng = random.Random(seed)
    out: list[MarketRecord] = []
    for _ in range(300):
        pair = rng.choice(["A", "B", "C", "D"])
        time = None if rng.random() < 0.1 else T0 + rng.randint(0, 50)
        price = Decimal(rng.randint(1, 9))
        kind = rng.randrange(3)
        if kind == 0:
            out.append(Trade(pair=pair, price=price, quantity=Decimal(1), time=time))
        elif kind == 1:
            level = ((price, Decimal(1)),)
            out.append(Book(pair=pair, bids=level, asks=level, time=time))
        else:
            out.append(MarkPrice(pair=pair, price=price, time=time))
    return out


def state(view: MarketView) -> tuple[Any, ...]:
    pairs = view.pairs()
    return (
        pairs,
        [(view.trade(p), view.book(p), view.mark(p), view.age(p)) for p in pairs],
    )


def test_the_routes_keep_what_apply_keeps_and_publish_every_record() -> None:
    for seed in range(5):
        clock, other = VirtualClock(T0), VirtualClock(T0)
        routed, applied = MarketView(clock, max_pairs=3), MarketView(other, max_pairs=3)
        heard: list[MarketRecord] = []
        routes = market_routes(routed, heard.append)
        for n, record in enumerate(records(seed)):
            clock.ms = other.ms = T0 + n
            routes[type(record)](record)
            applied.apply(record)
            assert state(routed) == state(applied)
        assert heard == records(seed)
        assert len(routed.pairs()) == 3  # a fourth pair is not kept, but still heard
