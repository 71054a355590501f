"""The twin's market section names the fill rule its exchange fills resting orders by."""

from __future__ import annotations

import pytest

from framework.twin import VenueTwin
from framework.twin.settings import settings_from_mapping
from framework.venue.errors import ConfigError


@pytest.mark.parametrize("rule", ["touch", "through", "queue"])
def test_market_fill_rule_reaches_the_twins_exchange(rule: str) -> None:
    settings = settings_from_mapping({"market": {"enabled": True, "fill_rule": rule}})
    assert settings.market.fill_rule == rule
    assert VenueTwin(settings, port=0).exchange.fill_rule.rule == rule


def test_the_twins_default_rule_is_queue_and_a_bad_one_is_located() -> None:
    assert VenueTwin(settings_from_mapping({}), port=0).exchange.fill_rule.rule == "queue"
    with pytest.raises(ConfigError, match=r"market\.fill_rule: fifo"):
        settings_from_mapping({"market": {"fill_rule": "fifo"}})
