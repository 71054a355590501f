"""``perpframe calibrate --recording R [--out FILE] [--report FILE]``: fit, print, write.

Reads the recording once (:mod:`framework.calibrate.observations`), fits
(:mod:`framework.calibrate.fit`), prints each figure with its 95 % interval and the number of
orders behind it, writes the model file (:mod:`framework.calibrate.model`) and an HTML page
with the fits drawn over the data (plotly, inlined: it opens offline).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

import yaml

from framework.backtest.cli import recording_problem
from framework.calibrate.estimates import Estimate, LogNormal
from framework.calibrate.fit import Bucket, Calibration, fit
from framework.calibrate.journal_orders import journal_orders
from framework.calibrate.model import model_document
from framework.calibrate.observations import Observations, observe
from framework.output_path import unwritable
from framework.venue.errors import ConfigError

__all__ = ["calibrate_main", "describe", "report_html"]

_EXIT_FAILED = 2


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _line(name: str, e: Estimate | None, unit: str = "", why: str = "no data") -> str:
    return f"  {name:<34} {e.text(unit) if e is not None else f'- ({why})'}"


def _latency_line(name: str, f: LogNormal | None) -> str:
    if f is None:
        return f"  {name:<34} - (no data)"
    return (
        f"  {name:<34} median {f.median.text(' ms')}; "
        f"log-normal mu {f.mu.value:.3f}, sigma {f.sigma:.3f}; p90 {f.p90:.3g} ms"
    )


def describe(cal: Calibration, obs: Observations) -> list[str]:
    """The printed summary: one line per figure."""
    lines = [
        f"orders: {cal.orders} sent ({cal.resting} rested, {cal.market} market orders filled);"
        f" {obs.unbound_matches} matches of no order sent in the recording;"
        f" {obs.undecodable} lines unreadable",
        "latency:",
        _latency_line("send to answer", cal.ack),
        _latency_line("send to match (arrival)", cal.arrival),
    ]
    if cal.clock_skew:
        lines.append(f"  ({cal.clock_skew} matches stamped before their send: clocks differ)")
    lines += [
        "fills of resting orders:",
        _line("fill per touch (touch_probability)", cal.touch_probability, why="no touches"),
    ]
    if cal.fills_without_touch:
        lines.append(f"  ({cal.fills_without_touch} fills with no recorded touch before them)")
    lines += [_line(f"filled, {b.label}", b.share, why="no orders") for b in cal.by_distance]
    lines += [
        _line(f"filled {b.label}", b.share, why="none watched so long") for b in cal.by_horizon
    ]
    lines += [
        _line("partially filled (of filled)", cal.partial_share),
        _line("filled fraction (of filled)", cal.filled_fraction),
        "market orders:",
        _line("slippage vs best at send", cal.slippage_bps, " bps"),
    ]
    return lines


def _bars(go: Any, buckets: tuple[Bucket, ...], name: str) -> Any:
    kept = [b for b in buckets if b.share is not None]
    return go.Bar(
        x=[f"{b.label} (n={b.share.n})" for b in kept if b.share is not None],
        y=[b.share.value for b in kept if b.share is not None],
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [b.share.high - b.share.value for b in kept if b.share is not None],
            "arrayminus": [b.share.value - b.share.low for b in kept if b.share is not None],
        },
        name=name,
    )


def _latency_trace(go: Any, values: tuple[float, ...], f: LogNormal | None, name: str) -> list[Any]:
    traces = [go.Histogram(x=list(values), histnorm="probability density", name=name, nbinsx=60)]
    if f is not None and values:
        hi = max(values)
        xs = [hi * (i + 1) / 200 for i in range(200)]
        traces.append(
            go.Scatter(x=xs, y=[f.density(x) for x in xs], name=f"{name}: log-normal fit")
        )
    return traces


def report_html(cal: Calibration, title: str) -> str:
    """The page: latency histograms with their fits, fill shares with their intervals."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=(
            "send to answer (ms)",
            "send to match (ms)",
            "filled, by distance from the best at send",
            "filled, by time resting",
        ),
    )
    for t in _latency_trace(go, cal.ack_values, cal.ack, "answer"):
        fig.add_trace(t, row=1, col=1)
    for t in _latency_trace(go, cal.arrival_values, cal.arrival, "match"):
        fig.add_trace(t, row=1, col=2)
    fig.add_trace(_bars(go, cal.by_distance, "by distance"), row=2, col=1)
    fig.add_trace(_bars(go, cal.by_horizon, "by horizon"), row=2, col=2)
    fig.update_layout(title_text=title, height=800, template="plotly_white")
    return str(fig.to_html(full_html=True, include_plotlyjs=True))


def calibrate_main(argv: list[str]) -> int:
    """``perpframe calibrate --recording R [--journal J] [--out F] [--report F]``; 0: fitted."""
    from framework.cli import program

    parser = argparse.ArgumentParser(
        prog=program("calibrate"),
        description="Fit latency and fill models to your own orders and matches in a recording.",
    )
    parser.add_argument("--recording", required=True, metavar="PATH", help="a recording")
    parser.add_argument(
        "--journal",
        metavar="PATH",
        help="the node's journal: the orders it sent, for recordings that do not keep them",
    )
    parser.add_argument(
        "--out", default="fill_model.yaml", metavar="FILE", help="model file (fill_model.yaml)"
    )
    parser.add_argument(
        "--report", default="calibrate.html", metavar="FILE", help="plots (calibrate.html)"
    )
    parser.add_argument(
        "--max-orders", type=int, default=1_000_000, help="orders followed at most (1000000)"
    )
    args = parser.parse_args(argv)
    recording = Path(args.recording)
    problem = recording_problem(recording)
    if problem is not None:
        print(f"calibrate: recording {recording}: {problem}", file=sys.stderr)
        return _EXIT_FAILED
    for out in (args.out, args.report):
        why = unwritable(Path(out), directory=False)
        if why is not None:
            print(f"calibrate: {out}: {why}", file=sys.stderr)
            return _EXIT_FAILED
    try:
        known = list(journal_orders(args.journal)) if args.journal else []
    except ConfigError as exc:
        print(f"calibrate: {exc}", file=sys.stderr)
        return _EXIT_FAILED
    obs = observe(recording, max_orders=args.max_orders, journal=known)
    if not obs.orders:
        print(
            f"calibrate: recording {recording}: no order sent in it with its request kept"
            " (recordings before this version do not keep them; --journal gives them):"
            " nothing to fit",
            file=sys.stderr,
        )
        return _EXIT_FAILED
    cal = fit(obs)
    for line in describe(cal, obs):
        print(line)
    source = {
        "recording": recording.name,
        "sha256": _sha256(recording),
        "orders": cal.orders,
        "first_ms": obs.first_ms,
        "last_ms": obs.last_ms,
    }
    document = model_document(cal, source)
    Path(args.out).write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    Path(args.report).write_text(report_html(cal, f"calibration of {recording.name}"), "utf-8")
    print(f"model: {args.out}; plots: {args.report}")
    return 0
