"""The live node in-process: embedded twin, strategies, timers, metrics, stop and fatal errors."""

from __future__ import annotations

import logging
from decimal import Decimal
from pathlib import Path

import anyio
import httpx
import orjson
import pytest

from framework import OrderUpdate, Strategy
from framework.config import Config, parse_config
from framework.live.node import SUMMARY_KEYS, FatalError, Node
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from tests.live.conftest import eventually
from tests.node_running import running

pytestmark = pytest.mark.anyio

# Still prices (no background ticks): the test moves the mark itself, so fills are exact.
EMBEDDED = """\
venue:
  embedded: true
  twin:
    prices:
      tick_interval: 0
pairs:
  ETH-USD: {}
polling:
  match_interval_s: 0.1
strategies:
{strategies}
{extra}
"""

LADDER = """\
  - name: ladder
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD, quantity: "0.01", spacing: "1", levels: 2, reference_price: "2000"}
"""


def embedded(strategies: str = LADDER, extra: str = "") -> Config:
    """A config trading against the embedded twin."""
    text = EMBEDDED.replace("{strategies}", strategies).replace("{extra}", extra)
    return parse_config(text, env={})


def accepted(node: Node) -> int:
    """How many orders the venue accepted so far."""
    assert node.engine is not None
    return node.engine.counters()["orders_accepted"]


def subscribed(node: Node) -> bool:
    """Whether the node's stream has had every subscription acknowledged (pushes now reach it)."""
    return node.stream is not None and node.stream.stats.connects >= 1


async def test_node_trades_against_the_embedded_twin_and_stops_gracefully(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    node = Node(embedded())
    async with running(node) as summary:
        await eventually(lambda: accepted(node) == 4)  # two levels each side of 2000
        # Strategies start before the stream: a fill before the twin has the subscription
        # would push to nobody (the resync after subscribing brings the state, not a push).
        await eventually(lambda: subscribed(node))
        twin = node.venue.twin if node.venue else None
        assert twin is not None
        twin.set_mark("ETH-USD", Decimal("1998.5"))  # crosses the buy at 1999
        ladder = node.strategies[0]
        await eventually(lambda: getattr(ladder, "fills", 0) == 1)
        await eventually(lambda: accepted(node) == 5)  # the counter sell at 2000
        # The fill's NEW position push: the match poll may have seen the fill before it came.
        await eventually(lambda: node.tallies.pushes >= 1)
        await eventually(lambda: node.portfolio.net_quantity("ETH-USD") == Decimal("0.01"))
    assert list(summary)[: len(SUMMARY_KEYS)] == list(SUMMARY_KEYS)
    assert summary["orders_accepted"] == 5
    assert summary["orders_rejected"] == 0
    assert summary["matches"] == 1
    assert summary["reason"] == "test over"
    assert "ladder stopping" in caplog.text  # on_stop ran
    assert "journal closed" in caplog.text


class Recorder(Strategy):
    """Test strategy: submits one market buy per timer tick and records what comes back."""

    def on_start(self) -> None:
        self.updates: list[OrderUpdate] = []
        self.ticks = 0
        self.stopped_at_tick: int | None = None
        self.schedule("tick", float(self.params.get("every_s", 0.05)))

    def on_timer(self, name: str) -> None:
        self.ticks += 1
        if self.ticks <= int(self.params.get("orders", 1)):
            self.submit_market()

    def submit_market(self) -> None:
        from framework import OrderIntent

        self.submit(OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal("0.01")))

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update)

    def on_stop(self) -> None:
        self.stopped_at_tick = self.ticks


RECORDER = """\
  - name: rec
    class: tests.live.test_node:Recorder
    params: {pair: ETH-USD, every_s: 0.05, orders: 2}
"""


async def test_timers_drive_strategies_and_order_updates_come_back() -> None:
    node = Node(embedded(RECORDER))
    async with running(node):
        rec = node.strategies[0]
        assert isinstance(rec, Recorder)
        await eventually(lambda: len(rec.updates) == 4)  # a market buy fills at once
        statuses = [(u.client_order_id, u.status.value) for u in rec.updates]
        first, second = dict.fromkeys(cid for cid, _ in statuses)
        assert sorted(statuses) == sorted(
            [(first, "ACCEPTED"), (first, "FILLED"), (second, "ACCEPTED"), (second, "FILLED")]
        )
        await eventually(lambda: rec.ticks >= 4)  # the timer keeps firing
    assert rec.stopped_at_tick is not None


