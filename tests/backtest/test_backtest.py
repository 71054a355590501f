"""Whole backtests: strategies unchanged, the report, determinism, and the command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from framework import MatchRecord, OrderIntent, OrderStatus, OrderUpdate, PositionPush, Strategy
from framework.backtest.cli import backtest_main
from framework.backtest.paper import PaperSettings
from framework.backtest.runner import (
    Backtest,
    BacktestSettings,
    backtest_settings,
    load_backtest_config,
)
from framework.backtest.synth import SynthSettings, generate
from framework.config import parse_config
from framework.venue.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
strategies:
  - name: pulse
    class: strategies.pulse:Pulse
    params: {pair: BTC-USD, quantity: "0.001", every_s: 1.0, hold: 3}
  - name: ladder
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD, quantity: "0.01", spacing: "0.5", levels: 3}
logging: {level: WARNING}
"""


@pytest.fixture(scope="module")
def own_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording where the recorded node itself traded (its activity gets superseded)."""
    path = tmp_path_factory.mktemp("rec") / "own.jsonl.gz"
    generate(path, SynthSettings(pushes=3000, own_orders=True, seed=9, mean_gap_ms=100))
    return path


@pytest.fixture(scope="module")
def external_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording of activity that is not the recorded node's (every push is delivered)."""
    path = tmp_path_factory.mktemp("rec") / "ext.jsonl"
    generate(path, SynthSettings(pushes=2000, seed=10, mean_gap_ms=100))
    return path


def run(recording: Path, config: str = CONFIG, **settings: object) -> Backtest:
    return Backtest(parse_config(config), recording, BacktestSettings(**settings))  # type: ignore[arg-type]


def test_example_strategies_trade_on_the_paper_venue(own_recording: Path) -> None:
    result = run(own_recording).run()
    r = result.results
    assert r["orders"]["submitted"] > 50 and r["orders"]["accepted"] > 0
    assert r["fills"]["count"] > 10
    assert set(r["fills"]["by_strategy"]) == {"ladder", "pulse"}
    # Every recorded push came from the recorded node's own orders: all superseded.
    assert r["recording"]["pushes_superseded"] == 3000 and r["recording"]["pushes_delivered"] == 0
    assert r["recording"]["matches_superseded"] > 0 and r["fills"]["external_matches"] == 0
    pulse = next(s for s in result.strategies if s.name == "pulse")
    assert pulse.wins + pulse.losses > 0  # type: ignore[attr-defined]
    usd = r["pnl"]["USD"]
    assert usd["initial_equity"] == "100000"
    assert float(usd["final_equity"]) == pytest.approx(
        100000 + float(usd["realized_pnl"]) + float(usd["unrealized_pnl"]) - float(usd["fees"])
    )


def test_net_pnl_is_one_defined_sum_and_round_trips_add_up(own_recording: Path) -> None:
    from decimal import Decimal

    r = run(own_recording).run().results
    usd = {k: Decimal(v) for k, v in r["pnl"]["USD"].items() if isinstance(v, str)}
    # framework.pnl: the live summary's definitions.
    assert usd["net_pnl"] == usd["realized_pnl"] - usd["fees"] + usd["unrealized_pnl"]
    assert usd["gross_pnl"] == usd["realized_pnl"] + usd["unrealized_pnl"]
    assert usd["final_equity"] - usd["initial_equity"] == usd["net_pnl"]
    trips = r["round_trips"]["USD"]
    assert set(trips["by_strategy"]) == {"ladder", "pulse"}
    every = trips["all"]
    assert every["closed"] == sum(s["closed"] for s in trips["by_strategy"].values()) > 0
    assert every["wins"] + every["losses"] <= every["closed"]
    # Closed trips' fees are the fills' fees but for those of trips still open.
    assert Decimal(every["fees"]) <= usd["fees"]
    assert Decimal(every["net_pnl"]) == Decimal(every["gross_pnl"]) - Decimal(every["fees"])


def test_the_same_inputs_give_a_byte_identical_report(own_recording: Path, tmp_path: Path) -> None:
    outputs = []
    for run_dir in ("a", "b"):
        assert run_cli(write_config(tmp_path), own_recording, tmp_path / run_dir) == 0
        outputs.append((tmp_path / run_dir / "report.json").read_bytes())
    assert outputs[0] == outputs[1]
    assert b"elapsed" not in outputs[0] and b"per_second" not in outputs[0]


