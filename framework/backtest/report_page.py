"""report.html: the backtest report as one offline page of interactive plotly charts.

The page holds plotly.js inline once (no CDN, no network: it opens from a file anywhere).
Top to bottom: the settings the run used (fill rule, fees, slippage, latency, where prices
came from), the results (PnL by its labelled parts, :mod:`framework.pnl`: net = realized −
fees + unrealized), the charts (:mod:`framework.backtest.report_charts`, all on one time
range: equity and drawdown, gross PnL against fees, positions, each pair's price (the
market's trades, mid and mark when the recording has them) with its fills, resting orders,
cancels and refusals), PnL per strategy, round trips
(:mod:`framework.backtest.round_trips`: statistics per strategy and each trip), the orders,
the fills (with client order ids) and report.json itself. report.json stays the
deterministic contract; this page is for reading.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, Protocol

import orjson

from framework.backtest.report_charts import (
    Span,
    equity_figure,
    figure_html,
    pnl_figure,
    position_figure,
    price_figure,
    when,
)
from framework.backtest.report_settings import settings_rows
from framework.backtest.round_trips import UNATTRIBUTED, RoundTrip
from framework.venue.codec import plain_decimal

if TYPE_CHECKING:
    from framework.backtest.market_lines import MarketLines
    from framework.backtest.paper import PaperVenue


class ReportCollector(Protocol):
    """What the page reads of a run (report.ReportCollector has it; no import back)."""

    @property
    def paper(self) -> PaperVenue:
        """The paper venue of the run."""
        ...

    @property
    def market(self) -> MarketLines:
        """The market's price lines per pair (empty without market data)."""
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

    @property
    def client_order_of(self) -> dict[int, str]:
        """The client order id of each venue order id."""
        ...

    def round_trips(self) -> list[RoundTrip]:
        """The round trips of the run's fills."""
        ...


__all__ = ["MAX_TABLE_ROWS", "render_html"]

MAX_TABLE_ROWS: Final = 2000
"""Rows shown per table (the first ones; the page says how many were left out)."""

_ZERO: Final = Decimal(0)


def _table(name: str, headers: Sequence[str], rows: Iterable[Sequence[object]], total: int) -> str:
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
    return (
        f"<table id='{name}'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>{more}"
    )


def _rows(pairs: Iterable[tuple[str, str]]) -> str:
    return "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in pairs)


