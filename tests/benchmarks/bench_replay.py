"""Replay throughput beside the plain orjson read rate of the same file, in the same run.

Generates (once, cached in the temp directory) a synthetic recording of N pushes with
framework.backtest.synth, then measures on the same file:

1. baseline: read it line by line and ``orjson.loads`` each line (nothing else);
2. for reference: each line and then its frame parsed with ``orjson.loads`` (what a naive
   replay does before any work), and the frame also decoded into its record by the codec;
3. a full backtest with a no-op strategy (a Strategy that overrides nothing: no push is
   listened to, so each is peeked and filed in the portfolio undecoded);
4. a full backtest with a strategy whose every data hook does nothing (each push is decoded,
   applied to the portfolio and dispatched to the hook, as live);
5. a full backtest with an example strategy (strategies.pulse:Pulse) trading on the paper
   venue (it listens to position pushes).

It prints lines per second for each and each rate as a share of the baseline (the
done-when figure, for 3, is 40 %). A backtest's time is all of Backtest.run(): the look for
the recorded node's own orders before the replay, the replay, and the report's figures.
Logging below ERROR is silenced (strategies and the engine log per order). The baseline
moves with the page cache from run to run (1.1 to 1.6 s for 1,000,000 pushes here).

    python tests/benchmarks/bench_replay.py [--pushes 1000000] [--gzip] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from framework import AccountPush, MatchRecord, OrderUpdate, PositionPush, Strategy
from framework.backtest.runner import Backtest, BacktestSettings
from framework.backtest.synth import SynthSettings, generate
from framework.config import parse_config
from framework.venue.codec import DEFAULT_CODEC

CONFIG = """
venue: {embedded: true}
pairs:
  ETH-USD: {}
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
strategies:
  - name: %(name)s
    class: %(cls)s
    params: %(params)s
"""


class NoOp(Strategy):
    """A strategy that does nothing: it overrides no hook."""


class NoOpHooks(Strategy):
    """Overrides every data hook with a body that does nothing (so each is dispatched)."""

    def on_position(self, push: PositionPush) -> None:
        """Nothing."""

    def on_account(self, push: AccountPush) -> None:
        """Nothing."""

    def on_match(self, match: MatchRecord) -> None:
        """Nothing."""

    def on_order(self, update: OrderUpdate) -> None:
        """Nothing."""


def recording(pushes: int, gzip: bool) -> Path:
    """The cached synthetic recording of that many pushes (generated on first use)."""
    suffix = ".jsonl.gz" if gzip else ".jsonl"
    path = Path(tempfile.gettempdir()) / f"perpframe-bench-{pushes}{suffix}"
    if not path.exists():
        began = time.perf_counter()
        partial = path.with_name(path.name + ".part" + suffix)
        stats = generate(partial, SynthSettings(pushes=pushes, poll_interval_ms=2000))
        partial.rename(path)
        print(
            f"generated {path}: {stats.lines} lines in {time.perf_counter() - began:.1f} s",
            file=sys.stderr,
        )
    return path


def baseline(path: Path) -> tuple[int, float]:
    """Lines and seconds to read the file line by line with orjson.loads."""
    loads = orjson.loads
    began = time.perf_counter()
    n = 0
    with _open(path) as handle:
        for line in handle:
            loads(line)
            n += 1
    return n, time.perf_counter() - began


def _open(path: Path) -> IO[bytes]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def parse_both(path: Path, decode: bool) -> tuple[int, float]:
    """Lines and seconds to parse every line and its frame (and decode the frame)."""
    loads = orjson.loads
    decode_frame = DEFAULT_CODEC.decode_frame
    began = time.perf_counter()
    n = 0
    with _open(path) as handle:
        for line in handle:
            n += 1
            frame = loads(line).get("frame")
            if frame is not None:
                obj = loads(frame)
                if decode:
                    decode_frame(obj)
    return n, time.perf_counter() - began


def backtest(path: Path, name: str, cls: str, params: str) -> tuple[int, float, dict[str, int]]:
    """Lines, seconds and a few counters of one backtest over the file."""
    config = parse_config(CONFIG % {"name": name, "cls": cls, "params": params})
    began = time.perf_counter()
    result = Backtest(config, path, BacktestSettings()).run()
    elapsed = time.perf_counter() - began
    recording = result.results["recording"]
    counters = {
        "pushes": recording["pushes_delivered"],
        "orders": result.results["orders"]["submitted"],
        "fills": result.results["fills"]["count"],
    }
    return result.stats.lines, elapsed, counters


def main() -> int:
    """Run the comparison and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushes", type=int, default=1_000_000)
    parser.add_argument("--gzip", action="store_true", help="use a .jsonl.gz recording")
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs of each")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    path = recording(args.pushes, args.gzip)
    size = path.stat().st_size
    print(f"file: {path} ({size / 1e6:.0f} MB)")
    gc.collect()
    runs: dict[str, tuple[int, float, dict[str, int]]] = {}
    for _ in range(args.repeat):
        for label, fn in (
            ("orjson read (baseline)", lambda: (*baseline(path), {})),
            ("  line + frame parsed", lambda: (*parse_both(path, False), {})),
            ("  line + frame parsed, frame decoded", lambda: (*parse_both(path, True), {})),
            (
                "backtest, no-op strategy",
                lambda: backtest(path, "noop", "tests.benchmarks.bench_replay:NoOp", "{}"),
            ),
            (
                "backtest, every hook a no-op",
                lambda: backtest(path, "hooks", "tests.benchmarks.bench_replay:NoOpHooks", "{}"),
            ),
            (
                "backtest, example strategy (pulse)",
                lambda: backtest(
                    path,
                    "pulse",
                    "strategies.pulse:Pulse",
                    '{pair: BTC-USD, quantity: "0.001", every_s: 1.0, hold: 3}',
                ),
            ),
        ):
            result = fn()
            best = runs.get(label)
            if best is None or result[1] < best[1]:
                runs[label] = result
    base_lines, base_s, _ = runs["orjson read (baseline)"]
    base_rate = base_lines / base_s
    for label, (lines, seconds, counters) in runs.items():
        rate = lines / seconds
        extra = ", ".join(f"{k} {v}" for k, v in counters.items())
        print(
            f"{label:38s} {lines:>9d} lines {seconds:7.2f} s {rate:>11,.0f} lines/s "
            f"{rate / base_rate:6.1%} of baseline" + (f"  ({extra})" if extra else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
