"""The venue's market records: trades, books, bars, mark and index prices (issue 27).

Frozen msgspec Structs of Decimals, as the private pushes are, so a strategy reads the
market the way it reads its positions; what the venue sends is turned into them by
:mod:`framework.venue.market_codec`. Kept apart from the codec because every layer reads
these records (the engine's read model, the twin, the paper venue) and none but the live
feed and the replay needs the decoders.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Final

import msgspec

from framework.venue.market_levels import Levels

__all__ = [
    "DEPTH",
    "KLINE",
    "MAX_ITEMS",
    "MAX_LEVELS",
    "TRADE",
    "Bar",
    "Book",
    "IndexPrice",
    "MarkPrice",
    "MarketRecord",
    "Trade",
]

DEPTH: Final = "api_depth"
TRADE: Final = "api_trade"
KLINE: Final = "api_kline"
MAX_LEVELS: Final = 1000
"""Levels kept per side of a book by default (the best ones; the rest is dropped)."""
MAX_ITEMS: Final = 1000
"""Trades or bars one frame or answer may hold by default (more is refused)."""


class Trade(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One trade of the market; is_long is the taker's side (True: bought, None: unstated)."""

    pair: str
    price: Decimal
    quantity: Decimal
    is_long: bool | None = None
    time: int | None = None
    id: str | None = None
    amount: Decimal | None = None


class Book(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A snapshot of a pair's order book: (price, quantity) levels, best first.

    bids and asks are tuples, or, in a book the codec decoded, :class:`Levels` that behave
    as those tuples and make their Decimals on first use.
    """

    pair: str
    bids: Sequence[tuple[Decimal, Decimal]]
    asks: Sequence[tuple[Decimal, Decimal]]
    time: int | None = None

    @property
    def best_bid(self) -> Decimal | None:
        """The highest bid price, None when there is no bid."""
        bids = self.bids
        if isinstance(bids, Levels):
            return bids.best()
        return bids[0][0] if bids else None

    @property
    def best_ask(self) -> Decimal | None:
        """The lowest ask price, None when there is no ask."""
        asks = self.asks
        if isinstance(asks, Levels):
            return asks.best()
        return asks[0][0] if asks else None

    @property
    def mid(self) -> Decimal | None:
        """The mean of the best bid and ask, None unless both sides have a level."""
        bids, asks = self.bids, self.asks
        bid = bids.best() if isinstance(bids, Levels) else bids[0][0] if bids else None
        if bid is None:
            return None
        ask = asks.best() if isinstance(asks, Levels) else asks[0][0] if asks else None
        return None if ask is None else (bid + ask) / 2


class Bar(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One bar (kline) of a pair and period; time is when the venue stamped it."""

    pair: str
    period: str
    open: Decimal
    high: Decimal
    low: Decimal
    close: Decimal
    quantity: Decimal | None = None
    amount: Decimal | None = None
    count: int | None = None
    time: int | None = None


class MarkPrice(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A pair's mark price (polled: the venue pushes none)."""

    pair: str
    price: Decimal
    time: int | None = None


class IndexPrice(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A pair's index price (polled: the venue pushes none)."""

    pair: str
    price: Decimal
    time: int | None = None


MarketRecord = Trade | Book | Bar | MarkPrice | IndexPrice
"""Any market record."""
