"""Twin settings: the shipped YAML loads, typos and bad values fail with their path."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from framework.twin.demo import DEMO_ADDRESS, DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.settings import TwinSettings, load_settings, settings_from_mapping
from framework.venue.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_config_loads_and_matches_the_defaults() -> None:
    loaded = load_settings(ROOT / "configs" / "venue.yaml")
    defaults = TwinSettings()
    assert loaded.pairs == defaults.pairs
    assert loaded.fees == defaults.fees
    assert loaded.batch_mode == "partial" and loaded.timestamp_window == 30
    assert loaded.demo_balance == Decimal("100000")
    assert loaded.server == defaults.server
    assert loaded.received_orders_max_bytes == defaults.received_orders_max_bytes


def test_decimals_may_be_yaml_numbers(tmp_path: Path) -> None:
    path = tmp_path / "twin.yaml"
    path.write_text("slippage: 0.001\nfees: {maker: 0.0001, taker: '0.0004'}\n")
    settings = load_settings(path)
    assert settings.slippage == Decimal("0.001")
    assert settings.fees.maker == Decimal("0.0001")


def test_unknown_keys_are_refused_with_their_path(tmp_path: Path) -> None:
    path = tmp_path / "twin.yaml"
    path.write_text("pairs:\n  ETH-USD:\n    rules:\n      max_levr: 20\n")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert str(path) in str(err.value)
    assert "max_levr" in str(err.value)


def test_bad_values_are_refused_with_their_path() -> None:
    with pytest.raises(ConfigError, match=r"pairs\.ETH-USD\.rules\.max_lever: expected int"):
        settings_from_mapping({"pairs": {"ETH-USD": {"rules": {"max_lever": "lots"}}}})
    with pytest.raises(ConfigError, match="batch_mode"):
        settings_from_mapping({"batch_mode": "sometimes"})
    with pytest.raises(ConfigError, match="share between 0 and 1"):
        settings_from_mapping({"faults": {"busy_rate": 2}})
    with pytest.raises(ConfigError, match="BASE-QUOTE"):
        settings_from_mapping({"pairs": {"ethusd": {}}})
    with pytest.raises(ConfigError, match="needs address"):
        settings_from_mapping({"accounts": [{"api_key": "k"}]})


def test_broken_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "twin.yaml"
    path.write_text("seed: 1\npairs: [\n")
    with pytest.raises(ConfigError, match="line"):
        load_settings(path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "nope.yaml")


def test_delivery_time_needs_a_zone_as_in_the_daemon_config() -> None:
    with pytest.raises(ConfigError, match="with a time zone"):
        settings_from_mapping(
            {"pairs": {"ETH-USD": {"rules": {"delivery_time": "2030-01-01 08:00:00"}}}}
        )
    settings = settings_from_mapping(
        {"pairs": {"ETH-USD": {"rules": {"delivery_time": "2030-01-01T08:00:00Z"}}}}
    )
    delivery = settings.pairs["ETH-USD"].rules.delivery_time
    assert delivery is not None and delivery.utcoffset() is not None


def test_errors_name_the_line_of_the_bad_value(tmp_path: Path) -> None:
    path = tmp_path / "twin.yaml"
    path.write_text("seed: 1\nfaults:\n  busy_rate: 2\n")
    with pytest.raises(ConfigError, match=r"faults: busy_rate is a share .* \(line 3\)"):
        load_settings(path)


def test_demo_key_pair_is_consistent() -> None:
    from eth_account import Account

    assert Account.from_key(DEMO_PRIVATE_KEY).address == DEMO_ADDRESS
    assert DEMO_API_KEY.startswith("st_")


def test_order_management_settings_are_validated() -> None:
    settings = settings_from_mapping({"order_management": False, "order_history_limit": 10})
    assert (settings.order_management, settings.order_history_limit) == (False, 10)
    assert TwinSettings().order_management is True
    assert TwinSettings().max_cancel_ids == 20
    with pytest.raises(ConfigError, match="order_history_limit must be at least 1"):
        settings_from_mapping({"order_history_limit": 0})
    with pytest.raises(ConfigError, match="max_cancel_ids"):
        settings_from_mapping({"max_cancel_ids": -1})


@pytest.mark.parametrize(
    "name", ["match_history_limit", "client_id_history_limit", "received_orders_limit"]
)
def test_memory_bounds_default_to_100000_and_are_validated(name: str) -> None:
    assert getattr(TwinSettings(), name) == 100_000
    assert getattr(settings_from_mapping({name: 7}), name) == 7
    with pytest.raises(ConfigError, match=f"{name} must be at least 1"):
        settings_from_mapping({name: 0})


def test_server_limits_default_load_and_are_validated() -> None:
    limits = TwinSettings().server
    assert (limits.max_body_bytes, limits.max_header_bytes) == (65_536, 16_384)
    assert (limits.header_timeout, limits.body_timeout, limits.keep_alive_timeout) == (10, 10, 5)
    assert (limits.max_connections, limits.ws_max_message_bytes) == (None, 65_536)
    assert TwinSettings().received_orders_max_bytes == 32 * 1024 * 1024
    loaded = settings_from_mapping({"server": {"max_body_bytes": 4096, "max_connections": 9}})
    assert (loaded.server.max_body_bytes, loaded.server.max_connections) == (4096, 9)
    with pytest.raises(ConfigError, match=r"server: max_body_bytes must be at least 1, got 0"):
        settings_from_mapping({"server": {"max_body_bytes": 0}})
    with pytest.raises(ConfigError, match="header_timeout must be above 0, got 0"):
        settings_from_mapping({"server": {"header_timeout": 0}})
    with pytest.raises(ConfigError, match="max_connections must be at least 1"):
        settings_from_mapping({"server": {"max_connections": 0}})
    with pytest.raises(ConfigError, match="max_body_byte"):
        settings_from_mapping({"server": {"max_body_byte": 1}})
    with pytest.raises(ConfigError, match="received_orders_max_bytes must be at least 1"):
        settings_from_mapping({"received_orders_max_bytes": 0})
