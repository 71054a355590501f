"""The node's start and stop protocols: on_start first, no UNKNOWN from a graceful stop,
a kept journal against a fresh venue."""

from __future__ import annotations

import logging
from decimal import Decimal
from pathlib import Path

import anyio
import attrs
import pytest

from framework import OrderIntent, OrderUpdate, Strategy
from framework.engine.intents import OrderStatus
from framework.live.journal import Journal
from framework.live.node import Node
from framework.twin.server import VenueTwin
from framework.twin.settings import FaultSettings, PriceSettings, TwinSettings
from framework.venue.models import MatchRecord
from tests.live.conftest import eventually
from tests.live.test_node import embedded, real_venue_config
from tests.node_running import running

pytestmark = pytest.mark.anyio


def market(quantity: str = "0.01", *, long: bool = True) -> OrderIntent:
    """A market intent on ETH-USD."""
    return OrderIntent(pair="ETH-USD", is_long=long, quantity=Decimal(quantity))


class Chaser(Strategy):
    """Buys once a tick; every fill of its own is answered by a counter-order; on_stop buys.

    What a strategy that reacts to fills does at a stop: the last match poll delivers a fill
    and the strategy submits while the node is stopping.
    """

    def on_start(self) -> None:
        self.updates: list[OrderUpdate] = []
        self.submitted: list[str] = []
        self.after_stop: str | None = None
        self.schedule("tick", 0.02)

    def on_timer(self, name: str) -> None:
        self.submitted.append(self.submit(market()))

    def on_match(self, match: MatchRecord) -> None:
        if match.client_order_id is not None and len(self.submitted) < 400:
            self.submitted.append(self.submit(market(long=len(self.submitted) % 2 == 0)))

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update)

    def on_stop(self) -> None:
        self.submitted.append(self.submit(market()))


CHASER = """\
  - name: chase
    class: tests.live.test_node_lifecycle:Chaser
    params: {pair: ETH-USD}
"""


async def test_a_graceful_stop_never_makes_an_order_of_unknown_outcome() -> None:
    for _ in range(3):  # a stop lands at a different moment of the chase each time
        node = Node(embedded(CHASER))
        async with running(node):
            chaser = node.strategies[0]
            assert isinstance(chaser, Chaser)
            await eventually(lambda: len(chaser.submitted) >= 12)  # noqa: B023
        statuses = [u.status for u in chaser.updates]
        assert OrderStatus.UNKNOWN not in statuses and OrderStatus.LOST not in statuses
        final = {u.client_order_id: u.status for u in chaser.updates}
        # every intent ends: filled, or refused at once (9013) once the node closed
        assert set(final) == set(chaser.submitted)
        refused = [u for u in chaser.updates if u.status is OrderStatus.REJECTED]
        assert all(u.code == 9013 for u in refused)
        assert final[chaser.submitted[-1]] in (OrderStatus.FILLED, OrderStatus.REJECTED)
        assert node.engine is not None and node.engine.closed and node.engine.idle


async def test_on_stop_submits_are_sent_and_later_ones_refused_with_9013() -> None:
    node = Node(embedded(CHASER))
    async with running(node):
        chaser = node.strategies[0]
        assert isinstance(chaser, Chaser)
        await eventually(lambda: len(chaser.submitted) >= 2)
    last = chaser.submitted[-1]  # on_stop's buy
    statuses = [u.status for u in chaser.updates if u.client_order_id == last]
    assert statuses in (
        [OrderStatus.ACCEPTED, OrderStatus.FILLED],
        [OrderStatus.REJECTED],  # only when the settling before it ran out of rounds
    )
    assert node.engine is not None
    late = node.engine.submit("chase", market())
    (refused,) = [u for u in chaser.updates if u.client_order_id == late]
    assert (refused.status, refused.code) == (OrderStatus.REJECTED, 9013)


