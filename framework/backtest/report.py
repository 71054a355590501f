"""The backtest report: report.json (results only, byte-identical across runs) and report.html.

:class:`ReportCollector` listens on the bus (order updates, matches) and to the paper venue
(fills, positions), samples equity on virtual time, and turns it all into plain data:
Decimals are written as plain strings, keys are sorted, nothing depends on the wall clock or
on the machine, so the same recording, config and strategies give the same bytes. Timing
figures are the caller's to print (stdout), never part of report.json.

report.html is one self-contained file (inline SVG drawn here, no script, no network): a
summary table, the equity curve, the position of each pair over time, and each pair's price
track with the paper fills on it.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from framework.backtest.paper import PAPER_ID_BASE, Fill, PaperVenue
from framework.backtest.replay import ReplayStats
from framework.engine.bus import Bus
from framework.engine.clock import datetime_of_ms
from framework.engine.events import MatchFilled, OrderUpdate
from framework.engine.intents import OrderStatus
from framework.venue.codec import plain_decimal

__all__ = ["REPORT_VERSION", "ReportCollector", "render_html", "write_report"]

REPORT_VERSION: Final = 1
_ZERO: Final = Decimal(0)
_PCT: Final = Decimal("0.0001")
_MAX_PLOT_POINTS: Final = 1500


def _d(value: Decimal) -> str:
    return plain_decimal(value)


def _pct(part: Decimal, whole: Decimal) -> str:
    if not whole:
        return "0"
    return _d((part * 100 / whole).quantize(_PCT, rounding=ROUND_HALF_EVEN))


@attrs.define
class _Drawdown:
    peak: Decimal | None = None
    amount: Decimal = _ZERO
    pct_of_peak: Decimal = _ZERO
    at_ms: int | None = None

    def update(self, value: Decimal, ts: int) -> None:
        if self.peak is None or value > self.peak:
            self.peak = value
            return
        drop = self.peak - value
        if drop > self.amount:
            self.amount = drop
            self.pct_of_peak = drop * 100 / self.peak if self.peak else _ZERO
            self.at_ms = ts


class ReportCollector:
    """Gathers a backtest's results while it runs; results() gives report.json's data."""

    def __init__(
        self,
        bus: Bus,
        paper: PaperVenue,
        *,
        now_ms: Callable[[], int],
        strategies: Sequence[str],
        skip_quiet: bool = True,
    ) -> None:
        self.paper = paper
        self._now_ms = now_ms
        self.strategies = list(strategies)
        self.skip_quiet = skip_quiet
        """Skip a sample that would find what the last one found (False: take every one)."""
        self.statuses: Counter[str] = Counter()
        self.rejected_by_code: Counter[int] = Counter()
        self.fills_by_strategy: Counter[str] = Counter()
        self.equity: dict[str, list[tuple[int, Decimal]]] = {}
        self._drawdown: dict[str, _Drawdown] = {}
        self._max_position: dict[str, Decimal] = {}
        self._max_notional: dict[str, Decimal] = {}
        self._quiet_since = -1  # paper.changes at the last sample taken while idle
        bus.subscribe(OrderUpdate, self._on_order)
        bus.subscribe(MatchFilled, self._on_match)
        paper.on_fill = self._on_fill

    def _on_order(self, update: OrderUpdate) -> None:
        self.statuses[update.status.value] += 1
        if update.status is OrderStatus.REJECTED and update.code is not None:
            self.rejected_by_code[update.code] += 1

    def _on_match(self, event: MatchFilled) -> None:
        # External matches are counted by the engine (a replay may count one undecoded).
        if not event.external and event.strategy is not None and event.match.id >= PAPER_ID_BASE:
            self.fills_by_strategy[event.strategy] += 1

    @property
    def quiet(self) -> bool:
        """True when a sample now would find what the last one found (nothing held, no change)."""
        return self.paper.changes == self._quiet_since and self.paper.idle

    def _on_fill(self, fill: Fill) -> None:
        self.sample(fill.ts)

    def sample(self, ts: int | None = None) -> None:
        """Record equity, drawdown and exposure now (called on a timer and after each fill)."""
        if self.skip_quiet and self.quiet:
            return  # nothing held, nothing changed since the last sample: the same figures
        paper = self.paper
        ts = self._now_ms() if ts is None else ts
        for coin, value in paper.equity().items():
            series = self.equity.setdefault(coin, [])
            if series and series[-1][0] == ts:
                series[-1] = (ts, value)
            elif not series or series[-1][1] != value:
                series.append((ts, value))
            self._drawdown.setdefault(coin, _Drawdown()).update(value, ts)
        for pair, quantity in self.paper.open_positions().items():
            size = abs(quantity)
            if size > self._max_position.get(pair, _ZERO):
                self._max_position[pair] = size
            mark = self.paper.mark(pair)
            if mark is not None and size * mark > self._max_notional.get(pair, _ZERO):
                self._max_notional[pair] = size * mark
        self._quiet_since = paper.changes if paper.idle else -1

    # ---- the results

    def results(self, stats: ReplayStats, counters: Mapping[str, int]) -> dict[str, Any]:
        """report.json's data: plain types only, Decimals as strings."""
        paper = self.paper
        fills = paper.fills
        start = stats.first_ts or 0
        end = stats.last_ts or start
        equity = paper.equity()
        unrealized = paper.unrealized()
        per_coin: dict[str, Any] = {}
        for coin, initial in sorted(paper.initial.items()):
            coin_fills = [f for f in fills if paper.coin_of[f.pair] == coin]
            realized = sum((f.profit_loss for f in coin_fills), _ZERO)
            fees = sum((f.fee for f in coin_fills), _ZERO)
            open_pnl = sum((v for p, v in unrealized.items() if paper.coin_of[p] == coin), _ZERO)
            final = equity.get(coin, initial)
            drawdown = self._drawdown.get(coin, _Drawdown())
            per_coin[coin] = {
                "initial_equity": _d(initial),
                "final_equity": _d(final),
                "realized_pnl": _d(realized),
                "unrealized_pnl": _d(open_pnl),
                "fees": _d(fees),
                "net_pnl": _d(final - initial),
                "return_pct": _pct(final - initial, initial),
                "max_drawdown": _d(drawdown.amount),
                "max_drawdown_pct": _d(drawdown.pct_of_peak.quantize(_PCT)),
                "max_drawdown_at_ms": drawdown.at_ms,
            }
        pairs: dict[str, Any] = {}
        open_positions = paper.open_positions()
        for pair in sorted(paper.positions):
            pair_fills = [f for f in fills if f.pair == pair]
            pairs[pair] = {
                "fills": len(pair_fills),
                "buys": sum(1 for f in pair_fills if f.is_long),
                "sells": sum(1 for f in pair_fills if not f.is_long),
                "volume": _d(sum((f.quantity for f in pair_fills), _ZERO)),
                "notional": _d(sum((f.quantity * f.price for f in pair_fills), _ZERO)),
                "realized_pnl": _d(sum((f.profit_loss for f in pair_fills), _ZERO)),
                "fees": _d(sum((f.fee for f in pair_fills), _ZERO)),
                "final_position": _d(open_positions.get(pair, _ZERO)),
                "unrealized_pnl": _d(unrealized.get(pair, _ZERO)),
                "max_abs_position": _d(self._max_position.get(pair, _ZERO)),
                "max_notional": _d(self._max_notional.get(pair, _ZERO)),
                "time_in_market_pct": _time_in_market(paper.positions.get(pair, []), start, end),
                "last_mark": None if (m := paper.mark(pair)) is None else _d(m),
            }
        orders = {
            "submitted": counters.get("orders_submitted", 0),
            "sent": counters.get("orders_sent", 0),
            "accepted": counters.get("orders_accepted", 0),
            "rejected": counters.get("orders_rejected", 0),
            "rejected_before_sending": counters.get("orders_risk_rejected", 0),
            "rejected_by_code": {str(k): v for k, v in sorted(self.rejected_by_code.items())},
            "unknown": counters.get("orders_unknown", 0),
            "lost": counters.get("orders_lost", 0),
            "filled": counters.get("orders_filled", 0),
            "batches": counters.get("batches_sent", 0),
            "retries": counters.get("retries", 0),
        }
        return {
            "version": REPORT_VERSION,
            "period": {
                "start_ms": start,
                "end_ms": end,
                "start": _iso(start),
                "end": _iso(end),
                "duration_s": _d(Decimal(end - start) / 1000),
            },
            "recording": attrs.asdict(stats),
            "strategies": sorted(self.strategies),
            "orders": orders,
            "fills": {
                "count": len(fills),
                "maker": sum(1 for f in fills if not f.is_taker),
                "taker": sum(1 for f in fills if f.is_taker),
                "by_strategy": dict(sorted(self.fills_by_strategy.items())),
                "external_matches": counters.get("matches_external", 0),
            },
            "pnl": per_coin,
            "pairs": pairs,
            "paper_refusals_by_code": {str(k): v for k, v in sorted(paper.refusals.items())},
        }


