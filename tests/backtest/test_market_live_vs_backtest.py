"""Issue 27's done-when: one strategy using every market hook and ``self.market`` runs
unchanged live against the twin (its market on), is recorded (``run.py record``), and the
backtest of that recording hears the same sequence of market events as the live run.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

from framework import Bar, Book, MarkPrice, Strategy, Trade
from framework.backtest.runner import Backtest, load_backtest_config
from framework.live.cli import record_main

CONFIG = """\
venue:
  embedded: true
  twin:
    seed: 11
    prices: {tick_interval: 0.1, max_step_ticks: 30}
    market: {enabled: true, periods: [1MIN]}
pairs:
  ETH-USD: {}
  BTC-USD: {}
market:
  pairs:
    ETH-USD: {channels: [trade, depth, kline], periods: [1MIN], mark_interval_s: 0.5}
    BTC-USD: {channels: [trade], mark_interval_s: 0}
strategies:
  - name: heard
    class: tests.backtest.test_market_live_vs_backtest:Heard
    params: {pair: ETH-USD}
logging: {level: WARNING}
"""


class Heard(Strategy):
    """Keeps every market event its hooks hear, and what self.market says then."""

    runs: ClassVar[list[list[tuple[Any, ...]]]] = []

    def on_start(self) -> None:
        self.heard: list[tuple[Any, ...]] = []
        Heard.runs.append(self.heard)

    def on_trade(self, trade: Trade) -> None:
        self.heard.append(("trade", trade, self.market.last(trade.pair)))

    def on_book(self, book: Book) -> None:
        self.heard.append(("book", book, self.market.book(book.pair)))

    def on_bar(self, bar: Bar) -> None:
        self.heard.append(("bar", bar, self.market.bar(bar.pair, bar.period)))

    def on_mark(self, mark: MarkPrice) -> None:
        self.heard.append(("mark", mark, self.market.reference_price(mark.pair)))


def test_a_backtest_of_a_recording_hears_the_live_runs_market_events_in_order(
    tmp_path: Path,
) -> None:
    config_path = tmp_path / "heard.yaml"
    config_path.write_text(CONFIG, encoding="utf-8")
    recording = tmp_path / "heard.jsonl.gz"
    Heard.runs.clear()
    assert record_main(["-c", str(config_path), "--out", str(recording), "--duration", "3"]) == 0
    (live,) = Heard.runs
    kinds = {kind for kind, *_ in live}
    assert kinds == {"trade", "book", "bar", "mark"}, kinds  # every hook heard
    assert all(record.pair == "ETH-USD" for _, record, _ in live)  # its pair only
    assert len(live) > 20

    config, settings = load_backtest_config(config_path)
    Backtest(config, recording, settings).run()
    (_, replayed) = Heard.runs
    assert [(kind, record) for kind, record, _ in replayed] == [
        (kind, record) for kind, record, _ in live
    ]
    # self.market answered in every hook of both runs. (Its answers may differ in the first
    # few: records heard live before on_start were all in self.market when the hooks heard
    # them right after on_start; a backtest replays them one by one after its start.)
    for run in (live, replayed):
        assert all(isinstance(answer, Decimal | Book | Bar) for *_, answer in run)
