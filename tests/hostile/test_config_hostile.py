"""Hostile and broken YAML files: one clear line naming the file, in bounded time and memory.

The commands run in subprocesses with a 256 MiB data limit (the old loader took 453 MB on a
1 MB flow list and grew without bound on an alias bomb) and a timeout that fails the test
rather than letting it hang. No timing is asserted.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from framework import yaml_read
from framework.config import ConfigProblems, load_config, parse_config
from tests.test_config import EMBEDDED

ROOT = Path(__file__).resolve().parents[2]
DATA_LIMIT = 256 * 1024 * 1024
TIMEOUT_S = 60

SECRET = "hmac-Secret-Value-8d1f07c2"
"""An HMAC secret (sign_type 1): not shaped like a hex key, so only the loader can hide it."""
LEVEL_LINE = "logging.level: expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got '***'"

REAL = """\
venue:
  base_url: https://venue.example
  ws_url: wss://venue.example/ws
  api_key: st_kkkkkkkkkkkkkkkkkkkkkkkk
  api_secret: ${PERP_API_SECRET}
  sign_type: 1
pairs:
  ETH-USD: {}
strategies:
  - name: a
    class: strategies.pulse:Pulse
    params: {pair: ETH-USD}
journal:
  path: journal.sqlite
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (DATA_LIMIT, DATA_LIMIT))


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python run.py ARGS`` from the repository, memory-limited; fails on the timeout."""
    return subprocess.run(
        [sys.executable, "run.py", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        preexec_fn=_limit_memory,
        check=False,
    )


def alias_bomb(depth: int = 9, width: int = 9) -> str:
    """The "billion laughs": each level a list of width aliases of the level below."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, depth + 1)]
    return "\n".join(lines) + "\n"


BOMB_LINE = (
    ": refused: aliases expand to more than 10000 values by *a3"
    " (an alias bomb? a config never needs that many) (line 5)"
)


@pytest.mark.parametrize(
    ("command", "code", "prefix"),
    [(("check", "-c"), 1, ""), (("venue", "--config"), 2, "venue: "), (("sweep", "-c"), 1, "")],
)
def test_every_yaml_entry_point_refuses_an_alias_bomb_in_one_line(
    tmp_path: Path, command: tuple[str, str], code: int, prefix: str
) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    result = run(*command, str(bomb))
    if result.stderr.startswith("sweep: needs the sweep extra"):
        pytest.skip("the sweep extra is not installed")
    assert (result.returncode, result.stdout) == (code, "")
    assert result.stderr.splitlines() == [f"{prefix}{bomb}{BOMB_LINE}"]


@pytest.mark.parametrize(
    ("command", "code", "prefix"),
    [(("venue", "--config"), 2, "venue: "), (("sweep", "-c"), 1, ""), (("backtest", "-c"), 1, "")],
)
def test_every_yaml_entry_point_says_a_file_is_not_utf8_in_one_line(
    tmp_path: Path, command: tuple[str, str], code: int, prefix: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b'prices:\n  tick_interval: "\xff"\n')
    result = run(*command, str(bad))
    if result.stderr.startswith("sweep: needs the sweep extra"):
        pytest.skip("the sweep extra is not installed")
    assert (result.returncode, result.stdout) == (code, "")
    assert result.stderr.splitlines() == [
        f"{prefix}{bad}: not UTF-8 text: byte 0xff at line 2, column 19 (invalid start byte)"
    ]


