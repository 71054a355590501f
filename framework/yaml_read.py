"""YAML text into plain data and the line of every value, within bounds; ${ENV} interpolated.

Bounds, each crossed with one line naming the file and the problem:
:data:`MAX_BYTES` (4 MiB) of UTF-8 text, :data:`MAX_DEPTH` nested collections, and
:data:`MAX_ALIASED` values brought in by aliases (an alias counts every value under the
anchor it names: the "billion laughs" file of nine aliases nine deep is refused at its fourth
level). An alias inside the collection it names is refused too.

PyYAML's own loaders are not used because (1) its pure-Python scanner costs about 10 µs a
value and its composer keeps a node with two marks per value until construction ends (a 1 MB
flow list took 16.7 s and 453 MB), and (2) neither composer bounds aliases or depth (the
Python one recurses; the C one is not extensible). Instead libyaml's parser (PyYAML's
``CParser``; PyYAML's Python parser where it is built without libyaml) yields the events, and
:class:`_Builder` turns them into data in one loop that holds only the open collections.
Scalars are resolved with a YAML 1.2-like schema (only ``true``/``false`` are booleans, only
decimal digits integers, so ``NO``, ``0x1f...`` or ``010`` stay strings) and constructed by
PyYAML's ``SafeConstructor``; ``<<`` merge keys work as in PyYAML; a mapping key must be a
scalar; ``!!set``, ``!!omap`` and other tags on collections are refused.

``${NAME}`` and ``${NAME:-default}`` in string values are replaced from the environment
(``$${`` writes a literal ``${``); a value that came from the environment may spell a number
or a boolean, YAML values themselves must have the right type.

Secret values: every string under a key of :data:`SECRET_KEYS`, the value of every
environment variable referenced there, and the value of every referenced variable whose name
contains SECRET, PRIVATE, PASSW or TOKEN. They are kept in :attr:`LineMap.secrets` and
replaced by ``***`` in every problem line about the file.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import yaml
from yaml.constructor import SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.scanner import Scanner

from framework.yaml_lines import ConfigProblems, KeyPath, LineMap, by_line, located, shown

# libyaml's parser (its constructor and resolver parts unused here); without libyaml,
# PyYAML's Python parser gives the same events, ~20x slower.
_FAST_PARSER: Final[Any] = getattr(yaml, "CSafeLoader", None)

__all__ = [
    "MAX_ALIASED",
    "MAX_BYTES",
    "MAX_DEPTH",
    "SECRET_KEYS",
    "EnvStr",
    "read_config_text",
    "read_yaml",
    "read_yaml_file",
]

MAX_BYTES: Final = 4 * 1024 * 1024
"""The largest YAML file read (4 MiB); configs are a few KB."""

MAX_DEPTH: Final = 100
"""The deepest nesting of collections, aliases expanded; configs nest about 6 deep."""

MAX_ALIASED: Final = 10_000
"""Values aliases may bring in, all aliases of a file together, each counted expanded."""

SECRET_KEYS: Final = frozenset({"api_secret", "hmac_secret"})
"""Keys whose values are secrets in perpframe's YAML files (config, twin settings)."""

_SECRET_NAME = re.compile(r"SECRET|PRIVATE|PASSW|TOKEN", re.IGNORECASE)
_ENV_REF = re.compile(r"\$\$\{|\$\{([^}:]*)(?::-([^}]*))?\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TAG = "tag:yaml.org,2002:"
_STR, _INT, _SEQ, _MAP = _TAG + "str", _TAG + "int", _TAG + "seq", _TAG + "map"


_IMPLICIT: Final[dict[str, list[tuple[str, re.Pattern[str]]]]] = {}
"""The YAML 1.2-like implicit types of plain scalars, by first character (no yes/no
booleans, no 0x/0o ints)."""
for _tag, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^[-+]?[0-9]+$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    (
        "timestamp",
        r"^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}"
        r"(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?"
        r"(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?)$",
        "0123456789",
    ),
    ("merge", r"^<<$", "<"),
):
    for _char in _first:
        _IMPLICIT.setdefault(_char, []).append((_TAG + _tag, re.compile(_pattern)))


