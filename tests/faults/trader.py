"""The fault suite's strategy: bursts of same-size intents, everything recorded.

``FaultTrader`` submits ``bursts`` bursts of ``burst_size`` intents on one pair, all of one
quantity, one burst per timer tick: market orders with sides alternating (long, short,
long...), or, with ``prices``, same-looking GTC limit orders (all long with ``side: long``)
that rest on the book. The suite seeds a long position first, so no short can take it
through zero (the venue's 2318). It records, in arrival order, every OrderUpdate, every
match, every refused cancel and on_start, and optionally appends each as a flushed JSON line
to a file (a child process's record survives SIGKILL), with a ``tick`` line at the first
timer tick (the node is fully up: signals are handled) and a ``stop`` line at on_stop (the
open orders then).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import orjson

from framework import CancelRejected, MatchRecord, OrderIntent, OrderUpdate, Strategy
from framework.engine.strategy import StrategyContext

PAIR: Final = "ETH-USD"
QUANTITY: Final = Decimal("0.01")
CLASS: Final = "tests.faults.trader:FaultTrader"
"""The ``class:`` of the strategy in a node config."""


class FaultTrader(Strategy):
    """Bursts of same-size intents; records updates, matches and on_start in order.

    params: ``pair``, ``quantity``, ``bursts``, ``burst_size``, ``every_s``; ``prices`` (limit
    prices, GTC, taken in turn within a burst; none: market orders), ``side`` (``alternate``,
    the default, or ``long``); ``armed`` (default false: the harness arms it once the faults
    are set), ``go`` (a file whose existence arms it), ``cancel_every`` (n: once every intent
    is submitted and ACCEPTED, cancel every n-th of them, the first included; 0: none),
    ``log`` (a JSONL file: a flushed line per start, submit, order update, match, cancel
    asked and cancel refused).
    """

    def __init__(
        self,
        name: str,
        context: StrategyContext,
        params: Mapping[str, Any] | None = None,
        *,
        pairs: Iterable[str] | None = None,
    ) -> None:
        super().__init__(name, context, params, pairs=pairs)
        p = self.params
        self.pair = str(p.get("pair", PAIR))
        self.quantity = Decimal(str(p.get("quantity", QUANTITY)))
        self.bursts = int(p.get("bursts", 1))
        self.burst_size = int(p.get("burst_size", 20))
        self.every_s = float(p.get("every_s", 0.1))
        self.prices = [Decimal(str(x)) for x in p.get("prices", ())]
        self.alternate = str(p.get("side", "alternate")) == "alternate"
        self.cancel_every = int(p.get("cancel_every", 0))
        self.armed = bool(p.get("armed", False))
        self.go = Path(p["go"]) if p.get("go") else None
        # Opened for each line (a child may end by SIGKILL; an in-process run leaves no file
        # open behind).
        self.log = Path(p["log"]) if p.get("log") else None
        self.bursts_done = 0
        self.ticks = 0
        self.started = False
        self.submitted: list[str] = []
        self.updates: list[OrderUpdate] = []
        self.final: dict[str, str] = {}
        self.matches: list[MatchRecord] = []
        self.refusals: list[CancelRejected] = []
        self.cancels_asked = False
        self.updates_before_start = 0

    @property
    def done_submitting(self) -> bool:
        """Every burst has been submitted."""
        return self.bursts_done >= self.bursts

    def _line(self, **fields: Any) -> None:
        if self.log is not None:
            with self.log.open("ab") as out:
                out.write(orjson.dumps(fields) + b"\n")

    def on_start(self) -> None:
        self.started = True
        self._line(kind="start")
        self.schedule("burst", self.every_s)

    def on_timer(self, name: str) -> None:
        if not self.ticks:
            self._line(kind="tick")  # the node's loop has been running since on_start
        self.ticks += 1
        if self.done_submitting:
            self._cancel_some()
            return
        if not self.armed:
            if self.go is None or not self.go.exists():
                return
            self.armed = True
        intents = [self.intent(i) for i in range(self.burst_size)]
        coids = self.submit_many(intents)
        self.submitted += coids
        self.bursts_done += 1
        for coid, intent in zip(coids, intents, strict=True):
            self._line(kind="submit", coid=coid, is_long=intent.is_long)

    def intent(self, i: int) -> OrderIntent:
        """The i-th intent of a burst."""
        is_long = not self.alternate or i % 2 == 0
        if not self.prices:
            return OrderIntent(pair=self.pair, is_long=is_long, quantity=self.quantity)
        price = self.prices[i % len(self.prices)]
        return OrderIntent(pair=self.pair, is_long=is_long, quantity=self.quantity, price=price)

    def _cancel_some(self) -> None:
        """Once, when every intent is ACCEPTED: cancel every cancel_every-th of them."""
        if not self.cancel_every or self.cancels_asked or not self.submitted:
            return
        if any(self.final.get(c) != "ACCEPTED" for c in self.submitted):
            return
        self.cancels_asked = True
        for coid in self.submitted[:: self.cancel_every]:
            self._line(kind="cancel", coid=coid, asked=self.cancel(coid))

    def on_order(self, update: OrderUpdate) -> None:
        if not self.started:
            self.updates_before_start += 1
        self.updates.append(update)
        status = str(update.status)
        self.final[update.client_order_id] = status
        self._line(
            kind="order",
            coid=update.client_order_id,
            status=status,
            order_id=update.order_id,
            code=update.code,
            msg=update.msg,
            after_start=self.started,
        )

    def on_match(self, match: MatchRecord) -> None:
        self.matches.append(match)
        self._line(
            kind="match",
            id=match.id,
            coid=match.client_order_id,
            entrust_id=match.entrust_id,
            quantity=str(match.quantity),
            candidates=list(match.candidates),
        )

    def on_cancel_rejected(self, event: CancelRejected) -> None:
        self.refusals.append(event)
        self._line(kind="refused", coid=event.client_order_id, code=event.code, msg=event.msg)

    def on_stop(self) -> None:
        self._line(kind="stop", open=sorted(o.client_order_id for o in self.open_orders()))
