"""Where in a recording the live node started its strategies: the backtest starts them there.

Live, a node with a ``market:`` section starts its market feed and waits until it is ready
(every subscription acknowledged, every price polled once; at most ``venue.timeout_s``)
before ``on_start`` (issue 27; ``MarketFeed.ready``): on_start reads a mark, and a first
market order in it is priced and not stale. What the feed heard meanwhile is kept by
``self.market`` and reaches the hooks right after on_start, in order (the kernel holds it).
A recording of that run begins with those records, after the REST answers of the initial
sync. A backtest that started its strategies before the first line would have them read no
market and refuse that first market order (9007).

:class:`StartGate` says, record by record, whether the recorded node had not started yet:
the leading records up to the one that made its feed ready, as the config's ``market:``
section describes the feed (its subscriptions and polls), or up to ``venue.timeout_s`` after
the first market record; a WebSocket frame that is not market data (the private stream,
opened after on_start) ends the stretch at once. The backtest replays that stretch, then
starts the strategies. Without a market feed (no pairs with channels or polls) there is no
gate: the strategies start before the first record, as before.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

import attrs
import orjson

from framework.market_config import MarketConfig
from framework.recording import LineRecord, MarketLine

__all__ = ["StartGate"]

_MARKET_EVENTS: Final = frozenset({"api_trade", "api_depth", "api_kline"})


@attrs.define(slots=True)
class StartGate:
    """Says whether each leading record came before the recorded node's start (see module)."""

    acks: Counter[tuple[str, str]]
    """(event, pair) -> subscribe acknowledgements still awaited."""
    polls: set[tuple[str, str]]
    """(kind, pair) of the price polls not answered yet."""
    wait_ms: int
    """How long the live node waits for its feed (venue.timeout_s)."""
    started: bool = False
    """True once a record came after the start: every later one does too."""
    _since: int | None = None
    _market_seen: bool = False

    @classmethod
    def of(cls, market: MarketConfig, timeout_s: float) -> StartGate | None:
        """The gate of a config's market section; None when the node waits for nothing."""
        acks: Counter[tuple[str, str]] = Counter()
        polls: set[tuple[str, str]] = set()
        for pair, rules in market.pairs.items():
            for channel in rules.channels:  # one subscription per bar period
                acks[(f"api_{channel}", pair)] += len(rules.periods) if channel == "kline" else 1
            polls.update((kind, pair) for kind, every_s in
                         (("mark", rules.mark_interval_s), ("index", rules.index_interval_s))
                         if every_s > 0)  # fmt: skip
        if not acks and not polls:
            return None
        return cls(acks, polls, int(timeout_s * 1000))

    def before_start(self, record: LineRecord) -> bool:
        """True when record came before the recorded node started its strategies."""
        if self.started:
            return False
        ts = int(record.ts)
        if self._since is None:
            self._since = ts
        if ts > self._since + self.wait_ms:  # live waits no longer for its feed
            self.started = True
            return False
        frame = record.frame
        if frame is None:
            if type(record) is MarketLine:
                self._market(ts)
                self.polls.discard((record.kind, record.pair))
            # else a REST answer: the initial sync, before the feed starts
        elif not self._market_frame(frame, ts):
            self.started = True  # the private stream opens after on_start
            return False
        if not self.acks and not self.polls:
            self.started = True  # the feed is ready: this record is the last before the start
        return True

    def _market(self, ts: int) -> None:
        """The first market record: the feed started then (its wait counts from there)."""
        if not self._market_seen:
            self._market_seen = True
            self._since = ts

    def _market_frame(self, frame: str, ts: int) -> bool:
        """Note a market frame or acknowledgement; False when frame is not market data."""
        try:
            data = orjson.loads(frame)
        except orjson.JSONDecodeError:
            return False
        event = data.get("event") if type(data) is dict else None
        if type(event) is not str or event.removesuffix("_res") not in _MARKET_EVENTS:
            return False
        self._market(ts)
        if event.endswith("_res") and data.get("success") is True:
            event, pair = event.removesuffix("_res"), data.get("pair")
            key = next(
                (k for k in self.acks if k[0] == event and (pair is None or k[1] == pair)), None
            )
            if key is not None:
                self.acks[key] -= 1
                if self.acks[key] <= 0:
                    del self.acks[key]
        return True
