"""The twin's public market GETs (VENUE-FACTS "Market data"): mark, index, trades, depth, kline.

Unsigned GETs at :class:`~framework.venue.market.MarketPaths`' paths, answered in the
twin's envelope (``{"code": 200, "error": false, "msg": "SUCCESS", "data": ...}``) with the
latency and refusal faults of every call. Served whether or not the market is enabled:
mark and index always; trades, depth and kline from the generated market, empty when it is
off. Shapes: :mod:`framework.twin.market_wire`. Parameters, read strictly like the twin's
other endpoints (a missing or empty one ``2002 Required parameter:<name>``, a bad one
``2001 Illegal parameter:<name>``):

* ``pairName`` required, a configured pair (else 2001).
* ``limit`` optional, a positive integer: trades at most ``market.keep_trades`` (default
  100), depth at most 1000 levels per side (default ``market.levels``), kline at most
  ``market.keep_bars`` (default 100); above its bound 2001.
* kline: ``period`` required, one the twin keeps (``market.periods``, else 2001);
  ``end_time`` optional, ms since the epoch (a value below 10^11 is seconds): bars that
  start at or before it.
* The index price is the mark smoothed exponentially (``market.index_smoothing``), the same
  for a random walk and a CSV track.

Lists are oldest first: the last ``limit`` trades, the last ``limit`` bars.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from framework.twin import market_wire
from framework.twin.market_feed import TwinMarket
from framework.twin.wire import Refused, positive
from framework.venue.market import MAX_LEVELS, MarketPaths

__all__ = ["MarketEndpoints"]

_DEFAULT_LIMIT = 100


class MarketEndpoints:
    """Handlers of the public market GETs, given (request, user id, query parameters)."""

    def __init__(self, market: TwinMarket, clock_ms: Callable[[], int]) -> None:
        """clock_ms: the twin's clock (the prices' and an empty book's time)."""
        self.market = market
        self.clock_ms = clock_ms

    def handlers(self, paths: MarketPaths | None = None) -> list[tuple[str, Any]]:
        """(path, handler) of every market GET."""
        p = paths if paths is not None else MarketPaths()
        return [
            (p.mark_price, self.mark_price),
            (p.index_price, self.index_price),
            (p.trades, self.trades),
            (p.depth, self.depth),
            (p.kline, self.kline),
        ]

    def _pair(self, params: dict[str, str]) -> str:
        pair = params.get("pairName")
        if not pair:
            raise Refused(2002, "pairName")
        if pair not in self.market.exchange.markets:
            raise Refused(2001, "pairName")
        return pair

    @staticmethod
    def _limit(params: dict[str, str], default: int, bound: int) -> int:
        limit = positive(params.get("limit"), default)
        if limit is None or limit > bound:
            raise Refused(2001, "limit")
        return limit

    async def mark_price(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """The pair's mark."""
        pair = self._pair(params)
        mark = self.market.exchange.markets[pair].mark
        return market_wire.price_object(pair, mark, self.clock_ms())

    async def index_price(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """The pair's index: its mark smoothed."""
        pair = self._pair(params)
        index = self.market.tapes[pair].index
        if index is None:
            index = self.market.exchange.markets[pair].mark
        return market_wire.price_object(pair, index, self.clock_ms())

    async def trades(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """The pair's last trades, oldest first."""
        pair = self._pair(params)
        s = self.market.settings
        limit = self._limit(params, min(_DEFAULT_LIMIT, s.keep_trades), s.keep_trades)
        pair_id = self.market.exchange.markets[pair].contract_pair_id
        return [
            market_wire.trade_object(t, pair_id) for t in self.market.tapes[pair].last_trades(limit)
        ]

    async def depth(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """The pair's book, best limit levels per side."""
        pair = self._pair(params)
        limit = self._limit(params, self.market.settings.levels, MAX_LEVELS)
        return market_wire.book_object(self.market.tapes[pair].book, limit, self.clock_ms())

    async def kline(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """The pair's last bars of a period ending at end_time, oldest first."""
        pair = self._pair(params)
        period = params.get("period")
        if not period:
            raise Refused(2002, "period")
        s = self.market.settings
        if period not in s.periods:
            raise Refused(2001, "period")
        end = params.get("end_time")
        end_ms = None
        if end:
            value = positive(end)
            if value is None:
                raise Refused(2001, "end_time")
            end_ms = value * 1000 if value < 10**11 else value
        limit = self._limit(params, min(_DEFAULT_LIMIT, s.keep_bars), s.keep_bars)
        pair_id = self.market.exchange.markets[pair].contract_pair_id
        bars = self.market.tapes[pair].last_bars(period, limit, end_ms)
        return [market_wire.bar_object(b, pair_id) for b in bars]
