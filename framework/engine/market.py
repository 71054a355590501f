"""The market as a strategy reads it (``self.market``): the latest record of each kind per pair.

A strategy needs the current price, not the history: the read model keeps one latest trade,
book, mark and index price per pair and one latest bar per pair and period, so its memory is
bounded by the pairs (``max_pairs``) and periods (``max_periods`` per pair) it hears, however
long it runs. Older history is the strategy's own to keep, from its hooks.

Records may arrive out of order (a REST poll of recent trades lists them newest first, a
reconnect may repeat a frame): a record stamped earlier than the one held of its kind does
not replace it, nor does it refresh the pair's age, unless the held one is stamped more
than ``MAX_AHEAD_MS`` ahead of the clock: a bad stamp (a venue time off by a day, seconds and
ms mixed up) is held only until the next record of its kind, never frozen in for as long as
its stamp is ahead. Records without a time are taken as they come. ``age`` is measured on
the clock passed in (the engine never reads the wall clock), from when the latest record of
the pair was applied, so a feed that goes silent ages even if its last frame carried a venue
time in the future.

``reference_price`` is what the risk gate will price a market order at: the mark, else the
last trade, else None (the venue pushes no mark price; it is polled, VENUE-FACTS "Market
data"). Given the pair's ``stale_after_s``, a mark applied longer ago than that gives way to
a trade applied after it: a mark poll that keeps failing does not price orders at a minutes
old mark while the market trades elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

from framework.engine.clock import Clock
from framework.venue.market import Bar, Book, IndexPrice, MarketRecord, MarkPrice, Trade

__all__ = ["MAX_AHEAD_MS", "MAX_PAIRS", "MAX_PERIODS", "MarketView", "market_routes"]

MAX_PAIRS: Final = 1024
"""Pairs the read model keeps by default; records of further pairs are not taken."""
MAX_PERIODS: Final = 32
"""Bar periods kept per pair by default (the venue has 1SECOND to 1YEAR, fewer than 32)."""
MAX_AHEAD_MS: Final = 60_000
"""A held record stamped further ahead of the clock than this is replaced by any later one
(a bad stamp); the venue's clock and ours differ by far less."""


def _newer(held: MarketRecord | None, record: MarketRecord, now_ms: Callable[[], int]) -> bool:
    """True unless held and record are both stamped and record is the earlier (a held record
    stamped more than MAX_AHEAD_MS ahead of now_ms() always gives way)."""
    return (held is None or held.time is None or record.time is None
            or record.time >= held.time or held.time > now_ms() + MAX_AHEAD_MS)  # fmt: skip


