"""A plug-in at the edge in one module: a record type (Tick), its hook (on_tick), its source.

Issue 26's done-when: a new record type and a new hook, registered outside framework/engine,
reach a strategy live and in a backtest with no other file changed. This module is all of
it: the hook is one row of the hook table, the venue's frames of ``api_tick`` decode to
Tick (the stream and the replay hand them over), and :class:`TickSource` feeds Ticks of its
own (config ``sources:``), live as a task of the node, in a backtest on the virtual clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

import anyio
import msgspec

from framework import Strategy
from framework.engine.strategy import Hook, register_hook
from framework.venue.codec import register_push


class Tick(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One price of one pair (a feed the venue itself does not have)."""

    symbol: str
    price: Decimal
    seq: int


register_hook(Hook("on_tick", Tick, by_pair=True))  # to every strategy trading its pair
register_push("api_tick", Tick)  # a frame {"event": "api_tick", "data": {...}} is a Tick


class TickSource:
    """Ticks of one pair every ``every_ms``, numbered from 1 (params: pair, every_ms)."""

    records = (Tick,)

    def __init__(self, name: str, params: Mapping[str, Any]) -> None:
        self.name = name
        self.pair = str(params.get("pair", "ETH-USD"))
        self.every_ms = int(params.get("every_ms", 20))

    def _tick(self, seq: int) -> Tick:
        return Tick(symbol=self.pair, price=Decimal(2000 + seq), seq=seq)

    async def run(self, feed: Callable[[Any], None]) -> None:
        """Live: a Tick every every_ms, until the node cancels the task."""
        for seq in itertools.count(1):
            feed(self._tick(seq))
            await anyio.sleep(self.every_ms / 1000)

    def timed(self, start_ms: int) -> Iterator[tuple[int, Tick]]:
        """Backtest: the same Ticks, every every_ms of virtual time after start_ms."""
        return ((start_ms + seq * self.every_ms, self._tick(seq)) for seq in itertools.count(1))


class TickListener(Strategy):
    """Keeps every Tick it hears, with the runtime's time when it heard it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ticks: list[tuple[datetime, Tick]] = []

    def on_tick(self, tick: Tick) -> None:
        """A Tick of a pair this strategy trades."""
        self.ticks.append((self.now(), tick))
