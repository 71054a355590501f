"""Issue 27's leftovers: the run summary counts the market, and klines (which name no pair,
only their contractPairId) are attributed to the right pair when several are subscribed.

A real Node runs against a venue twin over real sockets on 127.0.0.1, with the small market
server of ``test_market_feed`` mounted in front of the twin's routes; the pair list (and its
contractPairIds) is the twin's own ``/api/third/info/pairs``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from framework import OrderIntent, Strategy
from framework.config import Config, parse_config
from framework.engine.events import OrderUpdate
from framework.engine.intents import OrderStatus
from framework.live.market_pairs import PairOf
from framework.live.node import Node
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from framework.venue.market import KLINE, TRADE, Bar
from tests.live.conftest import eventually
from tests.live.test_market_feed import T0, WS_PATH, MarketServer
from tests.node_running import running

pytestmark = pytest.mark.anyio

PAIRS = ("ETH-USD", "BTC-USD")


class Bars(Strategy):
    """Keeps the bars it hears."""

    def on_start(self) -> None:
        self.bars: list[Bar] = []

    def on_bar(self, bar: Bar) -> None:
        self.bars.append(bar)


class StaleTaker(Strategy):
    """Sends one market order at on_start, on a pair whose market has not been heard."""

    def on_start(self) -> None:
        self.refusals: list[int | None] = []
        self.submit(OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal("0.01")))

    def on_order(self, update: OrderUpdate) -> None:
        if update.status is OrderStatus.REJECTED:
            self.refusals.append(update.code)


def kline(close: str, pair_id: object, n: int) -> dict[str, Any]:
    """An api_kline frame as the docs show it: no pair, only contractPairId."""
    return {
        "event": "api_kline",
        "data": {
            "amount": "100", "close": close, "count": 3, "high": "2010", "low": "1990",
            "open": "2000", "period": "1MIN", "quantity": "0.05", "time": T0 + n,
            "contractPairId": pair_id,
        },
    }  # fmt: skip


def config(twin: VenueTwin, tmp_path: Path, *, strategy: str, market: str) -> Config:
    """A node on the twin trading both pairs, with the market section given."""
    text = f"""\
venue:
  base_url: {twin.base_url}
  ws_url: {twin.ws_url}
  api_key: ${{KEY}}
  api_secret: ${{SECRET}}
pairs:
  ETH-USD: {{}}
  BTC-USD: {{}}
polling:
  match_interval_s: 0.1
journal:
  path: {tmp_path / "journal.sqlite"}
{market}strategies:
  - name: one
    class: tests.live.test_market_pairs:{strategy}
    pairs: [ETH-USD, BTC-USD]
"""
    return parse_config(text, env={"KEY": DEMO_API_KEY, "SECRET": DEMO_PRIVATE_KEY})


def section(kline_pairs: tuple[str, ...] = PAIRS) -> str:
    """A market section: both pairs' trades, klines of kline_pairs, no polls."""
    lines = [f"market:\n  ws_path: {WS_PATH}\n  pairs:\n"]
    for pair in PAIRS:
        channels = "[trade, kline]" if pair in kline_pairs else "[trade]"
        lines.append(
            f"    {pair}: {{channels: {channels}, mark_interval_s: 0, index_interval_s: 0}}\n"
        )
    return "".join(lines)


@pytest.fixture
async def venue(anyio_backend: str) -> AsyncIterator[tuple[VenueTwin, MarketServer]]:
    """A twin on 127.0.0.1 (both pairs) with the test's market in front of it."""
    settings = TwinSettings(prices=PriceSettings(tick_interval=0))
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        market = MarketServer()
        market.mount(twin)
        yield twin, market


def subscribed(node: Node) -> bool:
    """Whether the market socket has had every subscription acknowledged."""
    feed = node.market_feed
    return feed is not None and feed.stream is not None and feed.stream.stats.connects >= 1


