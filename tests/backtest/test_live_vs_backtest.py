"""One strategy, unchanged: live against the venue twin, then against its own recording.

The live run is ``run.py record`` (the node as ``live`` runs it, with the recorder). The
backtest replays that recording with the same config: the recorded node's own fills are
superseded by the paper venue's, priced at the recorded fills (slippage 0: the recorded
prices already carry the twin's). The strategy must make the same trades at the same prices.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from framework.backtest.cli import backtest_main, record_main
from framework.backtest.recording import RecordingReader, RestRecord
from framework.backtest.runner import Backtest, load_backtest_config
from framework.venue.requests import MATCHES_PATH

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
