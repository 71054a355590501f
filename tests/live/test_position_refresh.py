"""The periodic position snapshot keeps unrealized PnL current between reconnects, at the twin.

Position pushes carry no unrealized PnL: before this job, a position opened after start-up had
``unrealized: null`` in the summary until the next reconnect.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import attrs
import pytest

from framework import OrderIntent
from framework.config import Config
from framework.live.node import Node
from framework.twin.server import VenueTwin
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
            twin.set_mark(ETH, "2100")
            expected = twin_unrealized(twin)
            assert expected > 0

            def unrealized() -> str | None:
                return node.summary()["pnl"][ETH]["unrealized"]

            await eventually(
                lambda: (value := unrealized()) is not None and Decimal(value) == expected,
                timeout=10,
            )
            assert node.position_refresh is not None and node.position_refresh.rounds > 0


async def test_positions_interval_0_reads_positions_only_at_start_and_reconnect(
    tmp_path: Path,
) -> None:
    async with still_twin() as twin:
        node = Node(refreshing(twin, tmp_path / "j.sqlite", 0))
        async with running(node):
            assert node.position_refresh is None
