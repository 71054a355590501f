"""Where a YAML file's values sit, and how a problem there reads: path, line, never a secret.

A problem is one line ``strategies[0].params.levels: expected int, got 'ten' (line 14)``
(:func:`located`). :class:`ConfigProblems` carries every problem of a file at once; it
replaces each secret value the reader found (:attr:`LineMap.secrets`) by ``***`` and keeps at
most :data:`MAX_PROBLEMS` lines, so a hostile file cannot print millions of them. Values shown
in a message go through :func:`shown`, which cuts long ones short.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from typing import Any, Final

import attrs

from framework.venue.errors import ConfigError

__all__ = [
    "MAX_PROBLEMS",
    "ConfigProblems",
    "KeyPath",
    "LineMap",
    "Problems",
    "by_line",
    "format_path",
    "hide_secrets",
    "located",
    "shown",
]

KeyPath = tuple[str | int, ...]
"""Where a value sits: ("strategies", 0, "params", "levels")."""

MAX_PROBLEMS: Final = 50
"""Problem lines reported of one file; a last line counts the rest."""

REDACTED: Final = "***"
_SHORT_SECRET: Final = 4
_SHOWN_CHARS: Final = 80
_PLAIN_PART = re.compile(r"[^.\[\]\s\"]+")
_LINE_AT_END = re.compile(r"\(line (\d+)\)$")


def hide_secrets(text: str, secrets: Iterable[str]) -> str:
    """text with every secret value replaced by ***.

    A secret shorter than 4 characters is replaced only where it is quoted ('ab'), so that a
    one-character value cannot garble the line numbers of a message.
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) >= _SHORT_SECRET:
            text = text.replace(secret, REDACTED)
        else:
            for quoted in (repr(secret), f'"{secret}"'):
                text = text.replace(quoted, REDACTED)
    return text


def shown(value: Any) -> str:
    """repr(value) for a message, cut to 80 characters (its length said) when longer."""
    text = repr(value)
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[:_SHOWN_CHARS]}... ({len(text)} characters)"


class ConfigProblems(ConfigError):
    """A configuration that cannot run: one ``path: problem (line N)`` line per problem.

    Secret values in the lines are replaced by ``***``; past :data:`MAX_PROBLEMS` lines the
    rest are counted in one last line.
    """

    def __init__(self, problems: Iterable[str], *, secrets: Iterable[str] = ()) -> None:
        found = list(problems)
        if len(found) > MAX_PROBLEMS:
            rest = len(found) - MAX_PROBLEMS
            found = [*found[:MAX_PROBLEMS], f"... and {rest} more problems"]
        secrets = tuple(secrets)
        self.problems = tuple(hide_secrets(p, secrets) for p in found) if secrets else tuple(found)
        super().__init__("\n".join(self.problems))


def format_path(path: KeyPath) -> str:
    """``strategies[0].params.levels`` from ("strategies", 0, "params", "levels")."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif len(part) > _SHOWN_CHARS:
            out += f"[{shown(part)}]"
        elif _PLAIN_PART.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "(top level)"


def located(path: KeyPath, problem: str, line: int | None) -> str:
    """One problem as `path: problem (line N)`."""
    where = f" (line {line})" if line is not None else ""
    return f"{format_path(path)}: {problem}{where}"


def by_line(problems: list[str]) -> list[str]:
    """Problems in file order; those without a line (whole-file problems) first."""

    def line_of(problem: str) -> int:
        found = _LINE_AT_END.search(problem)
        return int(found.group(1)) if found else 0

    return sorted(problems, key=line_of)


@attrs.define
class LineMap:
    """Where each path's key and value start in the YAML text (1-based lines).

    ``items`` holds the lines of a sequence's items, one array per sequence (4 bytes an
    item, not a dict entry); ``secrets`` the values found secret, hidden from every message.
    """

    keys: dict[KeyPath, int] = attrs.Factory(dict)
    values: dict[KeyPath, int] = attrs.Factory(dict)
    items: dict[KeyPath, array[int]] = attrs.Factory(dict)
    secrets: frozenset[str] = frozenset()

    def of(self, path: KeyPath, *, key: bool = False) -> int | None:
        """The line of a key (or value), else of the nearest ancestor known."""
        if key and path in self.keys:
            return self.keys[path]
        for end in range(len(path), -1, -1):
            line = self.values.get(path[:end])
            if line is not None:
                return line
            index = path[end - 1] if end else None
            if isinstance(index, int):
                lines = self.items.get(path[: end - 1])
                if lines is not None and 0 <= index < len(lines):
                    return lines[index]
        return None


@attrs.define
class Problems:
    """Collects ``path: problem (line N)`` lines, looking lines up as it goes."""

    lines: LineMap
    found: list[str] = attrs.Factory(list)

    def add(self, path: KeyPath, problem: str, *, key: bool = False) -> None:
        """Record a problem at path (at its key's line with key=True); secrets hidden."""
        line = located(path, problem, self.lines.of(path, key=key))
        self.found.append(hide_secrets(line, self.lines.secrets))

    def require(self, ok: bool, path: KeyPath, problem: str, *, key: bool = False) -> None:
        """Record problem unless ok."""
        if not ok:
            self.add(path, problem, key=key)
