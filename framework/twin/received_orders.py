"""What the twin read: each order of each authenticated batchCreate body, bounded for tests.

:attr:`VenueTwin.received_orders` is the tests' ground truth of what reached the venue
(``tests/faults``: nothing resent, nothing lost). It keeps ``(clientOrderId, the order
re-serialized with sorted keys)`` of every order object with a string clientOrderId, oldest
first, and forgets the oldest beyond either bound of the settings: ``received_orders_limit``
orders or ``received_orders_max_bytes`` bytes (the canonical order plus its clientOrderId, in
UTF-8). An order larger than the byte bound on its own is not kept. Only bodies that passed
authentication are recorded (:mod:`framework.twin.app`), so an unsigned caller can make the
twin keep nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, overload

import orjson

__all__ = ["ReceivedOrders"]


class ReceivedOrders:
    """(clientOrderId, canonical order bytes), oldest first, bounded in count and bytes."""

    def __init__(self, *, limit: int, max_bytes: int) -> None:
        """Keep at most limit orders and max_bytes bytes of them."""
        self._items: deque[tuple[str, bytes]] = deque()
        self._sizes: deque[int] = deque()
        self.limit = limit
        self.max_bytes = max_bytes
        self.nbytes = 0
        """Bytes kept now (canonical orders plus clientOrderIds)."""

    def record(self, payload: Any) -> None:
        """Keep every order of a parsed batchCreate body that has a string clientOrderId."""
        orders = payload.get("orders") if type(payload) is dict else None
        if type(orders) is not list:
            return
        for item in orders:
            if type(item) is dict:
                client_id = item.get("clientOrderId")
                if type(client_id) is str:
                    # A copy: orjson's bytes keep the whole buffer it wrote them in (about
                    # 4 KB whatever their length), and these are kept for a long time.
                    canonical = bytes(memoryview(orjson.dumps(item, option=orjson.OPT_SORT_KEYS)))
                    self.append(client_id, canonical)

    def append(self, client_id: str, canonical: bytes) -> None:
        """Keep one order, then forget the oldest beyond the bounds."""
        size = len(canonical) + len(client_id.encode("utf-8", "surrogatepass"))
        self._items.append((client_id, canonical))
        self._sizes.append(size)
        self.nbytes += size
        while self._items and (len(self._items) > self.limit or self.nbytes > self.max_bytes):
            self._items.popleft()
            self.nbytes -= self._sizes.popleft()

    def clear(self) -> None:
        """Forget everything."""
        self._items.clear()
        self._sizes.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        """How many orders are kept."""
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        """The kept orders, oldest first."""
        return iter(self._items)

    @overload
    def __getitem__(self, index: int) -> tuple[str, bytes]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, bytes]]: ...
    def __getitem__(self, index: int | slice) -> tuple[str, bytes] | list[tuple[str, bytes]]:
        """One kept order by position (0: the oldest), or a list of a slice of them."""
        if isinstance(index, slice):
            return list(self._items)[index]
        return self._items[index]

    def __repr__(self) -> str:
        """Counts only: the orders may be large."""
        return f"ReceivedOrders({len(self)} orders, {self.nbytes} bytes)"
