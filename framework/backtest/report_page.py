"""report.html: the backtest report as one offline page of interactive plotly charts.

The page holds plotly.js inline once (no CDN, no network: it opens from a file anywhere) and
one chart per topic, each with zoom, pan and hover values: equity and drawdown per
settlement coin, position per pair, and each pair's price track with the paper fills on it
(hover: side, quantity, price, fee, realized PnL, order). Below them: the summary table, a
PnL table per strategy, the orders and the fills. report.json stays the deterministic
contract; this page is for reading.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, Protocol

import orjson

from framework.engine.clock import datetime_of_ms

if TYPE_CHECKING:
    from framework.backtest.paper import PaperVenue


class ReportCollector(Protocol):
    """What the page reads of a run (report.ReportCollector has it; no import back)."""

    @property
    def paper(self) -> PaperVenue:
        """The paper venue of the run."""
        ...

    @property
    def equity(self) -> dict[str, list[tuple[int, Decimal]]]:
        """Equity samples per settlement coin."""
        ...

    @property
    def orders(self) -> dict[str, dict[str, Any]]:
        """Orders by client order id."""
        ...

    @property
    def strategy_of_order(self) -> dict[int, str]:
        """The strategy of each venue order id."""
        ...


__all__ = ["MAX_TABLE_ROWS", "render_html"]

MAX_TABLE_ROWS: Final = 2000
"""Rows shown per table (the first ones; the page says how many were left out)."""

_MAX_PLOT_POINTS: Final = 5000
_ZERO: Final = Decimal(0)
_BUY, _SELL = "#2ca02c", "#d62728"
_PLOT_CONFIG: Final = {"displaylogo": False, "responsive": True, "scrollZoom": True}


def _when(ms: int) -> str:
    return datetime_of_ms(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _extend(points: Sequence[tuple[int, Decimal]], end: int) -> list[tuple[int, Decimal]]:
    out = list(points)
    if out and out[-1][0] < end:
        out.append((end, out[-1][1]))
    return out


def _thin(points: Sequence[tuple[int, Decimal]]) -> list[tuple[int, Decimal]]:
    """At most about _MAX_PLOT_POINTS points: each bucket keeps its first, min and max."""
    if len(points) <= _MAX_PLOT_POINTS:
        return list(points)
    size = len(points) // (_MAX_PLOT_POINTS // 3) + 1
    out: list[tuple[int, Decimal]] = []
    for i in range(0, len(points), size):
        bucket = points[i : i + size]
        chosen = {
            0,
            min(range(len(bucket)), key=lambda j: bucket[j][1]),
            max(range(len(bucket)), key=lambda j: bucket[j][1]),
        }
        out.extend(bucket[j] for j in sorted(chosen))
    out.append(points[-1])
    return out


def _xy(points: Sequence[tuple[int, Decimal]]) -> tuple[list[str], list[float]]:
    thinned = _thin(points)
    return [_when(t) for t, _ in thinned], [float(v) for _, v in thinned]


def _drawdown(points: Sequence[tuple[int, Decimal]]) -> list[tuple[int, Decimal]]:
    """The drop below the running peak at each point (zero or negative)."""
    peak: Decimal | None = None
    out = []
    for ts, value in points:
        peak = value if peak is None or value > peak else peak
        out.append((ts, value - peak))
    return out


def _figure_html(fig: Any, name: str) -> str:
    return str(
        fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            config=_PLOT_CONFIG,
            div_id=name,
            default_width="100%",
        )
    )


def _equity_figure(coin: str, series: Sequence[tuple[int, Decimal]], end: int) -> Any:
    from plotly.subplots import make_subplots

    points = _extend(series, end)
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.7, 0.3], vertical_spacing=0.04
    )
    x, y = _xy(points)
    fig.add_scatter(x=x, y=y, name=f"equity {coin}", line_shape="hv", row=1, col=1)
    dx, dy = _xy(_drawdown(points))
    fig.add_scatter(
        x=dx,
        y=dy,
        name="drawdown",
        line_shape="hv",
        fill="tozeroy",
        line_color=_SELL,
        row=2,
        col=1,
    )
    fig.update_yaxes(title_text=coin, row=1, col=1)
    fig.update_yaxes(title_text="drawdown", row=2, col=1)
    return _styled(fig, f"Equity and drawdown ({coin})", 460)


def _position_figure(
    positions: Mapping[str, Sequence[tuple[int, Decimal]]], start: int, end: int
) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for pair, changes in sorted(positions.items()):
        x, y = _xy(_extend([(start, _ZERO), *changes], end))
        fig.add_scatter(x=x, y=y, name=pair, line_shape="hv")
    fig.update_yaxes(title_text="net quantity (long +, short -)")
    return _styled(fig, "Position per pair", 320)


def _price_figure(pair: str, track: Sequence[tuple[int, Decimal]], fills: Sequence[Any]) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    if track:
        x, y = _xy(track)
        fig.add_scatter(x=x, y=y, name="price", line_color="#555", line_shape="hv")
    for is_long, color, symbol in ((True, _BUY, "triangle-up"), (False, _SELL, "triangle-down")):
        side = [f for f in fills if f.is_long is is_long]
        if not side:
            continue
        fig.add_scatter(
            x=[_when(f.ts) for f in side],
            y=[float(f.price) for f in side],
            mode="markers",
            name="buy" if is_long else "sell",
            marker={"color": color, "symbol": symbol, "size": 9},
            customdata=[
                [str(f.quantity), str(f.fee), str(f.profit_loss), f.order_id] for f in side
            ],
            hovertemplate="%{x}<br>price %{y}<br>quantity %{customdata[0]}<br>"
            "fee %{customdata[1]}<br>realized %{customdata[2]}<br>order %{customdata[3]}",
        )
    fig.update_yaxes(title_text="price")
    return _styled(fig, f"{pair}: price and fills", 360)


def _styled(fig: Any, title: str, height: int) -> Any:
    fig.update_layout(
        title_text=title,
        height=height,
        margin={"l": 70, "r": 20, "t": 50, "b": 40},
        hovermode="x unified",
        template="plotly_white",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
    )
    # Plain numbers on value axes (100,000.5, not 100.0005k).
    fig.update_yaxes(exponentformat="none", separatethousands=True)
    return fig


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]], total: int) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        if i >= MAX_TABLE_ROWS:
            break
        cells = "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    more = (
        f"<p class='sub'>The first {MAX_TABLE_ROWS} of {total} rows.</p>"
        if total > MAX_TABLE_ROWS
        else ""
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def _summary_rows(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    orders = results["orders"]
    rows = [
        (
            "Orders submitted / accepted / rejected",
            f"{orders['submitted']} / {orders['accepted']} / {orders['rejected']}",
        )
    ]
    if orders["rejected_by_code"]:
        codes = ", ".join(f"{k}: {v}" for k, v in orders["rejected_by_code"].items())
        rows.append(("Rejected by code", codes))
    fills = results["fills"]
    rows.append(
        ("Fills (maker / taker)", f"{fills['count']} ({fills['maker']} / {fills['taker']})")
    )
    for coin, pnl in results["pnl"].items():
        rows += [
            (
                f"{coin} equity: initial -> final",
                f"{pnl['initial_equity']} -> {pnl['final_equity']} ({pnl['return_pct']} %)",
            ),
            (
                f"{coin} realized / unrealized PnL",
                f"{pnl['realized_pnl']} / {pnl['unrealized_pnl']}",
            ),
            (f"{coin} fees", pnl["fees"]),
            (f"{coin} max drawdown", f"{pnl['max_drawdown']} ({pnl['max_drawdown_pct']} %)"),
        ]
    recording = results["recording"]
    rows.append(("Messages replayed", str(recording["lines"])))
    rows.append(
        (
            "Recorded pushes delivered / the recorded node's own, superseded",
            f"{recording['pushes_delivered']} / {recording['pushes_superseded']}",
        )
    )
    return rows


def _strategy_rows(results: Mapping[str, Any], collector: ReportCollector) -> list[list[object]]:
    """Per strategy: orders, fills, volume, notional, realized PnL, fees, realized net of fees."""
    paper = collector.paper
    owner = collector.strategy_of_order
    totals: dict[str, list[Decimal]] = {}
    counts: dict[str, int] = {}
    for fill in paper.fills:
        name = owner.get(fill.order_id, "(unattributed)")
        t = totals.setdefault(name, [_ZERO, _ZERO, _ZERO, _ZERO])
        t[0] += fill.quantity
        t[1] += fill.quantity * fill.price
        t[2] += fill.profit_loss
        t[3] += fill.fee
        counts[name] = counts.get(name, 0) + 1
    orders: dict[str, int] = {}
    for order in collector.orders.values():
        orders[order["strategy"]] = orders.get(order["strategy"], 0) + 1
    rows: list[list[object]] = []
    for name in sorted(set(results["strategies"]) | set(totals)):
        volume, notional, realized, fees = totals.get(name, [_ZERO] * 4)
        rows.append(
            [
                name,
                orders.get(name, 0),
                counts.get(name, 0),
                volume.normalize(),
                notional.normalize(),
                realized.normalize(),
                fees.normalize(),
                (realized - fees).normalize(),
            ]
        )
    return rows


def render_html(results: Mapping[str, Any], collector: ReportCollector, *, title: str) -> str:
    """The report as one offline HTML page: plotly.js inline, one interactive chart per topic."""
    from plotly.offline import get_plotlyjs

    paper = collector.paper
    start = results["period"]["start_ms"]
    end = max(results["period"]["end_ms"], start + 1)
    period = results["period"]
    charts: list[str] = []
    for i, (coin, series) in enumerate(sorted(collector.equity.items())):
        charts.append(_figure_html(_equity_figure(coin, series, end), f"equity-{i}"))
    if paper.positions:
        charts.append(_figure_html(_position_figure(paper.positions, start, end), "positions"))
    points = paper.track.points
    for i, pair in enumerate(sorted(paper.positions)):
        track = [(p.ts, p.price) for p in points if p.pair == pair]
        fills = [f for f in paper.fills if f.pair == pair]
        if track or fills:
            charts.append(_figure_html(_price_figure(pair, track, fills), f"price-{i}"))
    summary = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>"
        for k, v in _summary_rows(results)
    )
    strategies = _table(
        ["strategy", "orders", "fills", "volume", "notional", "realized PnL", "fees", "net"],
        _strategy_rows(results, collector),
        len(results["strategies"]),
    )
    orders_table = _table(
        [
            "first seen",
            "strategy",
            "client order id",
            "pair",
            "side",
            "type",
            "quantity",
            "price",
            "status",
            "code",
            "message",
            "order id",
        ],
        (
            [
                _when(o["ts"]),
                o["strategy"],
                cid,
                o["pair"],
                o["side"],
                o["type"],
                o["quantity"],
                o["price"],
                o["status"],
                o["code"],
                o["msg"],
                o["order_id"],
            ]
            for cid, o in collector.orders.items()
        ),
        len(collector.orders),
    )
    owner = collector.strategy_of_order
    fills_table = _table(
        [
            "time",
            "strategy",
            "pair",
            "side",
            "quantity",
            "price",
            "fee",
            "realized PnL",
            "maker/taker",
            "close",
            "order id",
        ],
        (
            [
                _when(f.ts),
                owner.get(f.order_id, ""),
                f.pair,
                "buy" if f.is_long else "sell",
                f.quantity,
                f.price,
                f.fee,
                f.profit_loss,
                "taker" if f.is_taker else "maker",
                "yes" if f.is_close else "",
                f.order_id,
            ]
            for f in paper.fills
        ),
        len(paper.fills),
    )
    everything = orjson.dumps(results, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
    return "".join(
        [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{html.escape(title)}</title><style>{_CSS}</style>",
            f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>",
            f"<h1>{html.escape(title)}</h1>",
            f"<p class='sub'>{html.escape(period['start'])} to {html.escape(period['end'])} "
            f"({period['duration_s']} s of recording), strategies: "
            f"{html.escape(', '.join(results['strategies']))}</p>",
            f"<table><tr><th>Result</th><th>Value</th></tr>{summary}</table>",
            *(f"<div class='chart'>{c}</div>" for c in charts),
            "" if charts else "<p>No equity, position or price to chart.</p>",
            f"<h2>PnL per strategy</h2>{strategies}",
            f"<h2>Orders</h2>{orders_table}",
            f"<h2>Fills</h2>{fills_table}",
            "<h2>All results (report.json)</h2><pre>",
            html.escape(everything.decode()),
            "</pre></body></html>\n",
        ]
    )


_CSS: Final = (
    "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}"
    "h1{margin-bottom:0}.sub{color:#666}table{border-collapse:collapse;margin:1em 0;"
    "font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th{background:#f4f4f4;position:sticky;top:0}td:first-child{text-align:left}"
    "pre{background:#f8f8f8;padding:1em;overflow:auto;font-size:12px}"
    ".chart{border:1px solid #ddd;margin:1em 0}"
)
