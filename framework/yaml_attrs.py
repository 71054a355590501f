"""YAML documents into attrs records, with every problem located by its path and line.

:func:`read_yaml` composes the text to nodes first, which gives every key and value its line
(:class:`LineMap`), then constructs it with a YAML 1.2-like schema: only ``true``/``false`` are
booleans and only decimal digits are integers, so ``NO``, ``0x1f...`` or ``010`` stay what they
look like (strings). ``${NAME}`` and ``${NAME:-default}`` in string values are replaced from
the environment (``$${`` writes a literal ``${``); a value that came from the environment may
spell a number or a boolean, YAML values themselves must have the right type.

:func:`structure` turns the data into an attrs class with a strict cattrs converter: unknown
keys, missing keys and wrong types are collected into one :class:`ConfigProblems` whose lines
read ``strategies[0].params.levels: expected int, got 'ten' (line 14)``. Values under a secret
key are never quoted in a message.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final, TypeVar, get_args, get_origin

import attrs
import cattrs
import yaml
from cattrs.gen import make_dict_structure_fn, override

from framework.venue.errors import ConfigError

__all__ = [
    "ConfigProblems",
    "KeyPath",
    "LineMap",
    "Problems",
    "Secret",
    "by_line",
    "format_path",
    "located",
    "read_yaml",
    "structure",
]

T = TypeVar("T")
KeyPath = tuple[str | int, ...]
"""Where a value sits: ("strategies", 0, "params", "levels")."""

_ENV_REF = re.compile(r"\$\$\{|\$\{([^}:]*)(?::-([^}]*))?\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_TEXT = re.compile(r"[-+]?[0-9]+")


class Secret:
    """A secret string whose repr and str hide it; reveal() returns the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself: pass it to a signer, never to a log or a message."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


class ConfigProblems(ConfigError):
    """A configuration that cannot run: one ``path: problem (line N)`` line per problem."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2-like implicit types (no yes/no booleans, no 0x/0o ints)."""


_Loader.yaml_implicit_resolvers = {}
_TAG = "tag:yaml.org,2002:"
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
    _Loader.add_implicit_resolver(_TAG + _tag, re.compile(_pattern), list(_first))


def _construct_decimal_int(loader: _Loader, node: yaml.Node) -> int:
    # The SafeLoader reads "010" as octal 8; with the 1.2-like resolver it is decimal 10.
    value = loader.construct_scalar(node)  # type: ignore[arg-type]
    return int(str(value).replace("_", ""))


_Loader.add_constructor(_TAG + "int", _construct_decimal_int)


@attrs.define
class LineMap:
    """Where each path's key and value start in the YAML text (1-based lines)."""

    keys: dict[KeyPath, int] = attrs.Factory(dict)
    values: dict[KeyPath, int] = attrs.Factory(dict)

    def of(self, path: KeyPath, *, key: bool = False) -> int | None:
        """The line of a key (or value), else of the nearest ancestor known."""
        if key and path in self.keys:
            return self.keys[path]
        for end in range(len(path), -1, -1):
            line = self.values.get(path[:end])
            if line is not None:
                return line
        return None


