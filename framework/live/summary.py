"""The run's summary: the tallies ``run.py live`` prints at exit (and metrics read).

SUMMARY_KEYS come first, in their order; then the execution engine's counters, the stream's
and the poller's, the portfolio's, and the trading state: open positions (net signed
quantity), resting limit orders per pair and PnL per pair (realized and fees of this node's
matches, unrealized as of the last REST position snapshot).

With a ``market:`` section (pairs or a source) the summary has ``market``
(:func:`market_counters`): what the feed heard per channel, its gaps, the bad frames per kind
(``unattributable`` among them: a frame naming no pair the stream could not attribute), the
failed price polls, and the market orders refused as stale (9007). Without one it has no
``market`` key, as before market data existed. A paper run's summary says ``"mode":
"paper"`` right after SUMMARY_KEYS.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from framework.engine.bus import Bus
from framework.engine.portfolio import Portfolio
from framework.live.market_feed import MarketFeed
from framework.live.trading import TradingState

__all__ = ["SUMMARY_KEYS", "market_counters", "run_summary"]

SUMMARY_KEYS: Final = (
    "pushes",
    "matches",
    "orders_sent",
    "orders_accepted",
    "orders_rejected",
    "orders_unknown",
    "reconnects",
)
"""Keys the summary always has, first and in this order (more follow)."""


def run_summary(
    *,
    counters: dict[str, int],
    stream: Mapping[str, int],
    poller: Mapping[str, int],
    pushes: int,
    matches: int,
    bus: Bus,
    start_errors: int,
    portfolio: Portfolio,
    trading: TradingState,
    positions: Mapping[str, Decimal],
    drain_skipped: bool,
    uptime_s: float,
    reason: str,
    market: Mapping[str, Any] | None = None,
    paper: bool = False,
) -> dict[str, Any]:
    """The summary of one run from its parts (see module)."""
    out: dict[str, Any] = {
        "pushes": pushes,
        "matches": matches,
        "orders_sent": counters.pop("orders_sent", 0),
        "orders_accepted": counters.pop("orders_accepted", 0),
        "orders_rejected": counters.pop("orders_rejected", 0),
        "orders_unknown": counters.pop("orders_unknown", 0),
        "reconnects": stream.get("reconnects", 0),
    }
    if paper:  # never to be mistaken for a real run's
        out["mode"] = "paper"
    out.update(counters)
    out.update(
        polls=poller.get("polls", 0),
        poll_errors=poller.get("errors", 0),
        stream_connects=stream.get("connects", 0),
        malformed_frames=stream.get("malformed", 0),
        strategy_errors=bus.handler_errors + start_errors,
        strategies_stopped=sorted(bus.stopped),
    )
    if market is not None:
        out["market"] = dict(market)
    out.update(
        **portfolio.counters(),
        positions={pair: str(q) for pair, q in positions.items()},
        resting=trading.resting(),
        pnl={pair: _strings(amounts) for pair, amounts in trading.pnl().items()},
        drain_skipped=drain_skipped,
        uptime_s=uptime_s,
        reason=reason,
    )
    return out


def _strings(amounts: Mapping[str, Decimal | None]) -> dict[str, str | None]:
    return {k: None if v is None else str(v) for k, v in amounts.items()}


def market_counters(feed: MarketFeed | None, *, stale_refusals: int) -> dict[str, Any]:
    """The ``market`` part of the summary: events per channel (trade, depth, kline, mark,
    index), gaps and their seconds, bad frames per kind, failed polls per kind, and market
    orders refused as stale (9007)."""
    stream = feed.stream if feed is not None else None
    return {
        "events": feed.events() if feed is not None else {},
        "gaps": stream.stats.gaps if stream is not None else 0,
        "gap_s": round(stream.stats.gap_s, 3) if stream is not None else 0.0,
        "bad_frames": dict(stream.told.counts) if stream is not None else {},
        "poll_errors": dict(feed.poll_errors()) if feed is not None else {},
        "stale_refusals": stale_refusals,
    }