class MarketView:
    """The latest market records per pair, read by strategies; pure (time from the clock)."""

    __slots__ = ("_applied", "_bars", "_books", "_clock", "_heard", "_indexes", "_marks", "_tables",
                 "_trades", "max_pairs", "max_periods")  # fmt: skip

    def __init__(
        self, clock: Clock, *, max_pairs: int = MAX_PAIRS, max_periods: int = MAX_PERIODS
    ) -> None:
        self._clock = clock
        self.max_pairs = max_pairs
        self.max_periods = max_periods
        self._heard: dict[str, int] = {}  # pair -> clock ms when its latest record was applied
        self._trades: dict[str, Trade] = {}
        self._books: dict[str, Book] = {}
        self._marks: dict[str, MarkPrice] = {}
        self._indexes: dict[str, IndexPrice] = {}
        self._bars: dict[str, dict[str, Bar]] = {}
        self._tables: dict[type, dict[str, Any]] = {
            Trade: self._trades,
            Book: self._books,
            MarkPrice: self._marks,
            IndexPrice: self._indexes,
        }
        # kind -> pair -> clock ms when its latest record of that kind was applied
        self._applied: dict[type, dict[str, int]] = {kind: {} for kind in self._tables}

    def __repr__(self) -> str:
        return f"MarketView({len(self._heard)} pairs)"

    def apply(self, record: MarketRecord) -> bool:
        """Take one market record; False when it was not taken (older, or a pair too many)."""
        kind = type(record)
        if kind is not Bar and kind not in self._tables:
            raise TypeError(f"MarketView.apply: not a market record: {kind.__name__}")
        pair = record.pair
        if pair not in self._heard and len(self._heard) >= self.max_pairs:
            return False
        if kind is Bar:
            held: dict[str, Any] = self._bars.get(pair) or {}
            key = record.period  # type: ignore[union-attr]
            if key not in held and len(held) >= self.max_periods:
                return False
        else:
            held, key = self._tables[kind], pair
        if not _newer(held.get(key), record, self._clock.now_ms):
            return False
        held[key] = record
        now = self._heard[pair] = self._clock.now_ms()
        if kind is Bar:
            self._bars[pair] = held
        else:
            self._applied[kind][pair] = now
        return True

    def taker(
        self, kind: type[Trade | Book | MarkPrice], then: Callable[[Any], None]
    ) -> Callable[[Any], None]:
        """A route of kind's records: taken as apply() takes them (inlined), then given to then.

        A replay routes a million records a second through it: one call per record, where
        apply() and its helpers cost four.
        """
        table, heard, now_ms = self._tables[kind], self._heard, self._clock.now_ms
        applied = self._applied[kind]

        def take(record: Any) -> None:
            pair = record.pair
            held = table.get(pair)
            if held is None:
                if pair in heard or len(heard) < self.max_pairs:
                    table[pair] = record
                    heard[pair] = applied[pair] = now_ms()
            elif (held.time is None or record.time is None or record.time >= held.time
                  or held.time > now_ms() + MAX_AHEAD_MS):  # fmt: skip
                table[pair] = record
                heard[pair] = applied[pair] = now_ms()
            then(record)

        return take

    def heard_at(self, pair: str, kind: type[Trade | Book | MarkPrice | IndexPrice]) -> int | None:
        """Clock ms when the pair's latest record of kind was applied, None before one."""
        return self._applied[kind].get(pair)

    def last(self, pair: str) -> Decimal | None:
        """The price of the pair's last trade, None before one."""
        trade = self._trades.get(pair)
        return None if trade is None else trade.price

    def trade(self, pair: str) -> Trade | None:
        """The pair's last trade, None before one."""
        return self._trades.get(pair)

    def mark(self, pair: str) -> Decimal | None:
        """The pair's latest mark price, None before one."""
        mark = self._marks.get(pair)
        return None if mark is None else mark.price

    def index(self, pair: str) -> Decimal | None:
        """The pair's latest index price, None before one."""
        index = self._indexes.get(pair)
        return None if index is None else index.price

    def book(self, pair: str) -> Book | None:
        """The pair's latest book (best_bid, best_ask, mid, bids and asks), None before one."""
        return self._books.get(pair)

    def bar(self, pair: str, period: str) -> Bar | None:
        """The pair's latest bar of period (``1MIN`` ...), None before one."""
        bars = self._bars.get(pair)
        return None if bars is None else bars.get(period)

    def reference_price(self, pair: str, stale_after_s: float | None = None) -> Decimal | None:
        """The price to judge a market order by: the mark, else the last trade, else None.

        With stale_after_s: a mark applied longer ago than that gives way to a later trade.
        """
        mark, trade = self._marks.get(pair), self._trades.get(pair)
        if mark is None:
            return None if trade is None else trade.price
        if trade is not None and stale_after_s is not None:
            marked = self._applied[MarkPrice][pair]
            if (self._clock.now_ms() - marked > stale_after_s * 1000
                    and self._applied[Trade][pair] > marked):  # fmt: skip
                return trade.price
        return mark.price

    def age(self, pair: str) -> float | None:
        """Seconds since the pair's latest market record was applied, None before any."""
        heard = self._heard.get(pair)
        return None if heard is None else (self._clock.now_ms() - heard) / 1000

    def stale(self, pair: str, stale_after_s: float) -> bool:
        """True when the pair has no market record, or its latest is older than stale_after_s."""
        age = self.age(pair)
        return age is None or age > stale_after_s

    def pairs(self) -> list[str]:
        """The pairs heard from, in the order first heard."""
        return list(self._heard)


def market_routes(
    view: MarketView, publish: Callable[[Any], None]
) -> dict[type[Any], Callable[[Any], None]]:
    """The kernel's intake routes of the market records: each kept by view, then published.

    Every record reaches the hooks (on_trade, on_book, on_bar, on_mark), also one the view
    keeps no newer record for (a REST page lists trades newest first): the hooks hear what
    the source delivered, in its order; the view answers what is latest. An index price has
    no hook: only the view takes it.
    """
    apply = view.apply

    def take(record: Any) -> None:
        apply(record)
        publish(record)

    def keep(record: Any) -> None:
        apply(record)

    return {
        Trade: view.taker(Trade, publish),
        Book: view.taker(Book, publish),
        Bar: take,
        MarkPrice: view.taker(MarkPrice, publish),
        IndexPrice: keep,
    }
