"""Memory soak: the daemon's RSS over a long run of positions opening and closing.

    python tests/benchmarks/bench_soak.py [--minutes 11]

The venue twin runs in a process of its own (``python -m framework.twin.cli --port 0``), so
only the daemon's memory is measured. The daemon (``framework.live.node.Node``, file journal
in a temp dir, match polls every second) runs one strategy that keeps a position flipping:
each position push that shows it open is answered by a market order closing it, each push
that shows it closed by one opening a new one, so every round trip makes a new position,
two pushes, two orders and two matches. Printed: RSS (VmRSS of this process) at start,
after one minute and at the end, the growth per 10 minutes after the first minute (target
< 1 MB per 10 min), and the run's tallies.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from decimal import Decimal
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from framework import OrderIntent, PositionPush, Strategy  # noqa: E402

PAIR = "ETH-USD"
SIZE = Decimal("0.01")


class Flipper(Strategy):
    """Open a position, close it when its push shows it open, open again when closed."""

    def on_start(self) -> None:
        self.submit(OrderIntent(pair=PAIR, is_long=True, quantity=SIZE))

    def on_position(self, push: PositionPush) -> None:
        quantity = push.current_quantity
        if quantity:  # open: close it with the opposite side
            self.submit(OrderIntent(pair=PAIR, is_long=push.direction != "LONG", quantity=quantity))
        else:
            self.submit(OrderIntent(pair=PAIR, is_long=True, quantity=SIZE))


def rss_mb() -> float:
    """This process's resident set size in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_twin() -> tuple[subprocess.Popen[str], str, str]:
    """The venue twin in a process of its own; returns it, its REST and WS addresses."""
    twin = subprocess.Popen(
        [sys.executable, "-m", "framework.twin.cli", "--port", "0", "--balance", "1000000000"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert twin.stdout is not None
    rest = ws = ""
    for line in twin.stdout:
        if line.strip().startswith("REST"):
            rest = line.split()[-1]
        elif line.strip().startswith("WebSocket") or "ws://" in line:
            ws = line.split()[-1]
        if rest and ws:
            return twin, rest, ws
    twin.kill()
    raise SystemExit("the twin did not start")


async def soak(rest: str, ws: str, minutes: float, journal: str, trace: bool = False) -> None:
    """Run the daemon for minutes; print RSS figures."""
    import yaml

    from framework.config import parse_config
    from framework.live.node import Node
    from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY

    data = {
        "node": {"name": "soak"},
        "venue": {"base_url": rest, "ws_url": ws, "api_key": "${KEY}", "api_secret": "${SECRET}"},
        "pairs": {PAIR: {}},
        "polling": {"match_interval_s": 1.0},
        "execution": {"calls_per_second": 10000.0},
        "journal": {"path": journal},
        "logging": {"level": "WARNING"},
        "strategies": [{"name": "flip", "class": "tests.benchmarks.bench_soak:Flipper"}],
    }
    env = {"KEY": DEMO_API_KEY, "SECRET": DEMO_PRIVATE_KEY}
    node = Node(parse_config(yaml.safe_dump(data), env=env))
    marks: list[tuple[float, float, int]] = []
    snapshots: list[tracemalloc.Snapshot] = []

    def mark(final: bool = False) -> None:
        gc.collect()
        marks.append((time.monotonic(), rss_mb(), node.tallies.pushes))
        if trace and (len(marks) == 2 or (final and len(snapshots) == 1)):
            snapshots.append(tracemalloc.take_snapshot())

    async with anyio.create_task_group() as tg:
        tg.start_soon(node.run)
        await node.started.wait()
        mark()
        start = time.monotonic()
        print(f"start      RSS {marks[0][1]:8.1f} MB", flush=True)
        next_print = 60.0
        while (elapsed := time.monotonic() - start) < minutes * 60:
            await anyio.sleep(min(5.0, minutes * 60 - elapsed))
            if time.monotonic() - start >= next_print:
                mark()
                print(f"{next_print / 60:4.0f} min   RSS {marks[-1][1]:8.1f} MB  "
                      f"pushes {marks[-1][2]}", flush=True)  # fmt: skip
                next_print += 60.0
        mark(final=True)
        node.request_stop("soak over")
    summary = node.summary()
    if len(snapshots) == 2:
        print("\ngrowth by line (tracemalloc, minute 1 -> end):")
        for stat in snapshots[1].compare_to(snapshots[0], "lineno")[:12]:
            print(f"  {stat}")
    t0, rss0, _ = marks[0]
    t_end, rss_end, pushes = marks[-1]
    print()
    print(f"RSS at start             {rss0:8.1f} MB")
    if len(marks) >= 3:
        t1, rss1, _ = marks[1]
        per_10 = (rss_end - rss1) / ((t_end - t1) / 600)
        print(f"RSS after 1 minute       {rss1:8.1f} MB")
        print(f"RSS at the end           {rss_end:8.1f} MB  ({(t_end - t0) / 60:.1f} min)")
        verdict = "met" if per_10 < 1.0 else "NOT met"
        print(f"growth after minute 1    {per_10:8.2f} MB per 10 min (target < 1: {verdict})")
    else:
        print(f"RSS at the end           {rss_end:8.1f} MB  (run >= 2 minutes for the growth rate)")
    print(
        f"pushes {pushes} ({pushes / (t_end - t0):.0f}/s), orders sent {summary['orders_sent']},"
        f" matches {summary['matches']}, reconnects {summary['reconnects']}"
    )


def main() -> None:
    """Parse the flags, start the twin, soak."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=11.0)
    parser.add_argument(
        "--trace", action="store_true", help="tracemalloc: print what grew after minute 1"
    )
    args = parser.parse_args()
    if args.trace:
        tracemalloc.start(8)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # "poll skipped" under load
    twin, rest, ws = start_twin()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            anyio.run(soak, rest, ws, args.minutes, f"{tmp}/journal.db", args.trace)
    finally:
        twin.terminate()
        twin.wait()


if __name__ == "__main__":
    main()
