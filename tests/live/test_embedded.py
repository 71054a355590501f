"""The embedded venue: the twin trades exactly the configured pairs, and says which it invents."""

from __future__ import annotations

import logging

import pytest

from framework.config import parse_config
from framework.live.embedded import open_venue

pytestmark = pytest.mark.anyio

CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
  SOL-USD: {}
strategies:
  - {name: p, class: "strategies.pulse:Pulse", params: {pair: ETH-USD}}
"""


async def test_a_pair_the_twin_does_not_know_is_traded_and_said_to_be_play_prices(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="framework.node")
    async with open_venue(parse_config(CONFIG, env={})) as venue:
        assert venue.twin is not None
        assert sorted(venue.twin.exchange.markets) == ["ETH-USD", "SOL-USD"]
        told = [r.getMessage() for r in caplog.records if r.name == "framework.node"]
        assert told == [
            "embedded venue twin: SOL-USD is not a pair it knows (ETH-USD, BTC-USD); its mark"
            " starts at 2000 and walks from there: play prices, not the market's"
        ]


HISTORY = ("order_history_limit", "match_history_limit", "client_id_history_limit")
KEPT = 10_000
"""What the embedded twin keeps of each (the twin's own default is 100000: some 150 MB)."""


async def test_the_embedded_twin_keeps_a_bounded_history_unless_venue_twin_sets_one() -> None:
    async with open_venue(parse_config(CONFIG, env={})) as venue:
        assert venue.twin is not None
        kept = venue.twin.settings
        assert [getattr(kept, name) for name in HISTORY] == [KEPT] * 3
        # received copies are only the tests' ground truth: a daemon keeps a few of them
        assert kept.received_orders_limit == 1_000
    chosen = CONFIG.replace(
        "{embedded: true}", "{embedded: true, twin: {order_history_limit: 500}}"
    )
    async with open_venue(parse_config(chosen, env={})) as venue:
        assert venue.twin is not None
        kept = venue.twin.settings
        assert [getattr(kept, name) for name in HISTORY] == [500] + [KEPT] * 2