class _PyParser(Reader, Scanner, Parser):
    """PyYAML's pure-Python event parser, where libyaml is missing."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)


class _Merge:
    """The ``<<`` key of a mapping: the mappings it names are merged into it."""


_MERGE: Final = _Merge()
_CONSTRUCTOR: Final = SafeConstructor()
_SCALARS: Final[dict[str, Callable[[yaml.ScalarNode], Any]]] = {
    _INT: lambda node: int(node.value),
    _TAG + "null": lambda node: None,
    _TAG + "bool": _CONSTRUCTOR.construct_yaml_bool,
    _TAG + "float": _CONSTRUCTOR.construct_yaml_float,
    _TAG + "binary": _CONSTRUCTOR.construct_yaml_binary,
    _TAG + "timestamp": _CONSTRUCTOR.construct_yaml_timestamp,
    _TAG + "merge": lambda node: _MERGE,
}


class _Refused(Exception):
    """A file the reader will not take: the problem and its line."""

    def __init__(self, problem: str, line: int | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line


@attrs.define(slots=True)
class _Open:
    """A collection being read: its data so far and what it weighs, aliases expanded."""

    path: KeyPath
    data: Any
    line: int
    anchor: str | None
    log_start: int
    size: int = 1
    height: int = 1
    key: Any = None
    has_key: bool = False
    items: array[int] | None = None
    merges: list[Any] | None = None


@attrs.frozen(slots=True)
class _Anchor:
    """What an anchor names, what it weighs, and its slice of the line log."""

    data: Any
    size: int
    height: int
    path: KeyPath
    log: tuple[int, int]


_IN_PROGRESS: Final = _Anchor(None, 0, 0, (), (0, 0))


class _Builder:
    """Events into data and a LineMap, holding only the open collections (see the module)."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.lines = LineMap()
        self.problems: list[str] = []
        self.stack: list[_Open] = []
        self.anchors: dict[str, _Anchor] = {}
        self.aliased = 0
        self.anchored_open = 0
        # Line entries recorded while an anchored collection is open: an alias copies its
        # anchor's slice under its own path.
        self.log: list[tuple[str, KeyPath, Any]] = []

    def build(self) -> Any:
        """The document's data (None when empty); raises _Refused or yaml.YAMLError."""
        root: Any = None
        documents = 0
        get_event = self.parser.get_event
        while True:
            event = get_event()
            kind = type(event)
            if kind is yaml.ScalarEvent:
                value = self._scalar(event)
                line = event.start_mark.line + 1
                if event.anchor is not None:
                    self.anchors[event.anchor] = _Anchor(value, 1, 0, (), (0, 0))
                done = self._add(value, 1, 0, line)
            elif kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
                self._start(event, kind is yaml.MappingStartEvent)
                continue
            elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                done = self._end()
            elif kind is yaml.AliasEvent:
                done = self._alias(event)
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise _Refused(
                        "not valid YAML: expected a single document, found another",
                        event.start_mark.line + 1,
                    )
                continue
            elif kind is yaml.StreamEndEvent:
                return root
            else:
                continue
            if done is not None:
                root = done[0]

    # ---------------------------------------------------------------------- events

    def _scalar(self, event: Any) -> Any:
        tag, value = event.tag, event.value
        if tag is None and event.implicit[0]:  # plain: typed by its look
            tag = _STR
            for resolved, pattern in _IMPLICIT.get(value[:1], ()):
                if pattern.match(value):
                    tag = resolved
                    break
        elif tag is None or tag == "!":  # quoted, or the non-specific tag
            return value
        if tag == _STR:
            return value
        construct = _SCALARS.get(tag)
        if construct is None:
            raise _Refused(f"not valid YAML: unknown tag {tag!r}", event.start_mark.line + 1)
        try:
            if tag == _INT:  # the SafeLoader reads "010" as octal 8; the 1.2-like schema 10
                return int(value.replace("_", ""))
            return construct(
                yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
            )
        except Exception:  # PyYAML's constructors fail in their own ways on explicit tags
            raise _Refused(
                f"not valid YAML: {shown(value)} is not a valid {tag.removeprefix(_TAG)}",
                event.start_mark.line + 1,
            ) from None

    def _start(self, event: Any, mapping: bool) -> None:
        line = event.start_mark.line + 1
        if event.tag not in (None, "!", _MAP if mapping else _SEQ):
            raise _Refused(f"not valid YAML: the tag {event.tag} is not supported here", line)
        if len(self.stack) >= MAX_DEPTH:
            raise _Refused(f"refused: nested more than {MAX_DEPTH} levels deep", line)
        path = self._child_path(line)
        if not self.stack or self.stack[-1].items is None:
            self._note("v", path, line)  # a sequence's items: in its array, by _add
        if event.anchor is not None:
            self.anchors[event.anchor] = _IN_PROGRESS
            self.anchored_open += 1
        self.stack.append(
            _Open(
                path,
                {} if mapping else [],
                line,
                event.anchor,
                len(self.log),
                items=None if mapping else array("I"),
            )
        )

    def _end(self) -> tuple[Any] | None:
        done = self.stack.pop()
        data = done.data
        if done.items is not None:
            self.lines.items[done.path] = done.items
            if self.anchored_open:
                self.log.append(("i", done.path, done.items))
        elif done.merges:
            merged: dict[Any, Any] = {}
            for source in done.merges:
                merged.update(source)
            merged.update(data)
            data = merged
        if done.anchor is not None:
            self.anchored_open -= 1
            self.anchors[done.anchor] = _Anchor(
                data, done.size, done.height, done.path, (done.log_start, len(self.log))
            )
        return self._add(data, done.size, done.height, done.line, noted=True)

    def _alias(self, event: Any) -> tuple[Any] | None:
        line = event.start_mark.line + 1
        anchor = self.anchors.get(event.anchor)
        if anchor is None:
            raise _Refused(f"not valid YAML: found undefined alias *{event.anchor}", line)
        if anchor is _IN_PROGRESS:
            raise _Refused(
                f"refused: alias *{event.anchor} refers to a collection that contains it", line
            )
        self.aliased += anchor.size
        if self.aliased > MAX_ALIASED:
            raise _Refused(
                f"refused: aliases expand to more than {MAX_ALIASED} values by *{event.anchor}"
                " (an alias bomb? a config never needs that many)",
                line,
            )
        if len(self.stack) + anchor.height > MAX_DEPTH:
            raise _Refused(
                f"refused: alias *{event.anchor} nests more than {MAX_DEPTH} levels deep", line
            )
        if anchor.height:  # a collection: its lines, under the alias's path
            path = self._child_path(line)
            start, end = anchor.log
            cut = len(anchor.path)
            for kind, sub, payload in self.log[start:end]:
                self._note(kind, (*path, *sub[cut:]), payload)
        return self._add(anchor.data, anchor.size, anchor.height, line)

    # ----------------------------------------------------------------- assembling

    def _child_path(self, line: int) -> KeyPath:
        if not self.stack:
            return ()
        parent = self.stack[-1]
        if parent.items is not None:
            return (*parent.path, len(parent.data))
        if not parent.has_key:
            raise _Refused("not valid YAML: a mapping key must be a scalar", line)
        return (*parent.path, "<<" if parent.key is _MERGE else str(parent.key))

    def _add(
        self, value: Any, size: int, height: int, line: int, *, noted: bool = False
    ) -> tuple[Any] | None:
        """Put a finished value in its parent; (value,) when it is the document itself.

        height 0 is a scalar (a key may be one); noted: its value line is already recorded.
        """
        if not self.stack:
            if not noted:
                self.lines.values[()] = line
            return (value,)
        parent = self.stack[-1]
        parent.size += size
        parent.height = max(parent.height, height + 1)
        if parent.items is None and not parent.has_key:
            if height:
                raise _Refused("not valid YAML: a mapping key must be a scalar", line)
            parent.key, parent.has_key = value, True
            if value is not _MERGE:
                sub = (*parent.path, str(value))
                if sub in self.lines.keys:
                    self.problems.append(located(sub, "duplicate key", line))
                self._note("k", sub, line)
            return None
        if value is _MERGE:
            raise _Refused("not valid YAML: '<<' is only a mapping key", line)
        if parent.items is not None:
            parent.data.append(value)
            parent.items.append(line)
            return None
        key, parent.key, parent.has_key = parent.key, None, False
        if key is _MERGE:
            sources = value if isinstance(value, list) else [value]
            if not all(isinstance(source, dict) for source in sources):
                raise _Refused("not valid YAML: '<<' merges a mapping or a list of mappings", line)
            # As PyYAML: a later `<<` overrides an earlier one, the first of a list the rest.
            parent.merges = [*(parent.merges or []), *reversed(sources)]
            return None
        if not noted:
            self._note("v", (*parent.path, str(key)), line)
        parent.data[key] = value
        return None

    def _note(self, kind: str, path: KeyPath, payload: Any) -> None:
        if kind == "k":
            self.lines.keys[path] = payload
        elif kind == "v":
            self.lines.values[path] = payload
        else:
            self.lines.items[path] = payload
        if self.anchored_open:
            self.log.append((kind, path, payload))