def test_external_pushes_and_matches_reach_the_strategy(external_recording: Path) -> None:
    seen = {"positions": 0, "matches": 0}

    class Watcher(Strategy):
        def on_position(self, push: PositionPush) -> None:
            seen["positions"] += 1

        def on_match(self, match: MatchRecord) -> None:
            assert match.client_order_id is None
            seen["matches"] += 1

    config = parse_config(CONFIG)
    backtest = Backtest(
        config, external_recording, strategies=[lambda context: Watcher("watcher", context, {})]
    )
    result = backtest.run()
    assert seen["positions"] == result.results["recording"]["position_pushes"] > 500
    assert seen["matches"] == result.results["fills"]["external_matches"] > 100
    assert result.results["recording"]["pushes_superseded"] == 0


def test_refusals_are_reported_by_code(external_recording: Path) -> None:
    class TooSmall(Strategy):
        def on_start(self) -> None:
            self.schedule("go", 10.0)

        def on_timer(self, name: str) -> None:
            self.submit(OrderIntent(pair="ETH-USD", is_long=True, quantity=D("0.0001")))
            self.submit(OrderIntent(pair="ETH-USD", is_long=True, quantity=D("50")))

    result = Backtest(
        parse_config(CONFIG),
        external_recording,
        strategies=[lambda context: TooSmall("small", context, {})],
    ).run()
    orders = result.results["orders"]
    assert orders["rejected_by_code"]["2312"] == orders["rejected_before_sending"] > 0
    assert orders["rejected_by_code"].get("2201", 0) + orders["rejected_by_code"].get("2102", 0) > 0


def test_timers_run_on_virtual_time(external_recording: Path) -> None:
    ticks: list[float] = []

    class Ticker(Strategy):
        def on_start(self) -> None:
            self.schedule("t", 2.5)

        def on_timer(self, name: str) -> None:
            ticks.append(self.now().timestamp())

    result = Backtest(
        parse_config(CONFIG),
        external_recording,
        strategies=[lambda context: Ticker("ticker", context, {})],
    ).run()
    start = result.results["period"]["start_ms"] / 1000
    span = (result.results["period"]["end_ms"] - result.results["period"]["start_ms"]) / 1000
    assert ticks[:3] == [start + 2.5, start + 5.0, start + 7.5]
    assert len(ticks) == int(span // 2.5)


def test_on_order_and_on_match_reach_the_owner(own_recording: Path) -> None:
    events: list[str] = []

    class Once(Strategy):
        def on_start(self) -> None:
            self.schedule("go", 5.0)
            self.done = False

        def on_timer(self, name: str) -> None:
            if not self.done:
                self.done = True
                self.submit(
                    OrderIntent(
                        pair="BTC-USD", is_long=True, quantity=D("0.001"), client_order_id="mine-1"
                    )
                )

        def on_order(self, update: OrderUpdate) -> None:
            events.append(f"{update.client_order_id}:{update.status.value}")

        def on_match(self, match: MatchRecord) -> None:
            if match.client_order_id is not None:
                events.append(f"match:{match.client_order_id}")

    Backtest(
        parse_config(CONFIG), own_recording, strategies=[lambda context: Once("once", context, {})]
    ).run()
    # As live: the engine's attribute() settles the intent (FILLED), then the match is
    # published.
    assert events == [
        f"mine-1:{OrderStatus.ACCEPTED.value}",
        f"mine-1:{OrderStatus.FILLED.value}",
        "match:mine-1",
    ]


def test_the_report_html_is_self_contained(own_recording: Path, tmp_path: Path) -> None:
    assert run_cli(write_config(tmp_path), own_recording, tmp_path / "out") == 0
    page = (tmp_path / "out" / "report.html").read_text()
    # plotly.js inline, and every chart a plotly div: equity, positions, a price track per pair
    assert "<script src" not in page and "<link" not in page
    assert page.count("Plotly.newPlot(") >= 4
    for part in ("Equity and drawdown", "Gross PnL against fees", "Position per pair", "price"):
        assert part in page
    for table in ("PnL per strategy", "Round trips", "Orders", "Fills"):
        assert f"<h2>{table}</h2>" in page
    results = orjson.loads((tmp_path / "out" / "report.json").read_bytes())
    assert str(results["fills"]["count"]) in page


def test_the_command_prints_results_and_timing(
    own_recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(write_config(tmp_path), own_recording, tmp_path / "r") == 0
    out = capsys.readouterr().out
    assert "report: " in out and "messages/s" in out and "orders: submitted" in out
    # Net PnL by its labelled parts (framework.pnl), and the round trips.
    assert re.search(
        r"^USD: net \S+ \(\S+ %\) = realized \S+ − fees \S+ \+ unrealized \S+, ", out, re.M
    ), out
    assert re.search(r"^USD round trips: \d+ closed \(\d+ open\), win rate ", out, re.M), out


def test_the_command_refuses_a_missing_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        backtest_main(
            ["-c", str(write_config(tmp_path)), "--recording", str(tmp_path / "nope.jsonl")]
        )
        == 1
    )
    assert "no such file" in capsys.readouterr().err
    assert backtest_main(["-c", str(write_config(tmp_path))]) == 1
    assert "no recording" in capsys.readouterr().err


def test_a_bad_backtest_section_is_reported_with_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, "backtest:\n  paper:\n    fill_price: soon\n    lever: 3\n")
    assert backtest_main(["-c", str(path), "--recording", "x"]) == 1
    err = capsys.readouterr().err
    assert "backtest.paper.fill_price" in err and "lever" in err
    # one line per problem, each located, as every other config error
    lines = [line for line in err.splitlines() if "backtest.paper." in line]
    assert len(lines) == 2 and all(re.search(r"\(line \d+\)$", line) for line in lines)


