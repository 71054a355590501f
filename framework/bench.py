"""`python run.py bench [NAME ...]`: run the benchmark scripts of tests/benchmarks/."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent / "tests" / "benchmarks"


def available() -> dict[str, Path]:
    """Benchmark scripts by short name (bench_signing.py -> signing)."""
    return {p.stem.removeprefix("bench_"): p for p in sorted(BENCH_DIR.glob("bench_*.py"))}


def main(argv: list[str]) -> int:
    """Run the named benchmarks (all when none is named) and return the worst exit status."""
    scripts = available()
    parser = argparse.ArgumentParser(
        prog="python run.py bench",
        description="Run benchmark scripts; each prints its figures beside a baseline.",
    )
    parser.add_argument("names", nargs="*", help=f"any of: {', '.join(scripts) or 'none found'}")
    args = parser.parse_args(argv)
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