# -------------------------------------------------------------------------- interpolation


class EnvStr(str):
    """A string that came from the environment: numeric and boolean fields may parse it."""

    __slots__ = ()


@attrs.define
class _Interpolation:
    """${NAME} replaced from env everywhere, secret values collected on the way."""

    env: Mapping[str, str]
    lines: LineMap
    secret_keys: Collection[str]
    problems: list[str] = attrs.Factory(list)
    secrets: set[str] = attrs.Factory(set)

    def value(self, value: Any, path: KeyPath, secret: bool) -> Any:
        """value with every string interpolated (copies of the collections)."""
        if isinstance(value, dict):
            return {
                k: self.value(v, (*path, str(k)), secret or k in self.secret_keys)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.value(v, (*path, i), secret) for i, v in enumerate(value)]
        if not isinstance(value, str):
            return value
        if "$" in value:
            value = self._text(value, path, secret)
        if secret:
            self.secrets.add(str(value))
        return value

    def _text(self, value: str, path: KeyPath, secret: bool) -> str:
        found = False

        def replace(match: re.Match[str]) -> str:
            nonlocal found
            if match.group(0) == "$${":
                return "${"
            found = True
            name, default = match.group(1), match.group(2)
            if not _ENV_NAME.fullmatch(name):
                self._problem(path, f"invalid environment variable name {name!r}")
                return ""
            if name in self.env:
                if secret or _SECRET_NAME.search(name):
                    self.secrets.add(self.env[name])
                return self.env[name]
            if default is not None:
                return default
            self._problem(path, f"environment variable {name} is not set")
            return ""

        text = _ENV_REF.sub(replace, value)
        return EnvStr(text) if found else text

    def _problem(self, path: KeyPath, problem: str) -> None:
        self.problems.append(located(path, problem, self.lines.of(path)))


