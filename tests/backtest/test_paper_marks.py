"""The paper venue's mark on a recorded market is the latest book's mid or trade's price.

On a pair where nothing rests and nothing is held, PaperVenue.on_market keeps the records and
makes the mark only when it is read (issue 27's replay speed): a read must give what applying
every record at once gave, a one-sided book leaving the mark as it was, whatever the count.
"""

from __future__ import annotations

import random
from decimal import Decimal

from framework.backtest.paper import PaperSettings, PaperVenue
from framework.backtest.prices import PriceTrack
from framework.venue.market import Book, MarkPrice, Trade
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.rules import PairRules

PAIR = "ETH-USD"


def venue() -> PaperVenue:
    return PaperVenue(
        PaperSettings(),
        rules={PAIR: PairRules()},
        track=PriceTrack([]),
        deliver=lambda push: None,
        now_ms=lambda: 0,
    )


def book(bid: int | None, ask: int | None) -> Book:
    bids = () if bid is None else ((Decimal(bid), Decimal(1)),)
    asks = () if ask is None else ((Decimal(ask), Decimal(1)),)
    return Book(pair=PAIR, bids=bids, asks=asks)


def test_the_mark_read_is_the_latest_priced_records_at_any_point() -> None:
    rng = random.Random(7)
    paper, expected = venue(), None
    for n in range(2_000):
        roll = rng.random()
        if roll < 0.2:
            price = Decimal(rng.randint(1900, 2100))
            paper.on_market(Trade(pair=PAIR, price=price, quantity=Decimal(1)))
            expected = price
        else:
            one_sided = roll < 0.6  # long runs of books without a mid: past the kept 16
            bid = rng.randint(1900, 2000)
            record = book(None if one_sided else bid, bid + rng.randint(1, 9))
            paper.on_market(record)
            expected = record.mid if record.mid is not None else expected
        if n % 37 == 0:
            assert paper.mark(PAIR) == expected


def test_an_order_is_priced_at_the_mark_the_records_made_and_a_recorded_mark_wins() -> None:
    paper = venue()
    paper.on_market(book(1999, 2001))
    paper.on_market(book(None, 2005))  # one-sided: the mark stays 2000
    order = OrderInput(
        client_order_id="a",
        is_long=True,
        is_market=False,
        lever=10,
        match_type=MatchType.GTC,
        pair_name=PAIR,
        position_type=PositionType.ISOLATED,
        price=Decimal(1000),
        quantity=Decimal("0.1"),
    )
    paper.batch_create([order], 0)  # resting: from now on each record is applied at once
    assert paper.exchange.markets[PAIR].mark == Decimal(2000)
    paper.on_market(book(2009, 2011))
    assert paper.exchange.markets[PAIR].mark == Decimal(2010)
    paper.on_market(MarkPrice(pair=PAIR, price=Decimal(2020)))
    paper.on_market(Trade(pair=PAIR, price=Decimal(2030), quantity=Decimal(1)))
    assert paper.mark(PAIR) == Decimal(2020)
