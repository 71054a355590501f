"""The fill model in a backtest of a recording with market data: the rule, the latency, the file.

The paper venue fills resting orders on recorded trades by ``backtest.paper.fill_rule``
(queue by default: the size ahead first, then fills in part), and an order reaches the
recorded book after its latency: one that arrives after the book moved fills at the new book.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from framework import Book, OrderIntent, Strategy
from framework.backtest.paper import PaperSettings
from framework.backtest.runner import Backtest, BacktestSettings, load_backtest_config
from framework.config import parse_config
from framework.engine.strategy import BasicContext
from framework.fill_model_file import load_fill_model
from framework.recording import RecordingWriter
from framework.sim.latency import LatencySettings
from framework.venue.errors import ConfigError

CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
strategies:
  - {name: maker, class: "tests.backtest.test_fill_model:Maker", pairs: [ETH-USD]}
logging: {level: WARNING}
"""
T0 = 1_700_000_000_000


def depth(n: int, best_ask: int, best_bid: int, size: str = "0.1") -> str:
    asks = [{"price": str(best_ask + i), "quantity": size} for i in range(5)]
    bids = [{"price": str(best_bid - i), "quantity": size} for i in range(5)]
    data = {"asks": asks, "bids": bids, "timestamp": T0 + n}
    return orjson.dumps({"event": "api_depth", "pair": "ETH-USD", "data": data}).decode()


def trade(n: int, price: str, quantity: str) -> str:
    data = {"contractMatchPairId": n, "pair": "ETH-USD", "price": price, "quantity": quantity,
            "isLong": False, "timestamp": T0 + n}  # fmt: skip
    return orjson.dumps({"event": "api_trade", "pair": "ETH-USD", "data": [data]}).decode()


class Maker(Strategy):
    """At the first book: a market buy of 0.1 and a bid of 0.1 at 1997."""

    def on_book(self, book: Book) -> None:
        if getattr(self, "sent", False):
            return
        self.sent = True
        pair = book.pair
        self.submit(OrderIntent(pair=pair, is_long=True, quantity=Decimal("0.1")))
        self.submit(
            OrderIntent(pair=pair, is_long=True, quantity=Decimal("0.1"), price=Decimal(1997))
        )


def maker(context: BasicContext) -> Maker:
    return Maker("maker", context, {}, pairs=["ETH-USD"])


def recording(tmp_path: Path) -> Path:
    path = tmp_path / "market.jsonl"
    if path.exists():
        return path
    with RecordingWriter(path, append=False) as w:
        w.write_ws(T0 + 1_000, depth(1_000, best_ask=2001, best_bid=1999))  # 0.1 at 1997
        w.write_ws(T0 + 1_200, depth(1_200, best_ask=2011, best_bid=1999))  # asks move up
        w.write_ws(T0 + 2_000, trade(2_000, "1997", "0.15"))  # 0.1 ahead, then 0.05 ours
        w.write_ws(T0 + 3_000, trade(3_000, "1997", "0.5"))  # the rest
        w.write_ws(T0 + 9_000, trade(9_000, "1998", "0.1"))
    return path


def run(tmp_path: Path, **paper: Any) -> list[Any]:
    settings = BacktestSettings(paper=PaperSettings(**paper))
    result = Backtest(parse_config(CONFIG), recording(tmp_path), settings, strategies=[maker])
    return result.run().paper.fills


def test_queue_fills_a_bid_in_part_after_the_size_ahead_then_the_rest(tmp_path: Path) -> None:
    market, *bids = run(tmp_path)
    assert market.is_taker and market.price == 2001 and market.ts == T0 + 1_000
    assert [(b.ts - T0, b.quantity, b.price, b.is_taker) for b in bids] == [
        (2_000, Decimal("0.05"), 1997, False),
        (3_000, Decimal("0.05"), 1997, False),
    ]
    touch = run(tmp_path, fill_rule="touch")[1:]
    assert [(b.ts - T0, b.quantity) for b in touch] == [(2_000, Decimal("0.1"))]


def test_an_order_arriving_after_the_book_moved_fills_at_the_new_book(tmp_path: Path) -> None:
    market = run(tmp_path, latency_ms=300)[0]  # sent at 1000, arrives at 1300
    assert (market.ts, market.price) == (T0 + 1_300, 2011)


def test_a_seeded_latency_model_gives_the_same_run_twice(tmp_path: Path) -> None:
    model = LatencySettings(model="lognormal", median_ms=150, sigma=1.0, max_ms=900)
    first = [(f.ts, f.price) for f in run(tmp_path, latency=model)]
    assert first == [(f.ts, f.price) for f in run(tmp_path, latency=model)]
    assert first[0][0] > T0 + 1_000  # the market order waited its draw


def test_the_backtest_section_names_the_rule_the_latency_and_a_model_file(tmp_path: Path) -> None:
    model = tmp_path / "fill.yaml"
    model.write_text(
        "version: 1\nlatency: {model: constant, ms: 300}\nfill: {rule: through}\n",
        encoding="utf-8",
    )
    config = tmp_path / "bt.yaml"
    config.write_text(CONFIG + "backtest:\n  paper: {fill_model: fill.yaml}\n", encoding="utf-8")
    _, settings = load_backtest_config(config)
    assert settings.paper.fill_model == str(model)
    fills = run(tmp_path, fill_model=str(model))
    assert fills[0].price == 2011  # the file's 300 ms
    assert [(f.ts - T0, f.quantity) for f in fills[1:]] == []  # through: 1997 never passed
    result = Backtest(
        parse_config(CONFIG),
        recording(tmp_path),
        BacktestSettings(paper=PaperSettings(fill_model=str(model), fill_rule="queue")),
        strategies=[maker],
    ).run()
    assert result.results["settings"]["fill_rule"].startswith("queue")  # the key wins
    assert result.results["settings"]["latency"] == "300 ms"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("paper: {fill_rule: fifo}", r"backtest\.paper\.fill_rule: .*fifo.* \(line 8\)"),
        (
            "paper:\n    latency: {model: lognormal, median_ms: 20}",
            r"backtest\.paper\.latency: model lognormal needs sigma \(line 9\)",
        ),
        ("paper: {latency_ms: 5, latency: {ms: 5}}", "latency_ms .constant. or latency, not both"),
        ("paper: {fill_model: nowhere.yaml}", "nowhere.yaml"),
    ],
)
def test_bad_fill_model_keys_are_one_located_line(
    tmp_path: Path, section: str, message: str
) -> None:
    config = tmp_path / "bt.yaml"
    config.write_text(CONFIG + "backtest:\n  " + section + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_backtest_config(config)


def test_a_bad_model_file_names_the_file_the_key_and_the_line(tmp_path: Path) -> None:
    model = tmp_path / "fill.yaml"
    model.write_text("version: 1\nfill:\n  rule: queue\n  params: {cancels: random}\n", "utf-8")
    with pytest.raises(ConfigError, match=r"fill\.yaml: fill\.params\.cancels: .* \(line 4\)"):
        load_fill_model(model)
    model.write_text("version: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"version: 3 is not a version .* \(line 1\)"):
        load_fill_model(model)
