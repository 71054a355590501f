"""Resting GTC orders of one pair, ordered by price then time, popped when the mark crosses.

Bids (long orders) fill when the mark falls to or below their price, asks (short orders) when
it rises to or above it (strictly, for the ``through`` and ``queue`` rules of
:mod:`framework.sim.market_fills`); within a side the best price goes first, then the oldest
order. The orders at one price are also kept by level, oldest first (:meth:`Book.at_price`,
:meth:`Book.levels`), for the queue rule, which fills them in part.
Removal is lazy: a cancelled order is flagged inactive and skipped when it reaches the top.
So that cancelled orders deep in the book do not pile up over a long run, the heaps are
rebuilt without them once they outnumber the active orders (and number more than
``_COMPACT_MIN``).
"""

from __future__ import annotations

import heapq
from decimal import Decimal

import attrs

__all__ = ["Book", "RestingOrder"]

_COMPACT_MIN = 1024


@attrs.define(slots=True, eq=False, kw_only=True)
class RestingOrder:
    """A GTC limit order waiting in the book; reserve is the margin and fee frozen for it."""

    order_id: int
    user_id: int
    pair: str
    client_order_id: str
    is_long: bool
    price: Decimal
    remaining: Decimal
    lever: int
    position_type: int
    reserve: Decimal
    seq: int
    active: bool = True
    # The queue rule's view (framework.sim.queue): the market's displayed size ahead of the
    # order at its price, and the level's displayed size last seen; None: not seen yet.
    ahead: Decimal | None = None
    level: Decimal | None = None
    touches: int = 0
    """Trades that reached it without filling it (the fill probability's draws)."""


class Book:
    """The resting orders of one pair (two heaps with lazy deletion)."""

    def __init__(self) -> None:
        """Start empty."""
        self._bids: list[tuple[Decimal, int, RestingOrder]] = []
        self._asks: list[tuple[Decimal, int, RestingOrder]] = []
        self._active = 0
        self._dead = 0  # inactive orders still in the heaps
        # Time priority within the book. Not the order's seq: a refused atomic batch gives
        # its seqs out again while its cancelled orders still sit in the heaps, and equal
        # (price, seq) keys would make the heap compare the orders themselves.
        self._arrivals = 0
        # (is_long, price) -> the active orders at that price, oldest first.
        self._levels: dict[tuple[bool, Decimal], list[RestingOrder]] = {}

    def __len__(self) -> int:
        """How many active orders rest in the book."""
        return self._active

    def add(self, order: RestingOrder) -> None:
        """Put an order in the book."""
        self._arrivals += 1
        if order.is_long:
            heapq.heappush(self._bids, (-order.price, self._arrivals, order))
        else:
            heapq.heappush(self._asks, (order.price, self._arrivals, order))
        self._levels.setdefault((order.is_long, order.price), []).append(order)
        self._active += 1

    def _unlevel(self, order: RestingOrder) -> None:
        key = (order.is_long, order.price)
        level = self._levels.get(key)
        if level is not None:
            level.remove(order)
            if not level:
                del self._levels[key]

    def cancel(self, order: RestingOrder) -> None:
        """Take an order out of the book (it is skipped when it reaches the top)."""
        if order.active:
            order.active = False
            self._unlevel(order)
            self._active -= 1
            self._dead += 1
            if self._dead > _COMPACT_MIN and self._dead > self._active:
                self._compact()

    def _compact(self) -> None:
        """Rebuild both heaps from their active orders."""
        self._bids = [e for e in self._bids if e[2].active]
        self._asks = [e for e in self._asks if e[2].active]
        heapq.heapify(self._bids)
        heapq.heapify(self._asks)
        self._dead = 0

    def pop_crossed(self, mark: Decimal, *, strict: bool = False) -> list[RestingOrder]:
        """Remove and return the orders the mark crosses: bids first, each side best first
        (strict: only those it passes, not those at its price)."""
        out: list[RestingOrder] = []
        bids = self._bids
        while bids and (
            not bids[0][2].active or (-bids[0][0] > mark if strict else -bids[0][0] >= mark)
        ):
            order = heapq.heappop(bids)[2]
            if order.active:
                out.append(order)
            else:
                self._dead -= 1
        asks = self._asks
        while asks and (
            not asks[0][2].active or (asks[0][0] < mark if strict else asks[0][0] <= mark)
        ):
            order = heapq.heappop(asks)[2]
            if order.active:
                out.append(order)
            else:
                self._dead -= 1
        for order in out:
            order.active = False
            self._unlevel(order)
        self._active -= len(out)
        return out

    def crossed(self, mark: Decimal, *, strict: bool = False) -> list[RestingOrder]:
        """The orders the mark crosses, left in the book: bids first, each side best first,
        oldest first at a price (strict: only those it passes)."""
        out: list[RestingOrder] = []
        levels = self._levels
        for is_long in (True, False):
            keys = sorted((price for side, price in levels if side is is_long), reverse=is_long)
            for price in keys:
                reached = price > mark if is_long else price < mark
                if not (reached or (not strict and price == mark)):
                    break
                out.extend(levels[(is_long, price)])
        return out

    def at_price(self, is_long: bool, price: Decimal) -> list[RestingOrder]:
        """The active orders of one side at exactly price, oldest first (a copy)."""
        return list(self._levels.get((is_long, price), ()))

    def levels(self) -> list[tuple[bool, Decimal]]:
        """The (is_long, price) of every level holding an active order."""
        return list(self._levels)

    def orders(self) -> list[RestingOrder]:
        """The active orders, bids then asks, each side best first."""
        bids = sorted((e for e in self._bids if e[2].active), key=lambda e: (e[0], e[1]))
        asks = sorted((e for e in self._asks if e[2].active), key=lambda e: (e[0], e[1]))
        return [e[2] for e in bids] + [e[2] for e in asks]