async def test_klines_of_two_pairs_go_to_the_pair_their_contract_pair_id_names(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path
) -> None:
    twin, market = venue
    ids = {pair: twin.exchange.markets[pair].contract_pair_id for pair in PAIRS}
    assert len(set(ids.values())) == 2
    node = Node(config(twin, tmp_path, strategy="Bars", market=section()))
    async with running(node) as summary:
        await eventually(lambda: subscribed(node))
        strategy = node.strategies[0]
        assert isinstance(strategy, Bars)
        market.send(
            kline("2003", ids["ETH-USD"], 1),
            kline("30010", str(ids["BTC-USD"]), 2),  # an id as a numeric string
            kline("1", 999, 3),  # no listed pair has this id: refused, never guessed
            kline("2", None, 4),  # no id at all
            kline("2004", ids["ETH-USD"], 5),
        )
        await eventually(lambda: len(strategy.bars) == 3)
    assert [(b.pair, b.close) for b in strategy.bars] == [
        ("ETH-USD", Decimal("2003")),
        ("BTC-USD", Decimal("30010")),
        ("ETH-USD", Decimal("2004")),
    ]
    assert node.kernel.market.bar("BTC-USD", "1MIN") is not None
    counters = summary["market"]
    assert counters["events"] == {"kline": 3}
    assert counters["bad_frames"] == {"unattributable": 2}


async def test_klines_of_the_one_pair_subscribing_them_need_no_pair_list(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path
) -> None:
    twin, market = venue
    node = Node(config(twin, tmp_path, strategy="Bars", market=section(("BTC-USD",))))
    assert node.config.market.pairs["ETH-USD"].channels == ["trade"]
    async with running(node):
        await eventually(lambda: subscribed(node))
        strategy = node.strategies[0]
        assert isinstance(strategy, Bars)
        market.send(kline("30010", 999, 1))  # whatever its id: only BTC-USD asked for klines
        await eventually(lambda: len(strategy.bars) == 1)
    assert strategy.bars[0].pair == "BTC-USD"


def test_pair_of_never_guesses() -> None:
    pair_of = PairOf(
        [(TRADE, "ETH-USD"), (TRADE, "BTC-USD"), (KLINE, "ETH-USD"), (KLINE, "BTC-USD")]
    )
    assert pair_of.needs_ids and pair_of.shared == [KLINE, TRADE]
    pair_of.learn({1: "ETH-USD", 2: "BTC-USD", 3: "SOL-USD"})
    assert pair_of.ids == {1: "ETH-USD", 2: "BTC-USD"}  # only the subscribed pairs
    frame = {"event": KLINE, "data": [{"contractPairId": 1}, {"contractPairId": 2}]}
    assert pair_of.of(_text(frame)) is None  # mixed ids
    assert pair_of.of(_text({"event": KLINE, "data": [{"contractPairId": 2}]})) == "BTC-USD"
    assert pair_of.of(_text({"event": KLINE, "data": {"contractPairId": 3}})) is None
    assert pair_of.of("[1, 2]") is None
    assert pair_of.of("not json") is None


def _text(frame: dict[str, Any]) -> str:
    return orjson.dumps(frame).decode()


async def test_the_summary_counts_the_market_and_the_orders_refused_as_stale(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path
) -> None:
    twin, market = venue
    node = Node(config(twin, tmp_path, strategy="StaleTaker", market=section()))
    async with running(node) as summary:
        await eventually(lambda: subscribed(node))
        strategy = node.strategies[0]
        assert isinstance(strategy, StaleTaker)
        await eventually(lambda: strategy.refusals == [9007])
        market.send("not json {", kline("2003", 1, 1))
        feed = node.market_feed
        assert feed is not None and feed.stream is not None
        stats = feed.stream.stats
        await eventually(lambda: stats.frames == stats.acks + 2)
    assert summary["market"] == {
        "events": {"kline": 1},
        "gaps": 0,
        "gap_s": 0.0,
        "bad_frames": {"not_json": 1},
        "poll_errors": {},
        "stale_refusals": 1,
    }


async def test_without_a_market_section_the_summary_has_no_market(
    venue: tuple[VenueTwin, MarketServer], tmp_path: Path
) -> None:
    twin, _ = venue
    node = Node(config(twin, tmp_path, strategy="Bars", market=""))
    async with running(node) as summary:
        pass
    assert "market" not in summary
    assert node.market_feed is not None and node.market_feed.stream is None
