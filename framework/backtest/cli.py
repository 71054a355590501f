"""``python run.py record`` and ``python run.py backtest``.

``record -c FILE --out PATH [--duration S] [--append]`` runs the node exactly as ``live``
does (strategies included) with the recorder writing PATH; the summary line is printed last.

``backtest -c FILE [--recording PATH] [--report DIR]`` replays a recording through the same
code as live on virtual time with a paper venue (:class:`framework.backtest.runner.Backtest`),
writes ``DIR/report.json`` and ``DIR/report.html`` and prints a few lines of results and the
timing (timing only here, never in report.json). A rich progress bar goes to stderr when it
is a terminal. Both exit 0 when they ran, 1 with a one-line reason when they could not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import attrs

from framework.backtest.report import write_report
from framework.backtest.runner import (
    Backtest,
    BacktestResult,
    BacktestSettings,
    load_backtest_config,
)
from framework.cli import add_strategy_dirs
from framework.config import Config
from framework.venue.errors import ConfigError, FrameworkError

__all__ = ["backtest_main", "record_main", "run_backtest"]

EXIT_OK = 0
EXIT_FAILED = 1


def _print_problems(exc: ConfigError) -> None:
    for line in str(exc).splitlines():
        print(line, file=sys.stderr)


def backtest_main(argv: list[str]) -> int:
    """``run.py backtest -c FILE [--recording PATH] [--report DIR]``; 0 when it ran."""
    parser = argparse.ArgumentParser(
        prog="run.py backtest",
        description="Replay a recording through the configured strategies on a paper venue.",
    )
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="YAML config")
    parser.add_argument("--recording", metavar="PATH", help="recording to replay (.jsonl[.gz])")
    parser.add_argument("--report", metavar="DIR", help="where report.json and .html go")
    args = parser.parse_args(argv)
    add_strategy_dirs(args.config)  # the same rule as check and live
    try:
        config, settings = load_backtest_config(args.config)
    except ConfigError as exc:
        _print_problems(exc)
        return EXIT_FAILED
    recording = args.recording or settings.recording
    if not recording:
        print(
            "backtest: no recording: pass --recording PATH or set backtest.recording",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not Path(recording).is_file():
        print(f"backtest: recording {recording}: no such file", file=sys.stderr)
        return EXIT_FAILED
    report_dir = Path(args.report or settings.report or Path("reports") / Path(args.config).stem)
    from framework.live.logs import configure_logging

    configure_logging(
        level=config.logging.level, json=config.logging.json, secrets=config.secrets()
    )
    try:
        result = run_backtest(config, settings, recording, progress=True)
    except (FrameworkError, OSError) as exc:
        print(f"backtest: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_FAILED
    json_path, html_path = write_report(
        report_dir,
        result.results,
        result.collector,
        title=f"Backtest of {Path(recording).name} ({Path(args.config).name})",
    )
    _print_summary(result, json_path, html_path)
    return EXIT_OK


def run_backtest(
    config: Config, settings: BacktestSettings, recording: str | Path, *, progress: bool = False
) -> BacktestResult:
    """One backtest as ``run.py backtest`` runs it (each sweep trial is one of these)."""
    backtest = Backtest(config, recording, settings)
    return _run_with_progress(backtest) if progress else backtest.run()


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
        f"(pushes delivered {results['recording']['pushes_delivered']}, "
        f"superseded {results['recording']['pushes_superseded']})"
    )
    codes = ", ".join(f"{k}: {v}" for k, v in orders["rejected_by_code"].items()) or "none"
    print(
        f"orders: submitted {orders['submitted']}, accepted {orders['accepted']}, "
        f"rejected {orders['rejected']} (by code: {codes}), fills {results['fills']['count']}"
    )
    for coin, pnl in results["pnl"].items():
        print(
            f"{coin}: realized {pnl['realized_pnl']}, unrealized {pnl['unrealized_pnl']}, "
            f"fees {pnl['fees']}, net {pnl['net_pnl']} ({pnl['return_pct']} %), "
            f"max drawdown {pnl['max_drawdown']}"
        )
    print(
        f"time: {result.elapsed_s:.2f} s ({result.scan_s:.2f} s scan), "
        f"{result.messages_per_second:,.0f} messages/s"
    )


def record_main(argv: list[str]) -> int:
    """``run.py record -c FILE --out PATH [--duration S] [--append]``: live node + recorder."""
    parser = argparse.ArgumentParser(
        prog="run.py record",
        description="Run the node as `live` does and record every inbound message.",
    )
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="YAML config")
    parser.add_argument(
        "--out",
        required=True,
        metavar="PATH",
        help="recording file (.jsonl, or .jsonl.gz to compress)",
    )
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    parser.add_argument("--append", action="store_true", help="add to an existing recording")
    args = parser.parse_args(argv)
    if args.duration is not None and not args.duration > 0:
        parser.error("--duration: expected a positive number of seconds")
    out = Path(args.out)
    if out.exists() and out.stat().st_size > 0 and not args.append:
        print(f"record: {out} exists (pass --append to add to it)", file=sys.stderr)
        return EXIT_FAILED
    add_strategy_dirs(args.config)  # the same rule as check and live
    try:
        config, _ = load_backtest_config(args.config)
    except ConfigError as exc:
        _print_problems(exc)
        return EXIT_FAILED
    import anyio

    from framework.live.cli import summary_line
    from framework.live.logs import configure_logging, redact

    secrets = config.secrets()
    configure_logging(level=config.logging.level, json=config.logging.json, secrets=secrets)
    from framework.live.node import Node

    node = Node(attrs.evolve(config, recording=attrs.evolve(config.recording, path=str(out))))
    try:
        summary = anyio.run(_run_node, node, args.duration)
    except KeyboardInterrupt:
        print("record: interrupted while starting", file=sys.stderr)
        return 130
    except Exception as exc:
        inner: BaseException = exc
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        print(f"record: {redact(' '.join(str(inner).split()), secrets)}", file=sys.stderr)
        return EXIT_FAILED
    recorder = node.recorder
    lines = recorder.lines if recorder is not None else 0
    print(f"recorded {lines} messages to {out}", file=sys.stderr)
    print(summary_line(summary), flush=True)
    return EXIT_OK if recorder is not None and not recorder.failed else EXIT_FAILED


async def _run_node(node: Any, duration: float | None) -> dict[str, Any]:
    result: dict[str, Any] = await node.run(duration=duration)
    return result
