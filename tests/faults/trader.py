"""The fault suite's strategy: bursts of same-size market intents, everything recorded.

``FaultTrader`` submits ``bursts`` bursts of ``burst_size`` market intents on one pair, all of
one quantity, sides alternating (long, short, long...), one burst per timer tick. The suite
seeds a long position first, so no short can take it through zero (the venue's 2318).
It records, in arrival order, every OrderUpdate, every match and on_start, and optionally
appends each as a flushed JSON line to a file (a child process's record survives SIGKILL),
with a ``tick`` line at the first timer tick (the node is fully up: signals are handled).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Final

import orjson

from framework import MatchRecord, OrderIntent, OrderUpdate, Strategy
from framework.engine.strategy import StrategyContext

PAIR: Final = "ETH-USD"
QUANTITY: Final = Decimal("0.01")
CLASS: Final = "tests.faults.trader:FaultTrader"
"""The ``class:`` of the strategy in a node config."""


class FaultTrader(Strategy):
    """Bursts of same-size market intents; records updates, matches and on_start in order.

    params: ``pair``, ``quantity``, ``bursts``, ``burst_size``, ``every_s``; ``armed`` (default
    false: the harness arms it once the faults are set), ``go`` (a file whose existence arms
    it), ``log`` (a JSONL file: a flushed line per start, submit, order update and match).
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
        self.armed = bool(p.get("armed", False))
        self.go = Path(p["go"]) if p.get("go") else None
        # Open for the strategy's life (a child may end by SIGKILL); each line is flushed.
        log = p.get("log")
        self._out: IO[bytes] | None = Path(log).open("ab") if log else None  # noqa: SIM115
        self.bursts_done = 0
        self.ticks = 0
        self.started = False
        self.submitted: list[str] = []
        self.updates: list[OrderUpdate] = []
        self.final: dict[str, str] = {}
        self.matches: list[MatchRecord] = []
        self.updates_before_start = 0

    @property
    def done_submitting(self) -> bool:
        """Every burst has been submitted."""
        return self.bursts_done >= self.bursts

    def _line(self, **fields: Any) -> None:
        if self._out is not None:
            self._out.write(orjson.dumps(fields) + b"\n")
            self._out.flush()

    def on_start(self) -> None:
        self.started = True
        self._line(kind="start")
        self.schedule("burst", self.every_s)

    def on_timer(self, name: str) -> None:
        if not self.ticks:
            self._line(kind="tick")  # the node's loop has been running since on_start
        self.ticks += 1
        if self.done_submitting:
            return
        if not self.armed:
            if self.go is None or not self.go.exists():
                return
            self.armed = True
        intents = [
            OrderIntent(pair=self.pair, is_long=i % 2 == 0, quantity=self.quantity)
            for i in range(self.burst_size)
        ]
        coids = self.submit_many(intents)
        self.submitted += coids
        self.bursts_done += 1
        for coid, intent in zip(coids, intents, strict=True):
            self._line(kind="submit", coid=coid, is_long=intent.is_long)

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
            kind="match", id=match.id, coid=match.client_order_id, entrust_id=match.entrust_id
        )
