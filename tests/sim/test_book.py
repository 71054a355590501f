"""The resting-order book: price-time order, lazy cancels, and compaction of cancelled orders."""

from __future__ import annotations

from decimal import Decimal

from framework.sim.book import Book, RestingOrder


def resting(seq: int, price: str, *, long: bool = True) -> RestingOrder:
    """A resting order of 1 at price; seq doubles as its id."""
    return RestingOrder(
        order_id=seq,
        user_id=1,
        pair="ETH-USD",
        client_order_id=f"c{seq}",
        is_long=long,
        price=Decimal(price),
        remaining=Decimal(1),
        lever=10,
        position_type=3,
        reserve=Decimal(0),
        seq=seq,
    )


def heap_entries(book: Book) -> int:
    """How many entries the heaps hold, cancelled ones included (a private detail)."""
    return len(book._bids) + len(book._asks)


def test_cancelled_orders_do_not_pile_up_in_the_heaps() -> None:
    book = Book()
    orders = [resting(i, str(1000 + i % 50), long=i % 2 == 0) for i in range(5000)]
    for item in orders:
        book.add(item)
    kept = orders[::100]
    for item in orders:
        if item not in kept:
            book.cancel(item)
    assert len(book) == len(kept)
    assert heap_entries(book) <= 2 * 1024 + 2 * len(kept)
    crossed = book.pop_crossed(Decimal("1025")) + book.pop_crossed(Decimal("1024"))
    bids = [o for o in kept if o.is_long and o.price >= 1024]
    asks = [o for o in kept if not o.is_long and o.price <= 1025]
    assert sorted(o.order_id for o in crossed) == sorted(o.order_id for o in bids + asks)
    assert len(book) == len(kept) - len(crossed)
    assert book.orders() == sorted(
        (o for o in kept if o not in crossed and o.is_long), key=lambda o: (-o.price, o.seq)
    ) + sorted((o for o in kept if o not in crossed and not o.is_long), key=lambda o: o.price)


def test_a_seq_given_out_again_at_the_same_price_keeps_time_priority() -> None:
    # A refused atomic batch gives its seqs out again while its cancelled orders still sit
    # in the heaps: equal (price, seq) must not make the heap compare two orders.
    book = Book()
    first = resting(7, "1900")
    book.add(first)
    book.cancel(first)
    again, later = resting(7, "1900"), resting(8, "1900")
    book.add(again)
    book.add(later)
    assert book.pop_crossed(Decimal("1900")) == [again, later]
