"""Issue 30's figures: a bundle of the shipped demo's 5 minutes, and the time to replay it.

Runs the demo (configs/demo.yaml: the embedded twin, Ladder and Pulse, market data on) as
``live`` runs it, with recording and a journal on disk, for ``--duration`` seconds of real
time; exports the whole session as one window; replays the bundle. Prints the bundle's size
(issue 30 wants under 5 MB for 5 minutes), the replay's wall time against the window's (under
a tenth), and what the replay found (it should be "replay matched").

    python tests/benchmarks/bench_incident.py [--duration 300] [--keep DIR]

It takes the duration in real time, plus the replay.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import anyio

from framework.config import load_live_config
from framework.incident.compare import render, replay_and_compare
from framework.incident.export import export_bundle
from framework.live.node import Node
from framework.recording import RecordingReader

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    """Record, export, replay; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of live demo")
    parser.add_argument("--keep", metavar="DIR", help="keep the session's files here")
    args = parser.parse_args()
    logging.disable(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bench-incident-") as scratch:
        tmp = Path(args.keep or scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        text = (ROOT / "configs" / "demo.yaml").read_text()
        text = text.replace("level: INFO", "level: ERROR")
        text += f"\njournal: {{path: {tmp / 'journal.sqlite'}}}\n"
        text += f"recording: {{path: {tmp / 'demo.jsonl'}}}\n"
        config_path = tmp / "demo.yaml"
        config_path.write_text(text)
        sys.path.insert(0, str(ROOT))
        node = Node(load_live_config(config_path))
        print(f"running the demo for {args.duration:g} s (recording on)...", flush=True)
        anyio.run(lambda: node.run(duration=args.duration))
        records = list(RecordingReader(tmp / "demo.jsonl").records())
        first, last = records[0].ts, records[-1].ts
        raw = (tmp / "demo.jsonl").stat().st_size
        out = tmp / "bundle.tar.gz"
        began = time.perf_counter()
        info = export_bundle(config_path, first, last, out)
        exported = time.perf_counter() - began
        size = out.stat().st_size
        began = time.perf_counter()
        outcome, verdict = replay_and_compare(out)  # every pass it takes
        replayed = time.perf_counter() - began
        window_s = (last - first) / 1000
        print(
            f"window: {window_s:.1f} s, {len(records)} recorded lines ({raw / 1e6:.2f} MB raw),"
            f" {info['intents']} intents"
        )
        print(
            f"bundle: {size / 1e6:.2f} MB (limit 5 MB: {'ok' if size < 5e6 else 'OVER'}),"
            f" exported in {exported:.2f} s"
        )
        print(
            f"replay: {replayed:.2f} s = {replayed / window_s:.4f} of the window's wall time"
            f" (limit 0.1: {'ok' if replayed < window_s / 10 else 'OVER'})"
        )
        print(render(verdict, outcome).splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
