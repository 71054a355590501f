"""Config loading: types, ${ENV} interpolation, and errors naming the YAML path and line."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path

import pytest

from framework import Strategy
from framework.config import Config, ConfigProblems, Secret, load_config, parse_config
from framework.venue.rules import PairRules

ROOT = Path(__file__).resolve().parent.parent
SECRET = "0x" + "ab" * 32

EMBEDDED = """\
venue:
  embedded: true
pairs:
  ETH-USD: {}
strategies:
  - name: grid
    class: strategies.ladder:Ladder
    params:
      pair: ETH-USD
"""

REAL = """\
venue:
  base_url: https://venue.example
  ws_url: wss://venue.example/api/market/ws
  api_key: ${PERP_API_KEY}
  api_secret: ${PERP_API_SECRET}
pairs:
  ETH-USD: {}
strategies:
  - name: grid
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD}
journal:
  path: journal.sqlite
"""

REAL_ENV = {"PERP_API_KEY": "st_" + "k" * 40, "PERP_API_SECRET": SECRET}


def problems_of(text: str, env: dict[str, str] | None = None) -> list[str]:
    """The problem lines parse_config reports for text (fails when it accepts it)."""
    with pytest.raises(ConfigProblems) as caught:
        parse_config(text, env=env or {})
    return list(caught.value.problems)


def test_minimal_embedded_config_gets_defaults() -> None:
    config = parse_config(EMBEDDED, env={})
    assert config.venue.embedded is True
    assert config.venue.sign_type == 2
    assert config.pairs == {"ETH-USD": PairRules()}
    assert config.coins() == ["USD"]
    assert config.strategies[0].class_ == "strategies.ladder:Ladder"
    assert config.polling.page_size == 50


def test_unknown_key_is_reported_with_its_path_and_line() -> None:
    text = EMBEDDED.replace("  embedded: true\n", "  embedded: true\n  base_urll: x\n")
    assert problems_of(text) == [
        "venue.base_urll: unknown key (did you mean 'base_url'?); expected one of: api_key,"
        " api_secret, base_url, embedded, language, mode, order_paths, paper, sign_type,"
        " timeout_s, twin, ws_url (line 3)"
    ]


def test_wrong_type_in_strategy_params_names_path_and_line() -> None:
    text = EMBEDDED + "      levels: ten\n"
    assert problems_of(text) == ["strategies[0].params.levels: expected int, got 'ten' (line 10)"]


class DataclassParams(Strategy):
    """Declares its params as a dataclass."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Params:
        """Its params."""

        pair: str
        quantity: Decimal = Decimal("0.01")


class PlainParams(Strategy):
    """Declares its params as a plain class: nothing could check them."""

    class Params:
        """Its params."""

        pair: str


def test_params_declared_as_a_dataclass_are_checked_and_a_plain_class_is_refused() -> None:
    text = EMBEDDED.replace("strategies.ladder:Ladder", "tests.test_config:DataclassParams")
    assert problems_of(text + "      quantity: abc\n") == [
        "strategies[0].params.quantity: expected decimal number, got 'abc' (line 10)"
    ]
    plain = EMBEDDED.replace("strategies.ladder:Ladder", "tests.test_config:PlainParams")
    assert problems_of(plain) == [
        "strategies[0].class: tests.test_config:PlainParams.Params must be an attrs class or a"
        " dataclass (its fields are the params), got"
        " <class 'tests.test_config.PlainParams.Params'> (line 7)"
    ]


def test_wrong_type_in_a_pair_rule_names_path_and_line() -> None:
    text = EMBEDDED.replace("  ETH-USD: {}\n", "  ETH-USD:\n    min_quantity: lots\n")
    assert problems_of(text) == [
        "pairs.ETH-USD.min_quantity: expected decimal number, got 'lots' (line 5)"
    ]


