"""A backtest of a recording with market data fills against the recorded book and trades.

The rule is the twin's with its market on (framework.sim.market_fills): a market order walks
the recorded book (never better than its best price), a resting order fills only when a
recorded trade reaches its price. Before, the paper venue priced fills by the recording's own
fills and positions, and a recording of a market alone gave no price at all (2331).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from framework import Book, OrderIntent, Strategy, Trade
from framework.backtest.runner import Backtest
from framework.config import parse_config
from framework.engine.strategy import BasicContext
from framework.recording import RecordingWriter

CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
strategies:
  - {name: taker, class: "tests.backtest.test_market_fills:Taker", pairs: [ETH-USD]}
logging: {level: WARNING}
"""
T0 = 1_700_000_000_000


def depth(n: int, best_ask: int, best_bid: int) -> str:
    asks = [{"price": str(best_ask + i), "quantity": "0.1"} for i in range(5)]
    bids = [{"price": str(best_bid - i), "quantity": "0.1"} for i in range(5)]
    data = {"asks": asks, "bids": bids, "timestamp": T0 + n}
    return orjson.dumps({"event": "api_depth", "pair": "ETH-USD", "data": data}).decode()


def trade(n: int, price: str) -> str:
    data = {"contractMatchPairId": n, "pair": "ETH-USD", "price": price, "quantity": "0.5",
            "isLong": False, "timestamp": T0 + n}  # fmt: skip
    return orjson.dumps({"event": "api_trade", "pair": "ETH-USD", "data": [data]}).decode()


class Taker(Strategy):
    """At the first book: a market buy of 0.25 and a bid of 0.1 at 1990."""

    def on_book(self, book: Book) -> None:
        if getattr(self, "sent", False):
            return
        self.sent = True
        pair = book.pair
        self.submit(OrderIntent(pair=pair, is_long=True, quantity=Decimal("0.25")))
        self.submit(
            OrderIntent(pair=pair, is_long=True, quantity=Decimal("0.1"), price=Decimal(1990))
        )

    def on_trade(self, trade: Trade) -> None:
        """Heard (the paper venue fills on it first)."""


def taker(context: BasicContext) -> Taker:
    return Taker("taker", context, {}, pairs=["ETH-USD"])


def test_market_orders_walk_the_recorded_book_and_bids_fill_on_recorded_trades(
    tmp_path: Path,
) -> None:
    path = tmp_path / "market.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0 + 1_000, depth(1_000, best_ask=2001, best_bid=1999))
        w.write_ws(T0 + 2_000, trade(2_000, "1995"))  # above the bid: fills nothing
        w.write_ws(T0 + 3_000, depth(3_000, best_ask=1993, best_bid=1991))
        w.write_ws(T0 + 4_000, trade(4_000, "1990"))  # reaches the bid: it fills
        w.write_ws(T0 + 9_000, trade(9_000, "1990.5"))
    result = Backtest(parse_config(CONFIG), path, strategies=[taker]).run()
    fills: list[Any] = result.paper.fills
    assert result.paper.market_fills
    market, bid = fills
    # 0.1 at 2001, 0.1 at 2002, 0.05 at 2003: the average, never below the best ask.
    assert (market.is_long, market.quantity, market.is_taker) == (True, Decimal("0.25"), True)
    assert market.price >= Decimal(2001) and market.ts < T0 + 2_000
    assert (bid.quantity, bid.price, bid.is_taker) == (Decimal("0.1"), Decimal(1990), False)
    assert bid.ts == T0 + 4_000  # not at the trade of 1995, nor the book's drop to 1991


def test_a_market_section_over_a_recording_without_market_data_is_told(tmp_path: Path) -> None:
    path = tmp_path / "private.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0, '{"event":"api_position_res","success":true}')
    config = parse_config(CONFIG + "market: {pairs: {ETH-USD: {channels: [trade]}}}\n")
    result = Backtest(config, path, strategies=[taker]).run()
    assert any(
        "holds no market data, but the config's market: section feeds ETH-USD" in line
        for line in result.warnings
    ), result.warnings
