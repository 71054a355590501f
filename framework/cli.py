"""The ``perpframe`` command (and ``python run.py``): one entry point for every subcommand.

Each subcommand lives in its own module and is imported only when it runs, so ``check``
works without the live I/O stack and ``bench`` without the dev extra says what to install.

Where strategy modules are found, for every command that reads a config (``check``, ``live``,
``record``, ``backtest``): a ``class: module:Class`` is imported from the installed packages,
then from the working directory, then from the directory of the config file
(:func:`add_strategy_dirs`).
"""

from __future__ import annotations

import importlib
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["COMMANDS", "add_strategy_dirs", "console", "main", "usage", "version_text"]

COMMANDS: dict[str, tuple[str, str, str]] = {
    "live": ("framework.live.cli", "live_main", "run strategies as a daemon (-c FILE)"),
    "check": ("framework.live.cli", "check_main", "validate a YAML config (-c FILE)"),
    "doctor": ("framework.live.doctor", "doctor_main", "preflight a live config, no trading"),
    "new-strategy": ("framework.scaffold", "main", "write NAME.py and NAME.yaml to start from"),
    "venue": ("framework.twin.cli", "main", "serve the venue twin, a local exchange"),
    "record": ("framework.live.cli", "record_main", "record pushes and polls to JSONL"),
    "backtest": ("framework.backtest.cli", "backtest_main", "replay a recording (dry run)"),
    "sweep": ("framework.backtest.sweep_cli", "sweep_main", "many backtests over parameters"),
    "calibrate": (
        "framework.calibrate.cli",
        "calibrate_main",
        "fit latency and fill models to your own orders (--recording R)",
    ),
    "bench": ("framework.bench", "main", "run the benchmark scripts and print figures"),
    "incident": ("framework.incident.cli", "incident_main", "bundle a live session, replay it"),
}
"""Subcommand -> (module, function taking argv and returning the exit status, help)."""


def version_text() -> str:
    """``perpframe X.Y.Z``: the installed distribution's version."""
    try:
        return f"perpframe {version('perpframe')}"
    except PackageNotFoundError:
        return "perpframe (not installed: version unknown)"


def usage(prog: str = "perpframe") -> str:
    """The help text listing every command."""
    lines = [f"usage: {prog} COMMAND [options]", f"       {prog} --version", "", "commands:"]
    lines += [f"  {name:<13} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", f"{prog} COMMAND --help shows the options of one command."]
    return "\n".join(lines)


def add_strategy_dirs(config_path: str | Path | None = None) -> None:
    """Make the working directory and config_path's directory importable (after the rest)."""
    dirs = [Path.cwd()]
    if config_path is not None:
        dirs.append(Path(config_path).resolve().parent)
    for directory in dirs:
        entry = str(directory)
        present = {os.path.abspath(p or os.curdir) for p in sys.path}
        if entry not in present:
            sys.path.append(entry)


_PROG = ["perpframe"]


def program(command: str) -> str:
    """A subcommand's name as the user called it (``perpframe live`` or ``run.py live``)."""
    return f"{_PROG[0]} {command}"


def main(argv: list[str], prog: str = "perpframe") -> int:
    """Dispatch to the command's main(argv) and return its exit status."""
    _PROG[0] = prog
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage(prog))
        return 0
    if argv[0] in ("-V", "--version", "version"):
        print(version_text())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"{prog}: unknown command {name!r}\n\n{usage(prog)}", file=sys.stderr)
        return 2
    module_name, func_name, _ = COMMANDS[name]
    try:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                print(f"{prog}: command {name!r} is not available in this build", file=sys.stderr)
                return 2
            raise
        result: int = getattr(module, func_name)(rest)
    except KeyboardInterrupt:
        # Ctrl-C before a command took signals over (while importing), or in one that lets
        # it through: a sentence and the shell's code for SIGINT, not a traceback.
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``perpframe doctor | head -1``): stop quietly, as cat does;
        # stdout now points at /dev/null so the interpreter's last flush cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # the shell's code for SIGPIPE
    return result


def console() -> int:
    """The ``perpframe`` console script."""
    return main(sys.argv[1:])
