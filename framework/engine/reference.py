"""The risk gate's reference price and market staleness: one rule, kept by the kernel.

A market order carries no price, yet ``max_notional`` must value it and the venue's
``min_notional`` must be checked on it. Every runtime (the live node, a backtest) used to
hand the gate a price of its own making; the kernel sees every market record and every
match, so it owns the one rule instead. The reference price of a pair is, first found:

1. the mark (``self.market.mark``, polled from the venue), unless it was heard longer than
   the pair's ``stale_after_s`` ago and a market trade was heard since (the polls failing
   while the market trades elsewhere);
2. the last market trade (``self.market.last``);
3. the last own fill of the pair (every match the kernel reads, whoever placed the order);
4. the configured ``execution.risk.reference_prices`` entry of the pair;
5. none: with ``max_notional`` set, a market order is refused (9005).

A market order is also refused (9007) while the pair's market is stale: the pair has a feed
(:meth:`MarketSettings.stale_after` gives seconds, not None) and its latest market record is
older than that, or there is none yet. A pair nothing feeds is never stale, and a limit order
is never refused for staleness (it carries its own price). Pure: ages from the kernel's clock.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from decimal import Decimal
from typing import Protocol

from framework.engine.market import MarketView
from framework.venue.models import MatchRecord

__all__ = ["MarketSettings", "ReferencePrices"]


class MarketSettings(Protocol):
    """What the kernel reads of the market section (a MarketConfig has it)."""

    def stale_after(self, pair: str) -> float | None:
        """Seconds after which the pair's market is stale; None when nothing feeds it."""
        ...


class ReferencePrices:
    """The reference price and the staleness of each pair, by the rule of the module."""

    __slots__ = ("_configured", "_fills", "_market", "_pairs", "_settings")

    def __init__(
        self,
        market: MarketView,
        *,
        pairs: Collection[str],
        configured: Mapping[str, Decimal] | None = None,
        settings: MarketSettings | None = None,
    ) -> None:
        """``pairs``: the traded pairs, the only ones whose fills are kept (memory bound);
        ``configured``: the last-resort price per pair; ``settings``: staleness (None:
        never stale)."""
        self._market = market
        self._pairs = pairs
        self._configured: Mapping[str, Decimal] = configured if configured is not None else {}
        self._settings = settings
        self._fills: dict[str, Decimal] = {}

    def __repr__(self) -> str:
        return f"ReferencePrices({len(self._fills)} pairs filled)"

    def filled(self, match: MatchRecord) -> None:
        """Remember the match's price as its pair's last own fill (a traded pair's only)."""
        pair, price = match.symbol, match.average_price
        if pair is not None and price is not None and pair in self._pairs:
            self._fills[pair] = price

    def price(self, pair: str) -> Decimal | None:
        """The pair's reference price: mark, last trade, last own fill, configured, None."""
        bound = self._settings.stale_after(pair) if self._settings is not None else None
        price = self._market.reference_price(pair, bound)
        if price is None:
            price = self._fills.get(pair)
        return price if price is not None else self._configured.get(pair)

    def stale(self, pair: str) -> tuple[float | None, float] | None:
        """(age in seconds or None before any record, the bound) when the pair's market is
        stale; None when it is fresh or nothing feeds the pair."""
        if self._settings is None:
            return None
        bound = self._settings.stale_after(pair)
        if bound is None or not self._market.stale(pair, bound):
            return None
        return self._market.age(pair), bound
