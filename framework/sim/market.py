"""A pair's public market, pure and seeded: books and trades from the mark, bars from trades.

Strategies must hear a market (issue 27), and the fills the exchange makes must agree with
what that market published. This module produces and remembers the market; the fill rule
that reads it is :mod:`framework.sim.market_fills`. Nothing here reads a clock or draws an
unseeded number: time is passed in, randomness comes from one ``random.Random`` per pair
seeded from the caller's seed, and prices never go through a float, so the same seed and the
same marks give the same books and trades (the twin's replays and tests are exact).

The API, in three parts, so that a producer other than :class:`MarketGenerator` (the paper
venue replaying RECORDED books and trades) feeds the same consumers:

* Producers: :meth:`MarketGenerator.tick` makes, from a pair's mark, a :class:`MarketTick`:
  the book (``levels`` price levels per side around the mark, best bid ``spread_ticks // 2``
  ticks below it on the pair's price grid, best ask ``spread_ticks`` ticks above the best
  bid, levels ``level_step_ticks`` apart, quantities drawn in ``[level_quantity_min,
  level_quantity_max]``) and the trades that happened at it (0 to ``trades_per_tick``, each
  side drawn, a buy taking the best ask's price, a sell the best bid's, quantities drawn in
  ``[trade_quantity_min, trade_quantity_max]``, ids increasing by pair from 1, stamped with
  the time given). A recording is another producer: its decoded
  :class:`~framework.venue.market.Book` and :class:`~framework.venue.market.Trade` records
  are the same types.
* Memory: :class:`MarketTape` keeps a pair's last ``keep_trades`` trades and, per period of
  ``periods``, its last ``keep_bars`` bars aggregated from the trades it is given
  (:meth:`MarketTape.record`), plus the index price: the mark smoothed exponentially
  (``index = index + index_smoothing x (mark - index)``, on the price grid).
* Fills: the exchange is told the current book (``Exchange.set_book(pair, book)``) and the
  trades that happened (``Exchange.market_trades(pair, trades, now_ms)``); see
  :mod:`framework.sim.market_fills` for what fills then.

Bars: a period is ``N`` and a unit of ``SECOND``, ``MIN``, ``HOUR``, ``DAY`` or ``WEEK``; a
bar covers ``[start, start + length)`` with start a multiple of its length since the epoch
(its ``time``); a bar exists only for a span that had trades.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, Final, Literal

import attrs

from framework.sim.state import Market
from framework.venue.market import Bar, Book, Trade

__all__ = [
    "MarketGenerator",
    "MarketSettings",
    "MarketTape",
    "MarketTick",
    "period_ms",
    "tapes",
]

_PERIOD: Final = re.compile(r"([1-9][0-9]{0,2})(SECOND|MIN|HOUR|DAY|WEEK)")
_UNIT_MS: Final = {
    "SECOND": 1000,
    "MIN": 60_000,
    "HOUR": 3_600_000,
    "DAY": 86_400_000,
    "WEEK": 604_800_000,
}


def period_ms(period: str) -> int | None:
    """The length in ms of a bar period such as ``1MIN`` (None: not a fixed-length period)."""
    found = _PERIOD.fullmatch(period)
    return None if found is None else int(found.group(1)) * _UNIT_MS[found.group(2)]


def _between(low: int, high: int) -> Any:
    def check(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
        if not low <= value <= high:
            raise ValueError(f"{attribute.name} must be between {low} and {high}, got {value}")

    return check


def _positive(_inst: object, attribute: attrs.Attribute[Decimal], value: Decimal) -> None:
    if not value.is_finite() or value <= 0:
        raise ValueError(f"{attribute.name} must be above 0, got {value}")


def _share(_inst: object, attribute: attrs.Attribute[Decimal], value: Decimal) -> None:
    if not value.is_finite() or not 0 < value <= 1:
        raise ValueError(f"{attribute.name} must be above 0 and at most 1, got {value}")


@attrs.frozen(kw_only=True)
class MarketSettings:
    """The generated market (off by default: fills at the mark, nothing published)."""

    enabled: bool = False
    levels: int = attrs.field(default=10, validator=_between(1, 1000))
    spread_ticks: int = attrs.field(default=2, validator=_between(1, 1_000_000))
    level_step_ticks: int = attrs.field(default=1, validator=_between(1, 1_000_000))
    level_quantity_min: Decimal = attrs.field(default=Decimal("0.1"), validator=_positive)
    level_quantity_max: Decimal = attrs.field(default=Decimal("2"), validator=_positive)
    trades_per_tick: int = attrs.field(default=4, validator=_between(0, 1000))
    trade_quantity_min: Decimal = attrs.field(default=Decimal("0.01"), validator=_positive)
    trade_quantity_max: Decimal = attrs.field(default=Decimal("0.5"), validator=_positive)
    periods: list[str] = attrs.Factory(lambda: ["1MIN", "5MIN", "15MIN", "1HOUR", "1DAY"])
    keep_trades: int = attrs.field(default=1000, validator=_between(1, 1_000_000))
    keep_bars: int = attrs.field(default=1000, validator=_between(1, 1_000_000))
    index_smoothing: Decimal = attrs.field(default=Decimal("0.2"), validator=_share)
    # Market subscriptions (api_depth, api_trade, api_kline) one WebSocket may hold.
    max_subscriptions: int = attrs.field(default=64, validator=_between(1, 100_000))
    # How resting orders fill on the published trades (framework.sim.fill_model): touch,
    # through or queue; the paper venue's backtest.paper.fill_rule takes the same names.
    fill_rule: Literal["touch", "through", "queue"] = "queue"
    # touch and through: the chance a trade reaching a resting order fills it (drawn from
    # the twin's seed; what perpframe calibrate fits as the fill per touch).
    fill_probability: Decimal = attrs.field(default=Decimal(1), validator=_share)

    def __attrs_post_init__(self) -> None:
        """Check what no single field can: ranges and periods."""
        if self.level_quantity_max < self.level_quantity_min:
            raise ValueError("level_quantity_max must not be below level_quantity_min")
        if self.fill_probability < 1 and self.fill_rule == "queue":
            raise ValueError("fill_probability applies to the touch and through rules, not queue")
        if self.trade_quantity_max < self.trade_quantity_min:
            raise ValueError("trade_quantity_max must not be below trade_quantity_min")
        if not 1 <= len(self.periods) <= 16:
            raise ValueError("periods: between 1 and 16 bar periods")
        for period in self.periods:
            if period_ms(period) is None:
                raise ValueError(
                    f"periods: {period!r} is not N followed by SECOND, MIN, HOUR, DAY or WEEK"
                )


@attrs.frozen(slots=True, kw_only=True)
class MarketTick:
    """What one tick of a pair's market produced: its book and the trades at it."""

    pair: str
    book: Book
    trades: tuple[Trade, ...]


