"""How orders fill against a published market: arrivals walk the book, trades cross rests.

When the exchange reads a market (``Exchange(..., book_fills=True)``: the twin with
``market.enabled``, later the paper venue on a recording with market data), a user's fills
must agree with what that market published (issue 27). The rule, given the pair's current
book (``Exchange.set_book``) and the trades that happened (``Exchange.market_trades``):

* Arrival (:func:`plan_book_fill`): a market buy walks the ask levels best first, taking
  each level's quantity, until it is filled; a limit buy only the levels at or below its
  price. It fills as taker at the average price of what it took, rounded up to the pair's
  price grid (so never below the best ask published; never above a limit). A sell walks the
  bids symmetrically, rounded down. What the levels do not hold is left unfilled: a market
  or IOC order drops it, FOK fills all or nothing, GTC rests it at its limit. The pair's
  ``liquidity``, when set, still caps one order's fill; ``slippage`` is not applied (the
  book is the slippage). The levels taken are gone from the book until the next one is set,
  so two orders never take the same quantity. A limit order that reaches no level is not
  crossing: it rests (GTC, POST_ONLY) or is dropped. Before any book is set, the mark rule
  of :func:`framework.sim.fills.plan_fill` applies.
* Resting orders fill only when the market trades through them: a bid when a trade is
  published at or below its price, an ask at or above it, whole, at its limit, as maker
  (the rest of :func:`framework.sim.fills.fill_crossed`'s rule holds). A mark that moves
  without a trade fills nothing; it still liquidates (at the mark, as before).
* The user's own fills are not published as market trades (the published trades are the
  producer's: the generator's or the recording's).
"""

from __future__ import annotations

from decimal import ROUND_DOWN, ROUND_UP, Decimal

import msgspec

from framework.sim.fills import FillPlan
from framework.sim.state import Market
from framework.venue.market import Book
from framework.venue.models import MatchType, OrderInput

__all__ = ["plan_book_fill"]

_ZERO = Decimal(0)


def plan_book_fill(market: Market, order: OrderInput, book: Book) -> tuple[FillPlan, Book]:
    """The order's immediate fill against book, and the book left once that fill is made."""
    qty, is_long = order.quantity, order.is_long
    limit = None if order.is_market else order.price
    side = book.asks if is_long else book.bids
    match_type = order.match_type

    def reachable(price: Decimal) -> bool:
        return limit is None or (price <= limit if is_long else price >= limit)

    crossing = bool(side) and reachable(side[0][0])
    if order.is_market and not crossing:
        return FillPlan(_ZERO, market.mark, _ZERO, True), book
    if not crossing:
        assert limit is not None
        rests = match_type == MatchType.GTC or match_type == MatchType.POST_ONLY
        return FillPlan(_ZERO, limit, qty if rests else _ZERO, False), book
    liquidity = market.settings.liquidity
    want = qty if liquidity is None else min(qty, liquidity)
    notional = _ZERO
    left: list[tuple[Decimal, Decimal]] = []
    for index, (price, available) in enumerate(side):
        if not want or not reachable(price):
            left.extend(side[index:])
            break
        taken = min(available, want)
        want -= taken
        notional += price * taken
        if taken < available:
            left.append((price, available - taken))
    fill = (qty if liquidity is None else min(qty, liquidity)) - want
    if match_type == MatchType.FOK and fill < qty:
        fill = _ZERO
    rest = qty - fill if match_type == MatchType.GTC and not order.is_market else _ZERO
    if not fill:
        return FillPlan(_ZERO, side[0][0] if limit is None else limit, rest, True), book
    average = (notional / fill).quantize(market.price_exp, ROUND_UP if is_long else ROUND_DOWN)
    if limit is not None:
        average = min(average, limit) if is_long else max(average, limit)
    remaining = (
        msgspec.structs.replace(book, asks=tuple(left))
        if is_long
        else msgspec.structs.replace(book, bids=tuple(left))
    )
    return FillPlan(fill, average, rest, True), remaining