class Careful(Strategy):
    """Sets its state up in on_start, as the README's example does; records hook order."""

    def on_start(self) -> None:
        self.seen: list[str] = ["start"]

    def on_order(self, update: OrderUpdate) -> None:
        self.seen.append(f"{update.status}:{update.client_order_id}")


CAREFUL = """\
  - name: careful
    class: tests.live.test_node_lifecycle:Careful
    params: {pair: ETH-USD}
"""


async def test_after_a_restart_strategies_get_on_start_before_recovered_updates(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite"
    journal = Journal.open(path)  # a previous life: sent, killed before the answer
    journal.add("pf-sent-1", "pf", "careful", market(), OrderStatus.PENDING, 1)
    journal.mark_sent(["pf-sent-1"], True)
    journal.close()
    settings = TwinSettings(prices=PriceSettings(tick_interval=0))
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        node = Node(real_venue_config(twin.base_url, twin.ws_url, path, CAREFUL))
        async with running(node):
            careful = node.strategies[0]
            assert isinstance(careful, Careful)
            await eventually(lambda: len(careful.seen) >= 2)
        assert careful.seen[:2] == ["start", "UNKNOWN:pf-sent-1"]
        assert not node.bus.stopped  # the strategy did not crash on the update


async def test_a_kept_journal_against_a_fresh_venue_says_so_and_resyncs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "journal.sqlite"
    journal = Journal.open(path)
    journal.save_match_window("ETH-USD", 24, 20)  # cursors of an earlier venue (ids 22-24)
    journal.close()
    settings = TwinSettings(prices=PriceSettings(tick_interval=0))
    caplog.set_level(logging.WARNING)
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        node = Node(real_venue_config(twin.base_url, twin.ws_url, path, CHASER))
        async with running(node):
            chaser = node.strategies[0]
            assert isinstance(chaser, Chaser)
            # its own fills (ids from 1 on this venue) are delivered again
            await eventually(lambda: node.tallies.matches >= 3)
    warnings = [r.getMessage() for r in caplog.records if "not the venue" in r.getMessage()]
    assert len(warnings) == 1 and "24" in warnings[0]
    with anyio.fail_after(5):
        reopened = Journal.open(path)
        high, _floor, _seen = reopened.load_match_window("ETH-USD")
        reopened.close()
    assert high is not None and high < 24 + node.tallies.matches


class Relentless(Strategy):
    """Answers every update of its own with a new order, forever: it never goes quiet."""

    def on_start(self) -> None:
        self.updates: list[OrderUpdate] = []
        self.submit(market())

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update)
        if update.status in (OrderStatus.ACCEPTED, OrderStatus.FILLED):
            self.submit(market(long=len(self.updates) % 2 == 0))


RELENTLESS = """\
  - name: relentless
    class: tests.live.test_node_lifecycle:Relentless
    params: {pair: ETH-USD}
"""


async def test_a_strategy_that_never_goes_quiet_still_stops_with_no_unknown_order(
    tmp_path: Path,
) -> None:
    # Every call takes 50 ms at the venue: at the end of the drain a batch is in flight.
    settings = TwinSettings(
        prices=PriceSettings(tick_interval=0), faults=FaultSettings(latency=0.05)
    )
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        config = real_venue_config(twin.base_url, twin.ws_url, tmp_path / "j.db", RELENTLESS)
        config = attrs.evolve(config, execution=attrs.evolve(config.execution, drain_timeout_s=0.5))
        node = Node(config)
        async with running(node):
            strategy = node.strategies[0]
            assert isinstance(strategy, Relentless)
            await eventually(lambda: len(strategy.updates) >= 6)
    statuses = {u.status for u in strategy.updates}
    assert OrderStatus.UNKNOWN not in statuses and OrderStatus.LOST not in statuses
    assert node.engine is not None and node.engine.idle and node.engine.closed
    refused = [u for u in strategy.updates if u.status is OrderStatus.REJECTED]
    assert refused and all(u.code == 9013 for u in refused)  # it kept submitting: refused
