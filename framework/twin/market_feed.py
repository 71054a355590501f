"""The twin's public market: the seeded generator ticked with the marks, its tapes, its fan-out.

Each tick of a pair (the price model's step, or a mark set by hand) moves the index price
(the mark smoothed, :class:`~framework.sim.market.MarketTape`) and, with ``market.enabled``,
makes a new book and trades (:class:`~framework.sim.market.MarketGenerator`), remembers them
(bounded), gives the book and the trades to the exchange (whose fills follow them,
:mod:`framework.sim.market_fills`), and queues the api_depth, api_trade and api_kline frames
to the connections subscribed to them, rendered once each. Publication order per tick:
depth, trades, then the klines of every kept period the trades touched; the private pushes
of the fills the trades caused come after (the server publishes them).

Subscriptions (``market_subscribe`` messages, signed as api_position's): per connection at
most ``market.max_subscriptions``; a kline needs a period the twin keeps
(``market.periods``). A slow reader is handled by its connection's queue
(``ws_queue_limit``), as for the private pushes. With the market off, subscribing works and
nothing is pushed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Protocol

import orjson

from framework.sim.events import Event
from framework.sim.exchange import Exchange
from framework.sim.market import MarketGenerator, MarketSettings, MarketTape, MarketTick, tapes
from framework.twin import market_wire
from framework.venue.errors import render_message
from framework.venue.market import DEPTH, KLINE, TRADE

__all__ = ["MARKET_EVENTS", "Subscriber", "TwinMarket"]

MARKET_EVENTS = (DEPTH, TRADE, KLINE)
"""The market events a connection may subscribe to."""

_Key = tuple[str, str, str | None]


class Subscriber(Protocol):
    """A connection frames are queued to (the hub's Connection)."""

    closing: bool

    def enqueue(self, frame: str) -> None:
        """Queue one text frame."""
        ...


class TwinMarket:
    """Ticks, keeps and publishes the twin's market; holds the market subscriptions."""

    def __init__(
        self,
        settings: MarketSettings,
        exchange: Exchange,
        *,
        seed: int | str,
        clock_ms: Callable[[], int],
    ) -> None:
        """Start every pair's tape at its mark (and its first book when enabled)."""
        self.settings = settings
        self.exchange = exchange
        self.enabled = settings.enabled
        self.generator = MarketGenerator(settings, exchange.markets, seed) if self.enabled else None
        self.tapes: dict[str, MarketTape] = tapes(settings, exchange.markets)
        self._subs: dict[_Key, dict[Subscriber, None]] = {}
        self._held: dict[Subscriber, set[_Key]] = {}
        now = clock_ms()
        for pair in exchange.markets:
            self.tick(pair, now)

    def tick(self, pair: str, now_ms: int) -> list[Event]:
        """One tick of a pair at its current mark; the events of the fills its trades cause."""
        market = self.exchange.markets[pair]
        tape = self.tapes[pair]
        tape.smooth(market.mark, self.settings.index_smoothing, market.price_exp)
        if self.generator is None:
            return []
        return self.publish(self.generator.tick(pair, now_ms), now_ms)

    def publish(self, tick: MarketTick, now_ms: int) -> list[Event]:
        """Publish a tick's book and trades (the generator's, or any producer's): remembered,
        pushed, given to the exchange; the events of the fills its trades cause."""
        pair = tick.pair
        bars = self.tapes[pair].record(tick, now_ms)
        self.exchange.set_book(pair, tick.book)
        pair_id = self.exchange.markets[pair].contract_pair_id
        if self._subs:
            levels = self.settings.levels
            self._send(
                (DEPTH, pair, None),
                partial(market_wire.depth_frame, pair, tick.book, levels, now_ms),
            )
            if tick.trades:
                self._send(
                    (TRADE, pair, None),
                    partial(market_wire.trade_frame, pair, tick.trades, pair_id),
                )
            for bar in bars:
                self._send(
                    (KLINE, pair, bar.period), partial(market_wire.kline_frame, bar, pair_id)
                )
        return self.exchange.market_trades(pair, tick.trades, now_ms)

    def _send(self, key: _Key, render: Callable[[], object]) -> None:
        subs = self._subs.get(key)
        if not subs:
            return
        frame = orjson.dumps(render()).decode()
        for connection in list(subs):
            if not connection.closing:
                connection.enqueue(frame)

    # -- subscriptions -----------------------------------------------------------------------

    def check(self, event: str, pair: object, period: object) -> str | None:
        """Why a market subscription of event, pair and period is refused (None: it is not)."""
        if not isinstance(pair, str) or not pair:
            return render_message(2002, "pair")
        if pair not in self.exchange.markets:
            return render_message(2001, "pair")
        if event == KLINE:
            if period is None or period == "":
                return render_message(2002, "period")
            if not isinstance(period, str) or period not in self.settings.periods:
                return render_message(2001, "period")
        return None

    def subscribe(
        self, connection: Subscriber, event: str, pair: str, period: str | None
    ) -> str | None:
        """Add a subscription (the checked one); the refusal when the connection holds too many."""
        key = (event, pair, period if event == KLINE else None)
        held = self._held.setdefault(connection, set())
        if key not in held and len(held) >= self.settings.max_subscriptions:
            return f"at most {self.settings.max_subscriptions} market subscriptions per connection"
        held.add(key)
        self._subs.setdefault(key, {})[connection] = None
        return None

    def unsubscribe(
        self, connection: Subscriber, event: str, pair: str, period: str | None
    ) -> None:
        """Remove a subscription (nothing when it is not held)."""
        key = (event, pair, period if event == KLINE else None)
        self._held.get(connection, set()).discard(key)
        subs = self._subs.get(key)
        if subs is not None:
            subs.pop(connection, None)
            if not subs:
                del self._subs[key]

    def forget(self, connection: Subscriber) -> None:
        """Drop every subscription of a connection that closed."""
        for key in self._held.pop(connection, set()):
            subs = self._subs.get(key)
            if subs is not None:
                subs.pop(connection, None)
                if not subs:
                    del self._subs[key]

    def subscriptions(self, connection: Subscriber) -> int:
        """How many market subscriptions a connection holds."""
        return len(self._held.get(connection, ()))

    def subscribers(self) -> int:
        """How many connections hold market subscriptions."""
        return sum(1 for held in self._held.values() if held)
