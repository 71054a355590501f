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
* Resting orders fill only on published trades (:func:`fill_on_trades`), by the exchange's
  fill rule (:class:`~framework.sim.fill_model.FillRule`, ``touch``, ``through`` or
  ``queue``, the default):

  - ``touch``: a bid fills when a trade is published at or below its price, an ask at or
    above it, whole, at its limit, as maker (the rule before issue 28).
  - ``through``: only a trade strictly beyond the price fills it (whole); one at the price
    fills nothing.
  - with ``fill_probability`` below 1 (touch and through), each trade that reaches the order
    fills it with that chance, else it keeps resting: a hash of the rule's seed, the order
    id and its count of reaching trades, so a replay draws the same.
  - ``queue``: a trade beyond the price fills it whole; a trade at its price first takes the
    size estimated ahead of it in the level's queue, and what is left of the trade fills it
    in part (each part a maker match at its limit; the order keeps resting with the rest).
    The queue starts at the displayed size at its price when it starts resting and follows
    trades at the price and cancels (the level shrinking without trades, pro rata by
    default): :mod:`framework.sim.queue` (:func:`follow_book`, at each new book).

  The rest of :func:`framework.sim.fills.fill_crossed`'s rule holds (never flip a position,
  cancel on a positionType mismatch or a balance that no longer covers the fill), for parts
  too (:func:`framework.sim.fills.fill_part`). A mark that moves without a trade fills
  nothing; it still liquidates (at the mark, as before). The side of a trade (``isLong``)
  is not read: a trade at a price is a trade at that level.
* The user's own fills are not published as market trades (the published trades are the
  producer's: the generator's or the recording's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from decimal import ROUND_DOWN, ROUND_UP, Decimal
from typing import Final

import msgspec

from framework.sim.events import Event
from framework.sim.fill_model import FillRule
from framework.sim.fills import FillPlan, FillStep, fill_crossed, fill_part
from framework.sim.queue import follow_book, trade_at_level
from framework.sim.state import Account, Market
from framework.venue.market import Book, Trade
from framework.venue.models import MatchType, OrderInput

__all__ = ["fill_on_trades", "plan_book_fill", "queue_on_book"]

_DRAW_SCALE: Final = Decimal(2**64)


def _draw(seed: int, order_id: int, touch: int) -> Decimal:
    """A uniform draw in [0, 1) from the seed, the order and its touch (no random state)."""
    digest = hashlib.blake2b(f"{seed}:{order_id}:{touch}".encode(), digest_size=8).digest()
    return Decimal(int.from_bytes(digest, "big")) / _DRAW_SCALE


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


def queue_on_book(market: Market, book: Book, rule: FillRule) -> None:
    """A new book of the pair: the resting orders' queues follow it (queue rule)."""
    if rule.rule != "queue" or not len(market.book):
        return
    resting = [o for key in market.book.levels() for o in market.book.at_price(*key)]
    follow_book(resting, book, rule.params.queue_start_share, rule.params.cancels)


def fill_on_trades(
    step: FillStep,
    accounts: Mapping[int, Account],
    market: Market,
    trades: Sequence[Trade],
    rule: FillRule,
    now_ms: int,
) -> list[Event]:
    """Fill the resting orders of market that the published trades reach, by rule, in order."""
    events: list[Event] = []
    book = market.book
    strict = rule.rule != "touch"
    chance = rule.fill_probability
    for trade in trades:
        if not len(book):
            break
        price = trade.price
        if chance < 1:  # touch or through: each reaching trade fills with that chance
            for order in book.crossed(price, strict=strict):
                order.touches += 1
                if _draw(rule.seed, order.order_id, order.touches) < chance:
                    book.cancel(order)  # out of the book, whole: fill_crossed's rule
                    fill_crossed(step, accounts[order.user_id], market, order, now_ms, events)
            continue
        for order in book.pop_crossed(price, strict=strict):
            fill_crossed(step, accounts[order.user_id], market, order, now_ms, events)
        if rule.rule != "queue":
            continue
        for is_long in (True, False):
            level = book.at_price(is_long, price)
            if not level:
                continue
            for order, qty in zip(level, trade_at_level(level, trade.quantity), strict=True):
                if not qty:
                    continue
                account = accounts[order.user_id]
                if qty >= order.remaining:
                    book.cancel(order)  # out of the book, whole: fill_crossed's rule
                    fill_crossed(step, account, market, order, now_ms, events)
                else:
                    fill_part(step, account, market, order, qty, now_ms, events)
    return events
