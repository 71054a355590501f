"""``python run.py live`` and ``python run.py check``: the daemon's command line.

``check -c FILE`` validates a configuration, strategy classes included, and builds each
strategy without a venue: exit 0 with one ``ok`` line, or exit 1 with one
``path: problem (line N)`` line per problem (``strategies[N] (name): error`` for a strategy
that cannot be built) on stderr.

``record -c FILE --out PATH [--duration S] [--append]`` runs the node exactly as ``live``
does (strategies included) with the recorder writing PATH (a ``backtest:`` section of the
file is not read); the summary line is printed last; exit codes as ``live``'s.

``live -c FILE [--duration S] [--paper | --shadow]`` runs the node until SIGINT, SIGTERM or the duration, then
prints one final line ``summary {json}`` on stdout and exits 0. Logs go to stderr. A
configuration the node cannot run with exits 1 with a one-line reason, never a traceback;
an unexpected crash exits 1 after logging its traceback. A second SIGINT or SIGTERM during
the stop skips the waiting (a warning says what was skipped); the summary line still comes
last and the exit code is 130. When every strategy has been stopped for failing (and
``node.exit_when_all_stopped`` is true) the node stops, says so in one line on stderr,
prints the summary and exits 1. ``--paper`` (for ``record`` too) runs it as if the file said
``venue: {mode: paper}``: the market from the venue, the orders to the in-process paper
venue (:mod:`framework.paper`), the journal, recording and summary marked paper.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import orjson

from framework.cli import add_strategy_dirs, program
from framework.config import Config, load_config, load_live_config
from framework.engine.raised import one_line, raised
from framework.logs import configure_logging, redact
from framework.output_path import unwritable
from framework.venue.errors import ConfigError

if TYPE_CHECKING:
    from framework.live.node import Node

__all__ = ["check_main", "live_main", "record_main", "run_node", "summary_line"]

log = logging.getLogger("framework.cli")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="YAML config")
    return parser


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def _load(path: str, load: Callable[[str], Config] = load_config) -> Config | None:
    """The config, or None after printing its problems to stderr one per line."""
    add_strategy_dirs(path)  # "module:Class" from the working directory or beside the config
    try:
        return load(path)
    except ConfigError as exc:
        for line in str(exc).splitlines():
            print(line, file=sys.stderr)
        return None


def check_main(argv: list[str]) -> int:
    """Validate a config file; 0 when it can run, 1 with one problem per line otherwise."""
    parser = _parser(program("check"), "Validate a daemon configuration file.")
    paper_flags(parser)
    args = parser.parse_args(argv)
    config = _load(args.config, partial(load_config, paper=args.paper, shadow=args.shadow))
    if config is None:
        return EXIT_FAILED
    problems = build_problems(config)
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        return EXIT_FAILED
    venue = "embedded venue twin" if config.venue.embedded else config.venue.base_url
    if config.venue.is_paper:
        venue = f"{venue} (paper: orders filled in-process, never sent)"
    elif config.shadow.enabled:
        venue = f"{venue} (with a paper shadow beside it)"
    strategies = ", ".join(f"{s.name} ({s.class_})" for s in config.strategies)
    ok = f"ok: {args.config}: venue {venue}; pairs {', '.join(config.pairs)}; "
    print(redact(ok + f"strategies {strategies}", config.secrets()))
    return EXIT_OK


def build_problems(config: Config) -> list[str]:
    """Build each strategy as live will, without a venue; one line per strategy that fails.

    No secret value of the config is shown (a strategy's error may quote its params).
    """
    from framework.engine.kernel import StrategyBuildError, build_strategy
    from framework.engine.portfolio import Portfolio
    from framework.engine.strategy import BasicContext
    from framework.live.wallclock import WallClock

    ids = iter(range(1, 1_000_000))
    context = BasicContext(
        Portfolio(),
        WallClock(),
        lambda strategy, intent: f"check-{next(ids)}",
        lambda strategy, name, every_s: None,
    )
    problems = []
    secrets = config.secrets()
    if config.venue.is_paper or config.shadow.enabled:  # read as the node will
        from framework.paper.venue import paper_settings

        try:
            if config.venue.is_paper or config.shadow.paper is None:
                paper_settings(config.venue.paper)
            else:
                paper_settings(config.shadow.paper, at=("shadow", "paper"))
        except ConfigError as exc:
            problems.append(redact(str(exc), secrets))
    for i, spec in enumerate(config.strategies):
        try:
            build_strategy(i, spec, context)  # as the kernel builds it
        except StrategyBuildError as exc:
            problems.append(redact(str(exc), secrets))
        except Exception as exc:  # its class cannot be loaded
            problems.append(redact(f"strategies[{i}] ({spec.name}): {raised(exc)}", secrets))
    return problems


def summary_line(summary: dict[str, Any]) -> str:
    """``summary {json}``: one line, keys in the summary's order."""
    return "summary " + orjson.dumps(summary, default=str).decode()


def live_main(argv: list[str]) -> int:
    """Run the daemon; prints ``summary {json}`` last and returns 0 after a graceful stop."""
    parser = _parser(program("live"), "Run the configured strategies until Ctrl-C.")
    parser.add_argument(
        "--duration", type=_positive, metavar="S", help="stop by itself after S seconds"
    )
    paper_flags(parser)
    args = parser.parse_args(argv)
    config = _load(args.config, partial(load_config, paper=args.paper, shadow=args.shadow))
    if config is None:
        return EXIT_FAILED
    secrets = config.secrets()
    configure_logging(level=config.logging.level, json=config.logging.json, secrets=secrets)
    # Imported here: check must work (and fail clearly) without the runtime's I/O stack.
    from framework.live.allocator import pin_malloc_thresholds
    from framework.live.node import Node

    pin_malloc_thresholds()  # a daemon's RSS stays flat (see framework.live.allocator)
    return run_node(Node(config), args.duration, prog="live", secrets=secrets)


def paper_flags(parser: argparse.ArgumentParser) -> None:
    """Add --paper and --shadow (the file read as if it said venue.mode: paper, or shadow:)."""
    parser.add_argument(
        "--paper",
        action="store_true",
        help="paper trading: the live market, orders filled in-process (venue.mode: paper)",
    )
    parser.add_argument(
        "--shadow",
        action="store_true",
        help="live trading with a paper venue beside it, compared order by order (shadow:)",
    )


def run_node(
    node: Node,
    duration: float | None,
    *,
    prog: str,
    secrets: list[str],
    before_summary: Callable[[], None] | None = None,
) -> int:
    """Run node to its end, print its ``summary`` line last and return the exit code.

    Problems are one ``prog: ...`` line on stderr. Exit codes: 0 after a stop; 130 when a
    second signal cut the stop short (or a signal interrupted the start-up); 1 when the node
    could not start, crashed, or stopped because every strategy was stopped for failing.
    Signals that come after the node's own watcher ended are noted until the summary is out.
    """
    late: list[int] = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        summary, code = _run_node(node, duration, prog, secrets, late)
        if summary is not None:
            if before_summary is not None:
                before_summary()
            print(summary_line(summary), flush=True)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return EXIT_INTERRUPTED if late and summary is not None else code


def _run_node(
    node: Node, duration: float | None, prog: str, secrets: list[str], late: list[int]
) -> tuple[dict[str, Any] | None, int]:
    from framework.live.node import FatalError

    try:
        summary = anyio.run(_run, node, duration, late.append)
    except KeyboardInterrupt:
        if not node.started.is_set():  # before the node watched signals
            print(f"{prog}: interrupted while starting", file=sys.stderr)
            return None, EXIT_INTERRUPTED
        # In the instant between the node's watcher and ours: a second signal all the same.
        return node.summary(), EXIT_INTERRUPTED
    except Exception as exc:
        inner = _innermost(exc)
        if isinstance(inner, FatalError | ConfigError):
            print(f"{prog}: {redact(one_line(inner), secrets)}", file=sys.stderr)
            return None, EXIT_FAILED
        log.critical("the node crashed", exc_info=exc)
        print(f"{prog}: crashed: {redact(one_line(inner), secrets)}", file=sys.stderr)
        return None, EXIT_FAILED
    if node.interrupted:
        return summary, EXIT_INTERRUPTED
    if node.all_stopped:
        stopped = "; ".join(f"{n} ({why})" for n, why in sorted(node.bus.stopped.items()))
        print(
            f"{prog}: every strategy has been stopped for failing: {redact(stopped, secrets)}",
            file=sys.stderr,
        )
        return summary, EXIT_FAILED
    return summary, EXIT_OK


async def _run(node: Node, duration: float | None, late: Callable[[int], None]) -> dict[str, Any]:
    try:
        return await node.run(duration=duration)
    finally:
        # The node's watcher has ended: from here to the summary a signal is noted, never a
        # kill (asyncio would raise KeyboardInterrupt for SIGINT and die of SIGTERM).
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda number, frame: late(number))


