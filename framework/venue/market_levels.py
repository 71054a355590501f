"""One side of a decoded book, its Decimal levels made on first use (issue 27's replay speed).

A depth frame of 10+10 levels holds 40 Decimals; making them was half the cost of decoding
it, and most books are never walked: a strategy counting them, the read model keeping the
latest, the paper venue reading only the best prices. So the codec checks every level up
front (a number above 0 for a price, not below 0 for a quantity: what it refuses is refused
there, with its located error, never later in a strategy's hook: the levels are read as
floats in the frame's one decode) and keeps the frame's text and the side's floats; the
(price, quantity) Decimal levels are made from the text on first use, by the codec's own
rules (quantity 0 left out, best first, at most ``max_levels``), and kept.

The best price needs no levels made when the floats prove which level is best: the first
level is best when its quantity is above 0 and its price beats every other strictly (a
float strictly above another is of a decimal strictly above it, whatever the rounding), and
its price is read from its text. Anything else (ties, a first level that is not best) makes
the levels.

A :class:`Levels` behaves as the tuple of its levels: indexing, slicing, iterating,
``len``, ``in``, ``+``, equality with a tuple or another Levels, hash, repr, and a pickle or
copy of it is that tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, overload

import msgspec

__all__ = ["FloatLevel", "Levels", "Side"]

Side = tuple[tuple[Decimal, Decimal], ...]
"""A side's levels made: (price, quantity) pairs, best first."""


class FloatLevel(msgspec.Struct, frozen=True, gc=False, order=True):
    """A level as floats, checked by the codec's decoder (orders by price, then quantity)."""

    price: float
    quantity: float


class Levels(msgspec.Struct, gc=False):
    """One side of a book (bids or asks): (price, quantity) Decimal levels, best first.

    Made by the codec from a frame it checked: raw is the frame's JSON text, floats the
    side's levels as floats in wire order, prefix what precedes the side's first price in
    the text when it is a string (once in the text: then the price follows it), and
    make(raw, best_high) the levels.
    """

    raw: bytes | str
    floats: list[FloatLevel]
    best_high: bool
    prefix: bytes | str
    make: Callable[[Any, bool], Side]
    made: Side | None = None

    def levels(self) -> Side:
        """The levels as a tuple (made on the first call, then kept)."""
        made = self.made
        if made is None:
            made = self.made = self.make(self.raw, self.best_high)
            self.raw, self.floats, self.prefix = b"", [], b""  # made: what it was made of goes
        return made

    def best(self) -> Decimal | None:
        """The best level's price (None when the side has none), made alone when it can be."""
        made = self.made
        if made is None:
            floats = self.floats
            if not floats:
                return None
            first = floats[0]
            if first.quantity > 0 and (
                len(floats) == 1
                or (
                    max(floats[1:]).price < first.price
                    if self.best_high
                    else min(floats[1:]).price > first.price
                )
            ):
                raw, prefix = self.raw, self.prefix
                start = raw.find(prefix)  # type: ignore[arg-type]
                if start >= 0 and raw.find(prefix, start + 1) < 0:  # type: ignore[arg-type]
                    start += len(prefix)
                    text = raw[start : raw.index(prefix[-1:], start)]  # type: ignore[arg-type]
                    if type(text) is not str:
                        text = text.decode()  # type: ignore[union-attr]
                    if "\\" not in text:  # an escape is read by the decoder: made
                        return Decimal(text)
            made = self.levels()
        return made[0][0] if made else None

    def __len__(self) -> int:
        return len(self.levels())

    def __bool__(self) -> bool:
        # Unmade, a level of the floats is a level made: the float check takes only
        # quantities above 0, of decimals above 0 (a float of a decimal 0 is 0).
        return bool(self.floats) if self.made is None else bool(self.made)

    @overload
    def __getitem__(self, index: int) -> tuple[Decimal, Decimal]: ...

    @overload
    def __getitem__(self, index: slice) -> Side: ...

    def __getitem__(self, index: int | slice) -> tuple[Decimal, Decimal] | Side:
        return self.levels()[index]

    def __iter__(self) -> Iterator[tuple[Decimal, Decimal]]:
        return iter(self.levels())

    def __reversed__(self) -> Iterator[tuple[Decimal, Decimal]]:
        return reversed(self.levels())

    def __contains__(self, level: object) -> bool:
        return level in self.levels()

    def index(self, level: Any, start: int = 0, stop: int = 2**62) -> int:
        """The index of the first level equal to level (ValueError when none is)."""
        return self.levels().index(level, start, stop)

    def count(self, level: Any) -> int:
        """How many levels equal level."""
        return self.levels().count(level)

    def __add__(self, other: Sequence[tuple[Decimal, Decimal]]) -> Side:
        return self.levels() + (other.levels() if isinstance(other, Levels) else tuple(other))

    def __radd__(self, other: Sequence[tuple[Decimal, Decimal]]) -> Side:
        return tuple(other) + self.levels()

    def __eq__(self, other: object) -> bool:
        if type(other) is Levels:
            other = other.levels()
        if type(other) is not tuple:
            return NotImplemented
        return self.levels() == other

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self.levels())

    def __repr__(self) -> str:
        return repr(self.levels())

    def __reduce__(self) -> tuple[type[tuple[Any, ...]], tuple[Side]]:
        return (tuple, (self.levels(),))


Sequence.register(Levels)
