"""Work a backtest leaves undone gives the same results as doing it.

A replay skips what nobody needs: pushes nobody listens to are filed undecoded, recorded
matches nobody listens to are only counted, the paper venue's price feed parks while nothing
rests or is held, and prices are read on first use (or taken from the replay's own reading).
Each test runs the same backtest with and without the shortcut and compares the results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from framework import MatchRecord, PositionPush, Strategy
from framework.backtest.paper import PaperSettings
from framework.backtest.recording import RecordingReader
from framework.backtest.replay import Replayer
from framework.backtest.runner import Backtest, BacktestSettings
from framework.backtest.scan import scan
from framework.backtest.synth import SynthSettings, generate
from framework.backtest.timeline import Timeline
from framework.engine.clock import VirtualClock
from framework.config import parse_config
from framework.engine.bus import Bus
from framework.engine.portfolio import Portfolio, push_router

CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
strategies:
%s
logging: {level: WARNING}
"""

TRADERS = """\
  - name: pulse
    class: strategies.pulse:Pulse
    params: {pair: BTC-USD, quantity: "0.001", every_s: 1.0, hold: 3}
  - name: ladder
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD, quantity: "0.01", spacing: "0.5", levels: 3}
"""


class Idle(Strategy):
    """Listens to nothing."""


class Listener(Strategy):
    """Listens to every push and match, and does nothing with them."""

    def on_position(self, push: PositionPush) -> None:
        """Nothing."""

    def on_match(self, match: MatchRecord) -> None:
        """Nothing."""


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Someone else's trading, the recorded node's own trading, and pushes without matches."""
    folder = tmp_path_factory.mktemp("lazy")
    out = {
        "external": folder / "external.jsonl",
        "own": folder / "own.jsonl.gz",
        "pushes": folder / "pushes.jsonl",
        "late start": folder / "late.jsonl",
    }
    generate(out["external"], SynthSettings(pushes=3000, seed=21, mean_gap_ms=100))
    generate(out["own"], SynthSettings(pushes=3000, seed=22, own_orders=True, mean_gap_ms=100))
    lines = out["external"].read_bytes().splitlines(keepends=True)
    with open(out["pushes"], "wb") as handle:
        for line in lines:
            if b'"source":"ws"' in line:
                handle.write(line)
    # Starting at a poll that answers older matches: prices dated before the first record.
    first = next(
        i for i, line in enumerate(lines) if b"MatchPairList" in line and b"averagePrice" in line
    )
    out["late start"].write_bytes(b"".join(lines[first:]))
    return out


def results(path: Path, strategies: str, **options: Any) -> dict[str, Any]:
    fill = options.pop("fill_price", "next")
    settings = BacktestSettings(paper=PaperSettings(fill_price=fill))
    result = Backtest(parse_config(CONFIG % strategies), path, settings, **options).run()
    return result.results


@pytest.mark.parametrize("kind", ["external", "own", "late start"])
@pytest.mark.parametrize("fill_price", ["next", "last"])
def test_a_parked_price_feed_and_paused_sampler_give_the_results_of_eager_ones(
    recordings: dict[str, Path], kind: str, fill_price: str
) -> None:
    path = recordings[kind]
    parked = results(path, TRADERS, fill_price=fill_price)
    fed = results(path, TRADERS, fill_price=fill_price, lazy=False)
    assert parked["fills"]["count"] > 10
    assert parked == fed


@pytest.mark.parametrize("kind", ["external", "own", "pushes"])
@pytest.mark.parametrize("positions", ["always", "fallback", "never"])
def test_the_replay_finds_the_prices_the_scan_finds(
    recordings: dict[str, Path], kind: str, positions: Any
) -> None:
    path = recordings[kind]
    clock = VirtualClock(0)
    replayer = Replayer(
        clock=clock,
        timeline=Timeline(clock),
        route=push_router(Portfolio(), Bus().publish),
        on_match=lambda m: None,
    )
    replayer.run(RecordingReader(path))
    expected = scan(path, positions=positions).price_rows
    assert replayer.prices.rows(positions) == expected
    if positions != "never":
        assert expected


def test_a_listener_and_nobody_see_the_same_recording(recordings: dict[str, Path]) -> None:
    # Nobody listening: pushes filed undecoded, external matches only counted. A listener:
    # every push decoded and routed, every match decoded and attributed. Same report.
    path = recordings["external"]
    idle = results(path, '  - {name: s, class: "tests.backtest.test_lazy_work:Idle"}')
    heard = results(path, '  - {name: s, class: "tests.backtest.test_lazy_work:Listener"}')
    assert idle["recording"]["pushes_delivered"] > 1000
    assert idle["fills"]["external_matches"] > 100
    assert idle == heard


def test_a_no_trade_report_has_the_prices_of_a_full_scan(recordings: dict[str, Path]) -> None:
    # No own orders and no trading: the prices come from the replay's own reading; with
    # prices read up front (a CSV would be the same path), the report's marks agree.
    path = recordings["external"]
    idle = '  - {name: s, class: "tests.backtest.test_lazy_work:Idle"}'
    lazy = Backtest(parse_config(CONFIG % idle), path, BacktestSettings()).run()
    marks = {pair: data["last_mark"] for pair, data in lazy.results["pairs"].items()}
    index = scan(path)
    last: dict[str, str] = {}
    for _, pair, price, _ in index.price_rows:
        last[pair] = str(price)
    assert marks == last
    assert orjson.dumps(lazy.results)  # plain types only
