"""The sweep file: which backtest, which parameters over which spaces, what to optimise.

A sweep file (``run.py sweep -c SWEEP.yaml``, sample ``configs/sweep.yaml``) names a backtest
config, one search space per strategy parameter, the objective (a key of report.json, or a
ratio of two) and the sampler. It is read like every other config
(:mod:`framework.yaml_attrs`): every problem is one ``path: problem (line N)`` line, all
reported at once, including those found against the backtest config (a strategy name that
is not there, a parameter its ``Params`` class does not have, a bound or choice it refuses).

A space is a list of values (categorical), or a mapping ``{low, high}`` with an optional
``step`` or ``log: true`` (integers when both bounds and the step are integers, unless
``type: float``), or ``{values: [...]}``. Paths in the file are looked up in the working
directory, then beside the sweep file (the rule strategy modules follow).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final

import attrs

from framework.backtest.runner import BacktestSettings, load_backtest_config
from framework.config import Config, beside_config
from framework.venue.errors import ConfigError
from framework.yaml_attrs import (
    ConfigProblems,
    KeyPath,
    Problems,
    by_line,
    read_yaml,
    structure,
)
from framework.yaml_read import read_config_text

__all__ = [
    "SAMPLERS",
    "Choice",
    "MissingKey",
    "Objective",
    "Range",
    "SamplerSettings",
    "Space",
    "SweepConfig",
    "SweepFile",
    "WorkerSettings",
    "load_sweep_config",
    "lookup",
    "parse_sweep",
]

SAMPLERS: Final = ("grid", "random", "tpe")
"""Sampler kinds: every combination, uniform random, Optuna's TPE."""

_RANGE_KEYS: Final = frozenset({"low", "high", "step", "log", "type"})


@attrs.frozen(kw_only=True)
class Objective:
    """What a trial scores: ``metric`` of report.json (or metric / divide_by), and the aim."""

    metric: str
    """A dotted key of report.json, e.g. ``pnl.USD.net_pnl``."""
    divide_by: str | None = None
    """Another key: the score is metric / divide_by (e.g. PnL over max drawdown)."""
    direction: str = "maximize"
    """maximize or minimize."""

    def score(self, results: Mapping[str, Any]) -> float:
        """The trial's score from its report data; ValueError naming what is missing."""
        value = lookup(results, self.metric)
        if self.divide_by is None:
            return float(value)
        divisor = lookup(results, self.divide_by)
        if divisor == 0:
            raise ValueError(f"objective: {self.divide_by} is 0 (cannot divide by it)")
        return float(value / divisor)

    @property
    def label(self) -> str:
        """How the objective reads in tables and plots."""
        return self.metric if self.divide_by is None else f"{self.metric} / {self.divide_by}"


@attrs.frozen(kw_only=True)
class SamplerSettings:
    """``sampler:``: grid, random or tpe, seeded for repeatable choices."""

    kind: str = "tpe"
    """One of SAMPLERS."""
    seed: int | None = 1
    startup_trials: int = 10
    """TPE: random trials before the model guides the choice."""


@attrs.frozen(kw_only=True)
class WorkerSettings:
    """``workers:``: how the recording reaches the workers, and how long none may be there."""

    recording: str = "ship"
    """ship: the client sends the file once to each worker, which keeps it on its local disk;
    shared: every worker reads the same path (shared storage mounted alike everywhere)."""
    lost_after_s: float = 60.0
    """Stop the sweep when the cluster has had no worker for this long (trials in flight stay
    for --resume); Dask itself would wait for a worker for ever."""


@attrs.frozen(kw_only=True)
class SweepFile:
    """The sweep file as written (paths not yet resolved, spaces not yet checked)."""

    backtest: str
    """The backtest config: a live config with a ``backtest:`` section."""
    recording: str | None = None
    """The recording (default: --recording, else the backtest config's backtest.recording)."""
    trials: int | None = None
    """How many trials in all (default: the grid's size, else 20)."""
    objective: Objective
    sampler: SamplerSettings = SamplerSettings()
    workers: WorkerSettings = WorkerSettings()
    params: dict[str, dict[str, Any]]
    """strategy name -> parameter -> space."""


