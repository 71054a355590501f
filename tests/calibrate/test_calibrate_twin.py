"""Issue 28's calibration test: a recording made against the twin with a known injected
latency and fill probability is read back by ``perpframe calibrate``, which recovers each
within 10 %, and writes a model file the fill model's reader takes.
"""

from __future__ import annotations

import gzip
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import yaml

from framework import Book, OrderIntent, Strategy
from framework.calibrate.cli import calibrate_main
from framework.calibrate.fit import fit
from framework.calibrate.journal_orders import journal_orders
from framework.calibrate.observations import observe
from framework.fill_model_file import load_fill_model
from framework.live.cli import record_main
from framework.venue.models import MatchType

LATENCY_S = 0.1
FILL_PROBABILITY = Decimal("0.5")
BIDS = 20

CONFIG = f"""\
venue:
  embedded: true
  twin:
    seed: 5
    prices: {{tick_interval: 0.05, max_step_ticks: 20}}
    market: {{enabled: true, fill_rule: touch, fill_probability: "{FILL_PROBABILITY}"}}
    faults: {{latency: {LATENCY_S}}}
pairs:
  ETH-USD: {{}}
polling: {{match_interval_s: 0.2}}
journal: {{path: JOURNAL}}
market:
  pairs:
    ETH-USD: {{channels: [trade, depth], mark_interval_s: 0}}
strategies:
  - name: prober
    class: tests.calibrate.test_calibrate_twin:Prober
    params: {{pair: ETH-USD}}
logging: {{level: WARNING}}
"""


class Prober(Strategy):
    """Every 0.2 s: a small market order, and BIDS GTC bids at the best bid (canceled after
    1 s): each trade at or below them is a trial for each."""

    def on_start(self) -> None:
        self.pair: str = self.params["pair"]
        self.book: Book | None = None
        self.sent: list[tuple[str, float]] = []
        self.side = True
        self.schedule("probe", 0.2)

    def on_book(self, book: Book) -> None:
        self.book = book

    def on_timer(self, name: str) -> None:
        now = self.now().timestamp()
        for coid, at in list(self.sent):
            if now - at > 1.0:
                self.cancel(coid)
                self.sent.remove((coid, at))
        book = self.book
        if book is None or book.best_bid is None:
            return
        self.side = not self.side
        q = Decimal("0.01")
        self.submit(
            OrderIntent(pair=self.pair, is_long=self.side, quantity=q, match_type=MatchType.IOC)
        )
        for _ in range(BIDS):
            coid = self.submit(
                OrderIntent(
                    pair=self.pair,
                    is_long=True,
                    quantity=q,
                    price=book.best_bid,
                    match_type=MatchType.GTC,
                )
            )
            self.sent.append((coid, now))


def test_calibrate_recovers_the_twins_injected_latency(tmp_path: Path) -> None:
    config = tmp_path / "probe.yaml"
    journal = tmp_path / "probe.sqlite"
    config.write_text(CONFIG.replace("JOURNAL", str(journal)), encoding="utf-8")
    recording = tmp_path / "probe.jsonl.gz"
    assert record_main(["-c", str(config), "--out", str(recording), "--duration", "8"]) == 0

    cal = fit(observe(recording))
    assert cal.orders > 30
    assert cal.ack is not None and cal.arrival is not None
    injected = LATENCY_S * 1000
    # The twin adds its latency before handling each call: send to answer and send to the
    # match both carry it, plus the loopback's own fraction of a millisecond to a few.
    assert abs(cal.ack.median.value - injected) <= 0.1 * injected, cal.ack
    assert abs(cal.arrival.median.value - injected) <= 0.1 * injected, cal.arrival
    assert cal.market > 10 and cal.slippage_bps is not None
    touch = cal.touch_probability
    assert cal.resting > 100 and touch is not None and touch.n > 500, touch
    assert abs(touch.value - float(FILL_PROBABILITY)) <= 0.1 * float(FILL_PROBABILITY), touch
    assert touch.low <= float(FILL_PROBABILITY) <= touch.high, touch

    out, report = tmp_path / "model.yaml", tmp_path / "calibrate.html"
    argv = ["--recording", str(recording), "--out", str(out), "--report", str(report)]
    assert calibrate_main(argv) == 0
    model: dict[str, Any] = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert model["version"] == 1 and model["fitted"]["kind"] == "perpframe-fill-model"
    median = model["fitted"]["latency_to_answer"]["median"]
    assert median["low"] <= median["value"] <= median["high"]
    assert median["n"] == len(cal.ack_values)
    # The file is the fill model a backtest, a paper run or a shadow reads (fill_model:).
    loaded = load_fill_model(out)
    assert loaded.fill.rule == "touch"
    assert abs(loaded.fill.fill_probability - FILL_PROBABILITY) <= Decimal("0.05")
    assert loaded.latency.model == "lognormal" and loaded.latency.median_ms is not None
    assert abs(loaded.latency.median_ms - injected) <= 0.1 * injected
    assert "plotly" in report.read_text(encoding="utf-8")

    # An older recording (no request kept) with the node's journal: the orders come from
    # the journal, the answer times do not (no send-to-answer latency), the rest does.
    old = tmp_path / "old.jsonl"
    with gzip.open(recording, "rb") as src, old.open("wb") as dst:
        for line in src:
            record = orjson.loads(line)
            record.pop("request", None)
            dst.write(orjson.dumps(record) + b"\n")
    assert (
        calibrate_main(["--recording", str(old), "--out", str(out), "--report", str(report)]) == 2
    )
    again = fit(observe(old, journal=journal_orders(journal)))
    assert again.orders == cal.orders and again.ack is None
    assert again.arrival is not None
    assert abs(again.arrival.median.value - injected) <= 0.1 * injected, again.arrival