def _iso(ms: int) -> str:
    return datetime_of_ms(ms).isoformat().replace("+00:00", "Z")


def _time_in_market(changes: Sequence[tuple[int, Decimal]], start: int, end: int) -> str:
    if end <= start:
        return "0"
    held = 0
    since: int | None = None
    for ts, quantity in changes:
        if quantity and since is None:
            since = ts
        elif not quantity and since is not None:
            held += ts - since
            since = None
    if since is not None:
        held += max(0, end - since)
    return _pct(Decimal(held), Decimal(end - start))


def write_report(
    directory: str | Path,
    results: Mapping[str, Any],
    collector: ReportCollector,
    *,
    title: str = "Backtest",
) -> tuple[Path, Path]:
    """Write report.json and report.html into directory; returns their paths."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    json_path = target / "report.json"
    json_path.write_bytes(
        orjson.dumps(results, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
    )
    html_path = target / "report.html"
    html_path.write_text(render_html(results, collector, title=title), encoding="utf-8")
    return json_path, html_path


# ---------------------------------------------------------------------------------- html


_COLORS: Final = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def render_html(results: Mapping[str, Any], collector: ReportCollector, *, title: str) -> str:
    """The report as one offline HTML page with inline SVG plots."""
    paper = collector.paper
    start = results["period"]["start_ms"]
    end = max(results["period"]["end_ms"], start + 1)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='sub'>{html.escape(results['period']['start'])} to "
        f"{html.escape(results['period']['end'])} ({results['period']['duration_s']} s of "
        f"recording), strategies: {html.escape(', '.join(results['strategies']))}</p>",
        _summary_table(results),
    ]
    for i, (coin, series) in enumerate(sorted(collector.equity.items())):
        points = _extend(series, end)
        parts.append(f"<h2>Equity ({html.escape(coin)})</h2>")
        parts.append(_chart([(coin, _COLORS[i % len(_COLORS)], points, False)], [], start, end))
    parts.append("<h2>Position over time</h2>")
    lines = []
    for i, (pair, changes) in enumerate(sorted(paper.positions.items())):
        lines.append(
            (pair, _COLORS[i % len(_COLORS)], _extend([(start, _ZERO), *changes], end), True)
        )
    parts.append(_chart(lines, [], start, end) if lines else "<p>No position.</p>")
    for pair in sorted(paper.positions):
        parts.append(f"<h2>{html.escape(pair)}: price track and fills</h2>")
        track = [(p.ts, p.price) for p in paper.track.points if p.pair == pair]
        marks = [
            (f.ts, f.price, "#2ca02c" if f.is_long else "#d62728", f.is_long)
            for f in paper.fills
            if f.pair == pair
        ]
        if not track and not marks:
            parts.append("<p>No price in the recording for this pair.</p>")
            continue
        parts.append(_chart([("price", "#555", track, True)], marks, start, end))
        parts.append(
            "<p class='legend'><span style='color:#2ca02c'>&#9650; buy</span> "
            "<span style='color:#d62728'>&#9660; sell</span></p>"
        )
    parts.append("<h2>All results</h2><pre>")
    parts.append(
        html.escape(
            orjson.dumps(results, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode()
        )
    )
    parts.append("</pre></body></html>\n")
    return "".join(parts)


_CSS: Final = (
    "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222}"
    "h1{margin-bottom:0}.sub{color:#666}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}th{background:#f4f4f4}"
    "td:first-child{text-align:left}pre{background:#f8f8f8;padding:1em;overflow:auto;"
    "font-size:12px}svg{background:#fff;border:1px solid #ddd}.legend{font-size:13px}"
)


def _summary_table(results: Mapping[str, Any]) -> str:
    rows = []
    orders = results["orders"]
    rows.append(
        (
            "Orders submitted / accepted / rejected",
            f"{orders['submitted']} / {orders['accepted']} / {orders['rejected']}",
        )
    )
    if orders["rejected_by_code"]:
        codes = ", ".join(f"{k}: {v}" for k, v in orders["rejected_by_code"].items())
        rows.append(("Rejected by code", codes))
    rows.append(
        (
            "Fills (maker / taker)",
            f"{results['fills']['count']} ({results['fills']['maker']} / "
            f"{results['fills']['taker']})",
        )
    )
    for coin, pnl in results["pnl"].items():
        rows.append(
            (
                f"{coin} equity: initial -> final",
                f"{pnl['initial_equity']} -> {pnl['final_equity']} ({pnl['return_pct']} %)",
            )
        )
        rows.append(
            (
                f"{coin} realized / unrealized PnL",
                f"{pnl['realized_pnl']} / {pnl['unrealized_pnl']}",
            )
        )
        rows.append((f"{coin} fees", pnl["fees"]))
        rows.append(
            (f"{coin} max drawdown", f"{pnl['max_drawdown']} ({pnl['max_drawdown_pct']} %)")
        )
    recording = results["recording"]
    rows.append(("Messages replayed", str(recording["lines"])))
    rows.append(
        (
            "Pushes delivered / superseded",
            f"{recording['pushes_delivered']} / {recording['pushes_superseded']}",
        )
    )
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table><tr><th>Result</th><th>Value</th></tr>{body}</table>"


def _extend(points: Sequence[tuple[int, Decimal]], end: int) -> list[tuple[int, Decimal]]:
    out = list(points)
    if out and out[-1][0] < end:
        out.append((end, out[-1][1]))
    return out


def _thin(points: Sequence[tuple[int, Decimal]]) -> list[tuple[int, float]]:
    """At most about _MAX_PLOT_POINTS points: each bucket keeps its first, min and max."""
    if len(points) <= _MAX_PLOT_POINTS:
        return [(t, float(v)) for t, v in points]
    size = len(points) // (_MAX_PLOT_POINTS // 3) + 1
    out: list[tuple[int, float]] = []
    for i in range(0, len(points), size):
        bucket = points[i : i + size]
        chosen = {
            0,
            min(range(len(bucket)), key=lambda j: bucket[j][1]),
            max(range(len(bucket)), key=lambda j: bucket[j][1]),
        }
        out.extend((bucket[j][0], float(bucket[j][1])) for j in sorted(chosen))
    out.append((points[-1][0], float(points[-1][1])))
    return out


_W, _H, _L, _R, _T, _B = 960, 260, 80, 20, 12, 30


def _chart(
    lines: Sequence[tuple[str, str, Sequence[tuple[int, Decimal]], bool]],
    marks: Sequence[tuple[int, Decimal, str, bool]],
    start: int,
    end: int,
) -> str:
    thinned = [(label, color, _thin(points), step) for label, color, points, step in lines]
    values = [v for _, _, pts, _ in thinned for _, v in pts] + [float(p) for _, p, _, _ in marks]
    if not values:
        return "<p>No data.</p>"
    low, high = min(values), max(values)
    if high == low:
        low, high = low - 1, high + 1
    pad = (high - low) * 0.05
    low, high = low - pad, high + pad
    span = max(end - start, 1)

    def x(t: int) -> float:
        return _L + (t - start) / span * (_W - _L - _R)

    def y(v: float) -> float:
        return _T + (high - v) / (high - low) * (_H - _T - _B)

    out = [
        f"<svg width='{_W}' height='{_H}' viewBox='0 0 {_W} {_H}' "
        "xmlns='http://www.w3.org/2000/svg' font-size='11'>"
    ]
    for k in range(5):
        v = low + (high - low) * k / 4
        out.append(
            f"<line x1='{_L}' x2='{_W - _R}' y1='{y(v):.1f}' y2='{y(v):.1f}' stroke='#eee'/>"
        )
        out.append(f"<text x='{_L - 6}' y='{y(v) + 4:.1f}' text-anchor='end'>{v:.6g}</text>")
    for k in range(5):
        t = start + span * k // 4
        out.append(
            f"<text x='{x(t):.1f}' y='{_H - 10}' text-anchor='middle'>"
            f"{datetime_of_ms(t).strftime('%H:%M:%S')}</text>"
        )
    for label, color, pts, step in thinned:
        if not pts:
            continue
        coords = []
        previous: float | None = None
        for t, v in pts:
            if step and previous is not None:
                coords.append(f"{x(t):.1f},{y(previous):.1f}")
            coords.append(f"{x(t):.1f},{y(v):.1f}")
            previous = v
        out.append(
            f"<polyline fill='none' stroke='{color}' stroke-width='1.5' "
            f"points='{' '.join(coords)}'><title>{html.escape(label)}</title></polyline>"
        )
    for i, (label, color, _, _) in enumerate(thinned):
        out.append(
            f"<text x='{_L + 8 + 120 * i}' y='{_T + 12}' fill='{color}'>{html.escape(label)}</text>"
        )
    for t, price, color, up in marks[:5000]:
        px, py = x(t), y(float(price))
        shape = (
            f"{px:.1f},{py - 6:.1f} {px - 5:.1f},{py + 4:.1f} {px + 5:.1f},{py + 4:.1f}"
            if up
            else f"{px:.1f},{py + 6:.1f} {px - 5:.1f},{py - 4:.1f} {px + 5:.1f},{py - 4:.1f}"
        )
        out.append(f"<polygon points='{shape}' fill='{color}'/>")
    out.append("</svg>")
    return "".join(out)