@attrs.frozen
class Choice:
    """A categorical space: one of these values."""

    values: tuple[Any, ...]

    def grid(self) -> list[Any]:
        """Every value."""
        return list(self.values)


@attrs.frozen(kw_only=True)
class Range:
    """A numeric space from low to high (inclusive), on a step or a log scale."""

    low: float
    high: float
    step: float | None = None
    log: bool = False
    integer: bool = False
    decimals: int | None = None
    """Decimal places of a float step: trial values are rounded to them (0.30000000000000004
    would otherwise reach the strategy, and best.yaml)."""

    def grid(self) -> list[Any]:
        """Every value on the step (only a stepped or integer range has a grid)."""
        if self.step is None and not self.integer:
            raise ValueError("a range without a step has no grid")
        step = self.step or 1
        count = math.floor((self.high - self.low) / step + 1e-9) + 1
        return [self.value(self.low + i * step) for i in range(count)]

    def value(self, raw: float) -> Any:
        """A sampled number as the trial passes it on (int, or float rounded to the step)."""
        if self.integer:
            return round(raw)
        return round(raw, self.decimals) if self.decimals is not None else float(raw)


Space = Choice | Range
"""One parameter's search space."""


@attrs.frozen(kw_only=True)
class SweepConfig:
    """A checked sweep: the backtest config and settings, the spaces and the objective."""

    path: Path
    file: SweepFile
    config_path: Path
    config: Config
    settings: BacktestSettings
    recording: Path | None
    """None when neither the sweep file nor the backtest config names one."""
    spaces: dict[str, Space]
    """``strategy.param`` -> space, in file order."""
    strategy_index: dict[str, int]
    """strategy name -> its index in config.strategies."""
    objective_lines: dict[str, int | None] = attrs.Factory(dict)
    """objective.metric and objective.divide_by -> their lines in the sweep file."""

    @property
    def objective(self) -> Objective:
        """The objective."""
        return self.file.objective

    def trial_count(self, requested: int | None = None) -> int:
        """--trials, else the file's trials, else the grid's size (grid) or 20; grids capped."""
        size = self.grid_size() if self.file.sampler.kind == "grid" else None
        count = requested or self.file.trials or size or 20
        return min(count, size) if size is not None else count

    def grid_size(self) -> int:
        """How many combinations the grid has."""
        return math.prod(len(space.grid()) for space in self.spaces.values())

    def with_params(self, params: Mapping[str, Any]) -> Config:
        """The backtest config with ``strategy.param`` values set over its strategies' params."""
        strategies = list(self.config.strategies)
        for key, value in params.items():
            name, _, param = key.partition(".")
            index = self.strategy_index[name]
            spec = strategies[index]
            strategies[index] = attrs.evolve(spec, params={**spec.params, param: value})
        return attrs.evolve(self.config, strategies=strategies)


class MissingKey(ValueError):
    """The objective names a key report.json does not have (the sweep file is wrong)."""

    def __init__(self, message: str, dotted: str) -> None:
        super().__init__(message)
        self.dotted = dotted


def lookup(results: Mapping[str, Any], dotted: str) -> Decimal:
    """The number at a dotted key of report data; ValueError naming the key if absent."""
    node: Any = results
    walked: list[str] = []
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            where = ".".join(walked) or "the top level"
            keys = ", ".join(sorted(map(str, node))) if isinstance(node, Mapping) else "none"
            raise MissingKey(
                f"report.json has no {dotted} (no {part!r} under {where}; keys: {keys})", dotted
            )
        node = node[part]
        walked.append(part)
    if isinstance(node, bool) or not isinstance(node, int | float | str):
        raise ValueError(f"report.json's {dotted} is not a number: {node!r}")
    try:
        return Decimal(str(node))
    except InvalidOperation:
        raise ValueError(f"report.json's {dotted} is not a number: {node!r}") from None


