"""The ``market:`` section of a config: which market events the node hears, per pair.

The venue publishes trades, book snapshots and bars over WebSocket and its mark and index
prices over public REST (VENUE-FACTS "Market data"). A config says, per pair, what to hear::

    market:
      stale_after_s: 10            # default for every pair below
      pairs:
        ETH-USD:
          channels: [trade, depth, kline]
          periods: [1MIN]          # bar periods, with the kline channel
          mark_interval_s: 5       # poll of the mark price (0: off)
          index_interval_s: 0      # poll of the index price (0: off)
      source: my_feed:RefPrice     # optional: a user class emitting the same records
      params: {url: ...}

A pair not named under ``pairs`` hears nothing, and without ``market:`` nothing is heard:
the node then behaves as before market data existed. ``stale_after_s`` is how old a pair's
latest market event may be before a market order on it is refused (the kernel reads it
through :meth:`MarketConfig.stale_after`); it applies only to pairs with a feed. Every
problem is one located line, as for the rest of the config (:func:`check_market`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, Final

import attrs

from framework.yaml_attrs import Problems
from framework.yaml_lines import shown

__all__ = [
    "CHANNELS",
    "MARKET_WS_PATH",
    "MarketConfig",
    "PairMarketConfig",
    "check_market",
]

CHANNELS: Final[tuple[str, ...]] = ("trade", "depth", "kline")
"""The WebSocket market channels: api_trade, api_depth (book snapshots), api_kline (bars)."""
MARKET_WS_PATH: Final = "/api/market/ws"
"""The venue's WebSocket path (the public SDK's one socket for every event)."""
_PERIOD: Final = re.compile(r"[1-9][0-9]{0,2}(SECOND|MIN|HOUR|DAY|WEEK|MONTH|YEAR)")
_MAX_PERIODS: Final = 16
_MAX_INTERVAL_S: Final = 86400.0


@attrs.frozen(slots=True, kw_only=True)
class PairMarketConfig:
    """What the node hears of one pair's market: channels, bar periods, price polls."""

    channels: list[str] = attrs.Factory(lambda: ["trade", "depth"])
    """WebSocket channels to subscribe (trade, depth, kline)."""
    periods: list[str] = attrs.Factory(lambda: ["1MIN"])
    """Bar periods (``1MIN``, ``5MIN``, ``1HOUR``...), subscribed with the kline channel."""
    depth_limit: int = 20
    """Levels per side asked of the REST depth (the WebSocket sends the venue's snapshot)."""
    mark_interval_s: float = 5.0
    """Seconds between polls of the mark price (0: never; the venue pushes no mark)."""
    index_interval_s: float = 0.0
    """Seconds between polls of the index price (0: never)."""
    stale_after_s: float | None = None
    """This pair's staleness bound; None: the section's ``stale_after_s``."""


@attrs.frozen(slots=True, kw_only=True)
class MarketConfig:
    """The market feeds: per-pair channels and polls, staleness, an optional user source."""

    pairs: dict[str, PairMarketConfig] = attrs.Factory(dict)
    """The pairs whose market the node hears, each with what to hear."""
    stale_after_s: float = 10.0
    """Market orders on a pair whose latest market event is older than this are refused."""
    ws_path: str = MARKET_WS_PATH
    """Path of the market WebSocket on the venue's ws_url host."""
    source: str | None = None
    """``module:Class`` of a user source emitting market records (Trade, Book, MarkPrice...)."""
    params: dict[str, Any] = attrs.Factory(dict)
    """Free params handed to ``source``."""

    def stale_after(self, pair: str) -> float | None:
        """Seconds after which the pair's market is stale; None when nothing feeds the pair."""
        rules = self.pairs.get(pair)
        if rules is None:
            return self.stale_after_s if self.source is not None else None
        return self.stale_after_s if rules.stale_after_s is None else rules.stale_after_s


def check_market(market: MarketConfig, traded: Collection[str], out: Problems) -> None:
    """Add one located problem per bad value of the ``market:`` section to out."""
    here = ("market",)
    out.require(
        0 < market.stale_after_s <= _MAX_INTERVAL_S,
        (*here, "stale_after_s"),
        f"must be > 0 and at most {_MAX_INTERVAL_S:g} s, got {shown(market.stale_after_s)}",
    )
    out.require(
        market.ws_path.startswith("/"),
        (*here, "ws_path"),
        f"expected a path starting with '/', got {shown(market.ws_path)}",
    )
    if market.source is not None:
        out.require(
            re.fullmatch(r"[\w.]+:\w+", market.source) is not None,
            (*here, "source"),
            f"expected 'module:Class', got {shown(market.source)}",
        )
    for pair, rules in market.pairs.items():
        at = (*here, "pairs", pair)
        out.require(
            pair in traded, at, f"pair {shown(pair)} is not configured under `pairs:`", key=True
        )
        _check_pair(rules, at, out)
        # Such a pair would count as fed (stale_after) yet nothing would ever come: every
        # market order on it refused 9007. A source may feed it: then the entry is its bound.
        out.require(
            bool(rules.channels)
            or rules.mark_interval_s > 0
            or rules.index_interval_s > 0
            or market.source is not None,
            at,
            "no channel and no poll: it would never hear a price (9007 on every market order)",
            key=True,
        )


def _check_pair(rules: PairMarketConfig, at: tuple[str, ...], out: Problems) -> None:
    """The problems of one pair's market settings."""
    for j, channel in enumerate(rules.channels):
        out.require(
            channel in CHANNELS,
            (*at, "channels", j),
            f"expected one of {', '.join(CHANNELS)}, got {shown(channel)}",
        )
    out.require(
        len(set(rules.channels)) == len(rules.channels),
        (*at, "channels"),
        "each channel at most once",
    )
    out.require(
        len(rules.periods) <= _MAX_PERIODS, (*at, "periods"), f"at most {_MAX_PERIODS} periods"
    )
    for j, period in enumerate(rules.periods):
        out.require(
            _PERIOD.fullmatch(period) is not None,
            (*at, "periods", j),
            f"expected a bar period such as 1MIN, 5MIN, 1HOUR or 1DAY, got {shown(period)}",
        )
    if "kline" in rules.channels:
        out.require(bool(rules.periods), (*at, "periods"), "the kline channel needs a period")
    out.require(
        1 <= rules.depth_limit <= 1000,
        (*at, "depth_limit"),
        f"must be between 1 and 1000, got {shown(rules.depth_limit)}",
    )
    for name in ("mark_interval_s", "index_interval_s"):
        value = getattr(rules, name)
        out.require(
            0 <= value <= _MAX_INTERVAL_S,
            (*at, name),
            f"must be between 0 (never) and {_MAX_INTERVAL_S:g} s, got {shown(value)}",
        )
    if rules.stale_after_s is not None:
        out.require(
            0 < rules.stale_after_s <= _MAX_INTERVAL_S,
            (*at, "stale_after_s"),
            f"must be > 0 and at most {_MAX_INTERVAL_S:g} s, got {shown(rules.stale_after_s)}",
        )
