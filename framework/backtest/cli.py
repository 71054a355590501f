"""``python run.py backtest``.

``backtest -c FILE [--recording PATH] [--report DIR] [--strict]`` replays a recording through
the same code as live on virtual time with a paper venue
(:class:`framework.backtest.runner.Backtest`), writes ``DIR/report.json`` and
``DIR/report.html`` and prints a few lines of results and the timing (timing only here, never
in report.json), then on stderr one ``backtest: warning:`` line for each thing wrong in the
recording (lines that are not records, time going back, none of the config's pairs in it, a
cut file). ``--strict`` (or ``backtest.strict: true``) makes a line that is not a record
fatal. A rich progress bar goes to stderr when it is a terminal. The config's ``venue:``
section is not read (a config for a real venue, its credentials unset, backtests as it is);
log lines carry the replay's virtual time. It exits 0 when it ran, 1 with a one-line
reason when it could not (an empty recording, or one with no valid record, included).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from framework.backtest.report import write_report
from framework.backtest.runner import (
    Backtest,
    BacktestResult,
    BacktestSettings,
    load_backtest_config,
)
from framework.cli import add_strategy_dirs, program
from framework.config import Config
from framework.output_path import unwritable
from framework.recording import RecordingReader
from framework.venue.errors import ConfigError, FrameworkError

__all__ = ["StrategiesFailed", "backtest_main", "recording_problem", "run_backtest"]

EXIT_OK = 0
EXIT_FAILED = 1


def _print_problems(exc: ConfigError) -> None:
    for line in str(exc).splitlines():
        print(line, file=sys.stderr)


def backtest_main(argv: list[str]) -> int:
    """``run.py backtest -c FILE [--recording PATH] [--report DIR] [--strict]``; 0 when it ran."""
    parser = argparse.ArgumentParser(
        prog=program("backtest"),
        description="Replay a recording through the configured strategies on a paper venue.",
    )
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="YAML config")
    parser.add_argument("--recording", metavar="PATH", help="recording to replay (.jsonl[.gz])")
    parser.add_argument("--report", metavar="DIR", help="where report.json and .html go")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="a line of the recording that is not a record is fatal (default: skipped, counted)",
    )
    args = parser.parse_args(argv)
    add_strategy_dirs(args.config)  # the same rule as check and live
    try:
        config, settings = load_backtest_config(args.config)
    except ConfigError as exc:
        _print_problems(exc)
        return EXIT_FAILED
    if args.strict:
        settings = attrs.evolve(settings, strict=True)
    recording = args.recording or settings.recording
    if not recording:
        print(
            "backtest: no recording: pass --recording PATH or set backtest.recording",
            file=sys.stderr,
        )
        return EXIT_FAILED
    problem = recording_problem(recording)
    if problem is not None:
        print(f"backtest: recording {recording}: {problem}", file=sys.stderr)
        return EXIT_FAILED
    report_dir = Path(args.report or settings.report or Path("reports") / Path(args.config).stem)
    problem = unwritable(report_dir, directory=True)
    if problem is not None:  # before the run, not after it
        print(f"backtest: cannot write the report to {report_dir}: {problem}", file=sys.stderr)
        return EXIT_FAILED
    from framework.logs import configure_logging

    configure_logging(
        level=config.logging.level, json=config.logging.json, secrets=config.secrets()
    )
    failed: StrategiesFailed | None = None
    try:
        result = run_backtest(config, settings, recording, progress=True, virtual_log_time=True)
    except StrategiesFailed as exc:  # the report is still written: what they did before
        failed, result = exc, exc.result
    except (FrameworkError, OSError) as exc:
        print(f"backtest: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_FAILED
    try:
        json_path, html_path = write_report(
            report_dir,
            result.results,
            result.collector,
            title=f"Backtest of {Path(recording).name} ({Path(args.config).name})",
        )
    except OSError as exc:  # e.g. the disk filled up meanwhile
        print(
            f"backtest: cannot write the report to {report_dir}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    _print_summary(result, json_path, html_path)
    for warning in result.warnings:
        print(f"backtest: warning: {warning}", file=sys.stderr)
    if failed is not None:
        print(f"backtest: {failed}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def run_backtest(
    config: Config,
    settings: BacktestSettings,
    recording: str | Path,
    *,
    progress: bool = False,
    virtual_log_time: bool = False,
) -> BacktestResult:
    """One backtest as ``run.py backtest`` runs it (each sweep trial is one of these).

    virtual_log_time: log lines are stamped with the replay's virtual time meanwhile (the
    process's logging: for one backtest at a time, never for trials run side by side).
    """
    backtest = Backtest(config, recording, settings)
    with _virtual_log_time(backtest) if virtual_log_time else _nothing():
        result = _run_with_progress(backtest) if progress else backtest.run()
    stopped = [s.name for s in result.strategies if s.stopped]
    if stopped:  # its figures are not the strategy's: it stopped trading when it failed
        raise StrategiesFailed(result, stopped)
    return result


class StrategiesFailed(FrameworkError):
    """A backtest in which strategies were stopped for failing; ``result`` holds its run."""

    def __init__(self, result: BacktestResult, names: list[str]) -> None:
        self.result = result
        self.names = names
        super().__init__(
            f"strategies stopped for failing: {', '.join(names)} (their hooks raised; the"
            " log says which and why): the figures are not those of the strategy"
        )


@contextmanager
def _virtual_log_time(backtest: Backtest) -> Iterator[None]:
    from framework.logs import set_log_clock

    def now_ms() -> int | None:
        clock = backtest.clock
        return clock.now_ms() if clock is not None else None

    set_log_clock(now_ms)
    try:
        yield
    finally:
        set_log_clock(None)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def recording_problem(path: str | Path) -> str | None:
    """Why a recording cannot be read (no such file, unreadable, empty, no valid record), or
    None when it can.

    Reads up to its first record: a valid recording costs one piece of reading.
    """
    if not Path(path).is_file():
        return "no such file"
    try:
        reader = RecordingReader(path)
        try:
            for _ in reader.records():
                return None
            stats = reader.stats
        finally:
            reader.close()
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if stats.lines == 0:
        return "empty: nothing to replay"
    return (
        f"no valid record in {stats.lines} line(s) (each line must be a JSON object with "
        '"ts" and "source": "ws" with "frame", or "rest" with "path" and "body")'
    )


def _run_with_progress(backtest: Backtest) -> BacktestResult:
    """Run with a rich progress bar on stderr when it is a terminal."""
    if not sys.stderr.isatty():
        return backtest.run()
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("replaying", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return backtest.run(progress=progress)


def _print_summary(result: BacktestResult, json_path: Path, html_path: Path) -> None:
    results = result.results
    orders = results["orders"]
    print(f"report: {json_path}  {html_path}")
    print(
        f"messages replayed: {results['recording']['lines']} "
        f"(recorded pushes delivered {results['recording']['pushes_delivered']}, "
        f"{results['recording']['pushes_superseded']} of the recorded node's own superseded"
        " by the paper venue's)"
    )
    codes = ", ".join(f"{k}: {v}" for k, v in orders["rejected_by_code"].items()) or "none"
    print(
        f"orders: submitted {orders['submitted']}, accepted {orders['accepted']}, "
        f"rejected {orders['rejected']} (by code: {codes}), fills {results['fills']['count']}"
    )
    for coin, pnl in results["pnl"].items():
        print(
            f"{coin}: net {pnl['net_pnl']} ({pnl['return_pct']} %) = realized "
            f"{pnl['realized_pnl']} − fees {pnl['fees']} + unrealized {pnl['unrealized_pnl']}, "
            f"max drawdown {pnl['max_drawdown']}"
        )
    for coin, trips in results["round_trips"].items():
        every = trips["all"]
        print(
            f"{coin} round trips: {every['closed']} closed ({every['open']} open), "
            f"win rate {every['win_rate_pct'] or '-'} %, profit factor "
            f"{every['profit_factor'] or '-'}, average holding {every['average_holding_s'] or '-'} s"
        )
    print(
        f"time: {result.elapsed_s:.2f} s ({result.scan_s:.2f} s scan), "
        f"{result.messages_per_second:,.0f} messages/s"
    )