def _decimals(number: float) -> int:
    exponent = Decimal(str(number)).normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _choice(values: Any, path: KeyPath, out: Problems) -> Choice | None:
    if not isinstance(values, list) or not values:
        out.add(path, "expected a non-empty list of values")
        return None
    bad = [i for i, v in enumerate(values) if not _scalar(v)]
    for i in bad:
        out.add((*path, i), "expected a number, string, true/false or null")
    if len(set(map(repr, values))) != len(values):
        out.add(path, "values repeat")
        return None
    return None if bad else Choice(tuple(values))


def _range(raw: Mapping[str, Any], path: KeyPath, out: Problems) -> Range | None:
    before = len(out.found)
    for key in sorted(set(raw) - _RANGE_KEYS - {"values"}):
        out.add((*path, key), "unknown key (a range has low, high, step, log, type)", key=True)
    for key in ("low", "high"):
        if key not in raw:
            out.add(path, f"{key} is missing (a range needs low and high)")
        elif not _is_number(raw[key]):
            out.add((*path, key), f"expected a number, got {raw[key]!r}")
    step, log, kind = raw.get("step"), raw.get("log", False), raw.get("type")
    if step is not None and (not _is_number(step) or step <= 0):
        out.add((*path, "step"), f"expected a positive number, got {step!r}")
    if not isinstance(log, bool):
        out.add((*path, "log"), f"expected true or false, got {log!r}")
    if kind not in (None, "int", "float"):
        out.add((*path, "type"), f"expected int or float, got {kind!r}")
    if len(out.found) > before:
        return None
    low, high = raw["low"], raw["high"]
    if not low < high:
        out.add(path, f"low ({low}) must be below high ({high})")
    if log and step is not None:
        out.add(path, "step and log: true cannot go together")
    if log and low <= 0:
        out.add((*path, "low"), "a log range needs low > 0")
    integer = kind == "int" or (
        kind is None and all(type(v) is int for v in (low, high, step if step else 1))
    )
    if integer and not all(float(v).is_integer() for v in (low, high, step or 1)):
        out.add(path, "type: int needs integer low, high and step")
    if len(out.found) > before:
        return None
    decimals = _decimals(step) if step is not None and not integer else None
    return Range(low=low, high=high, step=step, log=log, integer=integer, decimals=decimals)


def _space(raw: Any, path: KeyPath, out: Problems) -> Space | None:
    if isinstance(raw, list):
        return _choice(raw, path, out)
    if isinstance(raw, Mapping):
        if "values" in raw:
            for key in sorted(set(raw) - {"values"}):
                out.add((*path, key), "unknown key beside values", key=True)
            return _choice(raw["values"], (*path, "values"), out)
        return _range(raw, path, out)
    out.add(path, f"expected a list of values or a mapping with low and high, got {raw!r}")
    return None


def _check_file(file: SweepFile, out: Problems) -> None:
    """The rules of single settings, each at its own path and line."""

    def one_of(path: KeyPath, value: str, choices: tuple[str, ...]) -> None:
        if value not in choices:
            out.add(path, f"expected one of {', '.join(choices)}, got {value!r}")

    one_of(("objective", "direction"), file.objective.direction, ("maximize", "minimize"))
    one_of(("sampler", "kind"), file.sampler.kind, SAMPLERS)
    one_of(("workers", "recording"), file.workers.recording, ("ship", "shared"))
    if not 0 < file.workers.lost_after_s <= 86400:
        out.add(
            ("workers", "lost_after_s"),
            f"must be > 0 and at most 86400 s, got {file.workers.lost_after_s!r}",
        )
    if file.trials is not None and file.trials < 1:
        out.add(("trials",), f"must be at least 1, got {file.trials}")
    if file.sampler.startup_trials < 1:
        out.add(
            ("sampler", "startup_trials"), f"must be at least 1, got {file.sampler.startup_trials}"
        )


