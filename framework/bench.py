"""`python run.py bench [NAME ...]`: run the benchmark scripts of tests/benchmarks/."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

from framework.cli import program

BENCH_DIR = Path(__file__).resolve().parent.parent / "tests" / "benchmarks"

DEV_MODULES = ("eth_account", "pytest", "hypothesis")
"""Modules of the dev extra that the benchmark scripts (and the tests they borrow from) import."""


def missing_dev_modules() -> list[str]:
    """The DEV_MODULES that cannot be imported here."""
    missing = []
    for name in DEV_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def available() -> dict[str, Path]:
    """Benchmark scripts by short name (bench_signing.py -> signing)."""
    return {p.stem.removeprefix("bench_"): p for p in sorted(BENCH_DIR.glob("bench_*.py"))}


def main(argv: list[str]) -> int:
    """Run the named benchmarks (all when none is named) and return the worst exit status."""
    scripts = available()
    parser = argparse.ArgumentParser(
        prog=program("bench"),
        description="Run benchmark scripts; each prints its figures beside a baseline.",
    )
    parser.add_argument("names", nargs="*", help=f"any of: {', '.join(scripts) or 'none found'}")
    args = parser.parse_args(argv)
    if not BENCH_DIR.is_dir():
        print(
            "bench: the benchmark scripts come with a source checkout (tests/benchmarks/): "
            "clone the repository and run pip install -e '.[dev]' there",
            file=sys.stderr,
        )
        return 2
    missing = missing_dev_modules()
    if missing:
        print(
            f"bench: needs the dev extra ({', '.join(missing)} missing): pip install -e '.[dev]'",
            file=sys.stderr,
        )
        return 2
    unknown = [n for n in args.names if n not in scripts]
    if unknown:
        print(
            f"bench: unknown benchmark {', '.join(unknown)}; expected one of {', '.join(scripts)}",
            file=sys.stderr,
        )
        return 2
    status = 0
    for name in args.names or list(scripts):
        print(f"== {name} ({scripts[name].relative_to(BENCH_DIR.parent.parent)})", flush=True)
        status = max(status, subprocess.call([sys.executable, str(scripts[name])]))
    return status
