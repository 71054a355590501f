"""``python run.py sweep``: many backtests over a parameter space (see framework.backtest.sweep).

``sweep -c SWEEP.yaml [--recording PATH] [--scheduler tcp://HOST:8786] [--workers N]
[--trials N] [--out DIR] [--resume]``. Without --scheduler a LocalCluster of worker
processes (one per core, or --workers) starts and stops with the command. A rich progress
bar counts trials on stderr; the table of the best trials and where the files went are
printed at the end. Exit 0 when the requested trials ran, 1 with a reason when the sweep
could not run, 130 when interrupted (the finished trials are kept: --resume continues).
This module imports nothing of the sweep extra until it runs, so without it the command
says in one line what to install.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from framework.cli import add_strategy_dirs, program
from framework.venue.errors import ConfigError, FrameworkError

__all__ = ["INSTALL_HINT", "sweep_main"]

INSTALL_HINT = (
    "sweep: needs the sweep extra (dask[distributed], optuna, plotly): pip install -e '.[sweep]'"
)
"""The one line printed when the extra is missing."""


def _extra_missing() -> bool:
    try:
        import distributed  # noqa: F401
        import optuna  # noqa: F401
        import plotly  # noqa: F401
    except ImportError:
        return True
    return False


def sweep_main(argv: list[str]) -> int:
    """``run.py sweep -c SWEEP.yaml ...``; 0 when the requested trials ran."""
    parser = argparse.ArgumentParser(
        prog=program("sweep"),
        description="Run many backtests over a parameter space on a Dask cluster (Optuna).",
    )
    parser.add_argument("-c", "--config", required=True, metavar="SWEEP.yaml", help="sweep file")
    parser.add_argument("--recording", metavar="PATH", help="recording to replay")
    parser.add_argument(
        "--scheduler", metavar="ADDRESS", help="a Dask scheduler (tcp://HOST:8786); default: local"
    )
    parser.add_argument("--workers", type=int, metavar="N", help="local worker processes")
    parser.add_argument("--trials", type=int, metavar="N", help="trials in all (resume: to N)")
    parser.add_argument("--out", metavar="DIR", help="output directory (default sweeps/NAME)")
    parser.add_argument("--resume", action="store_true", help="continue the sweep in --out")
    args = parser.parse_args(argv)
    if args.trials is not None and args.trials < 1:
        parser.error("--trials: expected at least 1")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers: expected at least 1")
    if _extra_missing():
        print(INSTALL_HINT, file=sys.stderr)
        return 1
    from framework.backtest.sweep import run_sweep
    from framework.backtest.sweep_config import load_sweep_config
    from framework.backtest.sweep_queue import counted, trial_number
    from framework.backtest.sweep_report import best_table

    add_strategy_dirs(args.config)  # the rule of every command that reads a config
    try:
        sweep = load_sweep_config(args.config, recording=args.recording)
    except ConfigError as exc:
        for line in str(exc).splitlines():
            print(line, file=sys.stderr)
        return 1
    out = Path(args.out or Path("sweeps") / Path(args.config).stem)
    progress = _Progress(maximize=sweep.objective.direction == "maximize")
    try:
        result = run_sweep(
            sweep,
            out,
            trials=args.trials,
            scheduler=args.scheduler,
            workers=args.workers,
            resume=args.resume,
            on_start=progress.start,
            on_trial=progress.trial,
        )
    except (FrameworkError, OSError) as exc:
        print(f"sweep: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # before the trials began, or a second Ctrl-C while stopping
        print(
            f"sweep: interrupted (finished trials are kept: --resume --out {out})",
            file=sys.stderr,
        )
        return 130
    finally:
        progress.stop()
    _print_table(best_table(result.study, sweep))
    ran = sorted(
        (t for t in result.study.get_trials(deepcopy=False) if counted(t)), key=trial_number
    )
    failed = [t for t in ran if t.state.name == "FAIL"]
    skipped = f", {result.duplicates} repeated proposals skipped" if result.duplicates else ""
    print(
        f"trials: {result.ran} run now on {result.workers} workers, {len(ran)} in all "
        f"of {result.requested} requested, {len(failed)} failed{skipped}"
    )
    for trial in failed[-3:]:
        print(f"  trial {trial_number(trial)} failed: {trial.user_attrs.get('error')}")
    print("wrote: " + "  ".join(str(p) for p in result.written))
    if result.exhausted is not None and len(ran) < result.requested:
        print(f"sweep: stopped at {len(ran)} trials: {result.exhausted}", file=sys.stderr)
    if result.interrupted:
        print(f"sweep: interrupted; continue with --resume --out {out}", file=sys.stderr)
        return 130
    if result.lost is not None:
        print(f"sweep: stopped: {result.lost}; continue with --resume --out {out}", file=sys.stderr)
        return 1
    return 0


def _print_table(table: Any) -> None:
    """Print a rich table to stdout: at the terminal's width, or whole when piped."""
    from rich.console import Console
    from rich.measure import Measurement

    console = Console()
    if not console.is_terminal:  # no width to fit: cut headers help nobody
        wide = console.options.update(width=10_000)
        width = Measurement.get(console, wide, table).maximum
        console = Console(width=max(width, 80))
    console.print(table)


class _Progress:
    """A rich progress bar over trials on stderr (finished ones count from the start)."""

    def __init__(self, *, maximize: bool) -> None:
        self.bar: Any = None
        self.task: Any = None
        self.maximize = maximize
        self.best: float | None = None

    def start(self, done: int, requested: int) -> None:
        """Show the bar: done of requested."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self.bar.start()
        self.task = self.bar.add_task("trials", total=requested, completed=done)

    def trial(self, trial: Any, _outcome: Any) -> None:
        """One more trial finished; the best objective so far in the description."""
        if self.bar is None:
            return
        value = trial.value
        if value is not None and (
            self.best is None or (value > self.best if self.maximize else value < self.best)
        ):
            self.best = value
            self.bar.update(self.task, description=f"trials (best {value:.6g})")
        self.bar.update(self.task, advance=1)

    def stop(self) -> None:
        """Leave the bar's last state on the screen."""
        if self.bar is not None:
            self.bar.stop()
