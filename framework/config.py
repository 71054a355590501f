"""The daemon's configuration: attrs records read from one YAML file, checked as a whole.

Reading (YAML with lines, ${ENV} interpolation, strict types) is
:mod:`framework.yaml_attrs`; this module adds the records and the rules that span fields:
credentials versus ``venue.embedded``, URLs, pair names, ranges, unique strategy names, the
pairs strategies name, and -- unless ``resolve_strategies=False`` -- the strategy classes:
each ``class: module:Class`` is imported and, when the class declares ``Params`` (an attrs
class or a dataclass), its ``params`` are structured into it. Every problem is one line
``path: problem (line N)``, all reported at once in a :class:`ConfigProblems`.

``venue.mode: paper`` (or ``perpframe live --paper``: ``paper=True`` when reading) trades on
the in-process paper venue (:mod:`framework.paper`) while the market comes from the venue:
``venue.api_key``/``api_secret`` are then optional (together, and needed only for market
channels: the venue signs WebSocket subscribes), ``journal.path`` too, and ``venue.paper``
holds the paper venue's settings.

A backtest reads the same file with ``venue_used=False`` (after blanking the ``venue:``
section, see :func:`framework.backtest.runner.load_backtest_config`): no venue credentials and
no ``journal.path`` are required then.

``venue.api_secret`` is a :class:`Secret`: its repr and str never show the value, and error
messages never quote it. Every secret value the reader found (see :mod:`framework.yaml_read`:
the values under secret keys and of the environment variables they name) is replaced by
``***`` in every problem line, and kept in :attr:`Config.secret_values` for the log filter.

The file is read within the reader's bounds (4 MiB, 100 levels deep, 10000 aliased values):
a file past one is refused with one line naming it and the bound.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
import yaml

from framework.engine.execution import ExecutionSettings
from framework.market_config import MarketConfig, check_market
from framework.shadow_config import ShadowConfig, check_shadow
from framework.venue.errors import ConfigError
from framework.venue.rules import PairRules, settle_coin_of
from framework.venue_config import VenueConfig, check_paper, check_venue
from framework.yaml_attrs import (
    SECRET_KEYS,
    ConfigProblems,
    KeyPath,
    LineMap,
    Problems,
    Secret,
    by_line,
    format_path,
    read_yaml,
    read_yaml_file,
    structure,
)
from framework.yaml_lines import shown
from framework.yaml_read import read_config_text

__all__ = [
    "SECRET_KEYS",
    "AccountConfig",
    "Config",
    "ConfigProblems",
    "JournalConfig",
    "LoggingConfig",
    "MetricsConfig",
    "NodeConfig",
    "PollingConfig",
    "RecordingConfig",
    "Secret",
    "SourceConfig",
    "StrategyConfig",
    "StreamConfig",
    "VenueConfig",
    "beside_config",
    "format_path",
    "load_config",
    "load_live_config",
    "parse_config",
    "split_section",
    "structure_params",
]

T = TypeVar("T")

LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_NODE_NAME = re.compile(r"[A-Za-z0-9]{1,10}")
_PAIR_NAME = re.compile(r"[A-Za-z0-9]+-[A-Za-z0-9]+")
_CLASS_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


# ---------------------------------------------------------------------------------- records


@attrs.frozen(slots=True, kw_only=True)
class NodeConfig:
    """This node: its name prefixes generated client order ids ([A-Za-z0-9], up to 10)."""

    name: str = "pf"
    exit_when_all_stopped: bool = True
    """Stop the daemon (exit 1) once every strategy has been stopped for failing."""


@attrs.frozen(slots=True, kw_only=True)
class AccountConfig:
    """The account: settle_symbol is the settlement coin of pairs whose rules name none."""

    settle_symbol: str | None = None


@attrs.frozen(slots=True, kw_only=True)
class PollingConfig:
    """Match-result polling: every match_interval_s per pair; backfill starts from the oldest.

    Each poll re-reads a window below the newest match delivered, for fills the venue lists
    late: down to ``reread_ids`` ids below it, or to matches ``reread_age_s`` older than the
    newest read, whichever comes first (0 turns that bound off; both 0: no window).

    Every ``open_orders_interval_s`` the live node lists each pair's open orders and
    queries the tracked resting orders the list lacks (0: only at start). Every
    ``positions_interval_s`` it reads each pair's positions, for their unrealized PnL (0:
    only at start and after a reconnect).
    """

    match_interval_s: float = 1.0
    page_size: int = 50
    backfill: bool = False
    reread_age_s: float = 10.0
    reread_ids: int = 500
    open_orders_interval_s: float = 30.0
    positions_interval_s: float = 30.0


@attrs.frozen(slots=True, kw_only=True)
class StreamConfig:
    """WebSocket tuning: acknowledgement timeout, keepalive, silence and reconnect backoff."""

    ack_timeout_s: float = 5.0
    ping_interval_s: float = 10.0
    silence_timeout_s: float = 30.0
    backoff_initial_s: float = 0.2
    backoff_max_s: float = 10.0


@attrs.frozen(slots=True, kw_only=True)
class StrategyConfig:
    """One strategy instance: its unique name, ``class: module:Class`` and free params."""

    name: str
    class_: str
    params: dict[str, Any] = attrs.Factory(dict)
    pairs: list[str] | None = None
    """The pairs it trades; default: params.pair or params.pairs, else every pair."""


@attrs.frozen(slots=True, kw_only=True)
class SourceConfig:
    """An event source plugged in at the edge: its name, ``class: module:Class`` and params."""

    name: str
    class_: str
    params: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen(slots=True, kw_only=True)
class JournalConfig:
    """The SQLite journal; None means SQLite's private temporary database (embedded twin), and
    is refused with a real venue."""

    path: str | None = None


@attrs.frozen(slots=True, kw_only=True)
class RecordingConfig:
    """Where the recorder writes what came in (JSONL); None records nothing."""

    path: str | None = None


@attrs.frozen(slots=True, kw_only=True)
class LoggingConfig:
    """Log level and format: human lines, or JSON lines with ``json: true``."""

    level: str = "INFO"
    json: bool = False


@attrs.frozen(slots=True, kw_only=True)
class MetricsConfig:
    """The opt-in Prometheus endpoint (/metrics and /healthz)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 9464


