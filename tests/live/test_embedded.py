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