def test_the_backtest_section_does_not_disturb_the_live_config(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, "backtest:\n  seed: 4\n  paper: {latency_ms: 20}\nmetrics: {enabled: false}\n"
    )
    config, settings = load_backtest_config(path)
    assert settings.seed == 4 and settings.paper.latency_ms == 20
    assert list(config.pairs) == ["ETH-USD", "BTC-USD"]
    with pytest.raises(ConfigError):
        backtest_settings({"price_sources": ["ticks"]})
    assert backtest_settings(None) == BacktestSettings()
    assert backtest_settings({"paper": {"slippage": "0.001"}}).paper == PaperSettings(
        slippage=D("0.001")
    )


def test_latency_delays_the_answers_on_virtual_time(own_recording: Path) -> None:
    fast = run(own_recording).run().results
    slow = (
        Backtest(
            parse_config(CONFIG),
            own_recording,
            BacktestSettings(paper=PaperSettings(latency_ms=250)),
        )
        .run()
        .results
    )
    assert slow["orders"]["submitted"] > 0 and slow != fast


def test_files_a_backtest_config_names_are_found_here_else_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    there, here = tmp_path / "there", tmp_path / "here"
    there.mkdir()
    here.mkdir()
    (there / "rec.jsonl").write_text("")
    (there / "p.csv").write_text("")
    (here / "p.csv").write_text("")
    config = there / "bt.yaml"
    config.write_text(CONFIG + "backtest: {recording: rec.jsonl, prices_csv: p.csv}\n")
    monkeypatch.chdir(here)
    _, settings = load_backtest_config(config)
    assert settings.recording == str(there / "rec.jsonl")  # not here: beside the config
    assert settings.prices_csv == "p.csv"  # here first, as strategy modules are found
    config.write_text(CONFIG + "backtest: {recording: ''}\n")
    assert load_backtest_config(config)[1].recording == ""  # empty stays empty: none given


def test_the_shipped_sample_backtests_into_a_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = ROOT / "samples" / "demo.jsonl.gz"
    assert sample.stat().st_size < 3_000_000
    monkeypatch.chdir(tmp_path)  # the config's recording is found beside it, from anywhere
    _, settings = load_backtest_config(ROOT / "configs" / "backtest.yaml")
    assert settings.recording is not None
    assert Path(settings.recording).resolve() == sample.resolve()
    assert run_cli(ROOT / "configs" / "backtest.yaml", sample, tmp_path) == 0
    results = orjson.loads((tmp_path / "report.json").read_bytes())
    recording = results["recording"]
    out = capsys.readouterr().out
    assert (
        f"messages replayed: {recording['lines']} (recorded pushes delivered"
        f" {recording['pushes_delivered']}, {recording['pushes_superseded']} of the recorded"
        " node's own superseded by the paper venue's)"
    ) in out
    assert results["fills"]["count"] > 20
    assert set(results["fills"]["by_strategy"]) == {"ladder", "pulse"}
    assert results["recording"]["bad_lines"] == 0
    # It holds market data, and the paper venue filled against it.
    assert recording["market_frames"] > 1000 and recording["market_answers"] > 100
    assert recording["market_errors"] == 0
    # samples/README.md quotes the summary as this run prints it (timing aside).
    quoted = (ROOT / "samples" / "README.md").read_text(encoding="utf-8")
    summary = [line for line in out.splitlines() if line.split(":")[0] in _SUMMARY_HEADS]
    assert len(summary) == len(_SUMMARY_HEADS)
    for line in summary:
        assert line in quoted, line


_SUMMARY_HEADS = ("messages replayed", "orders", "USD", "USD round trips")


D = __import__("decimal").Decimal


def run_cli(config: Path, recording: Path, report: Path) -> int:
    """`run.py backtest -c config --recording recording --report report`; its exit code."""
    return backtest_main(
        ["-c", str(config), "--recording", str(recording), "--report", str(report)]
    )


