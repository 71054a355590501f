"""What an account remembers: its matches on each pair and its order records, each bounded.

How far back the match list reaches is not in the venue's documentation; the exchange keeps
the newest ``match_history_limit`` matches per account and pair (default 100000). Older ones
are forgotten: no longer listed, they drop off the bottom of the list. Ids of the kept
matches do not change, so paging by a ``matchId`` bound stays right; a page that reaches
below the oldest kept match is short or empty. :class:`MatchHistory` is what
selectContractMatchPairList pages through (:meth:`framework.sim.exchange.Exchange.matches`)
and what tests read as ground truth (``Account.matches[pair]``, a read-only sequence of
:class:`~framework.sim.events.Match` in id order). Its append and trim are amortized O(1)
per match: trimming moves an offset; the forgotten matches are deleted in one slice once
they number a quarter of the limit, so at most ``limit + limit // 4`` are held.

:class:`OrderIndex` holds one :class:`OrderRecord` per accepted order (market, IOC, FOK, GTC
and POST_ONLY alike), by entrustId and by clientOrderId, kept up to date by
:class:`~framework.sim.exchange.Exchange` as it places, fills and cancels; the
order-management extension reads it. Status: ``OPEN`` while the order rests in the book
(``quantity - filled`` left); ``FILLED`` once all of ``quantity`` filled; ``CANCELED`` when
it ended with less: the unfilled rest of an IOC or market order (liquidity cap), a FOK or
crossing POST_ONLY (``cancel`` mode) that took nothing, a resting order cancelled by a
client or by the exchange itself (the excess that would flip a position, or an opening fill
the balance no longer covers). A CANCELED order may have ``filled > 0``. Orders the exchange
creates itself (liquidations) are not recorded. Open orders are always kept; of the
completed ones only the newest ``limit`` by completion (``order_history_limit``, default
100000 per account), older ones are forgotten. The completed ones are a :class:`Recent`
map, so forgetting the oldest is O(1): with a plain dict, ``next(iter(...))`` after many
deletions at its front scans their holes (O(limit) per order at the default limit, about
80 us measured), and an OrderedDict takes about 100 bytes an entry, twice a dict's.

What is kept per order is small (a daemon embeds the twin): each match as one line of text
(its ids, time, lever, flags and amounts; what every match of the account and pair shares is
kept once), each completed order as its clientOrderId, its pair and one such line: with the
account's client id map, about 500 bytes for a market order and its match instead of 1300
(``tests/benchmarks/bench_twin_memory.py``). Reads make equal :class:`Match` and
:class:`OrderRecord` objects anew (a completed order's record is no longer changed). A match
or record whose fields are not of their plain types is kept as it is.

Trimming is explicit: the exchange trims once an operation can no longer be rolled back,
never while an atomic batch is open, so that a savepoint (:attr:`MatchHistory.end`) with
:meth:`MatchHistory.truncate` and :meth:`OrderIndex.forget` restore both exactly.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Iterator, MutableMapping, Sequence
from datetime import datetime
from decimal import Decimal
from itertools import islice
from typing import Final, Literal, TypeVar, overload

import attrs

from framework.sim.book import RestingOrder
from framework.sim.events import Match
from framework.venue.models import OrderInput

__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "MatchHistory",
    "OrderIndex",
    "OrderRecord",
    "OrderStatus",
    "Recent",
]

DEFAULT_HISTORY_LIMIT: Final = 100_000
"""Matches kept per account and pair, and completed orders per account, unless settings say
otherwise."""

_NONE: Final[tuple[Match, ...]] = ()


_Shared = tuple[int, str, str, int, "str | None", "datetime | None"]
"""What every match of one account and pair has in common: contract pair id, pair, coin,
settle decimals, address, delivery time."""


def _shared(match: Match) -> _Shared:
    return (
        match.contract_pair_id,
        match.pair,
        match.coin,
        match.settle_decimals,
        match.address,
        match.delivery_time,
    )


def _pack(match: Match, shared: _Shared) -> Match | str:
    """A kept match as one line of text, or the match itself when that would not be exact."""
    m = match
    if (
        m.contract_pair_id is not shared[0]
        or m.pair is not shared[1]
        or m.coin is not shared[2]
        or m.settle_decimals is not shared[3]
        or m.address is not shared[4]
        or m.delivery_time is not shared[5]
        or not type(m.id) is type(m.order_id) is type(m.position_id) is int
        or not type(m.time_ms) is type(m.lever) is int
        or not type(m.is_market) is type(m.is_close) is type(m.is_long) is type(m.is_taker) is bool
        or not type(m.price) is type(m.quantity) is type(m.amount) is Decimal
        or not type(m.fee) is type(m.profit_loss) is type(m.opening_price) is Decimal
    ):
        return match
    bits = m.is_market | m.is_close << 1 | m.is_long << 2 | m.is_taker << 3
    return (
        f"{m.id} {m.order_id} {m.position_id} {m.time_ms} {m.lever} {bits} {m.price!s}"
        f" {m.quantity!s} {m.amount!s} {m.fee!s} {m.profit_loss!s} {m.opening_price!s}"
    )


def _unpack(entry: Match | str, shared: _Shared | None) -> Match:
    """The match a kept entry stands for (equal to the one appended, field by field)."""
    if type(entry) is not str:
        assert isinstance(entry, Match)
        return entry
    assert shared is not None
    i, order, position, time_ms, lever, bits, *amounts = entry.split(" ")
    flags = int(bits)
    price, quantity, amount, fee, pnl, opening = map(Decimal, amounts)
    return Match(
        id=int(i),
        order_id=int(order),
        position_id=int(position),
        contract_pair_id=shared[0],
        time_ms=int(time_ms),
        pair=shared[1],
        coin=shared[2],
        settle_decimals=shared[3],
        lever=int(lever),
        is_market=bool(flags & 1),
        is_close=bool(flags & 2),
        is_long=bool(flags & 4),
        is_taker=bool(flags & 8),
        price=price,
        quantity=quantity,
        amount=amount,
        fee=fee,
        profit_loss=pnl,
        opening_price=opening,
        address=shared[4],
        delivery_time=shared[5],
    )


def _entry_id(entry: Match | str) -> int:
    if type(entry) is str:
        return int(entry[: entry.index(" ")])
    assert isinstance(entry, Match)
    return entry.id


class _Unpacked(Sequence[Match]):
    """Kept entries read as matches, each unpacked when read."""

    __slots__ = ("_items", "_shared")

    def __init__(self, items: list[Match | str], shared: _Shared | None) -> None:
        self._items = items
        self._shared = shared

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Match: ...

    @overload
    def __getitem__(self, index: slice) -> list[Match]: ...

    def __getitem__(self, index: int | slice) -> Match | list[Match]:
        if isinstance(index, slice):
            return [_unpack(e, self._shared) for e in self._items[index]]
        return _unpack(self._items[index], self._shared)


class MatchHistory(Sequence[Match]):
    """The kept matches of one account and pair, in id order (oldest first)."""

    __slots__ = ("_compact_at", "_dropped", "_items", "_shared", "_start", "limit")

    def __init__(self, limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        """Start empty; limit is how many matches trim() keeps."""
        if limit < 1:
            raise ValueError(f"a match history limit must be positive, got {limit}")
        self.limit = limit
        # Packed matches (_pack), oldest first: a Match object with its Decimals takes some
        # 500 bytes, its line of text about 150.
        self._items: list[Match | str] = []
        self._shared: _Shared | None = None  # taken from the first match appended
        self._start = 0  # index in _items of the oldest kept match
        self._dropped = 0  # matches forgotten since the start
        self._compact_at = max(1, limit // 4)

    def __len__(self) -> int:
        """How many matches are kept."""
        return len(self._items) - self._start

    def __iter__(self) -> Iterator[Match]:
        """The kept matches, oldest first."""
        shared = self._shared
        return (_unpack(e, shared) for e in islice(self._items, self._start, None))

    @overload
    def __getitem__(self, index: int) -> Match: ...

    @overload
    def __getitem__(self, index: slice) -> list[Match]: ...

    def __getitem__(self, index: int | slice) -> Match | list[Match]:
        """A kept match by position (0: the oldest kept), or a list of them."""
        size = len(self)
        items, start, shared = self._items, self._start, self._shared
        if isinstance(index, slice):
            low, high, step = index.indices(size)
            if step == 1:
                return [_unpack(e, shared) for e in items[start + low : start + max(low, high)]]
            return [_unpack(items[start + i], shared) for i in range(low, high, step)]
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("match history index out of range")
        return _unpack(items[start + index], shared)

    def __repr__(self) -> str:
        """Size, limit and id range, not every match."""
        if not len(self):
            return f"MatchHistory(0 of limit {self.limit})"
        return f"MatchHistory({len(self)} of limit {self.limit}, ids {self[0].id}..{self[-1].id})"

    @property
    def end(self) -> int:
        """How many matches were ever appended and not truncated: a savepoint of the list."""
        return self._dropped + len(self)

    def count_below(self, match_id: int) -> int:
        """How many kept matches have an id below match_id (ids increase with position)."""
        return bisect_left(self._items, match_id, lo=self._start, key=_entry_id) - self._start

    def append(self, match: Match) -> None:
        """Add the newest match (its id above every kept one); trim() bounds the list."""
        if self._shared is None:
            self._shared = _shared(match)
        self._items.append(_pack(match, self._shared))

    def trim(self) -> Sequence[Match]:
        """Forget the oldest matches beyond the limit; returns those forgotten, oldest first."""
        excess = len(self) - self.limit
        if excess <= 0:
            return _NONE
        start = self._start
        forgotten = _Unpacked(self._items[start : start + excess], self._shared)
        self._start = start + excess
        self._dropped += excess
        if self._start >= self._compact_at:
            del self._items[: self._start]
            self._start = 0
        return forgotten

    def truncate(self, end: int) -> None:
        """Undo the appends since the savepoint end (see :attr:`end`)."""
        keep = max(end - self._dropped, 0)
        del self._items[self._start + keep :]


OrderStatus = Literal["OPEN", "FILLED", "CANCELED"]
"""The life of an order record: resting, or completed fully or not."""


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


_K = TypeVar("_K")
_V = TypeVar("_V")


class Recent(MutableMapping[_K, _V]):
    """A map in insertion order that forgets its oldest entry in O(1): a dict and a list of
    its keys, oldest first. Deleting is quick for the newest keys only (a rollback's)."""

    __slots__ = ("_data", "_keys", "_start")

    def __init__(self) -> None:
        """Start empty."""
        self._data: dict[_K, _V] = {}
        self._keys: list[_K] = []
        self._start = 0  # index in _keys of the oldest key

    def __getitem__(self, key: _K) -> _V:
        """The value of a key."""
        return self._data[key]

    def __setitem__(self, key: _K, value: _V) -> None:
        """Set a key's value; a new key is the newest."""
        if key not in self._data:
            self._keys.append(key)
        self._data[key] = value

    def __delitem__(self, key: _K) -> None:
        """Forget a key (its place is searched for from the newest)."""
        del self._data[key]
        keys = self._keys
        for index in range(len(keys) - 1, self._start - 1, -1):
            if keys[index] == key:
                del keys[index]
                return

    def __contains__(self, key: object) -> bool:
        """Whether the key is kept."""
        return key in self._data

    def __iter__(self) -> Iterator[_K]:
        """The keys, oldest first."""
        return islice(self._keys, self._start, None)

    def __len__(self) -> int:
        """How many keys are kept."""
        return len(self._data)

    def __repr__(self) -> str:
        """The entries, oldest first."""
        return f"Recent({dict(self.items())!r})"

    def pop_oldest(self) -> tuple[_K, _V]:
        """Forget the oldest key; returns it with its value (KeyError when empty)."""
        if self._start >= len(self._keys):
            raise KeyError("pop_oldest(): the map is empty")
        key = self._keys[self._start]
        self._start += 1
        if self._start >= 64 and self._start * 2 >= len(self._keys):
            del self._keys[: self._start]
            self._start = 0
        return key, self._data.pop(key)


Completed = tuple[str, str, str]
"""A completed order as kept: its clientOrderId, its pair and the rest in one line of text."""


def _pack_record(record: OrderRecord) -> Completed | OrderRecord:
    """A completed record in some 150 bytes instead of 400, or itself when not exact."""
    r = record
    price = r.price
    if (
        not type(r.match_type) is type(r.position_type) is type(r.lever) is int
        or not type(r.create_ms) is type(r.update_ms) is int
        or not type(r.is_long) is type(r.is_market) is bool
        or not type(r.quantity) is type(r.filled) is Decimal
        or not (price is None or type(price) is Decimal)
        or type(r.pair) is not str
    ):
        return record
    bits = r.is_long | r.is_market << 1 | (r.status == "FILLED") << 2
    text = (
        f"{bits} {r.match_type} {r.position_type} {r.lever} {r.create_ms} {r.update_ms}"
        f" {r.quantity!s} {r.filled!s}"
    )
    if price is not None:
        text = f"{text} {price!s}"
    return r.client_order_id, sys.intern(r.pair), text


def _unpack_record(order_id: int, entry: Completed | OrderRecord) -> OrderRecord:
    """The record a kept completed order stands for (equal field by field, never resting)."""
    if isinstance(entry, OrderRecord):
        return entry
    client_order_id, pair, text = entry
    bits, match_type, position_type, lever, create_ms, update_ms, qty, filled, *price = text.split(
        " "
    )
    flags = int(bits)
    return OrderRecord(
        order_id=order_id,
        client_order_id=client_order_id,
        pair=pair,
        is_long=bool(flags & 1),
        is_market=bool(flags & 2),
        match_type=int(match_type),
        position_type=int(position_type),
        lever=int(lever),
        price=Decimal(price[0]) if price else None,
        quantity=Decimal(qty),
        filled=Decimal(filled),
        status="FILLED" if flags & 4 else "CANCELED",
        create_ms=int(create_ms),
        update_ms=int(update_ms),
    )


class OrderIndex:
    """One account's order records: open ones by pair, completed ones up to a limit."""

    def __init__(self, limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        """Start empty; limit is how many completed orders are kept."""
        if limit < 1:
            raise ValueError(f"an order history limit must be positive, got {limit}")
        self.limit = limit
        # The OPEN records by orderId; completed ones are only in _completed.
        self._by_id: dict[int, OrderRecord] = {}
        self._by_client: dict[str, int] = {}
        # pair -> orderId -> record; ids are given out in increasing order, so insertion
        # order is ascending entrustId.
        self._open: dict[str, dict[int, OrderRecord]] = {}
        # Completed orders by orderId, packed (_pack_record), oldest completion first.
        self._completed: Recent[int, Completed | OrderRecord] = Recent()

    def __len__(self) -> int:
        """How many orders are known (open and remembered completed ones)."""
        return len(self._by_id) + len(self._completed)

    def get(self, order_id: int) -> OrderRecord | None:
        """The record of an orderId (entrustId), None when unknown or forgotten.

        A completed order's record is made anew from what is kept at each call."""
        record = self._by_id.get(order_id)
        if record is not None:
            return record
        entry = self._completed.get(order_id)
        return None if entry is None else _unpack_record(order_id, entry)

    def by_client_id(self, client_order_id: str) -> OrderRecord | None:
        """The record of a clientOrderId, None when unknown or forgotten."""
        order_id = self._by_client.get(client_order_id)
        return None if order_id is None else self.get(order_id)

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
        pair = order.pair_name
        record = OrderRecord(
            order_id=order_id,
            client_order_id=order.client_order_id,
            pair=sys.intern(pair) if type(pair) is str else pair,
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
        self._by_client[order.client_order_id] = order_id
        if resting is not None:
            self._by_id[order_id] = record
            self._open.setdefault(record.pair, {})[order_id] = record
        else:
            self._completed[order_id] = _pack_record(record)
        return record

    def ended(self, order: RestingOrder, filled: Decimal, now_ms: int) -> OrderRecord | None:
        """A resting order left the book having filled filled more: FILLED or CANCELED."""
        record = self._by_id.get(order.order_id)
        if record is None or record.resting is None:
            return self.get(order.order_id)
        record.filled += filled
        record.status = "FILLED" if record.filled >= record.quantity else "CANCELED"
        record.update_ms = now_ms
        record.resting = None
        del self._by_id[record.order_id]
        orders = self._open[record.pair]
        del orders[record.order_id]
        if not orders:
            del self._open[record.pair]
        self._completed[record.order_id] = _pack_record(record)
        self.trim()
        return record

    def part_filled(self, order: RestingOrder, filled: Decimal, now_ms: int) -> None:
        """A resting order filled filled more and keeps resting (still OPEN)."""
        record = self._by_id.get(order.order_id)
        if record is not None:
            record.filled += filled
            record.update_ms = now_ms

    def forget(self, order_id: int) -> None:
        """Drop a record as if never placed (an atomic batch rolled back)."""
        record = self._by_id.pop(order_id, None)
        if record is not None:
            orders = self._open.get(record.pair)
            if orders is not None and orders.pop(order_id, None) is not None and not orders:
                del self._open[record.pair]
            client_order_id = record.client_order_id
        else:
            entry = self._completed.pop(order_id, None)
            if entry is None:
                return
            client_order_id = _client_id(entry)
        if self._by_client.get(client_order_id) == order_id:
            del self._by_client[client_order_id]

    def trim(self) -> None:
        """Forget the oldest completed orders beyond the limit."""
        completed = self._completed
        by_client = self._by_client
        while len(completed) > self.limit:
            order_id, entry = completed.pop_oldest()
            client_order_id = _client_id(entry)
            if by_client.get(client_order_id) == order_id:
                del by_client[client_order_id]


def _client_id(entry: Completed | OrderRecord) -> str:
    return entry.client_order_id if isinstance(entry, OrderRecord) else entry[0]
