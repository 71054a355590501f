"""The venue's public market GETs and the subscribes of its market events, sans-I/O.

Paths are the public SDK's (configurable: :class:`MarketPaths`); a GET is unsigned, its
parameters in the query string; a subscribe is signed like the private ones (VENUE-FACTS
"Market data"). Apart from the records and their decoders: what is asked, not what comes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import attrs

from framework.venue.errors import ParameterError
from framework.venue.market_records import DEPTH, KLINE, TRADE
from framework.venue.public_info import public_request
from framework.venue.requests import PreparedRequest, RequestBuilder

__all__ = ["MarketPaths", "market_request", "market_subscribe"]


@attrs.frozen(slots=True)
class MarketPaths:
    """The public market GETs' paths (the public SDK's by default; configurable)."""

    mark_price: str = "/api/third/info/markPrice"
    index_price: str = "/api/third/info/indexPrice"
    trades: str = "/api/third/info/trades"
    depth: str = "/api/third/info/depth"
    kline: str = "/api/third/info/kline"


def market_request(path: str, **params: object) -> PreparedRequest:
    """An unsigned GET of path, params in the query string in the order given, None left out.

    Names pass as written (kline's ``end_time`` is snake_case on the venue): e.g.
    ``market_request(paths.kline, pairName="ETH-USD", period="1MIN", end_time=None, limit=50)``.
    """
    for name in ("limit", "end_time"):
        value = params.get(name)
        if value is not None and (type(value) is not int or value < (name == "limit")):
            raise ParameterError(2001, f"Illegal parameter:{name} (got {value!r})")
    for name in ("pairName", "period"):
        if name in params and (type(params[name]) is not str or not params[name]):
            raise ParameterError(2002, f"Required parameter:{name}")
    query = "&".join(
        f"{k}={quote(str(v), safe='-_.~')}" for k, v in params.items() if v is not None
    )
    return attrs.evolve(public_request(path), query=query)


def market_subscribe(
    builder: RequestBuilder,
    event: str,
    pair: str,
    timestamp_ms: int,
    *,
    period: str | None = None,
    method: str = "SUBSCRIBE",
) -> dict[str, Any]:
    """The signed (UN)SUBSCRIBE message of a market event for a pair (and period for bars)."""
    if event not in (DEPTH, TRADE, KLINE) or not pair:
        raise ValueError(f"subscribe {event!r}: expected api_depth/api_trade/api_kline and a pair")
    if (event == KLINE) != bool(period):
        raise ValueError(f"subscribe {event}: a period is {'needed' if period else 'unused'}")
    message = builder.subscribe(event, timestamp_ms, pair=pair)
    message["method"] = method
    if period is not None:
        message["period"] = period
    return message
