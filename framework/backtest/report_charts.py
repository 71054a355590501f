"""The plotly charts of report.html, all drawn over one time range (see :class:`Span`).

Equity and drawdown per settlement coin; gross PnL against fees per coin; position per pair;
each pair's price track (with market data: the market's trades, book mid and mark) with the
paper fills, the cancels and refusals, and the resting limit orders (a line at the limit
price from acceptance to its end). Each chart has zoom, pan and hover values. Every x axis
is set to the same range, from the first recorded message to the last thing drawn, and
every step line is drawn to its end, so the charts line up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

import attrs

from framework.engine.clock import datetime_of_ms

__all__ = [
    "MARKET_LINES",
    "MAX_RESTING_LINES",
    "Span",
    "equity_figure",
    "figure_html",
    "pnl_figure",
    "position_figure",
    "price_figure",
    "when",
]

MAX_RESTING_LINES: Final = 2000
"""Resting orders drawn per pair (the first ones)."""

MARKET_LINES: Final = {
    "trades": ("market trades", "#555", "solid"),
    "mid": ("book mid", "#1f77b4", "solid"),
    "mark": ("mark", "#8c564b", "dash"),
}
"""The market's lines of a price chart: kind -> (legend name, colour, dash)."""

_MAX_PLOT_POINTS: Final = 5000
_ZERO: Final = Decimal(0)
_BUY, _SELL, _FEES = "#2ca02c", "#d62728", "#ff7f0e"
_PLOT_CONFIG: Final = {"displaylogo": False, "responsive": True, "scrollZoom": True}


def when(ms: int) -> str:
    """A virtual time as the charts and tables write it (UTC, milliseconds)."""
    return datetime_of_ms(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@attrs.frozen
class Span:
    """The one time range of every chart: start to end in epoch ms."""

    start: int
    end: int

    def apply(self, fig: Any) -> Any:
        """Set every x axis of fig to this range."""
        fig.update_xaxes(range=[when(self.start), when(self.end)])
        return fig


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
    return [when(t) for t, _ in thinned], [float(v) for _, v in thinned]


def _drawdown(points: Sequence[tuple[int, Decimal]]) -> list[tuple[int, Decimal]]:
    """The drop below the running peak at each point (zero or negative)."""
    peak: Decimal | None = None
    out = []
    for ts, value in points:
        peak = value if peak is None or value > peak else peak
        out.append((ts, value - peak))
    return out


def figure_html(fig: Any, name: str) -> str:
    """A figure as a div of the page (plotly.js is inlined once, by the page)."""
    return str(
        fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            config=_PLOT_CONFIG,
            div_id=name,
            default_width="100%",
        )
    )


def _styled(fig: Any, title: str, height: int, span: Span) -> Any:
    fig.update_layout(
        title_text=title,
        height=height,
        margin={"l": 70, "r": 20, "t": 50, "b": 40},
        hovermode="x unified",
        template="plotly_white",
        # Below the chart: above it, a long legend runs into the title and the tool bar.
        legend={"orientation": "h", "y": -0.12, "yanchor": "top", "x": 0, "xanchor": "left"},
    )
    # Plain numbers on value axes (100,000.5, not 100.0005k).
    fig.update_yaxes(exponentformat="none", separatethousands=True)
    return span.apply(fig)


def equity_figure(coin: str, series: Sequence[tuple[int, Decimal]], span: Span) -> Any:
    """Equity (top) and its drawdown below the running peak (bottom) of one coin."""
    from plotly.subplots import make_subplots

    points = _extend(series, span.end)
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
    return _styled(fig, f"Equity and drawdown ({coin})", 480, span)


def pnl_figure(
    coin: str,
    equity: Sequence[tuple[int, Decimal]],
    initial: Decimal,
    fees: Sequence[tuple[int, Decimal]],
    span: Span,
) -> Any:
    """Gross PnL (realized + unrealized), the fees paid so far and net (gross − fees) of a coin.

    Net at a sample is equity minus the initial equity; gross adds back the fees of the
    fills up to that time; fees are the running sum of the fills' fees.
    """
    import plotly.graph_objects as go

    paid: list[tuple[int, Decimal]] = []
    total = _ZERO
    for ts, fee in sorted(fees, key=lambda f: f[0]):
        total += fee
        if paid and paid[-1][0] == ts:
            paid[-1] = (ts, total)
        else:
            paid.append((ts, total))
    gross, net = [], []
    i, so_far = 0, _ZERO
    for ts, value in equity:
        while i < len(paid) and paid[i][0] <= ts:
            so_far = paid[i][1]
            i += 1
        net.append((ts, value - initial))
        gross.append((ts, value - initial + so_far))
    fig = go.Figure()
    for name, points, color in (
        ("gross PnL (realized + unrealized)", gross, _BUY),
        ("fees paid", [(span.start, _ZERO), *paid], _FEES),
        ("net PnL (gross − fees)", net, "#1f77b4"),
    ):
        x, y = _xy(_extend(points, span.end))
        fig.add_scatter(x=x, y=y, name=name, line_shape="hv", line_color=color)
    fig.update_yaxes(title_text=coin)
    return _styled(fig, f"Gross PnL against fees ({coin})", 360, span)