@attrs.frozen(slots=True, kw_only=True)
class Config:
    """A whole daemon configuration, as read from one YAML file."""

    node: NodeConfig = NodeConfig()
    venue: VenueConfig = VenueConfig()
    account: AccountConfig = AccountConfig()
    pairs: dict[str, PairRules] = attrs.Factory(dict)
    polling: PollingConfig = PollingConfig()
    stream: StreamConfig = StreamConfig()
    execution: ExecutionSettings = ExecutionSettings()
    strategies: list[StrategyConfig] = attrs.Factory(list)
    sources: list[SourceConfig] = attrs.Factory(list)
    """Event sources (framework.engine.strategy.Source), live and in a backtest."""
    market: MarketConfig = MarketConfig()
    """The market events heard per pair (framework.market_config); none by default."""
    shadow: ShadowConfig = ShadowConfig()
    """A paper venue beside live trading, compared order by order (framework.shadow_config)."""
    journal: JournalConfig = JournalConfig()
    recording: RecordingConfig = RecordingConfig()
    logging: LoggingConfig = LoggingConfig()
    metrics: MetricsConfig = MetricsConfig()
    backtest: dict[str, Any] = attrs.Factory(dict)
    """``run.py backtest`` settings (framework.backtest.runner.BacktestSettings); unused live."""
    secret_values: frozenset[str] = attrs.field(
        init=False, default=frozenset(), repr=False, eq=False
    )
    """Every secret value the reader found in the file (not a YAML key): never to be shown."""

    def settle_coin(self, pair: str) -> str:
        """The settlement coin of one configured pair."""
        rules = self.pairs.get(pair)
        if rules is not None and rules.settle_coin:
            return rules.settle_coin
        return self.account.settle_symbol or settle_coin_of(pair)

    def coins(self) -> list[str]:
        """The settlement coins to subscribe and sync: one per distinct coin of the pairs."""
        return sorted({self.settle_coin(pair) for pair in self.pairs})

    def secrets(self) -> list[str]:
        """The configured secret values, for the log redaction filter."""
        found = set(self.secret_values)
        if self.venue.api_secret is not None:
            found.add(self.venue.api_secret.reveal())
        if self.venue.twin is not None:
            found.update(a.hmac_secret for a in self.venue.twin.accounts if a.hmac_secret)
        return sorted(s for s in found if s)


def beside_config(raw: str, config_file: str | Path) -> Path:
    """A file a config names: from the working directory, else beside the config file.

    As given when absolute, or when neither place has it (the rule strategy modules follow).
    """
    path = Path(raw)
    if path.is_absolute() or path.exists():
        return path
    beside = Path(config_file).parent / path
    return beside if beside.exists() else path


def structure_params(cls: type[T], params: Mapping[str, Any]) -> T:
    """A strategy's params dict as its ``Params`` class (attrs or dataclass), strictly typed."""
    return structure(dict(params), cls, at=("params",))


# ------------------------------------------------------------------------------ validation


