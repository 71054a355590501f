"""Every order one account placed in this twin run, by entrustId and by clientOrderId.

What the order-management extension (:mod:`framework.twin.order_management`) reads: one
:class:`OrderRecord` per accepted order (market, IOC, FOK, GTC and POST_ONLY alike), kept up
to date by :class:`~framework.twin.exchange.Exchange` as it places, fills and cancels.

Status: ``OPEN`` while the order rests in the book (``quantity - filled`` left); ``FILLED``
once all of ``quantity`` filled; ``CANCELED`` when it ended with less: the unfilled rest of
an IOC or market order (liquidity cap), a FOK or crossing POST_ONLY (``cancel`` mode) that
took nothing, a resting order cancelled by a client or by the twin itself (the excess that
would flip a position, or an opening fill the balance no longer covers). A CANCELED order
may have ``filled > 0``. Orders the twin creates itself (liquidations) are not recorded.

Memory bound: open orders are always kept; of the completed ones (FILLED or CANCELED) only
the newest ``limit`` by completion (``order_history_limit``, default 100000 per account) are
kept, older ones are forgotten (to the extension they no longer exist). Forgetting happens
in :meth:`OrderIndex.trim`, which the exchange calls once an operation can no longer be
rolled back (an atomic batch refused restores the index exactly with :meth:`forget`). The
completed ids are an OrderedDict, so forgetting the oldest is O(1): with a plain dict,
``next(iter(...))`` after many deletions at its front scans their holes (O(limit) per
order at the default limit, about 80 us measured).
"""

from __future__ import annotations

from collections import OrderedDict
from decimal import Decimal
from typing import Final, Literal

import attrs

from framework.twin.book import RestingOrder
from framework.venue.models import OrderInput

__all__ = ["DEFAULT_HISTORY_LIMIT", "OrderIndex", "OrderRecord", "OrderStatus"]

OrderStatus = Literal["OPEN", "FILLED", "CANCELED"]
"""The life of an order record: resting, or completed fully or not."""

DEFAULT_HISTORY_LIMIT: Final = 100_000
"""Completed orders kept per account unless settings say otherwise."""

_ZERO = Decimal(0)


@attrs.define(slots=True, eq=False, kw_only=True)
class OrderRecord:
    """One accepted order as ordered, with what filled so far and its status."""

    order_id: int
    client_order_id: str
    pair: str
    is_long: bool
    is_market: bool
    match_type: int
    position_type: int
    lever: int
    price: Decimal | None
    quantity: Decimal
    filled: Decimal
    status: OrderStatus
    create_ms: int
    update_ms: int
    # The order in the book while OPEN, None once completed.
    resting: RestingOrder | None = None


class OrderIndex:
    """One account's order records: open ones by pair, completed ones up to a limit."""

    def __init__(self, limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        """Start empty; limit is how many completed orders are kept."""
        if limit < 1:
            raise ValueError(f"an order history limit must be positive, got {limit}")
        self.limit = limit
        self._by_id: dict[int, OrderRecord] = {}
        self._by_client: dict[str, int] = {}
        # pair -> orderId -> record; ids are given out in increasing order, so insertion
        # order is ascending entrustId.
        self._open: dict[str, dict[int, OrderRecord]] = {}
        # Completed orderIds, oldest completion first.
        self._completed: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        """How many orders are known (open and remembered completed ones)."""
        return len(self._by_id)

    def get(self, order_id: int) -> OrderRecord | None:
        """The record of an orderId (entrustId), None when unknown or forgotten."""
        return self._by_id.get(order_id)

    def by_client_id(self, client_order_id: str) -> OrderRecord | None:
        """The record of a clientOrderId, None when unknown or forgotten."""
        order_id = self._by_client.get(client_order_id)
        return None if order_id is None else self._by_id.get(order_id)

    def open_orders(self, pair: str | None = None) -> list[OrderRecord]:
        """The OPEN records of a pair (None: every pair), by entrustId ascending."""
        if pair is not None:
            return list(self._open.get(pair, {}).values())
        found = [r for orders in self._open.values() for r in orders.values()]
        found.sort(key=lambda r: r.order_id)
        return found

    def placed(
        self,
        order: OrderInput,
        order_id: int,
        now_ms: int,
        *,
        filled: Decimal,
        resting: RestingOrder | None,
    ) -> OrderRecord:
        """Record an accepted order: OPEN when it rests, else FILLED or CANCELED at once."""
        if resting is not None:
            status: OrderStatus = "OPEN"
        else:
            status = "FILLED" if filled == order.quantity else "CANCELED"
        record = OrderRecord(
            order_id=order_id,
            client_order_id=order.client_order_id,
            pair=order.pair_name,
            is_long=order.is_long,
            is_market=order.is_market,
            match_type=int(order.match_type),
            position_type=int(order.position_type),
            lever=order.lever,
            price=order.price,
            quantity=order.quantity,
            filled=filled,
            status=status,
            create_ms=now_ms,
            update_ms=now_ms,
            resting=resting,
        )
        self._by_id[order_id] = record
        self._by_client[order.client_order_id] = order_id
        if resting is not None:
            self._open.setdefault(record.pair, {})[order_id] = record
        else:
            self._completed[order_id] = None
        return record

    def ended(self, order: RestingOrder, filled: Decimal, now_ms: int) -> OrderRecord | None:
        """A resting order left the book having filled filled more: FILLED or CANCELED."""
        record = self._by_id.get(order.order_id)
        if record is None or record.resting is None:
            return record
        record.filled += filled
        record.status = "FILLED" if record.filled >= record.quantity else "CANCELED"
        record.update_ms = now_ms
        record.resting = None
        orders = self._open[record.pair]
        del orders[record.order_id]
        if not orders:
            del self._open[record.pair]
        self._completed[record.order_id] = None
        self.trim()
        return record

    def forget(self, order_id: int) -> None:
        """Drop a record as if never placed (an atomic batch rolled back)."""
        record = self._by_id.pop(order_id, None)
        if record is None:
            return
        if self._by_client.get(record.client_order_id) == order_id:
            del self._by_client[record.client_order_id]
        self._completed.pop(order_id, None)
        orders = self._open.get(record.pair)
        if orders is not None and orders.pop(order_id, None) is not None and not orders:
            del self._open[record.pair]

    def trim(self) -> None:
        """Forget the oldest completed orders beyond the limit."""
        completed = self._completed
        while len(completed) > self.limit:
            order_id, _ = completed.popitem(last=False)
            self.forget(order_id)
