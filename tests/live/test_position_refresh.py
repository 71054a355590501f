"""The periodic position snapshot keeps unrealized PnL current between reconnects, at the twin.

Position pushes carry no unrealized PnL: before this job, a position opened after start-up had
``unrealized: null`` in the summary until the next reconnect.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import anyio
import attrs
import pytest

from framework import OrderIntent
from framework.config import Config
from framework.engine.bus import Bus
from framework.engine.portfolio import Portfolio
from framework.live.node import Node
from framework.live.stream import RestResync
from framework.live.trading import TradingState
from framework.live.venue_jobs import PositionRefresh
from framework.twin.server import VenueTwin
from framework.venue.models import AccountBalance, ChangeType, Direction, Position, PositionPush
from tests.live.test_adoption import still_twin
from tests.live.test_cancels import hand, venue_config
from tests.node_running import running
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

ETH = "ETH-USD"


def refreshing(twin: VenueTwin, journal: Path, every_s: float) -> Config:
    """A Hand on ETH-USD at twin, reading positions every every_s seconds."""
    config = venue_config(twin, journal, node="pr")
    return attrs.evolve(config, polling=attrs.evolve(config.polling, positions_interval_s=every_s))


def twin_unrealized(twin: VenueTwin) -> Decimal:
    """The twin's own unrealized PnL of the demo account's ETH-USD position."""
    assert twin.demo_user_id is not None
    (position,) = twin.exchange.positions(twin.demo_user_id, ETH)
    return twin.exchange.unrealized_pnl(position)


async def test_the_unrealized_pnl_of_a_position_opened_while_running_follows_the_mark(
    tmp_path: Path,
) -> None:
    async with still_twin() as twin:
        node = Node(refreshing(twin, tmp_path / "j.sqlite", 0.2))
        async with running(node):
            h = hand(node)
            h.submit(OrderIntent(pair=ETH, is_long=True, quantity=Decimal("0.1")))
            await eventually(lambda: node.portfolio.net_quantity(ETH) == Decimal("0.1"))
            job = node.position_refresh
            assert job is not None
            twin.set_mark(ETH, "2100")
            expected = twin_unrealized(twin)
            assert expected > 0
            # A round under way may have read before the move; the next one reads after it.
            read_after = job.rounds + 2
            await eventually(lambda: job.rounds >= read_after, timeout=10)
            assert Decimal(node.summary()["pnl"][ETH]["unrealized"]) == expected


async def test_positions_interval_0_runs_no_refresh_job(
    tmp_path: Path,
) -> None:
    async with still_twin() as twin:
        node = Node(refreshing(twin, tmp_path / "j.sqlite", 0))
        async with running(node):
            assert node.position_refresh is None


class SlowVenue:
    """The REST positions of ETH-USD as the venue holds them when a call is served, each
    answer held until the test releases it (a slow answer on the wire)."""

    def __init__(self) -> None:
        self.state: list[Position] = []
        self.gates: list[anyio.Event] = []

    async def positions(
        self, pair: str, page_no: int | None = None, page_size: int | None = None
    ) -> list[Position]:
        """What the venue held when the call was served, once released."""
        served = list(self.state)
        gate = anyio.Event()
        self.gates.append(gate)
        await gate.wait()
        return served

    async def balance(self, symbol: str) -> AccountBalance:
        """Not used: no coins."""
        raise AssertionError("no balance is read here")


def long_eth(quantity: str, unrealized: str | None) -> Position:
    """The venue's record of a long ETH-USD position."""
    value = None if unrealized is None else Decimal(unrealized)
    return Position(
        id=7, symbol=ETH, is_long=True, quantity=Decimal(quantity), unrealized_pnl=value
    )


def resync_of(venue: SlowVenue) -> tuple[RestResync, Portfolio, TradingState]:
    """A resync over venue, its portfolio and the trading state it hands snapshots to."""
    portfolio = Portfolio()
    trading = TradingState([ETH])
    trading.follow(Bus(), portfolio, lambda coid: None)
    resync = RestResync(
        venue, pairs=[ETH], coins=[], portfolio=portfolio, publish=lambda e: None,
        on_snapshot=trading.on_snapshot,
    )  # fmt: skip
    return resync, portfolio, trading


async def test_a_slow_snapshot_never_replaces_a_newer_one_read_by_a_reconnect() -> None:
    # The refresh's read starts while the account is flat and is slow; a fill comes while
    # the stream is down (its push lost); the reconnect reads the position. Read one pair at
    # a time, the reconnect's read waits for the slow one and is applied last.
    venue = SlowVenue()
    resync, portfolio, _ = resync_of(venue)
    job = PositionRefresh(resync.refresh_positions, pairs=[ETH], interval_s=30)
    async with anyio.create_task_group() as tg:
        tg.start_soon(job.refresh)
        await anyio.wait_all_tasks_blocked()
        venue.state = [long_eth("0.1", "5")]
        tg.start_soon(resync)
        await anyio.wait_all_tasks_blocked()
        assert len(venue.gates) == 1  # the reconnect waits for the slow read to end
        venue.gates[0].set()  # the slow, flat answer
        await anyio.wait_all_tasks_blocked()
        venue.gates[1].set()
    assert portfolio.net_quantity(ETH) == Decimal("0.1")


async def test_every_applied_snapshot_sets_unrealized_and_a_flat_one_forgets_it() -> None:
    venue = SlowVenue()
    resync, portfolio, trading = resync_of(venue)

    async def read(state: list[Position]) -> None:
        venue.state = state
        async with anyio.create_task_group() as tg:
            tg.start_soon(resync.refresh_positions, ETH)
            await anyio.wait_all_tasks_blocked()
            venue.gates[-1].set()

    await read([long_eth("0.1", "5")])
    await read([long_eth("0.1", "40")])  # the same position: unrealized all the same
    assert trading.pnl()[ETH]["unrealized"] == Decimal("40")
    await read([])
    portfolio.apply_position_push(
        PositionPush(change_type=ChangeType.NEW, current_quantity=Decimal("0.1"),
                     direction=Direction.LONG, position_id=8, symbol=ETH)
    )  # fmt: skip
    assert trading.pnl()[ETH]["unrealized"] is None  # opened by a push: not known yet