def _check_params(
    name: str,
    index: int,
    config: Config,
    spaces: Mapping[str, Space],
    out: Problems,
) -> None:
    """Each swept parameter exists and its bounds and choices are values the strategy takes."""
    from framework.engine.strategy import load_strategy

    spec = config.strategies[index]
    try:
        cls = load_strategy(spec.class_)
    except Exception:
        return  # the backtest config's own check reports it
    params_cls = getattr(cls, "Params", None)
    if isinstance(params_cls, type) and attrs.has(params_cls):
        known = {a.name for a in attrs.fields(params_cls)}
    elif isinstance(params_cls, type) and dataclasses.is_dataclass(params_cls):
        known = {f.name for f in dataclasses.fields(params_cls)}
    else:
        return  # free-form params (or a Params class the config check refuses)
    for key, space in spaces.items():
        param = key.partition(".")[2]
        path: KeyPath = ("params", name, param)
        if param not in known:
            out.add(
                path,
                f"strategy {name!r} ({spec.class_}) has no parameter {param!r} "
                f"(it has: {', '.join(sorted(known))})",
                key=True,
            )
            continue
        samples = (
            space.grid()
            if isinstance(space, Choice)
            else [
                space.value(space.low),
                space.value(space.high),
            ]
        )
        for value in samples:
            try:
                structure({**spec.params, param: value}, params_cls)
            except ConfigProblems as exc:
                problem = "; ".join(p.removeprefix("(top level): ") for p in exc.problems)
                out.add(path, f"the value {value!r} is refused: {problem}")
                break


def parse_sweep(
    text: str,
    *,
    path: str | Path = "<sweep>",
    recording: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> SweepConfig:
    """Read a sweep file's text (paths relative to path) or raise ConfigProblems."""
    import os

    source = Path(path)
    data, lines = read_yaml(text, source=str(source), env=os.environ if env is None else env)
    try:
        file = structure(data, SweepFile, lines=lines)
    except ConfigProblems as exc:
        raise ConfigProblems([f"{source}: {p}" for p in exc.problems]) from None
    out = Problems(lines)
    _check_file(file, out)
    config_path = beside_config(file.backtest, source)
    if not config_path.is_file():
        out.add(("backtest",), f"{file.backtest}: no such file")
        raise ConfigProblems([f"{source}: {p}" for p in by_line(out.found)])
    from framework.cli import add_strategy_dirs

    add_strategy_dirs(config_path)  # strategy modules are found as `run.py backtest` finds them
    config, settings = load_backtest_config(config_path)  # its problems name its own file
    index = {s.name: i for i, s in enumerate(config.strategies)}
    spaces: dict[str, Space] = {}
    if not file.params:
        out.add(("params",), "no parameter to sweep")
    for name, params in file.params.items():
        if name not in index:
            out.add(
                ("params", name),
                f"no strategy named {name!r} in {config_path} "
                f"(strategies: {', '.join(index) or 'none'})",
                key=True,
            )
            continue
        if not params:
            out.add(("params", name), "no parameter to sweep")
        mine: dict[str, Space] = {}
        for param, raw in params.items():
            space = _space(raw, ("params", name, param), out)
            if space is not None:
                mine[f"{name}.{param}"] = space
        _check_params(name, index[name], config, mine, out)
        spaces.update(mine)
    if file.sampler.kind == "grid":
        for key, space in spaces.items():
            if isinstance(space, Range) and space.step is None and not space.integer:
                name, _, param = key.partition(".")
                out.add(("params", name, param), "a grid needs a step (or a list of values)")
    chosen = recording or file.recording
    found = beside_config(str(chosen), source) if chosen else settings.recording
    if out.found:
        raise ConfigProblems([f"{source}: {p}" for p in by_line(out.found)])
    return SweepConfig(
        path=source,
        file=file,
        config_path=config_path,
        config=config,
        settings=settings,
        recording=Path(found) if found else None,
        spaces=spaces,
        strategy_index=index,
        objective_lines={key: lines.of(("objective", key)) for key in ("metric", "divide_by")},
    )


def load_sweep_config(path: str | Path, *, recording: str | Path | None = None) -> SweepConfig:
    """Read and check a sweep file; ConfigError (every problem, located) if it is wrong."""
    try:
        text = read_config_text(path)  # bounded; not UTF-8 or too big: one line
    except ConfigProblems as exc:
        raise ConfigError("\n".join(exc.problems)) from None
    return parse_sweep(text, path=path, recording=recording)