# -------------------------------------------------------------------------- entry points


def read_config_text(path: str | Path) -> str:
    """A YAML file's text: ConfigProblems (one line) when unreadable, too big or not UTF-8."""
    try:
        with Path(path).open("rb") as file:
            raw = file.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigProblems([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    if len(raw) > MAX_BYTES:
        raise ConfigProblems([_too_big(str(path))])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigProblems(
            [
                f"{path}: not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line}, "
                f"column {column} ({exc.reason})"
            ]
        ) from None


def _too_big(source: str) -> str:
    return f"{source}: refused: larger than {MAX_BYTES} bytes (4 MiB), the most a YAML file may be"


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """What PyYAML or libyaml found wrong, and its line, on one line."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = exc.problem or exc.context
        if mark is not None and "\t" in _line_of(text, mark.line):
            problem = f"{problem}: the line holds a tab; YAML indents with spaces only"
        return f"{problem}{line}"
    if isinstance(exc, yaml.reader.ReaderError):
        # libyaml counts bytes of the UTF-8 text, PyYAML characters
        if _FAST_PARSER is not None:
            number = text.encode()[: exc.position].count(b"\n") + 1
        else:
            number = text[: exc.position].count("\n") + 1
        return f"{exc.reason}: #x{exc.character:04x} (line {number})"
    return " ".join(str(exc).split())


def _line_of(text: str, index: int) -> str:
    """The line of text at index (0-based); empty beyond its end."""
    lines = text.split("\n", index + 1)
    return lines[index] if index < len(lines) else ""


_LIBYAML_TOO_DEEP: Final = "exceeded maximum nesting depth"
"""libyaml's own refusal of a run of flow collections (its limit is 1000 levels)."""


def _build(text: str, source: str) -> tuple[Any, _Builder]:
    """The document's data and its builder (lines, duplicate keys), or ConfigProblems."""
    parser: Any = None
    try:
        parser = _FAST_PARSER(text) if _FAST_PARSER is not None else _PyParser(text)
        builder = _Builder(parser)
        return builder.build(), builder
    except _Refused as exc:
        where = f" (line {exc.line})" if exc.line is not None else ""
        raise ConfigProblems([f"{source}: {exc.problem}{where}"]) from None
    except yaml.YAMLError as exc:
        problem = _yaml_problem(exc, text)
        if problem.startswith(_LIBYAML_TOO_DEEP):
            # libyaml's scanner reads a run of '[' ahead of the events the builder counts,
            # so say what the builder says without libyaml
            problem = f"refused: nested more than {MAX_DEPTH} levels deep" + problem.removeprefix(
                _LIBYAML_TOO_DEEP
            )
        else:
            problem = f"not valid YAML: {problem}"
        raise ConfigProblems([f"{source}: {problem}"]) from None
    finally:
        if parser is not None and hasattr(parser, "dispose"):
            parser.dispose()


def read_yaml(
    text: str,
    *,
    source: str,
    env: Mapping[str, str],
    secret_keys: Collection[str] = SECRET_KEYS,
) -> tuple[dict[str, Any], LineMap]:
    """The top-level mapping of a YAML text, interpolated from env, and its line map."""
    if len(text) > MAX_BYTES:
        raise ConfigProblems([_too_big(source)])
    data, builder = _build(text, source)
    lines = builder.lines
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigProblems([f"{source}: expected a mapping of sections at the top level"])
    interpolation = _Interpolation(env, lines, secret_keys)
    data = interpolation.value(data, (), False)
    lines.secrets = frozenset(interpolation.secrets)
    problems = builder.problems + interpolation.problems
    if problems:
        raise ConfigProblems(by_line(problems), secrets=lines.secrets)
    return data, lines


def read_yaml_file(
    path: str | Path, *, env: Mapping[str, str], secret_keys: Collection[str] = SECRET_KEYS
) -> tuple[dict[str, Any], LineMap]:
    """read_yaml of a file's text (see :func:`read_config_text`), named by its path."""
    return read_yaml(read_config_text(path), source=str(path), env=env, secret_keys=secret_keys)
