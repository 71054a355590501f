"""The paper venue's mark on a recorded market: the latest trade's price or book's mid.

On a pair where nothing rests and nothing is held (idle), PaperVenue.on_market changes
nothing: the book and the mark are read from the market heard when they are needed (issue
27's replay speed; a replay does not even hand the idle account its records). The mark read
is the latest trade's price or the latest book's (its mid, or the best price of its only
side), whichever was heard later; in the ms of a trade, the trade's.
"""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from framework.backtest.paper import PaperSettings, PaperVenue
from framework.backtest.prices import PriceTrack
from framework.venue.market import Book, MarkPrice, Trade
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.rules import PairRules

PAIR = "ETH-USD"


def venue(now: list[int] | None = None) -> PaperVenue:
    clock = now if now is not None else [0]
    return PaperVenue(
        PaperSettings(),
        rules={PAIR: PairRules()},
        track=PriceTrack([]),
        deliver=lambda push: None,
        now_ms=lambda: clock[0],
    )


def book(bid: int | None, ask: int | None) -> Book:
    bids = () if bid is None else ((Decimal(bid), Decimal(1)),)
    asks = () if ask is None else ((Decimal(ask), Decimal(1)),)
    return Book(pair=PAIR, bids=bids, asks=asks)


def an_order(
    client_order_id: str,
    is_long: bool,
    *,
    price: Decimal | None = None,
    quantity: Decimal = Decimal(1),
) -> OrderInput:
    """An order of PAIR at lever 10: GTC at price, a market order without one."""
    return OrderInput(
        client_order_id=client_order_id,
        is_long=is_long,
        is_market=price is None,
        lever=10,
        match_type=MatchType.GTC,
        pair_name=PAIR,
        position_type=PositionType.ISOLATED,
        price=price,
        quantity=quantity,
    )


def test_the_mark_read_is_the_latest_trade_or_mid_at_any_point() -> None:
    rng = random.Random(7)
    now = [0]
    paper, expected = venue(now), None
    trade: Decimal | None = None
    mid: Decimal | None = None  # the latest book's price, when it came after the latest trade
    for n in range(2_000):
        now[0] = n
        roll = rng.random()
        if roll < 0.2:
            trade = Decimal(rng.randint(1900, 2100))
            paper.on_market(Trade(pair=PAIR, price=trade, quantity=Decimal(1)))
            mid = None
        else:
            one_sided = roll < 0.6  # runs of books without a mid
            bid = rng.randint(1900, 2000)
            ask = bid + rng.randint(1, 9)
            paper.on_market(book(None if one_sided else bid, ask))
            mid = Decimal(ask) if one_sided else (Decimal(bid) + ask) / 2
        if n % 37 == 0:
            expected = mid if mid is not None else trade if trade is not None else expected
            assert paper.mark(PAIR) == expected


def test_a_book_heard_in_the_ms_of_a_trade_gives_way_to_it() -> None:
    now = [5]
    paper = venue(now)
    paper.on_market(Trade(pair=PAIR, price=Decimal(2000), quantity=Decimal(1)))
    paper.on_market(book(2009, 2011))
    assert paper.mark(PAIR) == Decimal(2000)
    now[0] = 6
    paper.on_market(book(2019, 2021))
    assert paper.mark(PAIR) == Decimal(2020)


def test_an_order_is_priced_at_the_mark_the_records_made_and_a_recorded_mark_wins() -> None:
    paper = venue()
    paper.on_market(book(1999, 2001))
    paper.on_market(book(None, 2005))  # one-sided: its ask is the price
    order = an_order("a", True, price=Decimal(1000), quantity=Decimal("0.1"))  # a GTC bid
    paper.batch_create([order], 0)  # resting: from now on each record is applied at once
    assert paper.exchange.markets[PAIR].mark == Decimal(2005)
    paper.on_market(book(2009, 2011))
    assert paper.exchange.markets[PAIR].mark == Decimal(2010)
    paper.on_market(MarkPrice(pair=PAIR, price=Decimal(2020)))
    paper.on_market(Trade(pair=PAIR, price=Decimal(2030), quantity=Decimal(1)))
    assert paper.mark(PAIR) == Decimal(2020)


@pytest.mark.parametrize("trade_between", [False, True])
def test_a_level_an_order_took_stays_taken_until_a_book_comes(trade_between: bool) -> None:
    """Found by review: an idle pair's read reset the book orders walk to the recorded one
    whenever a trade or a mark had come, giving back the levels orders had taken."""
    now = [1]
    paper = venue(now)
    D = Decimal
    paper.on_market(
        Book(pair=PAIR, bids=((D(99), D(1)), (D(98), D(1))), asks=((D(100), D(1)), (D(101), D(1))))
    )
    now[0] = 2
    paper.batch_create([an_order("a", True)], 2)  # takes the 100 ask: long 1
    if trade_between:
        now[0] = 3
        paper.on_market(Trade(pair=PAIR, price=D(100), quantity=D("0.1")))
    now[0] = 4
    paper.batch_create([an_order("b", False)], 4)  # takes the 99 bid: flat, idle again
    paper.batch_create([an_order("c", True)], 4)  # no book since: the 100 ask is gone
    assert [(f.is_long, f.price) for f in paper.fills] == [
        (True, D(100)),
        (False, D(99)),
        (True, D(101)),
    ]
