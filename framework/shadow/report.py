"""shadow.html: the shadow's comparison of paper against live, drawn and tabled per pair.

One page, plotly.js inlined (it opens offline): per pair, the price gap of each order over
time (paper better above zero), the time-to-first-fill gap, the rolling fill ratio (paper's
filled orders over live's, over the summary window), and the outcomes counted; then the
summary lines as the log prints them, and a table of the last orders compared. Bounded: at
most :data:`MAX_POINTS` orders drawn per pair and :data:`MAX_ROWS` table rows (the newest).
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Final

from framework.engine.clock import datetime_of_ms
from framework.shadow.compare import Diff, Shadow, summarize

__all__ = ["MAX_POINTS", "MAX_ROWS", "shadow_html"]

MAX_POINTS: Final = 5000
"""Orders drawn per pair, the newest."""
MAX_ROWS: Final = 500
"""Orders in the table, the newest."""
_PLOT_CONFIG: Final = {"displaylogo": False, "responsive": True}


def _when(ms: int) -> str:
    return datetime_of_ms(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _rolling_ratio(diffs: Sequence[Diff], window: int) -> tuple[list[str], list[float | None]]:
    xs: list[str] = []
    ys: list[float | None] = []
    for i in range(len(diffs)):
        part = diffs[max(0, i + 1 - window) : i + 1]
        ratio = summarize(diffs[i].pair, part).fill_ratio
        xs.append(_when(diffs[i].sent_ms))
        ys.append(None if ratio is None else float(ratio))
    return xs, ys


def _pair_figure(pair: str, diffs: Sequence[Diff], window: int) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=(
            "price gap, bps (paper better > 0)",
            "first fill, paper − live (ms)",
            f"fill ratio paper/live, last {window} orders",
            "outcomes",
        ),
    )
    gaps = [(d, g) for d in diffs if (g := d.price_gap_bps) is not None]
    fig.add_trace(
        go.Scatter(
            x=[_when(d.sent_ms) for d, _ in gaps],
            y=[float(g) for _, g in gaps],
            mode="markers",
            name="price gap",
            text=[d.client_order_id for d, _ in gaps],
        ),
        row=1,
        col=1,
    )
    delays = [(d, ms) for d in diffs if (ms := d.first_fill_gap_ms) is not None]
    fig.add_trace(
        go.Scatter(
            x=[_when(d.sent_ms) for d, _ in delays],
            y=[ms for _, ms in delays],
            mode="markers",
            name="first-fill gap",
            text=[d.client_order_id for d, _ in delays],
        ),
        row=1,
        col=2,
    )
    xs, ys = _rolling_ratio(diffs, window)
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="fill ratio"), row=2, col=1)
    counts = Counter(d.outcome for d in diffs)
    fig.add_trace(go.Bar(x=list(counts), y=list(counts.values()), name="outcomes"), row=2, col=2)
    fig.update_layout(title_text=pair, height=700, template="plotly_white", showlegend=False)
    return fig


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return html.escape(f"{value:f}" if value == value.to_integral() else f"{value:.4f}")
    return html.escape(str(value))


def _table(diffs: Sequence[Diff]) -> str:
    headers = (
        "sent",
        "client order id",
        "pair",
        "side",
        "outcome",
        "live filled",
        "paper filled",
        "live price",
        "paper price",
        "gap bps",
        "live taker",
        "paper taker",
        "first fill gap ms",
        "fee gap",
        "PnL gap",
    )
    rows = []
    for d in diffs[-MAX_ROWS:]:
        gap = d.price_gap_bps
        cells = (
            _when(d.sent_ms),
            d.client_order_id,
            d.pair,
            "buy" if d.is_long else "sell",
            d.outcome,
            d.live.filled,
            d.paper.filled,
            d.live.average,
            d.paper.average,
            None if gap is None else round(gap, 2),
            d.live.taker,
            d.paper.taker,
            d.first_fill_gap_ms,
            d.fee_gap,
            d.pnl_gap,
        )
        rows.append("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    return f'<table id="orders"><tr>{head}</tr>{"".join(rows)}</table>'


def shadow_html(shadow: Shadow, title: str = "shadow: paper against live") -> str:
    """The page of a shadow's closed comparisons."""
    from plotly.offline import get_plotlyjs

    by_pair: dict[str, list[Diff]] = {}
    for diff in shadow.closed:
        by_pair.setdefault(diff.pair, []).append(diff)
    parts = []
    for i, (pair, diffs) in enumerate(sorted(by_pair.items())):
        fig = _pair_figure(pair, diffs[-MAX_POINTS:], shadow.window)
        parts.append(
            fig.to_html(
                full_html=False,
                include_plotlyjs=False,
                config=_PLOT_CONFIG,
                div_id=f"pair-{i}",
                default_width="100%",
            )
        )
    lines = "".join(
        f"<li>{html.escape(shadow.summary(pair).text())}</li>" for pair in sorted(by_pair)
    )
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(shadow.outcomes.items())) or "none"
    closed = list(shadow.closed)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        f"<script>{get_plotlyjs()}</script>"
        "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;"
        "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f'<ul id="summaries">{lines}</ul>'
        f'<p id="outcomes">orders compared: {len(closed)} ({html.escape(counts)});'
        f" still open: {len(shadow.open)}; not compared (over the limit): {shadow.skipped}</p>"
        + "".join(parts)
        + _table(closed)
        + "</body></html>"
    )
