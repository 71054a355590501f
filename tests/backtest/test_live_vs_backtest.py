"""One strategy, unchanged: live against the venue twin, then against its own recording.

The live run is ``run.py record`` (the node as ``live`` runs it, with the recorder). The
backtest replays that recording with the same config: the recorded node's own fills are
superseded by the paper venue's, priced at the recorded fills (slippage 0: the recorded
prices already carry the twin's). The strategy must make the same trades at the same prices.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import ClassVar

import orjson
import pytest

from framework import CancelRejected, MatchRecord, OrderIntent, OrderStatus, OrderUpdate
from framework.backtest.cli import backtest_main
from framework.backtest.runner import Backtest, load_backtest_config
from framework.live.cli import record_main
from framework.recording import RecordingReader, RestRecord
from framework.venue.requests import CANCEL_PATH, MATCHES_PATH
from strategies.pulse import Pulse

CONFIG = """\
venue:
  embedded: true
  twin:
    seed: 5
    prices: {tick_interval: 0.1, max_step_ticks: 400}
pairs:
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
polling:
  match_interval_s: 0.1
strategies:
  - name: pulse
    class: strategies.pulse:Pulse
    params: {pair: BTC-USD, quantity: "0.002", every_s: 0.5, hold: 1}
logging: {level: WARNING}
backtest:
  paper: {slippage: "0"}
"""


def live_fills(recording: Path) -> list[tuple[bool, Decimal, Decimal]]:
    """(is_long, quantity, price) of every match the live node got, oldest first."""
    found: dict[int, tuple[bool, Decimal, Decimal]] = {}
    for record in RecordingReader(recording).records():
        if isinstance(record, RestRecord) and record.path == MATCHES_PATH:
            for m in orjson.loads(record.body)["data"]:
                found[m["id"]] = (m["isLong"], Decimal(m["quantity"]), Decimal(m["averagePrice"]))
    return [found[k] for k in sorted(found)]


def test_a_strategy_trades_alike_live_and_on_its_own_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = tmp_path / "pulse.yaml"
    config_path.write_text(CONFIG)
    recording = tmp_path / "pulse.jsonl.gz"
    assert record_main(["-c", str(config_path), "--out", str(recording), "--duration", "4"]) == 0
    live = live_fills(recording)
    assert len(live) >= 4

    config, settings = load_backtest_config(config_path)
    result = Backtest(config, recording, settings).run()
    paper = [(f.is_long, f.quantity, f.price) for f in result.paper.fills]
    # The last live order may have been cut by the stop; everything before it must agree.
    compared = min(len(live), len(paper))
    assert compared >= len(live) - 1
    assert paper[:compared] == live[:compared]
    assert result.results["recording"]["pushes_superseded"] > 0
    assert result.results["fills"]["external_matches"] == 0

    assert (
        backtest_main(
            [
                "-c",
                str(config_path),
                "--recording",
                str(recording),
                "--report",
                str(tmp_path / "report"),
            ]
        )
        == 0
    )
    assert (tmp_path / "report" / "report.html").stat().st_size > 1000
    capsys.readouterr()


class Requoter(Pulse):
    """Pulse, plus one far bid (10 % under its last fill) replaced at every pulse: a cancel each.

    The bid never fills (the walk does not move 10 % in seconds), so the trades are Pulse's,
    and each pulse cancels the bid of the pulse before. Every instance is kept in ``runs``
    (the live run's and the backtest's run in this process).
    """

    runs: ClassVar[list[Requoter]] = []

    def on_start(self) -> None:
        """Pulse's timer, and the bookkeeping of the bids."""
        super().on_start()
        Requoter.runs.append(self)
        self.bid: str | None = None
        self.last_price: Decimal | None = None
        self.bids: list[Decimal] = []
        self.canceled: list[str] = []
        self.refused: list[CancelRejected] = []

    def on_timer(self, name: str) -> None:
        """Cancel the last bid, place the next one, then pulse."""
        if self.bid is not None:
            self.cancel(self.bid)
            self.bid = None
        s = self.settings
        if self.last_price is not None:
            price = (self.last_price * Decimal("0.9")).quantize(Decimal("0.1"))
            self.bids.append(price)
            self.bid = self.submit(
                OrderIntent(pair=s.pair, is_long=True, quantity=s.quantity, price=price, tag="bid")
            )
        super().on_timer(name)

    def on_match(self, match: MatchRecord) -> None:
        """Pulse's rule; the fill price places the next bid."""
        super().on_match(match)
        if match.client_order_id is not None and match.average_price is not None:
            self.last_price = match.average_price

    def on_order(self, update: OrderUpdate) -> None:
        """Pulse's rule; cancelled bids are counted."""
        super().on_order(update)
        if update.status is OrderStatus.CANCELED:
            self.canceled.append(update.client_order_id)

    def on_cancel_rejected(self, event: CancelRejected) -> None:
        """A cancel that did not happen (none should)."""
        self.refused.append(event)


def test_a_strategy_that_cancels_trades_and_cancels_alike_live_and_on_its_recording(
    tmp_path: Path,
) -> None:
    config_path = tmp_path / "requoter.yaml"
    config_path.write_text(
        CONFIG.replace("strategies.pulse:Pulse", "tests.backtest.test_live_vs_backtest:Requoter")
    )
    recording = tmp_path / "requoter.jsonl.gz"
    Requoter.runs.clear()
    assert record_main(["-c", str(config_path), "--out", str(recording), "--duration", "4"]) == 0
    (live,) = Requoter.runs
    fills = live_fills(recording)
    assert len(fills) >= 4
    assert len(live.canceled) >= 3 and live.refused == []
    cancel_calls = [
        r
        for r in RecordingReader(recording).records()
        if isinstance(r, RestRecord) and r.path == CANCEL_PATH
    ]
    assert len(cancel_calls) >= len(live.canceled)  # the recording holds the cancel answers

    config, settings = load_backtest_config(config_path)
    result = Backtest(config, recording, settings).run()
    (paper,) = [s for s in result.strategies if isinstance(s, Requoter)]
    assert paper is not live
    paper_fills = [(f.is_long, f.quantity, f.price) for f in result.paper.fills]
    compared = min(len(fills), len(paper_fills))
    assert compared >= len(fills) - 1
    assert paper_fills[:compared] == fills[:compared]  # the bids never filled, either side
    # The same bids at the same prices, each cancelled at the next pulse, in both runs.
    placed = min(len(live.bids), len(paper.bids))
    assert placed >= len(live.bids) - 1 and paper.bids[:placed] == live.bids[:placed]
    assert abs(len(paper.canceled) - len(live.canceled)) <= 1
    assert paper.refused == []
    assert len(paper.canceled) == len(paper.bids) - (1 if paper.bid is not None else 0)
    # The paper venue agrees: every bid but the last is cancelled there.
    index = result.paper.exchange.accounts[1].orders
    assert all(index.by_client_id(c).status == "CANCELED" for c in paper.canceled)  # type: ignore[union-attr]
    assert {r.client_order_id for r in index.open_orders()} == (
        {paper.bid} if paper.bid is not None else set()
    )
    assert result.engine.counters()["orders_canceled"] == len(paper.canceled)
