"""The kernel's start: each on_start isolated, one way for live and backtest."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest

from framework import OrderIntent, OrderUpdate, Strategy
from framework.engine.events import Started
from framework.engine.kernel import Kernel
from tests.engine.test_kernel import kernel as engine_kernel

CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
strategies:
  - name: boom
    class: tests.engine.test_kernel_start:Boom
    params: {pair: ETH-USD}
  - name: fine
    class: tests.engine.test_kernel_start:Fine
    params: {pair: ETH-USD}
"""


class Boom(Strategy):
    """Raises in on_start; counts the updates it would get."""

    def on_start(self) -> None:
        self.updates: list[OrderUpdate] = []
        raise RuntimeError("boom")

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update)


class Fine(Strategy):
    """Counts its on_start calls."""

    starts = 0

    def on_start(self) -> None:
        self.starts += 1


def kernel(text: str = CONFIG) -> Kernel:
    """A kernel with an engine on a virtual clock, its strategies loaded."""
    k = engine_kernel(text)
    k.load_strategies(schedule=None)
    return k


def test_a_strategy_whose_on_start_raises_is_stopped_and_not_started(
    caplog: pytest.LogCaptureFixture,
) -> None:
    k = kernel()
    stopped: list[tuple[str, str]] = []
    k.on_strategy_stopped(lambda name, why: stopped.append((name, why)))
    seen: list[object] = []
    k.bus.subscribe(Started, seen.append)
    with caplog.at_level(logging.INFO):
        k.start()
    boom, fine = k.strategies
    assert k.started == ["fine"]
    assert isinstance(fine, Fine) and fine.starts == 1  # once, not again by its own handler
    assert boom.stopped and k.bus.is_stopped("boom") and not fine.stopped
    at = f"(at test_kernel_start.py:{Boom.on_start.__code__.co_firstlineno + 2})"
    assert stopped == [("boom", f"on_start raised RuntimeError: boom {at}")]
    assert k.start_errors == 1  # counted in the summary's strategy_errors
    assert len(seen) == 1
    errors = [r for r in caplog.records if r.name == "framework.kernel"]
    assert [r.getMessage() for r in errors] == [
        f"strategy boom: on_start raised RuntimeError: boom {at}"
    ]
    assert errors[0].exc_info is None  # the traceback only at DEBUG
    assert not k.all_stopped()


def test_the_traceback_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    k = kernel()
    with caplog.at_level(logging.DEBUG, logger="framework.kernel"):
        k.start()
    (record,) = [r for r in caplog.records if r.name == "framework.kernel"]
    assert record.exc_info is not None


def test_a_stopped_strategy_gets_no_event_and_all_stopped_says_so() -> None:
    k = kernel(CONFIG.split("  - name: fine")[0])
    k.start()
    (boom,) = k.strategies
    k.close()
    k.engine.submit("boom", OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal("0.1")))
    assert isinstance(boom, Boom) and boom.updates == []  # its 9013 refusal never reached it
    assert k.all_stopped()