def _summary_rows(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for coin, pnl in results["pnl"].items():
        gross, fees = Decimal(pnl["gross_pnl"]), Decimal(pnl["fees"])
        share = (
            f" ({plain_decimal((fees / abs(gross)).quantize(Decimal('0.01')))} x |gross|)"
            if gross
            else ""
        )
        rows += [
            (
                f"{coin} net PnL = realized − fees + unrealized",
                f"{pnl['net_pnl']} = {pnl['realized_pnl']} − {pnl['fees']} + "
                f"{pnl['unrealized_pnl']}",
            ),
            (f"{coin} realized PnL (closed, before fees)", pnl["realized_pnl"]),
            (f"{coin} unrealized PnL (open, at the last price)", pnl["unrealized_pnl"]),
            (f"{coin} gross PnL = realized + unrealized (before fees)", pnl["gross_pnl"]),
            (f"{coin} fees paid", f"{pnl['fees']}{share}"),
            (
                f"{coin} equity: initial -> final",
                f"{pnl['initial_equity']} -> {pnl['final_equity']} ({pnl['return_pct']} %)",
            ),
            (f"{coin} max drawdown", f"{pnl['max_drawdown']} ({pnl['max_drawdown_pct']} %)"),
        ]
    for coin, trips in results.get("round_trips", {}).items():
        every = trips["all"]
        rows += [
            (
                f"{coin} round trips: closed (open at the end)",
                f"{every['closed']} ({every['open']})",
            ),
            (
                f"{coin} round trips: win rate, average win / loss",
                f"{_none(every['win_rate_pct'])} % ({every['wins']} won, {every['losses']} "
                f"lost), {_none(every['average_win'])} / {_none(every['average_loss'])}",
            ),
            (f"{coin} round trips: profit factor", _none(every["profit_factor"])),
            (
                f"{coin} round trips: holding time, average / longest",
                f"{_none(every['average_holding_s'])} s / {_none(every['max_holding_s'])} s",
            ),
        ]
    orders = results["orders"]
    rows.append(
        (
            "Orders submitted / accepted / rejected / cancelled",
            f"{orders['submitted']} / {orders['accepted']} / {orders['rejected']} / "
            f"{orders['canceled']}",
        )
    )
    if orders["rejected_by_code"]:
        codes = ", ".join(f"{k}: {v}" for k, v in orders["rejected_by_code"].items())
        rows.append(("Rejected by code", codes))
    fills = results["fills"]
    rows.append(
        ("Fills (maker / taker)", f"{fills['count']} ({fills['maker']} / {fills['taker']})")
    )
    recording = results["recording"]
    rows.append(("Messages replayed", str(recording["lines"])))
    rows.append(
        (
            "Recorded pushes delivered / the recorded node's own, superseded",
            f"{recording['pushes_delivered']} / {recording['pushes_superseded']}",
        )
    )
    return rows


def _none(value: object) -> str:
    return "-" if value is None else str(value)


def _strategy_rows(results: Mapping[str, Any], collector: ReportCollector) -> list[list[object]]:
    """Per strategy: orders, fills, volume, notional, realized, unrealized, fees, net.

    A pair's unrealized PnL goes to the strategy that alone filled on it; a pair several
    strategies filled on (the venue nets their positions) has a row of its own.
    """
    paper = collector.paper
    owner = collector.strategy_of_order
    totals: dict[str, list[Decimal]] = {}
    counts: dict[str, int] = {}
    traders: dict[str, set[str]] = {}
    for fill in paper.fills:
        name = owner.get(fill.order_id, UNATTRIBUTED)
        traders.setdefault(fill.pair, set()).add(name)
        t = totals.setdefault(name, [_ZERO] * 5)
        t[0] += fill.quantity
        t[1] += fill.quantity * fill.price
        t[2] += fill.profit_loss
        t[3] += fill.fee
        counts[name] = counts.get(name, 0) + 1
    for pair, found in sorted(traders.items()):
        unrealized = Decimal(results["pairs"].get(pair, {}).get("unrealized_pnl", "0"))
        name = next(iter(found)) if len(found) == 1 else f"(several: {pair})"
        totals.setdefault(name, [_ZERO] * 5)[4] += unrealized
    orders: dict[str, int] = {}
    for order in collector.orders.values():
        orders[order["strategy"]] = orders.get(order["strategy"], 0) + 1
    rows: list[list[object]] = []
    for name in sorted(set(results["strategies"]) | set(totals)):
        volume, notional, realized, fees, unrealized = totals.get(name, [_ZERO] * 5)
        rows.append(
            [
                name,
                orders.get(name, 0),
                counts.get(name, 0),
                volume.normalize(),
                notional.normalize(),
                realized.normalize(),
                unrealized.normalize(),
                fees.normalize(),
                (realized - fees + unrealized).normalize(),
            ]
        )
    return rows


_STATS_HEADERS: Final = [
    "coin",
    "strategy",
    "closed",
    "open",
    "won",
    "lost",
    "win rate %",
    "average win",
    "average loss",
    "profit factor",
    "gross",
    "fees",
    "net",
    "average holding s",
    "longest s",
]


def _stats_rows(results: Mapping[str, Any]) -> list[list[object]]:
    rows: list[list[object]] = []
    for coin, trips in results.get("round_trips", {}).items():
        for name, stats in [*trips["by_strategy"].items(), ("all", trips["all"])]:
            rows.append(
                [
                    coin,
                    name,
                    stats["closed"],
                    stats["open"],
                    stats["wins"],
                    stats["losses"],
                    stats["win_rate_pct"],
                    stats["average_win"],
                    stats["average_loss"],
                    stats["profit_factor"],
                    stats["gross_pnl"],
                    stats["fees"],
                    stats["net_pnl"],
                    stats["average_holding_s"],
                    stats["max_holding_s"],
                ]
            )
    return rows


def _trip_rows(trips: Sequence[RoundTrip]) -> Iterable[list[object]]:
    for t in trips:
        held = t.holding_ms
        yield [
            t.strategy,
            t.pair,
            "long" if t.is_long else "short",
            when(t.opened_ms),
            "open" if t.closed_ms is None else when(t.closed_ms),
            "" if held is None else plain_decimal(Decimal(held) / 1000),
            t.max_quantity.normalize(),
            t.fills,
            t.gross.normalize(),
            t.fees.normalize(),
            t.net.normalize(),
        ]


def _span(results: Mapping[str, Any], collector: ReportCollector) -> Span:
    """From the first recorded message to the last thing any chart draws."""
    paper = collector.paper
    start = results["period"]["start_ms"]
    ends = [results["period"]["end_ms"], start + 1]
    ends += [series[-1][0] for series in collector.equity.values() if series]
    ends += [changes[-1][0] for changes in paper.positions.values() if changes]
    ends += [f.ts for f in paper.fills[-1:]]
    ends += [o["end_ms"] or o["ts"] for o in collector.orders.values()]
    return Span(start, max(ends))


def _charts(results: Mapping[str, Any], collector: ReportCollector, span: Span) -> list[str]:
    paper = collector.paper
    charts: list[str] = []
    for i, (coin, series) in enumerate(sorted(collector.equity.items())):
        charts.append(figure_html(equity_figure(coin, series, span), f"equity-{i}"))
        fees = [(f.ts, f.fee) for f in paper.fills if paper.coin_of.get(f.pair) == coin]
        initial = Decimal(results["pnl"][coin]["initial_equity"])
        charts.append(figure_html(pnl_figure(coin, series, initial, fees, span), f"pnl-{i}"))
    if paper.positions:
        charts.append(figure_html(position_figure(paper.positions, span), "positions"))
    points = paper.track.points
    for i, pair in enumerate(sorted(paper.positions)):
        market = collector.market.of(pair)
        # With the market's prices, the recorded node's own fills are no price track: the
        # paper venue filled against the market (README: Recording and backtesting).
        track = [] if market else [(p.ts, p.price) for p in points if p.pair == pair]
        fills = [f for f in paper.fills if f.pair == pair]
        orders = [{**o, "cid": cid} for cid, o in collector.orders.items() if o["pair"] == pair]
        if track or fills or orders or market:
            figure = price_figure(pair, track, fills, orders, span, market=market)
            charts.append(figure_html(figure, f"price-{i}"))
    return charts


def render_html(results: Mapping[str, Any], collector: ReportCollector, *, title: str) -> str:
    """The report as one offline HTML page: plotly.js inline, one interactive chart per topic."""
    from plotly.offline import get_plotlyjs

    paper = collector.paper
    period = results["period"]
    charts = _charts(results, collector, _span(results, collector))
    strategies = _table(
        "strategies",
        [
            "strategy",
            "orders",
            "fills",
            "volume",
            "notional",
            "realized PnL",
            "unrealized PnL",
            "fees",
            "net PnL",
        ],
        _strategy_rows(results, collector),
        len(results["strategies"]),
    )
    trips = collector.round_trips()
    stats_table = _table(
        "round-trip-statistics", _STATS_HEADERS, _stats_rows(results), MAX_TABLE_ROWS
    )
    trips_table = _table(
        "round-trips",
        [
            "strategy",
            "pair",
            "side",
            "opened",
            "closed",
            "held s",
            "largest position",
            "fills",
            "gross",
            "fees",
            "net",
        ],
        _trip_rows(trips),
        len(trips),
    )
    orders_table = _table(
        "orders",
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
                when(o["ts"]),
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
    owner, cids = collector.strategy_of_order, collector.client_order_of
    fills_table = _table(
        "fills",
        [
            "time",
            "strategy",
            "client order id",
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
                when(f.ts),
                owner.get(f.order_id, ""),
                cids.get(f.order_id, ""),
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
            "<table id='settings'><tr><th>Setting</th><th>Value</th></tr>",
            _rows(settings_rows(results, collector.paper.market_fills)),
            "</table>",
            "<table id='summary'><tr><th>Result</th><th>Value</th></tr>",
            _rows(_summary_rows(results)),
            "</table>",
            *(f"<div class='chart'>{c}</div>" for c in charts),
            "" if charts else "<p>No equity, position or price to chart.</p>",
            f"<h2>PnL per strategy</h2>{_PNL_NOTE}{strategies}",
            f"<h2>Round trips</h2>{_TRIPS_NOTE}{stats_table}{trips_table}",
            f"<h2>Orders</h2>{orders_table}",
            f"<h2>Fills</h2>{fills_table}",
            "<h2>All results (report.json)</h2><pre>",
            html.escape(everything.decode()),
            "</pre></body></html>\n",
        ]
    )


_PNL_NOTE: Final = (
    "<p class='sub'>net PnL = realized − fees + unrealized (the live summary's definition). "
    "A pair's unrealized PnL is its strategy's when one strategy alone filled on it; "
    "several strategies on one pair share one netted position: its own row.</p>"
)
_TRIPS_NOTE: Final = (
    "<p class='sub'>A round trip is one strategy's position on one pair from flat back to "
    "flat (a fill through zero closes one and opens the next). gross = sells − buys "
    "(quantity × price), net = gross − fees; it is won when net &gt; 0. Profit factor: "
    "the won trips' net over the lost trips' loss. Trips open at the end are only counted.</p>"
)

_CSS: Final = (
    "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}"
    "h1{margin-bottom:0}.sub{color:#666}table{border-collapse:collapse;margin:1em 0;"
    "font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th{background:#f4f4f4;position:sticky;top:0}td:first-child{text-align:left}"
    "#settings td,#summary td{text-align:left}"
    "pre{background:#f8f8f8;padding:1em;overflow:auto;font-size:12px}"
    ".chart{border:1px solid #ddd;margin:1em 0}"
)