def _check(config: Config, out: Problems, *, venue_used: bool = True) -> None:
    out.require(
        _NODE_NAME.fullmatch(config.node.name) is not None,
        ("node", "name"),
        "expected 1 to 10 letters or digits (it prefixes client order ids)",
    )
    if venue_used:
        check_venue(config.venue, out)
        check_paper(config.venue, config.market, out)
        check_shadow(config.shadow, config.venue, config.market, out)
    out.require(bool(config.pairs), ("pairs",), "at least one pair is required (e.g. ETH-USD: {})")
    for pair in config.pairs:
        out.require(
            _PAIR_NAME.fullmatch(pair) is not None,
            ("pairs", pair),
            "pair names look like BASE-QUOTE (e.g. ETH-USD)",
            key=True,
        )
    positive = [("polling", "match_interval_s")] + [
        ("stream", name) for name in attrs.fields_dict(StreamConfig)
    ]
    for section, name in positive:
        out.require(getattr(getattr(config, section), name) > 0, (section, name), "must be > 0")
    out.require(
        1 <= config.polling.page_size <= 100, ("polling", "page_size"), "must be between 1 and 100"
    )
    out.require(config.polling.reread_age_s >= 0, ("polling", "reread_age_s"), "must be >= 0")
    out.require(config.polling.reread_ids >= 0, ("polling", "reread_ids"), "must be >= 0")
    out.require(
        0 <= config.polling.open_orders_interval_s <= 86400,
        ("polling", "open_orders_interval_s"),
        "must be between 0 and 86400 (0: only at start)",
    )
    out.require(
        0 <= config.polling.positions_interval_s <= 86400,
        ("polling", "positions_interval_s"),
        "must be between 0 and 86400 (0: only at start and after a reconnect)",
    )
    check_market(config.market, config.pairs, out)
    for pair in config.execution.risk.reference_prices:
        out.require(
            pair in config.pairs,
            ("execution", "risk", "reference_prices", pair),
            f"pair {shown(pair)} is not configured under `pairs:`",
            key=True,
        )
    out.require(bool(config.strategies), ("strategies",), "at least one strategy is required")
    names: set[str] = set()
    for i, strategy in enumerate(config.strategies):
        out.require(
            strategy.name not in names, ("strategies", i, "name"), "duplicate strategy name"
        )
        out.require(bool(strategy.name.strip()), ("strategies", i, "name"), "must not be empty")
        names.add(strategy.name)
        _check_strategy_pairs(config, i, strategy, out)
        out.require(
            _CLASS_SPEC.fullmatch(strategy.class_) is not None,
            ("strategies", i, "class"),
            f"expected 'module:Class', got {shown(strategy.class_)}",
        )
    out.require(
        config.logging.level.upper() in LOG_LEVELS,
        ("logging", "level"),
        f"expected one of {', '.join(LOG_LEVELS)}, got {shown(config.logging.level)}",
    )
    out.require(0 <= config.metrics.port <= 65535, ("metrics", "port"), "must be in 0..65535")
    out.require(
        config.journal.path is not None
        or config.venue.embedded
        or config.venue.is_paper
        or not venue_used,
        ("journal", "path"),
        "required with a real venue (intents and match cursors must survive restarts)",
    )


def _check_strategy_pairs(
    config: Config, index: int, strategy: StrategyConfig, out: Problems
) -> None:
    """Every pair a strategy names (pairs, params.pair, params.pairs) must be configured."""
    named: list[tuple[KeyPath, object]] = []
    if strategy.pairs is not None:
        named += [(("strategies", index, "pairs", j), p) for j, p in enumerate(strategy.pairs)]
    else:
        if "pair" in strategy.params:
            named.append((("strategies", index, "params", "pair"), strategy.params["pair"]))
        pairs = strategy.params.get("pairs")
        if isinstance(pairs, list):
            named += [(("strategies", index, "params", "pairs", j), p) for j, p in enumerate(pairs)]
    for path, pair in named:
        out.require(
            pair in config.pairs, path, f"pair {shown(pair)} is not configured under `pairs:`"
        )


def _check_strategy_classes(config: Config, out: Problems) -> None:
    """Import every strategy and source class; structure a strategy's params when it declares
    a Params class."""
    from framework.engine.strategy import load_source, load_strategy

    for i, source in enumerate(config.sources):
        try:
            load_source(source.class_)
        except Exception as exc:
            out.add(("sources", i, "class"), str(exc) or type(exc).__name__)
    for i, strategy in enumerate(config.strategies):
        if not _CLASS_SPEC.fullmatch(strategy.class_):
            continue  # already reported
        try:
            cls = load_strategy(strategy.class_)
        except Exception as exc:
            out.add(("strategies", i, "class"), str(exc) or type(exc).__name__)
            continue
        params_cls = getattr(cls, "Params", None)
        if params_cls is None:
            continue
        if not isinstance(params_cls, type) or not (
            attrs.has(params_cls) or dataclasses.is_dataclass(params_cls)
        ):
            out.add(
                ("strategies", i, "class"),
                f"{strategy.class_}.Params must be an attrs class or a dataclass (its fields are"
                f" the params), got {params_cls!r}",
            )
            continue
        try:
            structure(strategy.params, params_cls, lines=out.lines, at=("strategies", i, "params"))
        except ConfigProblems as exc:
            out.found += exc.problems