def write_config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "bt.yaml"
    path.write_text(CONFIG + extra)
    return path


def test_own_activity_can_be_delivered_as_recorded(own_recording: Path) -> None:
    quiet = CONFIG.replace("every_s: 1.0", "every_s: 100000.0")
    result = run(own_recording, quiet, own_activity="deliver").run()
    recording = result.results["recording"]
    assert recording["pushes_superseded"] == 0 and recording["pushes_delivered"] == 3000
    assert result.results["fills"]["external_matches"] == recording["matches_delivered"] > 0


# ------------------------------------------------------------------ the command, as a user runs it

REAL_VENUE = """\
venue:
  base_url: https://venue.example.com
  ws_url: wss://venue.example.com/ws
  api_key: ${MY_KEY}
  api_secret: ${MY_SECRET}
journal: {path: /nonexistent/journal.sqlite}
"""


def backtest_command(
    config: Path, recording: Path, report: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python run.py backtest ...` in a subprocess (environment without MY_KEY/MY_SECRET)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("MY_KEY", "MY_SECRET")}
    return subprocess.run(
        [
            *(sys.executable, str(ROOT / "run.py"), "backtest", "-c", str(config)),
            *("--recording", str(recording), "--report", str(report)),
        ],
        cwd=ROOT,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_config_for_a_real_venue_backtests_without_its_credentials(
    own_recording: Path, tmp_path: Path
) -> None:
    config = tmp_path / "real.yaml"
    config.write_text(CONFIG.replace("venue: {embedded: true}\n", REAL_VENUE))
    done = backtest_command(config, own_recording, tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert "orders: submitted" in done.stdout
    assert (tmp_path / "r" / "report.json").is_file()
    # The live commands still want the credentials.
    check = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "check", "-c", str(config)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k not in ("MY_KEY", "MY_SECRET")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 1
    assert "venue.api_key: environment variable MY_KEY is not set (line 4)" in check.stderr


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "empty: nothing to replay"),
        ('not json\n{"ts": 1}\n[1, 2]\n', "no valid record in 3 line(s)"),
    ],
)
def test_a_recording_with_nothing_to_replay_exits_1_with_one_line(
    tmp_path: Path, content: str, problem: str
) -> None:
    recording = tmp_path / "rec.jsonl"
    recording.write_text(content)
    done = backtest_command(write_config(tmp_path), recording, tmp_path / "r")
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"backtest: recording {recording}: {problem}")
    assert not (tmp_path / "r").exists()


def test_log_lines_of_a_backtest_carry_virtual_time(own_recording: Path, tmp_path: Path) -> None:
    config = tmp_path / "bt.yaml"
    config.write_text(CONFIG.replace("logging: {level: WARNING}", "logging: {level: INFO}"))
    done = backtest_command(config, own_recording, tmp_path / "r")
    assert done.returncode == 0, done.stderr
    first_ts = orjson.loads((tmp_path / "r" / "report.json").read_bytes())["recording"]["first_ts"]
    lines = [line for line in done.stderr.splitlines() if " strategy." in line]
    assert lines, done.stderr
    recorded = datetime.fromtimestamp(first_ts / 1000, UTC)
    for line in lines:
        stamp = datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert recorded <= stamp < recorded + timedelta(days=1), line  # the recording's day
    assert abs(datetime.now(UTC) - recorded) > timedelta(days=1)  # which is not today


def test_a_backtest_whose_strategy_failed_exits_1_with_one_line_and_still_reports(
    own_recording: Path, tmp_path: Path
) -> None:
    (tmp_path / "faulty.py").write_text(
        "from framework import Strategy\n\n\n"
        "class Faulty(Strategy):\n"
        '    """Raises on every timer: stopped for failing."""\n\n'
        "    def on_start(self) -> None:\n"
        '        self.schedule("t", 0.5)\n\n'
        "    def on_timer(self, name: str) -> None:\n"
        '        raise ValueError("oops")\n'
    )
    config = tmp_path / "faulty.yaml"
    config.write_text(
        "venue: {embedded: true}\npairs:\n  ETH-USD: {}\nstrategies:\n"
        "  - name: faulty\n    class: faulty:Faulty\n    params: {pair: ETH-USD}\n"
        "logging: {level: WARNING}\n"
    )
    done = backtest_command(config, own_recording, tmp_path / "r")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("backtest:")]
    assert lines == [
        "backtest: strategies stopped for failing: faulty (their hooks raised; the log says"
        " which and why): the figures are not those of the strategy"
    ]
    assert "Traceback" not in done.stderr
    assert (tmp_path / "r" / "report.json").is_file()