def _innermost(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member exception groups (task groups)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def record_main(argv: list[str]) -> int:
    """``run.py record -c FILE --out PATH [--duration S] [--append]``: live node + recorder."""
    parser = argparse.ArgumentParser(
        prog=program("record"),
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
    paper_flags(parser)
    args = parser.parse_args(argv)
    if args.duration is not None and not args.duration > 0:
        parser.error("--duration: expected a positive number of seconds")
    out = Path(args.out)
    problem = unwritable(out, directory=False)
    if problem is not None:
        print(f"record: cannot write the recording to {out}: {problem}", file=sys.stderr)
        return EXIT_FAILED
    if out.exists() and out.stat().st_size > 0 and not args.append:
        print(f"record: {out} exists (pass --append to add to it)", file=sys.stderr)
        return EXIT_FAILED
    # its backtest: section is not read
    config = _load(args.config, partial(load_live_config, paper=args.paper, shadow=args.shadow))
    if config is None:
        return EXIT_FAILED
    secrets = config.secrets()
    configure_logging(level=config.logging.level, json=config.logging.json, secrets=secrets)
    from framework.live.node import Node

    node = Node(attrs.evolve(config, recording=attrs.evolve(config.recording, path=str(out))))

    def recorded() -> None:
        recorder = node.recorder
        print(f"recorded {recorder.lines if recorder else 0} messages to {out}", file=sys.stderr)

    code = run_node(node, args.duration, prog="record", secrets=secrets, before_summary=recorded)
    if code == EXIT_OK and (node.recorder is None or node.recorder.failed):
        return EXIT_FAILED
    return code
