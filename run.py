#!/usr/bin/env python3
"""Command line of the framework: live, check, venue, record, backtest, bench."""

from __future__ import annotations

import importlib
import sys

COMMANDS: dict[str, tuple[str, str, str]] = {
    "live": ("framework.live.cli", "live_main", "run strategies as a daemon (-c FILE)"),
    "check": ("framework.live.cli", "check_main", "validate a YAML config (-c FILE)"),
    "venue": ("framework.twin.cli", "main", "serve the venue twin, a local exchange"),
    "record": ("framework.backtest.cli", "record_main", "record pushes and polls to JSONL"),
    "backtest": ("framework.backtest.cli", "backtest_main", "replay a recording (dry run)"),
    "bench": ("framework.bench", "main", "run the benchmark scripts and print figures"),
}


def usage() -> str:
    """The help text listing every command."""
    lines = ["usage: python run.py COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<9} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "python run.py COMMAND --help shows the options of one command."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Dispatch to the command's main(argv) and return its exit status."""
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"run.py: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module_name, func_name, _ = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            print(f"run.py: command {name!r} is not available in this build", file=sys.stderr)
            return 2
        raise
    result: int = getattr(module, func_name)(rest)
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