async def test_run_stops_by_itself_after_the_duration() -> None:
    node = Node(embedded())
    with anyio.fail_after(15):
        summary = await node.run(duration=0.3)
    assert summary["reason"] == "duration 0.3 s elapsed"
    assert summary["orders_accepted"] == 4


async def test_metrics_endpoint_serves_counters_latency_and_health() -> None:
    extra = "metrics: {enabled: true, port: 0}\n"
    node = Node(embedded(RECORDER, extra))
    async with running(node):
        assert node.metrics_port is not None
        base = f"http://127.0.0.1:{node.metrics_port}"
        async with httpx.AsyncClient(base_url=base) as client:
            await eventually(lambda: accepted(node) == 2)
            await eventually(lambda: node.stream is not None and node.stream.state == "connected")
            health = await client.get("/healthz")
            assert health.status_code == 200
            assert orjson.loads(health.content) == {
                "status": "ok",
                "stream": "connected",
                "poller": "running",
            }
            text = (await client.get("/metrics/")).text
    assert "perp_orders_accepted_total 2.0" in text
    assert "perp_batches_total" in text and "perp_reconnects_total 0.0" in text
    assert 'perp_push_to_submit_seconds_count{trigger="timer"} 2.0' in text


def sent_ids(node: Node) -> set[str]:
    """The client order ids of the orders the node's Recorder heard back about."""
    rec = node.strategies[0]
    assert isinstance(rec, Recorder)
    return {u.client_order_id for u in rec.updates}


def real_venue_config(base_url: str, ws_url: str, journal: Path, strategies: str) -> Config:
    """A non-embedded config with the twin's demo credentials from the environment."""
    text = f"""\
venue:
  base_url: {base_url}
  ws_url: {ws_url}
  api_key: ${{KEY}}
  api_secret: ${{SECRET}}
pairs:
  ETH-USD: {{}}
polling:
  match_interval_s: 0.1
journal:
  path: {journal}
strategies:
{strategies}
"""
    return parse_config(text, env={"KEY": DEMO_API_KEY, "SECRET": DEMO_PRIVATE_KEY})


async def test_unreachable_venue_is_a_one_line_fatal_error(tmp_path: Path) -> None:
    config = real_venue_config(
        "http://127.0.0.1:9", "ws://127.0.0.1:9/ws", tmp_path / "j.sqlite", LADDER
    )
    with pytest.raises(FatalError) as caught:
        await Node(config).run(duration=5)
    assert str(caught.value).startswith("cannot reach the venue at http://127.0.0.1:9")
    assert "\n" not in str(caught.value)


async def test_refused_credentials_are_a_fatal_error(tmp_path: Path) -> None:
    settings = TwinSettings(prices=PriceSettings(tick_interval=0), demo_account=False)
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        config = real_venue_config(twin.base_url, twin.ws_url, tmp_path / "j.sqlite", LADDER)
        with pytest.raises(FatalError) as caught:
            await Node(config).run(duration=5)
    assert str(caught.value).startswith("the venue refused the API key or signature")


async def test_a_restart_on_the_same_journal_republishes_no_match(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    settings = TwinSettings(prices=PriceSettings(tick_interval=0))
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:

        def make() -> Node:
            return Node(real_venue_config(twin.base_url, twin.ws_url, journal, RECORDER))

        first = make()
        async with running(first) as summary:
            await eventually(lambda: first.tallies.matches == 2)
        assert summary["matches"] == 2
        second = make()
        async with running(second) as again:
            rec = second.strategies[0]
            assert isinstance(rec, Recorder)
            await eventually(lambda: second.tallies.matches == 2)  # only its own two fills
            assert not sent_ids(first) & sent_ids(second)  # client order ids never reused
        assert again["matches"] == 2