def test_every_problem_is_reported_in_file_order() -> None:
    text = EMBEDDED.replace("pairs:\n", "polling:\n  page_size: many\npairs:\n") + "logging: 3\n"
    assert problems_of(text) == [
        "polling.page_size: expected int, got 'many' (line 4)",
        "logging: expected a mapping, got 3 (line 12)",
    ]


def test_missing_required_key_is_reported() -> None:
    text = EMBEDDED.replace("  - name: grid\n    class:", "  - class:")
    assert problems_of(text) == ["strategies[0].name: required key is missing (line 6)"]


def test_missing_environment_variable_is_named() -> None:
    env = {"PERP_API_KEY": "st_key"}
    assert problems_of(REAL, env) == [
        "venue.api_secret: environment variable PERP_API_SECRET is not set (line 5)"
    ]


def test_environment_values_are_interpolated_and_typed() -> None:
    text = REAL + "metrics:\n  enabled: ${METRICS_ON}\n  port: ${METRICS_PORT:-9100}\n"
    config = parse_config(text, env={**REAL_ENV, "METRICS_ON": "true"})
    assert config.venue.api_key == REAL_ENV["PERP_API_KEY"]
    assert config.venue.api_secret == Secret(SECRET)
    assert config.metrics.enabled is True
    assert config.metrics.port == 9100


def test_dollar_dollar_brace_is_a_literal() -> None:
    text = EMBEDDED.replace("      pair: ETH-USD\n", "      pair: ETH-USD\n      note: $${HOME}\n")
    config = parse_config(text, env={}, resolve_strategies=False)
    assert config.strategies[0].params["note"] == "${HOME}"


def test_api_secret_is_hidden_from_repr_and_type_errors() -> None:
    config = parse_config(REAL, env=REAL_ENV)
    assert SECRET not in repr(config)
    assert SECRET not in str(config.venue.api_secret)
    assert config.secrets() == [SECRET]
    text = REAL.replace("${PERP_API_SECRET}", "[123456789]")
    found = problems_of(text, REAL_ENV)
    assert found == ["venue.api_secret: expected string, got a secret value (line 5)"]


def test_a_malformed_api_secret_is_refused_without_echoing_it() -> None:
    bad = "0x" + "zz" * 32
    found = problems_of(REAL, {**REAL_ENV, "PERP_API_SECRET": bad})
    assert len(found) == 1
    assert found[0].startswith("venue.api_secret: not a key for sign_type 2")
    assert bad not in found[0]


def test_hex_looking_scalars_stay_strings() -> None:
    text = REAL.replace("${PERP_API_KEY}", "0x1f").replace("${PERP_API_SECRET}", SECRET)
    config = parse_config(text, env={})
    assert config.venue.api_key == "0x1f"
    assert config.venue.api_secret == Secret(SECRET)


def test_real_venue_needs_credentials_and_a_journal() -> None:
    text = "pairs: {ETH-USD: {}}\nstrategies: [{name: a, class: 'strategies.ladder:Ladder', params: {pair: ETH-USD}}]\n"
    found = problems_of(text)
    assert [p.split(":")[0] for p in found] == [
        "venue.base_url",
        "venue.ws_url",
        "venue.api_key",
        "venue.api_secret",
        "journal.path",
    ]


def test_embedded_venue_refuses_credentials() -> None:
    text = EMBEDDED.replace("  embedded: true\n", "  embedded: true\n  api_key: st_x\n")
    assert problems_of(text) == [
        "venue.api_key: must not be set with venue.embedded: true (the twin supplies it) (line 3)"
    ]


def test_strategy_module_that_does_not_exist_is_reported() -> None:
    text = EMBEDDED.replace("strategies.ladder:Ladder", "strategies.nope:Ladder")
    found = problems_of(text)
    assert len(found) == 1
    assert found[0].startswith("strategies[0].class: ")
    assert "module 'strategies.nope' not found" in found[0]
    assert found[0].endswith("(line 7)")


