"""Reading a fill model file (``fill_model: path``): YAML or JSON in, a FillModel out.

The schema is :class:`framework.sim.fill_model.FillModel` (version 1: ``latency`` and
``fill``); this module is the file edge the pure ``framework.sim`` package does not have, so
that the backtest, live paper trading and the shadow read a model one way. The text is read
bounded (:func:`framework.yaml_read.read_config_text`); JSON is YAML, so both read alike.
Every problem is one line naming the file, the key's path and its line
(``models/fill.yaml: fill.params.cancels: expected one of ... (line 5)``), raised together as
one :class:`~framework.yaml_lines.ConfigProblems`. No ``${ENV}`` is read from a model file.
"""

from __future__ import annotations

from pathlib import Path

from framework.sim.fill_model import FILL_MODEL_VERSION, FillModel
from framework.yaml_attrs import ConfigProblems, located, read_yaml, structure
from framework.yaml_read import read_config_text

__all__ = ["fill_model_from_text", "load_fill_model"]


def fill_model_from_text(text: str, *, source: str = "<fill model>") -> FillModel:
    """The model a file's text describes, or ConfigProblems locating every bad value."""
    data, lines = read_yaml(text, source=source, env={})
    version = data.get("version")
    if version != FILL_MODEL_VERSION or type(version) is not int:
        problem = (
            "required key is missing"
            if version is None
            else f"{version!r} is not a version this framework reads"
        )
        where = located(
            ("version",), f"{problem} (it reads {FILL_MODEL_VERSION})", lines.of(("version",))
        )
        raise ConfigProblems([f"{source}: {where}"])
    try:
        return structure(data, FillModel, lines=lines)
    except ConfigProblems as exc:
        raise ConfigProblems([f"{source}: {problem}" for problem in exc.problems]) from None


def load_fill_model(path: str | Path) -> FillModel:
    """Read a fill model file, or raise ConfigProblems (a ConfigError) naming it."""
    return fill_model_from_text(read_config_text(path), source=str(path))
