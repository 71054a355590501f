"""Sweep throughput: trials per second serially and on a LocalCluster, in one run.

Generates (once, cached in the temp directory) a synthetic recording with
framework.backtest.synth, large enough that one trial (a backtest of configs/backtest.yaml's
ladder and pulse) takes about a second, so the sweep's own costs do not hide in it. Then, on
that recording, with the same sampled parameters:

1. serially: one process runs the trials one after another through the very function the
   workers run (:func:`framework.backtest.sweep_trial.run_trial`), nothing else;
2. on a LocalCluster of ``--workers`` worker processes (2 by default): :func:`run_sweep` with
   Optuna's random sampler and its SQLite study, from the cluster being up (workers started,
   files shipped) to the last trial recorded; the cluster's start is printed apart.

It prints both rates, their ratio (issue 16's target: >= 1.7x with 2 workers on 2 cores),
and the per-trial overhead beyond the backtest itself: serially, wall time per trial minus
Backtest.run(); on the cluster, worker-seconds per trial (wall x workers / trials) minus the
mean Backtest.run() measured on the workers (scheduling, shipping the config, the result's
way back, Optuna's ask and tell, writing report.json, and workers idle between trials).
Figures move with the machine's load: compare those of one run.

    python tests/benchmarks/bench_sweep.py [--pushes 20000] [--trials 12] [--workers 2] [--repeat 1]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from framework.backtest.sweep import distributions, run_sweep, trial_params
from framework.backtest.sweep_config import parse_sweep
from framework.backtest.sweep_trial import TrialTask, run_trial
from framework.backtest.synth import SynthSettings, generate

ROOT = Path(__file__).resolve().parents[2]
TARGET = 1.7

SWEEP = """\
backtest: %(config)s
objective: {metric: pnl.USD.net_pnl}
sampler: {kind: random, seed: 11}
params:
  ladder:
    spacing: {low: 0.25, high: 2.0, step: 0.25}
    levels: {low: 2, high: 6}
  pulse:
    hold: [2, 3, 5, 8]
"""


def recording(pushes: int) -> Path:
    """The cached synthetic recording of that many pushes."""
    path = Path(tempfile.gettempdir()) / f"perpframe-bench-sweep-{pushes}.jsonl.gz"
    if not path.exists():
        began = time.perf_counter()
        generate(path, SynthSettings(pushes=pushes, seed=5))
        print(f"generated {path.name} in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    return path


def serial(sweep: Any, rec: Path, trials: int) -> tuple[float, list[float]]:
    """Wall seconds for trials run one after another here, and each Backtest.run() time."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=11))
    dists = distributions(sweep)
    tasks = []
    for _ in range(trials):
        trial = study.ask(dists)
        tasks.append(
            TrialTask(
                trial.number,
                sweep.with_params(trial_params(sweep, trial.params)),
                sweep.settings,
                str(rec),
            )
        )
    backtests = []
    began = time.perf_counter()
    for task in tasks:
        outcome = run_trial(task)
        assert outcome.error is None, outcome.error
        backtests.append(outcome.backtest_s)
    return time.perf_counter() - began, backtests


def cluster(sweep: Any, trials: int, workers: int) -> tuple[float, float, list[float], list[float]]:
    """(cluster start s, wall s from the cluster up to the last trial, each backtest s, and
    each idle gap of a worker: from one trial's end to the start of its next)."""
    marks: dict[str, float] = {}
    backtests: list[float] = []
    spans: dict[str, list[tuple[float, float]]] = {}

    def start(_done: int, _requested: int) -> None:
        marks["up"] = time.perf_counter()

    def finished(_trial: Any, outcome: Any) -> None:
        assert outcome is not None and outcome.error is None, outcome
        backtests.append(outcome.backtest_s)
        spans.setdefault(outcome.worker, []).append(
            (outcome.began_at, outcome.began_at + outcome.trial_s)
        )
        marks["last"] = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as out:
        began = time.perf_counter()
        run_sweep(
            sweep, Path(out), trials=trials, workers=workers, on_start=start, on_trial=finished
        )
    gaps = [
        later[0] - earlier[1]
        for runs in spans.values()
        for earlier, later in zip(sorted(runs), sorted(runs)[1:], strict=False)
    ]
    return marks["up"] - began, marks["last"] - marks["up"], backtests, gaps


def main(argv: list[str] | None = None) -> int:
    """Print serial and cluster rates, their ratio and the per-trial overhead."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushes", type=int, default=20_000, help="recording size")
    parser.add_argument("--trials", type=int, default=12, help="trials in each run")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster workers")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the best of each is shown")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    rec = recording(args.pushes)
    text = SWEEP % {"config": ROOT / "configs" / "backtest.yaml"}
    sweep = parse_sweep(text, path=ROOT / "bench-sweep.yaml", recording=rec)

    best_serial: tuple[float, list[float]] | None = None
    best_cluster: tuple[float, float, list[float], list[float]] | None = None
    for _ in range(args.repeat):  # alternating, the best of each: the machine's load varies
        run = serial(sweep, rec, args.trials)
        if best_serial is None or run[0] < best_serial[0]:
            best_serial = run
        other = cluster(sweep, args.trials, args.workers)
        if best_cluster is None or other[1] < best_cluster[1]:
            best_cluster = other
    assert best_serial is not None and best_cluster is not None
    serial_s, serial_bt = best_serial
    startup_s, cluster_s, cluster_bt, gaps = best_cluster

    serial_rate = args.trials / serial_s
    cluster_rate = args.trials / cluster_s
    ratio = cluster_rate / serial_rate
    serial_over = serial_s / args.trials - statistics.mean(serial_bt)
    cluster_over = cluster_s * args.workers / args.trials - statistics.mean(cluster_bt)
    print(
        f"recording: {rec.name} ({rec.stat().st_size / 1e6:.1f} MB), {args.trials} trials "
        f"per run, best of {args.repeat}"
    )
    print(
        f"serial:  {serial_rate:.3f} trials/s  (backtest {statistics.mean(serial_bt):.3f} s "
        f"mean, overhead {serial_over * 1000:.1f} ms/trial)"
    )
    print(
        f"cluster: {cluster_rate:.3f} trials/s on {args.workers} workers  (backtest "
        f"{statistics.mean(cluster_bt):.3f} s mean, overhead {cluster_over * 1000:.1f} ms per "
        f"trial per worker; cluster start {startup_s:.1f} s, not counted)"
    )
    if gaps:
        print(
            f"         a worker idles {statistics.mean(gaps) * 1000:.1f} ms between two trials "
            f"(mean of {len(gaps)}; max {max(gaps) * 1000:.1f} ms)"
        )
    verdict = "ok" if ratio >= TARGET else "BELOW TARGET"
    print(f"speed-up: {ratio:.2f}x serial (target >= {TARGET}x with 2 workers): {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