def test_strategy_class_that_is_not_a_strategy_is_reported() -> None:
    text = EMBEDDED.replace("strategies.ladder:Ladder", "decimal:Decimal")
    found = problems_of(text)
    assert len(found) == 1
    assert "not a subclass of framework.Strategy" in found[0]
    assert found[0].endswith("(line 7)")


def test_strategy_class_without_module_colon_class_form_is_reported() -> None:
    text = EMBEDDED.replace("strategies.ladder:Ladder", "Ladder")
    assert problems_of(text) == [
        "strategies[0].class: expected 'module:Class', got 'Ladder' (line 7)"
    ]


def test_strategy_pair_must_be_configured() -> None:
    text = EMBEDDED.replace("      pair: ETH-USD\n", "      pair: SOL-USD\n")
    assert problems_of(text) == [
        "strategies[0].params.pair: pair 'SOL-USD' is not configured under `pairs:` (line 9)"
    ]


def test_duplicate_keys_and_strategy_names_are_refused() -> None:
    text = (
        EMBEDDED
        + "  - name: grid\n    class: strategies.ladder:Ladder\n    params: {pair: ETH-USD}\npairs: {}\n"
    )
    assert problems_of(text) == [
        "pairs: duplicate key (line 13)",
    ]
    text = (
        EMBEDDED
        + "  - name: grid\n    class: strategies.ladder:Ladder\n    params: {pair: ETH-USD}\n"
    )
    assert problems_of(text) == ["strategies[1].name: duplicate strategy name (line 10)"]


def test_invalid_yaml_is_reported_with_a_line() -> None:
    found = problems_of("venue:\n  embedded: [true\npairs: {}\n")
    assert len(found) == 1
    assert found[0].startswith("<config>: not valid YAML: ")
    assert found[0].endswith("(line 3)")


def test_a_tab_that_breaks_the_yaml_is_named() -> None:
    """Found by a first-time reader: a tab gave only 'found character that cannot start any
    token', which does not say what the character is."""
    (found,) = problems_of("venue:\n\tembedded: true\npairs: {}\n")
    assert found.startswith("<config>: not valid YAML: ")
    assert found.endswith(": the line holds a tab; YAML indents with spaces only (line 2)")
    (other,) = problems_of("venue:\n  embedded: [true\npairs: {}\n")  # no tab: no word of one
    assert "tab" not in other


def test_execution_settings_are_structured() -> None:
    text = EMBEDDED + "execution:\n  linger_ms: 5\n  risk:\n    kill_switch: true\n"
    config = parse_config(text, env={})
    assert config.execution.linger_ms == 5
    assert config.execution.risk.kill_switch is True
    text = EMBEDDED + "execution:\n  linger_ms: soon\n"
    assert problems_of(text) == ["execution.linger_ms: expected int, got 'soon' (line 11)"]


def test_embedded_twin_settings_are_checked_too() -> None:
    text = EMBEDDED.replace(
        "  embedded: true\n", "  embedded: true\n  twin:\n    prices: {tick_interval: fast}\n"
    )
    assert problems_of(text) == [
        "venue.twin.prices.tick_interval: expected number, got 'fast' (line 4)"
    ]
    text = EMBEDDED.replace("  embedded: true\n", "  embedded: true\n  twin: {port: 80}\n")
    assert problems_of(text)[0].startswith("venue.twin.port: set by the node")