def position_figure(positions: Mapping[str, Sequence[tuple[int, Decimal]]], span: Span) -> Any:
    """The net position of each pair over time."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for pair, changes in sorted(positions.items()):
        x, y = _xy(_extend([(span.start, _ZERO), *changes], span.end))
        fig.add_scatter(x=x, y=y, name=pair, line_shape="hv")
    fig.update_yaxes(title_text="net quantity (long +, short -)")
    return _styled(fig, "Position per pair", 320, span)


def _resting_trace(fig: Any, orders: Sequence[Mapping[str, Any]], is_long: bool, end: int) -> None:
    """One trace of line segments: each resting order at its price while it rested."""
    x: list[str | None] = []
    y: list[float | None] = []
    text: list[str | None] = []
    for order in orders[:MAX_RESTING_LINES]:
        label = f"resting {order['side']} {order['quantity']} @ {order['price']} ({order['cid']})"
        x += [when(order["accepted_ms"]), when(order["end_ms"] or end), None]
        y += [float(order["price"]), float(order["price"]), None]
        text += [label, label, None]
    fig.add_scatter(
        x=x,
        y=y,
        text=text,
        mode="lines",
        name=f"resting {'buys' if is_long else 'sells'}",
        line={"color": _BUY if is_long else _SELL, "width": 1, "dash": "dot"},
        opacity=0.6,
        hovertemplate="%{text}<extra></extra>",
    )


def _ended_trace(
    fig: Any, orders: Sequence[Mapping[str, Any]], name: str, symbol: str, color: str
) -> None:
    """Markers where orders ended without a fill (cancelled, refused), at their price."""
    fig.add_scatter(
        x=[when(o["end_ms"]) for o in orders],
        y=[float(o["end_price"]) for o in orders],
        mode="markers",
        name=name,
        marker={"color": color, "symbol": symbol, "size": 9, "line": {"width": 1}},
        customdata=[
            [o["cid"], o["side"] or "", o["quantity"] or "", o["code"] or "", o["msg"] or ""]
            for o in orders
        ],
        hovertemplate="%{x}<br>" + name + " %{customdata[1]} %{customdata[2]} @ %{y}<br>"
        "%{customdata[0]}<br>%{customdata[3]} %{customdata[4]}<extra></extra>",
    )


def price_figure(
    pair: str,
    track: Sequence[tuple[int, Decimal]],
    fills: Sequence[Any],
    orders: Iterable[Mapping[str, Any]],
    span: Span,
    *,
    market: Mapping[str, Sequence[tuple[int, Decimal]]] | None = None,
) -> Any:
    """A pair's price track, the market's prices, its fills, resting orders, cancels and
    refusals.

    orders: the pair's orders as the page keeps them (``cid``, ``side``, ``price``,
    ``quantity``, ``status``, ``code``, ``msg``, ``accepted_ms``, ``end_ms``, ``end_price``).
    market: the market's price lines by kind (``trades``, ``mid``, ``mark``; downsampled by
    :mod:`framework.backtest.market_lines`), each drawn as a line named in MARKET_LINES.
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    if track:
        x, y = _xy(_extend(track, span.end))
        fig.add_scatter(x=x, y=y, name="price", line_color="#555", line_shape="hv")
    for kind, (name, color, dash) in MARKET_LINES.items():
        points = (market or {}).get(kind)
        if points:
            x, y = _xy(_extend(points, span.end))
            fig.add_scatter(
                x=x,
                y=y,
                name=name,
                line={"color": color, "width": 1, "dash": dash},
                line_shape="hv",
            )
    for is_long, color, symbol in ((True, _BUY, "triangle-up"), (False, _SELL, "triangle-down")):
        side = [f for f in fills if f.is_long is is_long]
        if not side:
            continue
        fig.add_scatter(
            x=[when(f.ts) for f in side],
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
    orders = list(orders)
    for is_long in (True, False):
        resting = [
            o
            for o in orders
            if o["accepted_ms"] is not None
            and o["price"] is not None
            and (o["side"] == "buy") is is_long
        ]
        if resting:
            _resting_trace(fig, resting, is_long, span.end)
    for status, name, symbol, color in (
        ("CANCELED", "cancelled", "x", "#7f7f7f"),
        ("REJECTED", "refused", "x-thin-open", "#9467bd"),
    ):
        ended = [
            o
            for o in orders
            if o["status"] == status and o["end_ms"] is not None and o["end_price"] is not None
        ]
        if ended:
            _ended_trace(fig, ended, name, symbol, color)
    fig.update_yaxes(title_text="price")
    return _styled(fig, f"{pair}: price, fills, resting orders, cancels and refusals", 400, span)
