"""The venue's market data, sans-I/O: one import for its records, decoders, GETs and subscribes.

Strategies, runtimes and tests import market data from here; each concept lives in a module
of its own: the records (:mod:`framework.venue.market_records`), their decoders
(:mod:`framework.venue.market_codec`) and what is asked of the venue
(:mod:`framework.venue.market_requests`).
"""

from __future__ import annotations

from framework.venue.market_codec import DEFAULT_MARKET_CODEC, MarketCodec, MarketFields
from framework.venue.market_records import (
    DEPTH,
    KLINE,
    MAX_ITEMS,
    MAX_LEVELS,
    TRADE,
    Bar,
    Book,
    IndexPrice,
    MarketRecord,
    MarkPrice,
    Trade,
)
from framework.venue.market_requests import MarketPaths, market_request, market_subscribe

__all__ = [
    "DEFAULT_MARKET_CODEC",
    "DEPTH",
    "KLINE",
    "MAX_ITEMS",
    "MAX_LEVELS",
    "TRADE",
    "Bar",
    "Book",
    "IndexPrice",
    "MarkPrice",
    "MarketCodec",
    "MarketFields",
    "MarketPaths",
    "MarketRecord",
    "Trade",
    "market_request",
    "market_subscribe",
]
