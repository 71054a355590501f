"""Sweeps: a real Dask scheduler and workers, the embedded LocalCluster, resume, failures.

Every trial's report.json is compared, byte for byte, with ``run.py backtest``'s for a config
holding the same parameters. Recordings are tiny (a trial takes a fraction of a second).
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from framework.backtest.cli import backtest_main
from framework.backtest.synth import SynthSettings, generate

pytest.importorskip("distributed")
pytest.importorskip("optuna")

from optuna.trial import TrialState

from framework.backtest.sweep import distributions, open_study, run_sweep
from framework.backtest.sweep_cli import INSTALL_HINT, sweep_main
from framework.backtest.sweep_config import load_sweep_config
from framework.backtest.sweep_queue import TRIAL, trial_number
from tests.waiting import until

ROOT = Path(__file__).resolve().parents[2]

BACKTEST = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
polling: {match_interval_s: 0.5}
strategies:
  - name: ladder
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD, quantity: "0.01", spacing: "0.5", levels: 3}
  - name: flaky
    class: %(module)s:Flaky
    params: {pair: BTC-USD, quantity: "0.001", every_s: 1.0, hold: 3}
logging: {level: WARNING}
backtest:
  paper: {balances: {USD: "100000"}}
  %(extra)s
"""

# A strategy module only the sweep can bring to the workers (they run elsewhere).
FLAKY = '''\
"""A pulse that cannot be built with boom: 1 (a trial that raises)."""

from __future__ import annotations

import os
import threading

import attrs

from strategies.pulse import Pulse


class Flaky(Pulse):
    """Pulse, refusing boom == 1 when built; die == 1 ends the process (a dead worker)."""

    @attrs.frozen(kw_only=True)
    class Params(Pulse.Params):
        """Pulse's params, boom and die."""

        boom: int = 0
        die: int = 0
        hang: int = 0

    def __init__(self, name, context, params=None, **kwargs):
        params = dict(params or {})
        if params.pop("hang", 0) == 1:  # a trial that never ends, its start marked in a file
            with open(os.environ["SWEEP_HANG_MARK"], "w") as mark:
                mark.write("started")
            threading.Event().wait()
        if params.pop("die", 0) == 1:
            os._exit(3)
        if params.pop("boom", 0) == 1:
            raise RuntimeError("boom is 1")
        super().__init__(name, context, params, **kwargs)
'''


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny synthetic recording (a trial takes well under a second)."""
    path = tmp_path_factory.mktemp("rec") / "tiny.jsonl.gz"
    generate(path, SynthSettings(pushes=800, seed=3, mean_gap_ms=100))
    return path


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[str]:
    """A LocalCluster of two worker processes for the tests that need not start their own."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        yield str(cluster.scheduler_address)


def _backtest(module: str, extra: str = "") -> str:
    return BACKTEST % {"module": module, "extra": extra}


def _setup(tmp_path: Path, module: str, sweep: str, extra: str = "") -> Path:
    """A directory holding the strategy module, backtest.yaml and sweep.yaml."""
    (tmp_path / f"{module}.py").write_text(FLAKY, encoding="utf-8")
    (tmp_path / "backtest.yaml").write_text(_backtest(module, extra), encoding="utf-8")
    (tmp_path / "sweep.yaml").write_text(sweep, encoding="utf-8")
    return tmp_path / "sweep.yaml"


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "trials.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _value(text: str) -> Any:
    return yaml.safe_load(text)  # trials.csv holds values as YAML would spell them


def _check_reports(tmp_path: Path, module: str, recording: Path, out: Path, extra: str = "") -> int:
    """Each complete trial's report.json equals run.py backtest's with its params; count."""
    compared = 0
    for row in _rows(out):
        if row["state"] != "complete":
            continue
        config = yaml.safe_load(_backtest(module, extra))
        by_name = {s["name"]: s for s in config["strategies"]}
        for key, text in row.items():
            name, dot, param = key.partition(".")
            if dot and name in by_name and text != "":
                by_name[name]["params"][param] = _value(text)
        single = tmp_path / f"single-{row['number']}.yaml"
        single.write_text(yaml.safe_dump(config), encoding="utf-8")
        report = tmp_path / f"single-{row['number']}"
        assert (
            backtest_main(
                ["-c", str(single), "--recording", str(recording), "--report", str(report)]
            )
            == 0
        )
        trial = out / "trials" / f"{int(row['number']):05d}" / "report.json"
        assert trial.read_bytes() == (report / "report.json").read_bytes(), row
        compared += 1
    return compared