# ------------------------------------------------------------------------------ entry points


def parse_config(
    text: str,
    *,
    source: str = "<config>",
    env: Mapping[str, str] | None = None,
    resolve_strategies: bool = True,
    venue_used: bool = True,
    paper: bool = False,
    shadow: bool = False,
) -> Config:
    """Read a YAML text into a Config, or raise ConfigProblems listing every problem.

    venue_used=False (a backtest): venue credentials and journal.path are not required.
    paper=True (``--paper``): as if the file said ``venue: {mode: paper}``.
    """
    data, lines = read_yaml(text, source=source, env=os.environ if env is None else env)
    return _config(
        data,
        lines,
        resolve_strategies=resolve_strategies,
        venue_used=venue_used,
        paper=paper,
        shadow=shadow,
    )


def _config(
    data: dict[str, Any],
    lines: LineMap,
    *,
    resolve_strategies: bool,
    venue_used: bool,
    paper: bool = False,
    shadow: bool = False,
) -> Config:
    if paper:
        venue = data.setdefault("venue", {})
        if isinstance(venue, dict):  # anything else is reported as the file has it
            venue["mode"] = "paper"
    if shadow:
        section = data.get("shadow")
        if section is None:
            section = data["shadow"] = {}
        if isinstance(section, dict):  # anything else is reported as the file has it
            section["enabled"] = True
    config = structure(data, Config, lines=lines, secret_keys=SECRET_KEYS)
    object.__setattr__(config, "secret_values", lines.secrets)  # frozen; not a YAML key
    out = Problems(lines)
    _check(config, out, venue_used=venue_used)
    if resolve_strategies:
        _check_strategy_classes(config, out)
    if out.found:
        raise ConfigProblems(by_line(out.found), secrets=lines.secrets)
    return config


def split_section(text: str, name: str = "backtest") -> tuple[str, Any, int | None]:
    """The text with its top-level ``name:`` section blanked (line numbers kept), the section
    and its first line (None, None: no such section)."""
    try:
        return _split(text, name)
    except (yaml.YAMLError, RecursionError):  # too deep for PyYAML's recursive composer
        return text, None, None  # parse_config reports the YAML error with its line


def _split(text: str, name: str) -> tuple[str, Any, int | None]:
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(node, yaml.MappingNode):
        return text, None, None
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == name:
            first, last = key.start_mark.line, value.end_mark.line
            if value.end_mark.column == 0:
                last -= 1
            lines = text.splitlines(keepends=True)
            for i in range(first, min(last, len(lines) - 1) + 1):
                lines[i] = "\n"
            section = yaml.safe_load(yaml.serialize(value, Dumper=yaml.SafeDumper))
            return "".join(lines), section, first + 1
    return text, None, None


def load_config(
    path: str | Path,
    *,
    env: Mapping[str, str] | None = None,
    resolve_strategies: bool = True,
    paper: bool = False,
    shadow: bool = False,
) -> Config:
    """Read a YAML file into a Config, or raise ConfigProblems (a ConfigError).

    Unreadable, larger than 4 MiB or not UTF-8: one line naming the file and the problem.
    paper=True (``--paper``): as if the file said ``venue: {mode: paper}``; shadow=True
    (``--shadow``): as if it said ``shadow: {enabled: true}``.
    """
    data, lines = read_yaml_file(path, env=os.environ if env is None else env)
    return _config(
        data,
        lines,
        resolve_strategies=resolve_strategies,
        venue_used=True,
        paper=paper,
        shadow=shadow,
    )


def load_live_config(path: str | Path, *, paper: bool = False, shadow: bool = False) -> Config:
    """A file that may hold a ``backtest:`` section, as the live node reads it (``run.py
    record``): that section is blanked first, neither read nor checked; ConfigError if bad."""
    try:
        text = read_config_text(path)  # bounded; not UTF-8 or too big: one line
    except ConfigProblems as exc:
        raise ConfigError("\n".join(exc.problems)) from None
    return parse_config(split_section(text)[0], source=str(path), paper=paper, shadow=shadow)