def _index_nodes(node: yaml.Node, path: KeyPath, lines: LineMap, problems: list[str]) -> None:
    lines.values[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key == "<<":
                continue
            sub = (*path, key)
            if key in seen:
                problems.append(located(sub, "duplicate key", key_node.start_mark.line + 1))
            seen.add(key)
            lines.keys[sub] = key_node.start_mark.line + 1
            _index_nodes(value_node, sub, lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_nodes(item, (*path, i), lines, problems)


class _EnvStr(str):
    """A string that came from the environment: numeric and boolean fields may parse it."""

    __slots__ = ()


def _interpolate(
    value: Any, path: KeyPath, env: Mapping[str, str], lines: LineMap, problems: list[str]
) -> Any:
    if isinstance(value, dict):
        return {k: _interpolate(v, (*path, str(k)), env, lines, problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, (*path, i), env, lines, problems) for i, v in enumerate(value)]
    if not isinstance(value, str) or "$" not in value:
        return value
    found = False

    def replace(match: re.Match[str]) -> str:
        nonlocal found
        if match.group(0) == "$${":
            return "${"
        found = True
        name, default = match.group(1), match.group(2)
        if not _ENV_NAME.fullmatch(name):
            problems.append(
                located(path, f"invalid environment variable name {name!r}", lines.of(path))
            )
            return ""
        if name in env:
            return env[name]
        if default is not None:
            return default
        problems.append(located(path, f"environment variable {name} is not set", lines.of(path)))
        return ""

    text = _ENV_REF.sub(replace, value)
    return _EnvStr(text) if found else text


class _Mismatch(Exception):
    """A value of the wrong type; the message is rendered with the path by the reporter."""

    def __init__(self, expected: str, got: Any) -> None:
        super().__init__(expected)
        self.expected = expected
        self.got = got


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, date):
        return value.isoformat() + (
            "" if isinstance(value, datetime) else " (a date without a time)"
        )
    return repr(str(value) if isinstance(value, _EnvStr) else value)


def _structure_int(value: Any, _: Any) -> int:
    if type(value) is int:
        return value
    if isinstance(value, _EnvStr) and _INT_TEXT.fullmatch(value.strip()):
        return int(value)
    raise _Mismatch("int", value)


def _structure_float(value: Any, _: Any) -> float:
    if type(value) in (int, float):
        return float(value)
    if isinstance(value, _EnvStr):
        try:
            return float(value)
        except ValueError:
            pass
    raise _Mismatch("number", value)


def _structure_bool(value: Any, _: Any) -> bool:
    if type(value) is bool:
        return value
    if isinstance(value, _EnvStr) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _Mismatch("true or false", value)


def _structure_str(value: Any, _: Any) -> str:
    if isinstance(value, str):
        return str(value)
    raise _Mismatch("string", value)


def _structure_secret(value: Any, _: Any) -> Secret:
    if isinstance(value, str):
        return Secret(str(value))
    raise _Mismatch("string", value)


def _structure_decimal(value: Any, _: Any) -> Decimal:
    if type(value) in (int, float, str, _EnvStr):
        try:
            # str() first: Decimal(0.1) would carry the float's binary error into the money path.
            result = Decimal(str(value).strip())
        except InvalidOperation:
            pass
        else:
            if result.is_finite():
                return result
    raise _Mismatch("decimal number", value)


def _structure_datetime(value: Any, _: Any) -> datetime:
    result: datetime | None = None
    if isinstance(value, datetime):
        result = value
    elif isinstance(value, str):
        try:
            result = datetime.fromisoformat(value.strip())
        except ValueError:
            result = None
    if result is None:
        raise _Mismatch("ISO date-time", value)
    if result.tzinfo is None:
        raise _Mismatch("date-time with a time zone (e.g. 2030-01-01T00:00:00Z)", value)
    return result


def _yaml_key(attribute: str) -> str:
    # Python keywords are spelled with a trailing underscore (class_); YAML uses the word.
    return attribute[:-1] if attribute.endswith("_") else attribute


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for cls, hook in (
        (int, _structure_int),
        (float, _structure_float),
        (bool, _structure_bool),
        (str, _structure_str),
        (Secret, _structure_secret),
        (Decimal, _structure_decimal),
        (datetime, _structure_datetime),
    ):
        conv.register_structure_hook(cls, hook)

    def attrs_factory(cls: type[Any]) -> Callable[[Any, Any], Any]:
        renames = {
            a.name: override(rename=_yaml_key(a.name))
            for a in attrs.fields(cls)
            if _yaml_key(a.name) != a.name
        }
        inner = make_dict_structure_fn(cls, conv, **renames)  # type: ignore[arg-type]

        def structure(value: Any, type_: Any) -> Any:
            if not isinstance(value, dict):
                raise _Mismatch("a mapping", value)
            return inner(value, type_)

        return structure

    def dict_factory(type_: Any) -> Callable[[Any, Any], Any]:
        inner = cattrs.cols.mapping_structure_factory(type_, conv)

        def structure(value: Any, t: Any) -> Any:
            if not isinstance(value, dict):
                raise _Mismatch("a mapping", value)
            return inner(value, t)

        return structure

    def list_factory(type_: Any) -> Callable[[Any, Any], Any]:
        args = get_args(type_)
        if get_origin(type_) is tuple and len(args) == 2 and args[1] is Ellipsis:
            inner = cattrs.cols.homogenous_tuple_structure_factory(type_, conv)
        else:
            inner = cattrs.cols.list_structure_factory(type_, conv)

        def structure(value: Any, t: Any) -> Any:
            if not isinstance(value, list):
                raise _Mismatch("a list", value)
            return inner(value, t)

        return structure

    conv.register_structure_hook_factory(attrs.has, attrs_factory)
    conv.register_structure_hook_factory(cattrs.cols.is_mapping, dict_factory)
    conv.register_structure_hook_factory(cattrs.cols.is_sequence, list_factory)
    return conv


_CONVERTER: Final = _make_converter()


def _unknown_key(key: str, cls: Any) -> str:
    """'unknown key', with the nearest valid key and the valid keys of its section."""
    try:
        valid = sorted(_yaml_key(f.name) for f in attrs.fields(cls))
    except (TypeError, attrs.exceptions.NotAnAttrsClassError):
        return "unknown key"
    near = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown key{hint}; expected one of: {', '.join(valid)}"


def format_path(path: KeyPath) -> str:
    """``strategies[0].params.levels`` from ("strategies", 0, "params", "levels")."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[^.\[\]\s\"]+", part):
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
        found = re.search(r"\(line (\d+)\)$", problem)
        return int(found.group(1)) if found else 0

    return sorted(problems, key=line_of)


def _report(
    exc: BaseException, path: KeyPath, lines: LineMap, secret_keys: Collection[str]
) -> list[str]:
    out: list[str] = []
    secret = any(p in secret_keys for p in path if isinstance(p, str))
    children: list[tuple[BaseException, KeyPath]] = []
    if isinstance(exc, cattrs.ClassValidationError):
        with_notes, others = exc.group_exceptions()
        children += [(sub, (*path, _yaml_key(note.name))) for sub, note in with_notes]
        children += [(sub, path) for sub in others]
    elif isinstance(exc, cattrs.IterableValidationError):
        with_index, others = exc.group_exceptions()
        for sub, inote in with_index:
            index = inote.index
            children.append((sub, (*path, index if isinstance(index, int) else str(index))))
        children += [(sub, path) for sub in others]
    elif isinstance(exc, BaseExceptionGroup):
        children += [(member, path) for member in exc.exceptions]
    elif isinstance(exc, cattrs.ForbiddenExtraKeysError):
        for key in sorted(exc.extra_fields):
            where = (*path, key)
            out.append(located(where, _unknown_key(key, exc.cl), lines.of(where, key=True)))
        return out
    elif isinstance(exc, KeyError):
        return [located(path, "required key is missing", lines.of(path))]
    elif isinstance(exc, _Mismatch):
        got = "a secret value" if secret else _describe(exc.got)
        return [located(path, f"expected {exc.expected}, got {got}", lines.of(path))]
    for child, where in children:
        out += _report(child, where, lines, secret_keys)
    if not children:
        text = "invalid value" if secret else str(exc) or type(exc).__name__
        out.append(located(path, text, lines.of(path)))
    return out


@attrs.define
class Problems:
    """Collects ``path: problem (line N)`` lines, looking lines up as it goes."""

    lines: LineMap
    found: list[str] = attrs.Factory(list)

    def add(self, path: KeyPath, problem: str, *, key: bool = False) -> None:
        """Record a problem at path (at its key's line with key=True)."""
        self.found.append(located(path, problem, self.lines.of(path, key=key)))

    def require(self, ok: bool, path: KeyPath, problem: str, *, key: bool = False) -> None:
        """Record problem unless ok."""
        if not ok:
            self.add(path, problem, key=key)


def read_yaml(text: str, *, source: str, env: Mapping[str, str]) -> tuple[dict[str, Any], LineMap]:
    """The top-level mapping of a YAML text, interpolated from env, and its line map."""
    problems: list[str] = []
    lines = LineMap()
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _index_nodes(node, (), lines, problems)
        data = loader.construct_document(node) if node is not None else {}
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f" (line {mark.line + 1})" if mark is not None else ""
        what = exc.problem or exc.context
        raise ConfigProblems([f"{source}: not valid YAML: {what}{line}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigProblems([f"{source}: not valid YAML: {exc}"]) from None
    finally:
        loader.dispose()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigProblems([f"{source}: expected a mapping of sections at the top level"])
    data = _interpolate(data, (), env, lines, problems)
    if problems:
        raise ConfigProblems(by_line(problems))
    return data, lines


def structure(
    data: Any,
    cls: type[T],
    *,
    lines: LineMap | None = None,
    at: KeyPath = (),
    secret_keys: Collection[str] = (),
) -> T:
    """data as an instance of the attrs class cls, or ConfigProblems locating every error."""
    try:
        return _CONVERTER.structure(data, cls)
    except Exception as exc:
        found = _report(exc, at, lines or LineMap(), secret_keys)
        raise ConfigProblems(by_line(found)) from None