@attrs.define(slots=True, kw_only=True)
class _OpenBar:
    """A bar still taking trades."""

    start: int
    open: Decimal
    high: Decimal
    low: Decimal
    close: Decimal
    quantity: Decimal
    amount: Decimal
    count: int

    def record(self, pair: str, period: str) -> Bar:
        return Bar(
            pair=pair,
            period=period,
            open=self.open,
            high=self.high,
            low=self.low,
            close=self.close,
            quantity=self.quantity,
            amount=self.amount,
            count=self.count,
            time=self.start,
        )


class _Bars:
    """One pair's bars of one period: the closed ones (bounded) and the open one."""

    __slots__ = ("closed", "length", "open", "pair", "period")

    def __init__(self, pair: str, period: str, keep: int) -> None:
        self.pair, self.period = pair, period
        self.length = period_ms(period) or 60_000
        self.closed: deque[Bar] = deque(maxlen=keep)
        self.open: _OpenBar | None = None

    def add(self, trade: Trade, at: int) -> None:
        start = at - at % self.length
        bar, price, qty = self.open, trade.price, trade.quantity
        if bar is not None and bar.start != start:
            self.closed.append(bar.record(self.pair, self.period))
            bar = None
        if bar is None:
            self.open = _OpenBar(
                start=start,
                open=price,
                high=price,
                low=price,
                close=price,
                quantity=qty,
                amount=price * qty,
                count=1,
            )
            return
        bar.high, bar.low, bar.close = max(bar.high, price), min(bar.low, price), price
        bar.quantity += qty
        bar.amount += price * qty
        bar.count += 1

    def last(self, limit: int, end_ms: int | None) -> list[Bar]:
        """The newest limit bars starting at or before end_ms (None: any), oldest first."""
        bars = list(self.closed)
        if self.open is not None:
            bars.append(self.open.record(self.pair, self.period))
        if end_ms is not None:
            bars = [b for b in bars if b.time is not None and b.time <= end_ms]
        return bars[-limit:]


