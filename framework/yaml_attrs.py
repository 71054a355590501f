"""YAML documents into attrs records, with every problem located by its path and line.

Reading the text (bounds, lines, ``${ENV}``, secrets found) is :mod:`framework.yaml_read`;
how a problem line reads is :mod:`framework.yaml_lines`; both are re-exported here.

:func:`structure` turns the data into an attrs class with a strict cattrs converter: unknown
keys, missing keys and wrong types are collected into one :class:`ConfigProblems` whose lines
read ``strategies[0].params.levels: expected int, got 'ten' (line 14)``. Values under a secret
key are never quoted in a message, and no secret value the reader found is shown anywhere.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterator
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from framework.yaml_lines import (
    ConfigProblems,
    KeyPath,
    LineMap,
    Problems,
    by_line,
    format_path,
    located,
    shown,
)
from framework.yaml_read import SECRET_KEYS, EnvStr, read_yaml, read_yaml_file

__all__ = [
    "SECRET_KEYS",
    "ConfigProblems",
    "KeyPath",
    "LineMap",
    "Problems",
    "Secret",
    "by_line",
    "format_path",
    "located",
    "read_yaml",
    "read_yaml_file",
    "structure",
]

T = TypeVar("T")
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
    return shown(str(value) if isinstance(value, EnvStr) else value)


def _structure_int(value: Any, _: Any) -> int:
    if type(value) is int:
        return value
    if isinstance(value, EnvStr) and _INT_TEXT.fullmatch(value.strip()):
        return int(value)
    raise _Mismatch("int", value)


def _structure_float(value: Any, _: Any) -> float:
    if type(value) in (int, float):
        return float(value)
    if isinstance(value, EnvStr):
        try:
            return float(value)
        except ValueError:
            pass
    raise _Mismatch("number", value)


def _structure_bool(value: Any, _: Any) -> bool:
    if type(value) is bool:
        return value
    if isinstance(value, EnvStr) and value.strip().lower() in ("true", "false"):
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
    if type(value) in (int, float, str, EnvStr):
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
        args = get_args(type_)
        key_type, value_type = args if len(args) == 2 else (Any, Any)
        key_hook = conv.get_structure_hook(key_type)
        value_hook = conv.get_structure_hook(value_type)

        def one(pair: tuple[Any, Any]) -> tuple[Any, Any]:
            return key_hook(pair[0], key_type), value_hook(pair[1], value_type)

        def structure(value: Any, t: Any) -> Any:
            if not isinstance(value, dict):
                raise _Mismatch("a mapping", value)
            return dict(_bounded(((k, (k, v)) for k, v in value.items()), one, t))

        return structure

    def list_factory(type_: Any) -> Callable[[Any, Any], Any]:
        args = get_args(type_)
        homogenous = len(args) == 2 and args[1] is Ellipsis
        if get_origin(type_) is tuple and not homogenous:
            return cattrs.cols.list_structure_factory(type_, conv)  # (unused by the configs)
        item_type = args[0] if args else Any
        item_hook = conv.get_structure_hook(item_type)
        make = tuple if get_origin(type_) is tuple else list

        def structure(value: Any, t: Any) -> Any:
            if not isinstance(value, list):
                raise _Mismatch("a list", value)
            return make(_bounded(enumerate(value), lambda v: item_hook(v, item_type), t))

        return structure

    conv.register_structure_hook_factory(attrs.has, attrs_factory)
    conv.register_structure_hook_factory(cattrs.cols.is_mapping, dict_factory)
    conv.register_structure_hook_factory(cattrs.cols.is_sequence, list_factory)
    return conv


_CONVERTER: Final = _make_converter()


_WRONG_ITEMS: Final = 20
"""Wrong items (or unknown keys) of one list or mapping reported; the rest are counted."""


class _Unchecked(Exception):
    """The items of a collection left unchecked after _WRONG_ITEMS wrong ones."""


def _bounded(items: Iterator[tuple[Any, Any]], one: Callable[[Any], Any], t: Any) -> list[Any]:
    """one(item) for each (index, item); raises the first 20 failures together.

    cattrs' own collection hooks collect every failure: half a million wrong items took 15 s
    and 850 MB before a word was printed. Here the items after them are counted, not checked.
    """
    done: list[Any] = []
    errors: list[Exception] = []
    for index, item in items:
        if len(errors) == _WRONG_ITEMS:
            left = 1 + sum(1 for _ in items)
            errors.append(
                _Unchecked(f"{left} more items not checked after {_WRONG_ITEMS} wrong ones")
            )
            break
        try:
            done.append(one(item))
        except Exception as exc:
            exc.add_note(cattrs.IterableValidationNote(f"Structuring {t} @ {index!r}", index, t))
            errors.append(exc)
    if errors:
        raise cattrs.IterableValidationError(f"While structuring {t!r}", errors, t)
    return done


def _unknown_key(key: str, cls: Any) -> str:
    """'unknown key', with the nearest valid key and the valid keys of its section."""
    try:
        valid = sorted(_yaml_key(f.name) for f in attrs.fields(cls) if f.init)
    except (TypeError, attrs.exceptions.NotAnAttrsClassError):
        return "unknown key"
    near = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown key{hint}; expected one of: {', '.join(valid)}"


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
        extra = sorted(
            exc.extra_fields, key=lambda k: (lines.of((*path, k), key=True) or 0, str(k))
        )
        for key in extra[:_WRONG_ITEMS]:
            where = (*path, key)
            out.append(located(where, _unknown_key(key, exc.cl), lines.of(where, key=True)))
        if len(extra) > _WRONG_ITEMS:
            more = f"{len(extra) - _WRONG_ITEMS} more unknown keys"
            out.append(located(path, more, lines.of(path)))
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


def structure(
    data: Any,
    cls: type[T],
    *,
    lines: LineMap | None = None,
    at: KeyPath = (),
    secret_keys: Collection[str] = SECRET_KEYS,
) -> T:
    """data as an instance of the attrs class cls, or ConfigProblems locating every error.

    The values in lines.secrets are hidden from every problem line.
    """
    lines = lines or LineMap()
    try:
        return _CONVERTER.structure(data, cls)
    except Exception as exc:
        found = _report(exc, at, lines, secret_keys)
        raise ConfigProblems(by_line(found), secrets=lines.secrets) from None
