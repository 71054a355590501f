"""``configs/live.example.yaml``, the template for the real venue, trades against a twin.

Issue 27: the template could not place its first order (a market order priced by nothing:
9005 with ``max_notional`` set). With its ``market:`` section the node polls the mark before
the strategies start, so the ladder's first order goes out priced by the mark, and its grid
follows the book. The file is used as shipped; only the venue's URLs, the journal and the
metrics port are pointed at this test's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from framework.config import parse_config
from framework.live.node import Node
from framework.sim.market import MarketSettings
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from tests.live.conftest import eventually
from tests.node_running import running

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def twin(anyio_backend: str) -> AsyncIterator[VenueTwin]:
    """A twin whose market is on: books and trades around a walking mark."""
    settings = TwinSettings(
        prices=PriceSettings(tick_interval=0.05), market=MarketSettings(enabled=True)
    )
    async with VenueTwin(settings, host="127.0.0.1", port=0) as running_twin:
        yield running_twin


def template(twin: VenueTwin, tmp_path: Path, *, market: bool = True) -> Node:
    """A node of configs/live.example.yaml as shipped, pointed at twin (without market:)."""
    data = yaml.safe_load((ROOT / "configs" / "live.example.yaml").read_text(encoding="utf-8"))
    assert data["execution"]["risk"]["max_notional"]  # the limit that refused it (9005)
    if not market:
        del data["market"]
    data["venue"].update(base_url=twin.base_url, ws_url=twin.ws_url)
    data["journal"]["path"] = str(tmp_path / "journal.sqlite")
    data["metrics"]["port"] = 0
    env = {"PERP_API_KEY": DEMO_API_KEY, "PERP_API_SECRET": DEMO_PRIVATE_KEY}
    return Node(parse_config(yaml.safe_dump(data), env=env))


async def test_the_live_template_places_its_first_order_priced_by_the_market(
    tmp_path: Path, twin: VenueTwin
) -> None:
    node = template(twin, tmp_path)
    async with running(node):
        assert node.kernel.market.mark("ETH-USD") is not None  # polled before on_start
        await eventually(lambda: len(twin.received_orders) > 0, timeout=30)
        ladder = node.kernel.strategies[0]
        await eventually(lambda: getattr(ladder, "reference", None) is not None, timeout=30)
        assert node.engine is not None
        counters = dict(node.engine.counters())
    assert counters["orders_risk_rejected"] == 0, counters  # neither 9005 nor 9007


async def test_without_its_market_section_the_first_market_order_has_no_price(
    tmp_path: Path, twin: VenueTwin
) -> None:
    """The same file without market: (what the section fixed): the probe is refused 9005."""
    node = template(twin, tmp_path, market=False)
    async with running(node):
        assert node.engine is not None
        engine = node.engine
        await eventually(lambda: engine.counters()["orders_risk_rejected"] > 0, timeout=30)
    assert len(twin.received_orders) == 0