class MarketTape:
    """One pair's published market: last book, last trades, bars per period, index price."""

    def __init__(
        self, pair: str, *, periods: Sequence[str], keep_trades: int, keep_bars: int
    ) -> None:
        """An empty tape keeping at most keep_trades trades and keep_bars bars per period."""
        self.pair = pair
        self.book: Book | None = None
        self.trades: deque[Trade] = deque(maxlen=keep_trades)
        self.bars = {p: _Bars(pair, p, keep_bars) for p in periods}
        self.index: Decimal | None = None

    def record(self, tick: MarketTick, now_ms: int) -> list[Bar]:
        """Remember a tick's book and trades; the open bar of each period its trades touched."""
        self.book = tick.book
        self.trades.extend(tick.trades)
        if not tick.trades:
            return []
        for trade in tick.trades:
            at = trade.time if trade.time is not None else now_ms
            for bars in self.bars.values():
                bars.add(trade, at)
        return [b.open.record(self.pair, p) for p, b in self.bars.items() if b.open is not None]

    def last_trades(self, limit: int) -> list[Trade]:
        """The newest limit trades, oldest first."""
        trades = self.trades
        skip = max(0, len(trades) - limit)
        return [t for i, t in enumerate(trades) if i >= skip]

    def last_bars(self, period: str, limit: int, end_ms: int | None = None) -> list[Bar]:
        """The newest limit bars of a kept period starting at or before end_ms, oldest first."""
        return self.bars[period].last(limit, end_ms)

    def smooth(self, mark: Decimal, alpha: Decimal, grid: Decimal) -> Decimal:
        """Move the index toward mark by alpha (the first mark is the first index)."""
        index = self.index
        index = mark if index is None else index + alpha * (mark - index)
        self.index = index.quantize(grid, ROUND_HALF_EVEN)
        return self.index


def _lots(value: Decimal, lot: Decimal) -> int:
    return max(1, int(value / lot))


class MarketGenerator:
    """Books and trades of every pair from its mark, one tick at a time (seeded)."""

    def __init__(
        self, settings: MarketSettings, markets: Mapping[str, Market], seed: int | str
    ) -> None:
        """markets: the exchange's pairs (their price grid, quantity decimals and marks)."""
        self.settings = settings
        self.markets = markets
        self._rng = {pair: random.Random(f"{seed}:market:{pair}") for pair in markets}
        self._next_id = dict.fromkeys(markets, 0)

    def tick(self, pair: str, now_ms: int) -> MarketTick:
        """The book around the pair's mark now and the trades that happened at it."""
        s, market, rng = self.settings, self.markets[pair], self._rng[pair]
        grid = market.price_exp
        lot = Decimal(1).scaleb(-market.rules.quantity_decimals)
        min_lots = _lots(market.rules.min_quantity, lot)
        mark = market.mark.quantize(grid, ROUND_HALF_EVEN)
        below = s.spread_ticks // 2
        best_bid = mark - below * grid
        best_ask = best_bid + s.spread_ticks * grid
        step = s.level_step_ticks * grid
        low_q = max(min_lots, _lots(s.level_quantity_min, lot))
        high_q = max(low_q, _lots(s.level_quantity_max, lot))
        bids: list[tuple[Decimal, Decimal]] = []
        asks: list[tuple[Decimal, Decimal]] = []
        for i in range(s.levels):
            bid = best_bid - i * step
            if bid > 0:
                bids.append((bid, rng.randint(low_q, high_q) * lot))
            asks.append((best_ask + i * step, rng.randint(low_q, high_q) * lot))
        book = Book(pair=pair, bids=tuple(bids), asks=tuple(asks), time=now_ms)
        trades = self._trades(pair, book, rng, lot, min_lots, now_ms)
        return MarketTick(pair=pair, book=book, trades=trades)

    def _trades(
        self,
        pair: str,
        book: Book,
        rng: random.Random,
        lot: Decimal,
        min_lots: int,
        now_ms: int,
    ) -> tuple[Trade, ...]:
        s = self.settings
        low_q = max(min_lots, _lots(s.trade_quantity_min, lot))
        high_q = max(low_q, _lots(s.trade_quantity_max, lot))
        out: list[Trade] = []
        for _ in range(rng.randint(0, s.trades_per_tick)):
            is_long = rng.randrange(2) == 1
            side = book.asks if is_long else book.bids
            quantity = rng.randint(low_q, high_q) * lot
            if not side:
                continue
            price = side[0][0]
            self._next_id[pair] += 1
            out.append(
                Trade(
                    pair=pair,
                    price=price,
                    quantity=quantity,
                    is_long=is_long,
                    time=now_ms,
                    id=str(self._next_id[pair]),
                    amount=price * quantity,
                )
            )
        return tuple(out)


def tapes(settings: MarketSettings, pairs: Iterable[str]) -> dict[str, MarketTape]:
    """An empty tape per pair with the settings' bounds and periods."""
    return {
        pair: MarketTape(
            pair, periods=settings.periods, keep_trades=settings.keep_trades,
            keep_bars=settings.keep_bars,
        )
        for pair in pairs
    }  # fmt: skip