def test_a_secret_referenced_from_a_plain_key_is_never_printed(tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text(REAL + "logging:\n  level: ${PERP_API_SECRET}\n")
    result = run("check", "-c", str(config), env={"PERP_API_SECRET": SECRET})
    assert SECRET not in result.stdout + result.stderr
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [f"{LEVEL_LINE} (line 16)"]


BOOM = """\
from framework import Strategy


class Boom(Strategy):
    def __init__(self, name, context, params, **kw):
        super().__init__(name, context, params, **kw)
        raise ValueError(f"cannot use note {params['note']!r}")
"""


def test_check_hides_a_secret_a_strategy_quotes_when_it_fails(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text(BOOM)
    config = tmp_path / "bot.yaml"
    text = REAL.replace("strategies.pulse:Pulse", "boom:Boom")
    config.write_text(
        text.replace("{pair: ETH-USD}", '{pair: ETH-USD, note: "${PERP_API_SECRET}"}')
    )
    result = run("check", "-c", str(config), env={"PERP_API_SECRET": SECRET})
    assert SECRET not in result.stdout + result.stderr
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "strategies[0] (a): ValueError: cannot use note '***' (at boom.py:7)"
    ]


def test_a_literal_secret_aliased_under_a_plain_key_is_hidden() -> None:
    text = REAL.replace("${PERP_API_SECRET}", f"&s {SECRET}") + "logging:\n  level: *s\n"
    assert _problems(text, env={}) == [f"{LEVEL_LINE} (line 16)"]


def test_a_variable_named_like_a_secret_is_hidden_wherever_it_is_used() -> None:
    text = EMBEDDED + "logging:\n  level: ${MY_API_TOKEN}\n"
    assert _problems(text, env={"MY_API_TOKEN": SECRET}) == [f"{LEVEL_LINE} (line 11)"]


def test_a_twin_account_secret_is_hidden_wherever_it_is_used() -> None:
    twin = (
        "  twin:\n    accounts:\n      - {api_key: k1, hmac_secret: '${TWIN_KEY}'}\n"
        "logging:\n  level: ${TWIN_KEY}\n"
    )
    text = EMBEDDED.replace("  embedded: true\n", "  embedded: true\n" + twin.split("logging")[0])
    text += "logging:" + twin.split("logging:")[1]
    assert _problems(text, env={"TWIN_KEY": SECRET}) == [f"{LEVEL_LINE} (line 14)"]


def _problems(text: str, env: dict[str, str]) -> list[str]:
    """The problem lines of a config text, checked free of the secret."""
    with pytest.raises(ConfigProblems) as caught:
        parse_config(text, env=env, resolve_strategies=False)
    assert SECRET not in str(caught.value)
    return list(caught.value.problems)


def test_invalid_utf8_is_one_line_naming_the_byte_and_its_place(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(EMBEDDED.encode() + b"logging:\n  level: \xff\xfe\n")
    with pytest.raises(ConfigProblems) as caught:
        load_config(path)
    assert caught.value.problems == (
        f"{path}: not UTF-8 text: byte 0xff at line 11, column 10 (invalid start byte)",
    )


@pytest.mark.parametrize("libyaml", [True, False])
@pytest.mark.parametrize("flow", [True, False])
def test_deep_nesting_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flow: bool, libyaml: bool
) -> None:
    """The same line with or without libyaml (a machine without it refused differently)."""
    if not libyaml:
        monkeypatch.setattr(yaml_read, "_FAST_PARSER", None)
    elif yaml_read._FAST_PARSER is None:
        pytest.skip("PyYAML here has no libyaml")
    path = tmp_path / "deep.yaml"
    if flow:
        deep = "extra: " + "[" * 5000 + "]" * 5000 + "\n"
    else:
        deep = "".join("  " * i + f"k{i}:\n" for i in range(1000)) + "  " * 1000 + "v: 1\n"
    path.write_text(EMBEDDED + deep)
    with pytest.raises(ConfigProblems) as caught:
        load_config(path)
    assert caught.value.problems == (
        f"{path}: refused: nested more than 100 levels deep (line {10 if flow else 110})",
    )


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigProblems) as caught:
        parse_config(EMBEDDED + "extra: &x [1, *x]\n", source="loop.yaml", env={})
    assert caught.value.problems == (
        "loop.yaml: refused: alias *x refers to a collection that contains it (line 10)",
    )


def test_a_file_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(EMBEDDED + ("# padding\n" * 500_000))  # 5 MB of comments: valid YAML
    with pytest.raises(ConfigProblems) as caught:
        load_config(path)
    assert caught.value.problems == (
        f"{path}: refused: larger than 4194304 bytes (4 MiB), the most a YAML file may be",
    )


def test_a_control_character_is_one_line_with_its_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigProblems) as caught:
        parse_config(EMBEDDED + "extra: a\x00b\n", source="nul.yaml", env={})
    (line,) = caught.value.problems
    assert line.startswith("nul.yaml: not valid YAML: ")
    assert line.endswith("#x0000 (line 10)")


def test_a_one_megabyte_flow_list_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(EMBEDDED + "extra: [" + ",".join(["1"] * 500_000) + "]\n")
    result = run("check", "-c", str(path))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "extra: unknown key; expected one of: account, backtest, execution, journal, logging,"
        " market, metrics, node, pairs, polling, recording, shadow, sources, strategies, stream, venue"
        " (line 10)"
    ]


def test_half_a_million_wrong_items_make_a_short_report(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    text = EMBEDDED.split("strategies:")[0] + "strategies: [" + ",".join(["1"] * 500_000) + "]\n"
    path.write_text(text)
    result = run("check", "-c", str(path))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[:2] == [
        "strategies[0]: expected a mapping, got 1 (line 5)",
        "strategies[1]: expected a mapping, got 1 (line 5)",
    ]
    assert lines[-1] == "strategies: 499980 more items not checked after 20 wrong ones (line 5)"
    assert len(lines) == 21


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (alias_bomb(), "x.yaml" + BOMB_LINE),
        (
            "a: " + "[" * 5000 + "]" * 5000,
            "x.yaml: refused: nested more than 100 levels deep (line 1)",
        ),
        (
            "a: &x {b: *x}",
            "x.yaml: refused: alias *x refers to a collection that contains it (line 1)",
        ),
    ],
)
def test_without_libyaml_the_same_bounds_hold(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    monkeypatch.setattr(yaml_read, "_FAST_PARSER", None)  # PyYAML's pure-Python parser
    with pytest.raises(ConfigProblems) as caught:
        parse_config(text, source="x.yaml", env={})
    assert caught.value.problems == (expected,)


def test_backtest_refuses_deep_nesting_in_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("pairs: {ETH-USD: {}}\nx: " + "[" * 5000 + "]" * 5000 + "\n")
    result = run("backtest", "-c", str(deep))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [
        f"{deep}: refused: nested more than 100 levels deep (line 2)"
    ]
