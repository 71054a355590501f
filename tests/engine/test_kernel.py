"""The kernel: one build of bus, portfolio, engine and strategies for every runtime."""

from __future__ import annotations

from decimal import Decimal

import pytest

from framework import OrderIntent, Strategy
from framework.config import parse_config
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import OrderUpdate, Started
from framework.engine.kernel import Kernel, StrategyBuildError

CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
strategies:
  - name: fine
    class: tests.engine.test_kernel:Fine
    params: {pair: ETH-USD}
  - name: broken
    class: tests.engine.test_kernel:Broken
    params: {pair: ETH-USD}
"""


class Fine(Strategy):
    """Submits one limit buy at on_start; records its updates."""

    def on_start(self) -> None:
        self.updates: list[OrderUpdate] = []
        self.submit(
            OrderIntent(
                pair="ETH-USD", is_long=True, quantity=Decimal("0.1"), price=Decimal("1900")
            )
        )

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update)


class Broken(Strategy):
    """Raises in its constructor."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise ValueError("boom in __init__")


def kernel(text: str = CONFIG) -> Kernel:
    """A kernel on a virtual clock with an engine."""
    clock = VirtualClock(1_700_000_000_000)
    k = Kernel(parse_config(text, env={}), clock)
    k.build_engine(ids=ClientIdGenerator.ephemeral("t", now_ms=clock.ms, random_bits=1))
    return k


def test_a_strategy_that_cannot_be_built_is_one_line_naming_it() -> None:
    with pytest.raises(StrategyBuildError) as err:
        kernel().load_strategies(schedule=None)
    line = Broken.__init__.__code__.co_firstlineno + 1
    assert str(err.value) == (
        f"strategies[1] (broken): ValueError: boom in __init__ (at test_kernel.py:{line})"
    )


def test_strategies_get_on_start_from_the_kernel_and_submit_through_its_engine() -> None:
    k = kernel(CONFIG.split("  - name: broken")[0])
    (fine,) = k.load_strategies(schedule=None)
    seen: list[object] = []
    k.bus.subscribe(Started, seen.append)
    assert k.start() == 0  # no journal: nothing to recover
    assert len(seen) == 1 and isinstance(fine, Fine)
    batch = k.engine.next_batch()
    assert batch is not None and len(batch.orders) == 1
    assert k.close() == 0  # the batch is in flight, nothing queued
    refused = k.engine.submit("fine", OrderIntent(pair="ETH-USD", is_long=True,
                                                  quantity=Decimal("0.1")))  # fmt: skip
    assert [(u.client_order_id, u.code) for u in fine.updates] == [(refused, 9013)]
