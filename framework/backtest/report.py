"""The backtest report: report.json (results only, byte-identical across runs) and report.html.

:class:`ReportCollector` listens on the bus (order updates, matches, and the market's records,
kept downsampled for the price charts by :mod:`framework.backtest.market_lines`) and to the
paper venue (fills, positions), samples equity on virtual time, and turns it all into plain data:
Decimals are written as plain strings, keys are sorted, nothing depends on the wall clock or
on the machine, so the same recording, config and strategies give the same bytes. Timing
figures are the caller's to print (stdout), never part of report.json.

PnL follows :mod:`framework.pnl` (the live summary's definitions): per settlement coin
``realized_pnl``, ``fees``, ``unrealized_pnl``, ``gross_pnl`` (realized + unrealized) and
``net_pnl`` (realized − fees + unrealized). ``round_trips`` holds the statistics of
:mod:`framework.backtest.round_trips` per coin, for all trips and per strategy.

report.html (:mod:`framework.backtest.report_page`) is one offline page of interactive
plotly charts and tables built from the same collector.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from framework.backtest.market_lines import MarketLines, MarketReader
from framework.backtest.paper import PAPER_ID_BASE, Fill, PaperVenue
from framework.backtest.replay import ReplayStats
from framework.backtest.report_page import render_html
from framework.backtest.round_trips import (
    UNATTRIBUTED,
    RoundTrip,
    TripFill,
    round_trips,
    statistics_by_coin,
)
from framework.engine.bus import Bus
from framework.engine.clock import datetime_of_ms
from framework.engine.events import MatchFilled, OrderUpdate
from framework.engine.intents import OrderIntent, OrderStatus
from framework.pnl import gross_pnl, net_pnl
from framework.venue.codec import plain_decimal

__all__ = ["REPORT_VERSION", "ReportCollector", "render_html", "write_report"]

REPORT_VERSION: Final = 1
_ZERO: Final = Decimal(0)
_PCT: Final = Decimal("0.0001")
_ENDS: Final = frozenset(
    {
        OrderStatus.FILLED,
        OrderStatus.CANCELED,
        OrderStatus.REJECTED,
        OrderStatus.LOST,
        OrderStatus.AMBIGUOUS,
    }
)


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
        market: MarketReader,
        span_ms: int | None = None,
    ) -> None:
        self.paper = paper
        self._now_ms = now_ms
        self.strategies = list(strategies)
        self.statuses: Counter[str] = Counter()
        self.rejected_by_code: Counter[int] = Counter()
        self.fills_by_strategy: Counter[str] = Counter()
        self.equity: dict[str, list[tuple[int, Decimal]]] = {}
        self._drawdown: dict[str, _Drawdown] = {}
        self._max_position: dict[str, Decimal] = {}
        self._max_notional: dict[str, Decimal] = {}
        self._quiet_since = -1  # paper.changes at the last sample taken while idle
        self.orders: dict[str, dict[str, Any]] = {}
        """For the page only: client order id -> what is known of the order, in first-seen order."""
        self.strategy_of_order: dict[int, str] = {}
        """Venue order id (paper ids) -> the strategy that owns it."""
        self.client_order_of: dict[int, str] = {}
        """For the page only: venue order id (paper ids) -> its client order id."""
        self._trips: list[RoundTrip] | None = None
        self.market = MarketLines(market, list(paper.exchange.markets), span_ms=span_ms)
        """For the page only: the market's price lines per pair (trades, mid, mark)."""
        bus.subscribe(OrderUpdate, self._on_order)
        bus.subscribe(MatchFilled, self._on_match)
        paper.on_fill = self._on_fill

    def _on_order(self, update: OrderUpdate) -> None:
        self.statuses[update.status.value] += 1
        if update.status is OrderStatus.REJECTED and update.code is not None:
            self.rejected_by_code[update.code] += 1
        order = self.orders.get(update.client_order_id)
        if order is None:
            intent = update.intent
            order = self.orders[update.client_order_id] = {
                "ts": self._now_ms(),
                "strategy": update.strategy,
                "pair": None if intent is None else intent.pair,
                "side": None if intent is None else ("buy" if intent.is_long else "sell"),
                "type": None if intent is None else _order_type(intent),
                "quantity": None if intent is None else intent.quantity,
                "price": None if intent is None else intent.price,
                "order_id": None,
                "code": None,
                "msg": None,
                "accepted_ms": None,
                "end_ms": None,
                "end_price": None,
            }
        order["status"] = update.status.value
        if update.order_id is not None:
            order["order_id"] = update.order_id
            self.strategy_of_order[update.order_id] = update.strategy
            self.client_order_of[update.order_id] = update.client_order_id
        if update.code is not None:
            order["code"], order["msg"] = update.code, update.msg
        if update.status is OrderStatus.ACCEPTED and order["accepted_ms"] is None:
            order["accepted_ms"] = self._now_ms()
        elif update.status in _ENDS and order["end_ms"] is None:
            # Where the page marks it: its limit price, else the mark of the moment.
            order["end_ms"] = self._now_ms()
            pair = order["pair"]
            order["end_price"] = order["price"] or (pair and self.paper.mark(pair))

    def _on_match(self, event: MatchFilled) -> None:
        # External matches are counted by the engine (a replay may count one undecoded).
        if not event.external and event.strategy is not None and event.match.id >= PAPER_ID_BASE:
            self.fills_by_strategy[event.strategy] += 1
            match = event.match
            if match.entrust_id is not None:
                self.strategy_of_order.setdefault(match.entrust_id, event.strategy)
                if match.client_order_id is not None:
                    self.client_order_of.setdefault(match.entrust_id, match.client_order_id)

    @property
    def quiet(self) -> bool:
        """True when a sample now would find what the last one found (nothing held, no change)."""
        return self.paper.changes == self._quiet_since and self.paper.idle

    def _on_fill(self, fill: Fill) -> None:
        self.sample(fill.ts)

    def sample(self, ts: int | None = None) -> None:
        """Record equity, drawdown and exposure now (called on a timer and after each fill)."""
        if self.quiet:
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

    def round_trips(self) -> list[RoundTrip]:
        """The paper fills' round trips per strategy and pair (framework.backtest.round_trips)."""
        if self._trips is None:
            owner = self.strategy_of_order
            self._trips = round_trips(
                TripFill(
                    owner.get(f.order_id, UNATTRIBUTED),
                    f.pair,
                    f.ts,
                    f.is_long,
                    f.quantity,
                    f.price,
                    f.fee,
                )
                for f in self.paper.fills
            )
        return self._trips

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
            net = net_pnl(realized, fees, open_pnl) or _ZERO
            per_coin[coin] = {
                "initial_equity": _d(initial),
                "final_equity": _d(final),
                "realized_pnl": _d(realized),
                "unrealized_pnl": _d(open_pnl),
                "gross_pnl": _d(gross_pnl(realized, open_pnl) or _ZERO),
                "fees": _d(fees),
                "net_pnl": _d(net),
                "return_pct": _pct(net, initial),
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
            "canceled": counters.get("orders_canceled", 0),
            "cancels_sent": counters.get("cancels_sent", 0),
            "cancels_rejected": counters.get("cancels_rejected", 0),
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
            "recording": stats.report(),
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
            "round_trips": statistics_by_coin(self.round_trips(), paper.coin_of),
            "pairs": pairs,
            "paper_refusals_by_code": {str(k): v for k, v in sorted(paper.refusals.items())},
        }


def _order_type(intent: OrderIntent) -> str:
    if intent.is_market:
        return "market"
    return f"limit {intent.match_type.name}"


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