GRID = """\
backtest: backtest.yaml
objective: {metric: pnl.USD.net_pnl, direction: maximize}
sampler: {kind: grid}
params:
  flaky:
    boom: {low: 0, high: 2}
  ladder:
    spacing: ["0.5", "1.5"]
"""


def test_embedded_local_cluster_sweep_matches_single_backtests(
    tmp_path: Path, recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = _setup(tmp_path, "flaky_embedded", GRID)
    out = tmp_path / "out"
    argv = ["-c", str(sweep), "--recording", str(recording), "--out", str(out), "--workers", "2"]
    assert sweep_main(argv) == 0
    rows = _rows(out)
    assert len(rows) == 6  # the whole grid: boom 0..2 x two spacings
    failed = [r for r in rows if r["state"] == "fail"]
    assert [r["flaky.boom"] for r in failed] == ["1", "1"]
    assert all("boom is 1" in r["error"] for r in failed)
    assert _check_reports(tmp_path, "flaky_embedded", recording, out) == 4
    best = yaml.safe_load((out / "best.yaml").read_text(encoding="utf-8"))
    assert {s["name"] for s in best["strategies"]} == {"ladder", "flaky"}
    assert all("pair" in s["params"] for s in best["strategies"])  # whole blocks, to paste
    page = (out / "sweep.html").read_text(encoding="utf-8")
    assert "Objective over trials" in page and "cdn" not in page.split("<body>")[1].lower()
    printed = capsys.readouterr().out
    assert "Best trials" in printed and "2 failed" in printed


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[str]:
    """``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1 (free ports)."""
    with _dask(tmp_path, 2) as (address, _):
        yield address


@contextlib.contextmanager
def _dask(
    tmp_path: Path, workers: int, env: dict[str, str] | None = None
) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A ``dask scheduler`` and ``workers`` worker processes (no nanny: a killed one stays
    dead); yields the address and the worker processes."""
    from distributed import Client

    dask = Path(sys.executable).with_name("dask")
    command = [str(dask)] if dask.exists() else [sys.executable, "-m", "dask"]
    elsewhere = tmp_path / "workers"
    elsewhere.mkdir()
    file = tmp_path / "scheduler.json"  # the address of a free port (--port 0)
    env = {**os.environ, "PYTHONPATH": "", **(env or {})}  # workers find nothing beside it
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(
            subprocess.Popen(
                [
                    *command,
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--no-dashboard",
                    "--scheduler-file",
                    str(file),
                ],
                cwd=elsewhere,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        until(lambda: file.exists() and file.stat().st_size > 0, 30, "scheduler file")
        address = until(lambda: _address(file), 30, "scheduler address")
        for i in range(workers):
            procs.append(
                subprocess.Popen(
                    [
                        *command,
                        "worker",
                        address,
                        "--host",
                        "127.0.0.1",
                        "--nworkers",
                        "1",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                        "--no-nanny",
                        "--death-timeout",
                        "10",
                        "--local-directory",
                        str(elsewhere / f"w{i}"),
                    ],
                    cwd=elsewhere,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        client = Client(address, timeout="20s")
        try:
            client.wait_for_workers(workers, timeout=60)
            yield address, procs[1:]
        finally:
            # Workers are told to close first; then the scheduler and the client.
            client.retire_workers(close_workers=True)
            client.shutdown()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


def _address(file: Path) -> str | None:
    import json

    try:
        return str(json.loads(file.read_text(encoding="utf-8"))["address"])
    except (ValueError, KeyError, OSError):
        return None


RANDOM = """\
backtest: backtest.yaml
trials: 3
objective: {metric: pnl.USD.net_pnl, divide_by: pnl.USD.initial_equity, direction: maximize}
sampler: {kind: random, seed: 7}
params:
  flaky:
    hold: [2, 4]
    every_s: {low: 0.5, high: 2.0, step: 0.5}
"""


def test_sweep_on_a_dask_scheduler_and_two_worker_processes(
    tmp_path: Path, recording: Path, dask_cluster: str
) -> None:
    # A price track too: like the recording, it reaches the workers from the client.
    prices = tmp_path / "prices.csv"
    prices.write_text(
        "ts,ETH-USD,BTC-USD\n"
        + "".join(
            f"{1_700_000_000_000 + i * 1000},{2000 + i % 7},{60000 + 10 * (i % 5)}\n"
            for i in range(120)
        ),
        encoding="utf-8",
    )
    extra = f"prices_csv: {prices}"
    sweep = _setup(tmp_path, "flaky_remote", RANDOM, extra)
    out = tmp_path / "out"
    argv = [
        "-c",
        str(sweep),
        "--recording",
        str(recording),
        "--out",
        str(out),
        "--scheduler",
        dask_cluster,
    ]
    assert sweep_main(argv) == 0
    rows = _rows(out)
    assert [r["state"] for r in rows] == ["complete"] * 3, rows
    assert len({r["worker"] for r in rows}) >= 1
    assert all(r["worker"].startswith("tcp://127.0.0.1:") for r in rows)
    assert _check_reports(tmp_path, "flaky_remote", recording, out, extra) == 3
    # What the workers were sent, in their own local directories (they run elsewhere).
    sent = {p.name for p in (tmp_path / "workers").rglob("*") if p.is_file()}
    assert {"flaky_remote.py", "tiny.jsonl.gz", "prices.csv"} <= sent, sent


RESUMABLE = """\
backtest: backtest.yaml
trials: 5
objective: {metric: pnl.USD.net_pnl}
sampler: {kind: random, seed: 3}
workers: {recording: shared}
params:
  ladder:
    levels: {low: 1, high: 6}
    spacing: {low: 0.25, high: 2.0, step: 0.25}
"""


def test_a_stopped_sweep_resumes_to_the_requested_count_without_redoing_trials(
    tmp_path: Path, recording: Path, shared_cluster: str
) -> None:
    sweep_path = _setup(tmp_path, "flaky_resume", RESUMABLE)
    sweep = load_sweep_config(sweep_path, recording=recording)
    out = tmp_path / "out"

    finished: list[int] = []

    def ctrl_c(trial: Any, _outcome: Any) -> None:
        finished.append(trial_number(trial))
        if len(finished) == 2:
            raise KeyboardInterrupt  # as Ctrl-C, with the other worker's trial in flight

    first = run_sweep(sweep, out, scheduler=shared_cluster, on_trial=ctrl_c)
    assert first.interrupted and first.ran == 2
    # In flight: left RUNNING with its number, to run first at resume.
    cut = first.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    assert cut and all(TRIAL in t.user_attrs for t in cut)
    before = {
        p.parent.name: (p.read_bytes(), p.stat().st_mtime_ns)
        for p in (out / "trials").glob("*/report.json")
    }
    assert len(before) == 2
    # A client killed after asking, before submitting, leaves a RUNNING trial with no number.
    study = open_study(sweep, out, resume=True)
    stale = study.ask(distributions(sweep))
    second = run_sweep(sweep, out, scheduler=shared_cluster, resume=True)
    assert not second.interrupted
    trials = second.study.get_trials(deepcopy=False)
    ran = [t for t in trials if t.state.name == "COMPLETE"]
    assert len(ran) == 5 and second.ran == 3
    assert all(t.state.name in ("COMPLETE", "PRUNED") for t in trials)  # nothing left over
    # Contiguous numbers: those cut keep theirs; the stale trial ran too, numbered after.
    assert sorted(trial_number(t) for t in ran) == [0, 1, 2, 3, 4]
    for c in cut:
        again = next(t for t in ran if t.number == c.number)
        assert trial_number(again) == trial_number(c) and again.params == c.params
    assert next(t for t in trials if t.number == stale.number).state.name == "COMPLETE"
    assert [int(r["number"]) for r in _rows(out)] == [0, 1, 2, 3, 4]
    after = {
        p.parent.name: (p.read_bytes(), p.stat().st_mtime_ns)
        for p in (out / "trials").glob("*/report.json")
    }
    assert {k: after[k] for k in before} == before  # finished trials were not run again
    assert sorted(after) == [f"{n:05d}" for n in range(5)]


LOGSCALE = """\
backtest: backtest.yaml
objective: {metric: pnl.USD.net_pnl}
params:
  flaky:
    every_s: {low: 0.5, high: 4.0, log: true}
    hold: [2, 3, 5, 8]
"""

SMALL = """\
backtest: backtest.yaml
trials: 6
objective: {metric: pnl.USD.net_pnl}
sampler: {kind: random, seed: 5}
workers: {recording: shared}
params:
  ladder:
    levels: {low: 1, high: 3}
"""


def test_parameters_that_already_ran_are_never_run_again(
    tmp_path: Path, recording: Path, shared_cluster: str
) -> None:
    # Three combinations, six trials asked for: a random sampler proposes repeats.
    sweep = load_sweep_config(_setup(tmp_path, "flaky_small", SMALL), recording=recording)
    result = run_sweep(sweep, tmp_path / "out", scheduler=shared_cluster)
    trials = result.study.get_trials(deepcopy=False)
    ran = [t for t in trials if t.state.name == "COMPLETE"]
    assert sorted(t.params["ladder.levels"] for t in ran) == [1, 2, 3]
    assert sorted(trial_number(t) for t in ran) == [0, 1, 2]
    assert result.exhausted == "all 3 combinations of the parameter space were taken"
    repeats = [t for t in trials if t.state.name == "PRUNED"]
    assert result.duplicates == len(repeats)
    assert all(t.user_attrs["duplicate_of"] in (0, 1, 2, None) for t in repeats)


def test_ctrl_c_in_a_sweep_is_one_line_and_130_without_a_traceback(
    tmp_path: Path, recording: Path
) -> None:
    # As at a terminal: SIGINT to the whole process group, the LocalCluster's workers too.
    sweep = _setup(tmp_path, "flaky_ctrl_c", RESUMABLE)
    out = tmp_path / "out"
    command = [sys.executable, str(ROOT / "run.py"), "sweep", "-c", str(sweep)]
    command += ["--recording", str(recording), "--out", str(out), "--workers", "2"]
    process = subprocess.Popen(
        [*command, "--trials", "40"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        until(lambda: any(out.glob("trials/*/report.json")), 120, "a finished trial")
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1] == (
        f"sweep: interrupted; continue with --resume --out {out}"
    )


def test_the_best_trials_read_well_piped_and_in_sweep_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import optuna

    from framework.backtest.sweep_cli import _print_table
    from framework.backtest.sweep_report import best_table, write_html

    sweep = load_sweep_config(_setup(tmp_path, "flaky_table", LOGSCALE))
    study = optuna.create_study(direction="maximize")
    dists = distributions(sweep)
    for number, every_s in enumerate((0.7365118456816135, 3.1044814454585246)):
        params = {"flaky.every_s": every_s, "flaky.hold": 3}
        study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions=dists,
                value=-1.2345678912345 * (number + 1),
                user_attrs={"params": params, TRIAL: number, "backtest_s": 0.25},
            )
        )
    _print_table(best_table(study, sweep))  # to a pipe (capsys): no terminal width
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if "objective" in line)
    for name in ("trial", "objective", "flaky.every_s", "flaky.hold", "backtest s"):
        assert name in header, printed  # whole: not cut to fit 80 columns
    assert "0.736512" in printed and "-1.23457" in printed and "0.7365118" not in printed
    page = write_html(study, sweep, tmp_path / "sweep.html").read_text(encoding="utf-8")
    best = page.split("<table id='best'>", 1)[1].split("</table>", 1)[0]
    assert "<th>flaky.every_s</th>" in best and "<td>3.10448</td>" in best
    assert "{" not in best and not re.search(r"\d\.\d{7,}", best), best


def test_sweep_file_problems_are_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = """\
backtest: backtest.yaml
objective: {metric: pnl.USD.net_pnl, direction: upward}
params:
  ladder:
    levels: {low: 0, high: 4}
    spacing: {low: 2, high: 1, step: 0.5}
    colour: [red, blue]
  nobody:
    x: [1, 2]
"""
    sweep = _setup(tmp_path, "flaky_bad", bad)
    assert sweep_main(["-c", str(sweep)]) == 1
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert (
        f"{sweep}: objective.direction: expected one of maximize, minimize, got 'upward' (line 2)"
        in lines
    )
    assert any(
        line
        == f"{sweep}: params.ladder.levels: the value 0 is refused: levels must be at least 1 (line 5)"
        for line in lines
    ), lines
    assert any(
        "params.ladder.spacing: low (2) must be below high (1) (line 6)" in line for line in lines
    ), lines
    assert any(
        "params.ladder.colour: strategy 'ladder'" in line and "(line 7)" in line for line in lines
    ), lines
    assert any(
        "params.nobody: no strategy named 'nobody'" in line and "(line 8)" in line for line in lines
    ), lines


def test_sweep_without_the_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)
    assert sweep_main(["-c", "configs/sweep.yaml"]) == 1
    assert capsys.readouterr().err.strip() == INSTALL_HINT
    assert "pip install -e '.[sweep]'" in INSTALL_HINT


DYING = """\
backtest: backtest.yaml
objective: {metric: pnl.USD.net_pnl}
sampler: {kind: grid}
params:
  flaky:
    die: [0, 1]
    hold: [2, 3]
"""


def test_a_trial_whose_worker_dies_is_recorded_failed_and_the_sweep_goes_on(
    tmp_path: Path, recording: Path
) -> None:
    import dask

    sweep = load_sweep_config(_setup(tmp_path, "flaky_dying", DYING), recording=recording)
    # No retry on another worker: the first death fails the trial (the default retries 3 times).
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        result = run_sweep(sweep, tmp_path / "out", workers=2)
    assert not result.interrupted and result.ran == 4
    rows = _rows(tmp_path / "out")
    assert sorted((r["flaky.die"], r["state"]) for r in rows) == [
        ("0", "complete"),
        ("0", "complete"),
        ("1", "fail"),
        ("1", "fail"),
    ]
    assert all("KilledWorker" in r["error"] for r in rows if r["state"] == "fail"), rows


def test_a_resume_with_a_changed_sweep_file_is_refused(tmp_path: Path, recording: Path) -> None:
    from framework.backtest.sweep import SweepError

    path = _setup(tmp_path, "flaky_changed", RESUMABLE)
    open_study(load_sweep_config(path, recording=recording), tmp_path / "out", resume=False)
    with pytest.raises(SweepError, match="exists: pass --resume"):
        open_study(load_sweep_config(path, recording=recording), tmp_path / "out", resume=False)
    path.write_text(RESUMABLE.replace("high: 6", "high: 8"), encoding="utf-8")
    with pytest.raises(SweepError, match="changed since this sweep began"):
        open_study(load_sweep_config(path, recording=recording), tmp_path / "out", resume=True)
    with pytest.raises(SweepError, match="no sweep to resume"):
        open_study(load_sweep_config(path, recording=recording), tmp_path / "new", resume=True)


def test_an_objective_key_report_json_lacks_stops_the_sweep_with_its_line(
    tmp_path: Path, recording: Path, shared_cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = RESUMABLE.replace("pnl.USD.net_pnl", "pnl.EUR.net_pnl")
    sweep = _setup(tmp_path, "flaky_metric", wrong)
    argv = ["-c", str(sweep), "--recording", str(recording), "--out", str(tmp_path / "o")]
    assert sweep_main([*argv, "--scheduler", shared_cluster]) == 1
    err = capsys.readouterr().err
    assert (
        f"sweep: {sweep}: objective.metric: report.json has no pnl.EUR.net_pnl "
        "(no 'EUR' under pnl; keys: USD) (line 3)"
    ) in err, err


@pytest.mark.parametrize(
    ("space", "problem"),
    [
        ("{low: 1, high: 2, log: true, step: 0.5}", "step and log: true cannot go together"),
        ("{low: 0, high: 2, log: true}", "params.ladder.spacing.low: a log range needs low > 0"),
        ("{low: 1, high: 2, colour: red}", "params.ladder.spacing.colour: unknown key"),
        ("{high: 2}", "low is missing"),
        ("[]", "expected a non-empty list of values"),
        ("[1, 1]", "values repeat"),
        ("7", "expected a list of values or a mapping with low and high, got 7"),
        ("{low: 0.5, high: 2.0}", "a grid needs a step (or a list of values)"),
    ],
)
def test_bad_spaces_are_located(tmp_path: Path, space: str, problem: str) -> None:
    from framework.backtest.sweep_config import parse_sweep
    from framework.venue.errors import ConfigError

    _setup(tmp_path, "flaky_spaces", "")
    text = (
        f"backtest: {tmp_path / 'backtest.yaml'}\n"
        "objective: {metric: pnl.USD.net_pnl}\n"
        "sampler: {kind: grid}\n"
        "params:\n"
        f"  ladder:\n    spacing: {space}\n"
    )
    with pytest.raises(ConfigError) as caught:
        parse_sweep(text, path=tmp_path / "s.yaml")
    assert problem in str(caught.value) and "(line 6)" in str(caught.value), str(caught.value)


# A strategy whose params are a dataclass: the sweep checks them as it checks attrs ones.
DATACLASS_PARAMS = '''\
"""Pulse's params as a dataclass."""

from __future__ import annotations

import dataclasses

from strategies.pulse import Pulse


class Flaky(Pulse):
    """Pulse, declaring its params as a dataclass."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Params:
        """Pulse's params."""

        pair: str
        quantity: str = "0.001"
        every_s: float = 1.0
        hold: int = 3
'''


def test_a_swept_parameter_a_dataclass_params_lacks_is_located(tmp_path: Path) -> None:
    from framework.backtest.sweep_config import parse_sweep
    from framework.venue.errors import ConfigError

    (tmp_path / "dcflaky.py").write_text(DATACLASS_PARAMS, encoding="utf-8")
    (tmp_path / "backtest.yaml").write_text(_backtest("dcflaky"), encoding="utf-8")
    text = (
        f"backtest: {tmp_path / 'backtest.yaml'}\n"
        "objective: {metric: pnl.USD.net_pnl}\n"
        "params:\n"
        "  flaky:\n    evry_s: [1.0, 2.0]\n"
    )
    with pytest.raises(ConfigError) as caught:
        parse_sweep(text, path=tmp_path / "s.yaml")
    assert (
        "params.flaky.evry_s: strategy 'flaky' (dcflaky:Flaky) has no parameter 'evry_s'"
        " (it has: every_s, hold, pair, quantity) (line 5)"
    ) in str(caught.value), str(caught.value)


HANGING = """\
backtest: backtest.yaml
objective: {metric: pnl.USD.net_pnl}
sampler: {kind: grid}
workers: {lost_after_s: 1}
params:
  flaky:
    hang: [1]
"""


def test_a_sweep_whose_every_worker_is_gone_stops_with_one_line(
    tmp_path: Path, recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Dask waits for a worker for ever; the sweep stops after workers.lost_after_s."""
    import threading

    mark = tmp_path / "hanging"
    sweep = _setup(tmp_path, "flaky_hang", HANGING)
    out = tmp_path / "out"
    argv = ["-c", str(sweep), "--recording", str(recording), "--out", str(out)]
    with _dask(tmp_path, 1, {"SWEEP_HANG_MARK": str(mark)}) as (address, (worker,)):
        codes: list[int] = []
        run = threading.Thread(
            target=lambda: codes.append(sweep_main([*argv, "--scheduler", address])), daemon=True
        )
        run.start()
        until(mark.exists, 60, "the trial to start on the worker")
        worker.kill()  # no nanny: it stays dead, and the trial with it
        run.join(timeout=120)
        assert not run.is_alive(), "the sweep still waits for a worker"
    assert codes == [1]
    err = capsys.readouterr().err
    assert "sweep: stopped: no worker in the cluster for 1 s (1 trials in flight are kept" in err
    assert f"continue with --resume --out {out}" in err
