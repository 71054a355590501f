"""Queue position of a resting order in a published market: the ``queue`` fill rule's arithmetic.

A paper order is not in the real (or generated) market's book: the displayed sizes are the
other traders' orders. The queue rule (issue 28) estimates how much of the displayed size at
the order's price is ahead of it, and how much of a trade printed at that price reaches it:

* Start: when the order starts resting, ``ahead`` is the displayed size at its price on its
  side of the current book, times ``queue_start_share`` (1 by default: the whole level was
  there first). A price better than every displayed level of its side (or inside the
  displayed range with no level there) has nothing ahead (0). A price beyond the displayed
  depth, or no book yet, is not seen: ``ahead`` stays unknown until a book shows the level
  (then it starts there, as at the start), and a trade at the price meanwhile finds nothing
  ahead.
* Trades at the price (:func:`trade_at_level`), whatever the trade's side: the orders at the
  price are served oldest first; for each, the trade's size left (the trade less what our
  earlier orders at the price took from it) first reduces its ``ahead``, and what is left
  beyond ``ahead`` fills it, at most its remaining quantity. The displayed level drops by the
  part of the trade that was not ours.
* Cancels (:func:`follow_book`): a new book whose level at the price is smaller than the last
  seen level (after the trades at it are taken off) lost that difference to cancels. Where
  the cancelled size was in the queue is not published; the documented rule, ``cancels``:
  ``pro_rata`` (the default): the share of the shrink that was ahead of us is ahead / level,
  so ``ahead`` becomes ``ahead x new_level / level``; ``behind_first``: cancels come from
  behind us first, so ``ahead`` becomes ``min(ahead, new_level)``. A level that grows grew
  behind us (``ahead`` unchanged). A level that vanished while the price is within the
  displayed range is empty: ``ahead`` 0. A price beyond the displayed depth keeps its state.
* Trades beyond the price fill the rest whole (:mod:`framework.sim.market_fills`).

Books and trades are applied in the order they come. A book that already shows a trade's
effect (the level shrank by the trade's size) before the trade itself comes counts that
shrink as a cancel too, so ``ahead`` may fall faster than the market really moved: an
optimistic bias of at most the trade's share, documented rather than guessed away.
Quantities are Decimal; nothing here reads a clock or draws a number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Literal

from framework.sim.book import RestingOrder
from framework.venue.market import Book as QuoteBook

__all__ = ["displayed_sizes", "follow_book", "level_size", "start_queue", "trade_at_level"]

_ZERO = Decimal(0)

Cancels = Literal["pro_rata", "behind_first"]


def displayed_sizes(book: QuoteBook, is_long: bool) -> Mapping[Decimal, Decimal]:
    """The displayed size by price of one side of book (bids for long orders)."""
    return dict(book.bids if is_long else book.asks)


def level_size(
    side: Sequence[tuple[Decimal, Decimal]],
    sizes: Mapping[Decimal, Decimal],
    is_long: bool,
    price: Decimal,
) -> Decimal | None:
    """The displayed size at price on one side (best first): 0 when the price is within or
    better than the displayed levels but not shown; None when beyond the displayed depth."""
    found = sizes.get(price)
    if found is not None:
        return found
    if not side:
        return None
    worst = side[-1][0]
    deeper = price < worst if is_long else price > worst
    return None if deeper else _ZERO


def start_queue(order: RestingOrder, book: QuoteBook | None, share: Decimal) -> None:
    """Set the queue of an order that starts resting, from the current book (None: unseen)."""
    if book is None:
        return
    side = book.bids if order.is_long else book.asks
    size = level_size(side, dict(side), order.is_long, order.price)
    order.level = size
    order.ahead = None if size is None else size * share


def follow_book(
    orders: Sequence[RestingOrder], book: QuoteBook, share: Decimal, cancels: Cancels
) -> None:
    """A new book of the pair: each order's queue follows its level's cancels and adds."""
    sides: dict[bool, tuple[Sequence[tuple[Decimal, Decimal]], Mapping[Decimal, Decimal]]] = {}
    for order in orders:
        found = sides.get(order.is_long)
        if found is None:
            side = book.bids if order.is_long else book.asks
            found = sides[order.is_long] = (side, dict(side))
        new = level_size(found[0], found[1], order.is_long, order.price)
        if new is None:
            continue
        old, ahead = order.level, order.ahead
        order.level = new
        if old is None or ahead is None:
            order.ahead = new * share
            continue
        if new < old:
            if cancels == "pro_rata":
                ahead = ahead * new / old if old else _ZERO
            else:
                ahead = min(ahead, new)
        order.ahead = min(ahead, new)


def trade_at_level(orders: Sequence[RestingOrder], quantity: Decimal) -> list[Decimal]:
    """A trade of quantity at the price of orders (oldest first): what fills each of them.

    Each order's ``ahead`` and ``level`` are updated; its ``remaining`` is left to the fill.
    """
    fills: list[Decimal] = []
    ours = _ZERO
    for order in orders:
        left = quantity - ours
        ahead = order.ahead or _ZERO  # unknown: nothing ahead, until a book shows the level
        consumed = min(left, ahead)
        if order.ahead is not None:
            order.ahead = ahead - consumed
        fill = min(left - consumed, order.remaining)
        fills.append(fill)
        ours += fill
    others = quantity - ours
    for order in orders:
        if order.level is not None:
            order.level = max(order.level - others, _ZERO)
            if order.ahead is not None:
                order.ahead = min(order.ahead, order.level)
    return fills