def test_load_config_reads_a_file_and_names_unreadable_ones(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(EMBEDDED, encoding="utf-8")
    assert isinstance(load_config(path), Config)
    with pytest.raises(ConfigProblems) as caught:
        load_config(tmp_path / "missing.yaml")
    assert str(caught.value).startswith(f"{tmp_path / 'missing.yaml'}: cannot read")


@pytest.mark.parametrize("name", ["demo.yaml", "ladder.yaml", "pulse.yaml"])
def test_shipped_embedded_configs_are_valid(name: str) -> None:
    config = load_config(ROOT / "configs" / name, env={})
    assert config.venue.embedded is True
    assert config.strategies


def test_live_example_config_is_valid_with_its_environment() -> None:
    config = load_config(ROOT / "configs" / "live.example.yaml", env=REAL_ENV)
    assert config.venue.embedded is False
    assert config.venue.api_secret == Secret(SECRET)
    with pytest.raises(ConfigProblems) as caught:
        load_config(ROOT / "configs" / "live.example.yaml", env={})
    assert "environment variable PERP_API_KEY is not set" in str(caught.value)


@pytest.mark.parametrize("value", ["-1", "86401", ".nan"])
def test_positions_interval_is_bounded(value: str) -> None:
    text = EMBEDDED.replace("pairs:\n", f"polling:\n  positions_interval_s: {value}\npairs:\n")
    (problem,) = problems_of(text)
    assert problem.startswith("polling.positions_interval_s: must be between 0 and 86400")


def test_the_market_section_is_read_per_pair_with_defaults() -> None:
    text = EMBEDDED + (
        "market:\n"
        "  stale_after_s: 4\n"
        "  pairs:\n"
        "    ETH-USD: {channels: [trade, kline], periods: [1MIN, 5MIN], index_interval_s: 30}\n"
    )
    market = parse_config(text, env={}).market
    eth = market.pairs["ETH-USD"]
    assert (eth.channels, eth.periods, eth.mark_interval_s, eth.index_interval_s) == (
        ["trade", "kline"],
        ["1MIN", "5MIN"],
        5.0,
        30.0,
    )
    assert market.stale_after("ETH-USD") == 4.0
    assert market.stale_after("BTC-USD") is None  # nothing feeds it: never stale
    assert parse_config(EMBEDDED, env={}).market.stale_after("ETH-USD") is None


def test_every_bad_value_of_the_market_section_is_one_located_line() -> None:
    text = EMBEDDED + (
        "market:\n"
        "  stale_after_s: 0\n"
        "  pairs:\n"
        "    ETH-USD: {channels: [trade, book, trade], periods: [1MN], mark_interval_s: -2}\n"
        "    BTC-USD: {}\n"
    )
    assert problems_of(text) == [
        "market.stale_after_s: must be > 0 and at most 86400 s, got 0.0 (line 11)",
        "market.pairs.ETH-USD.channels[1]: expected one of trade, depth, kline, got 'book' (line 13)",
        "market.pairs.ETH-USD.channels: each channel at most once (line 13)",
        "market.pairs.ETH-USD.periods[0]: expected a bar period such as 1MIN, 5MIN, 1HOUR or"
        " 1DAY, got '1MN' (line 13)",
        "market.pairs.ETH-USD.mark_interval_s: must be between 0 (never) and 86400 s, got -2.0"
        " (line 13)",
        "market.pairs.BTC-USD: pair 'BTC-USD' is not configured under `pairs:` (line 14)",
    ]


def test_a_market_pair_with_no_channel_and_no_poll_is_one_located_line() -> None:
    text = EMBEDDED + "market:\n  pairs:\n    ETH-USD: {channels: [], mark_interval_s: 0}\n"
    assert problems_of(text) == [
        "market.pairs.ETH-USD: no channel and no poll: it would never hear a price (9007 on"
        " every market order) (line 12)"
    ]
    fed = "\n  source: tests.review.test_review_27:RefSource\n"
    assert parse_config(text + fed, env={}).market.stale_after("ETH-USD") == 10.0  # the source


def test_a_reference_price_of_a_pair_not_traded_is_located() -> None:
    text = EMBEDDED + "execution:\n  risk:\n    reference_prices: {ETH-USD: '2000', BTC-USD: '1'}\n"
    assert problems_of(text) == [
        "execution.risk.reference_prices.BTC-USD: pair 'BTC-USD' is not configured under"
        " `pairs:` (line 12)"
    ]
