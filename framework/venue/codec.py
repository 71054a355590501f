"""JSON <-> records: decoders and encoders compiled once per record class.

Decoding is total: anything that does not fit raises :class:`DecodeError` naming the record
and the wire field. Decimals arrive as JSON strings (numbers are tolerated and read through
their shortest text, never through binary floats), nulls stay ``None``, date-times become
timezone-aware (the venue's zone is configurable, UTC by default) and unknown keys are kept
in the record's ``extra``. The fast path is one generated function per record; only a
failure takes the slow path that finds the field to blame.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from decimal import Decimal, InvalidOperation
from typing import Any, Final, TypeVar

import attrs
import orjson

from framework.venue import models as m
from framework.venue.errors import DecodeError

__all__ = [
    "DEFAULT_CODEC",
    "Codec",
    "decode",
    "decode_frame",
    "dumps_compact",
    "encode",
    "plain_decimal",
]

R = TypeVar("R")
Frame = m.PositionPush | m.AccountPush | m.SubscribeAck

_ENUMS: Final[dict[str, type[Any]]] = {
    "MatchType": m.MatchType,
    "PositionType": m.PositionType,
    "ChangeType": m.ChangeType,
    "Direction": m.Direction,
}


_CACHE_LIMIT: Final = 1 << 16
"""Decimal and date-time texts a codec keeps decoded; a full cache is emptied (bounded)."""


def plain_decimal(value: Decimal) -> str:
    """Render a Decimal as a plain string: no exponent, no trailing zeros (1E+1 -> '10')."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def dumps_compact(obj: Any) -> bytes:
    """Compact JSON with no spaces, non-ASCII escaped as the venue's public SDK does."""
    out = orjson.dumps(obj)
    # json.dumps(ensure_ascii=True) also escapes DEL (0x7f); orjson writes it raw.
    if out.isascii() and b"\x7f" not in out:
        return out
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")


# Converters: each takes a wire value (never None; None is handled by the caller) and returns
# the typed value or raises ValueError/TypeError with a reason.


def _to_str(v: Any) -> str:
    if type(v) is str:
        return v
    raise TypeError(f"expected a string, got {_describe(v)}")


def _to_id(v: Any) -> str:
    if type(v) is str:
        return v
    if type(v) is int:
        return str(v)
    raise TypeError(f"expected a string or integer, got {_describe(v)}")


def _to_int(v: Any) -> int:
    if type(v) is int:
        return v
    if type(v) is str and v.strip().lstrip("-").isdigit():
        return int(v)
    raise TypeError(f"expected an integer, got {_describe(v)}")


def _to_bool(v: Any) -> bool:
    if v is True or v is False:
        return v
    raise TypeError(f"expected a boolean, got {_describe(v)}")


def _to_dec(v: Any) -> Decimal:
    t = type(v)
    if t is str or t is int:
        try:
            d = Decimal(v)
        except InvalidOperation:
            raise ValueError(f"expected a decimal, got {_describe(v)}") from None
    elif t is float:
        d = Decimal(repr(v))
    else:
        raise TypeError(f"expected a decimal string, got {_describe(v)}")
    if not d.is_finite():
        raise ValueError(f"expected a finite decimal, got {_describe(v)}")
    return d


def _to_raw(v: Any) -> Any:
    return v


def _describe(v: Any) -> str:
    text = repr(v)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(v).__name__} {text}"


def _dt_converter(zone: tzinfo) -> Callable[[Any], datetime]:
    # Texts have second resolution and repeat (every match of a poll page, every page of a
    # poll), so each is parsed once; datetimes are immutable. Bounded like the Decimal cache.
    cache: dict[str, datetime] = {}

    def to_dt(v: Any) -> datetime:
        if type(v) is not str:
            raise TypeError(f"expected a date-time string, got {_describe(v)}")
        found = cache.get(v)
        if found is not None:
            return found
        try:
            value = datetime.fromisoformat(v)
        except ValueError:
            raise ValueError(f"expected yyyy-MM-dd HH:mm:ss, got {_describe(v)}") from None
        if value.tzinfo is None:
            value = value.replace(tzinfo=zone)
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[v] = value
        return value

    return to_dt


def _enum_converter(enum_type: type[Any]) -> Callable[[Any], Any]:
    table = {member.value: member for member in enum_type}

    def to_enum(v: Any) -> Any:
        try:
            return table[v]
        except (KeyError, TypeError):
            allowed = ", ".join(str(k) for k in table)
            raise ValueError(f"expected one of {allowed}, got {_describe(v)}") from None

    return to_enum


@attrs.frozen(slots=True)
class _WireField:
    attr: str
    key: str
    alias: str | None
    required: bool
    convert: Callable[[Any], Any]
    kind: str


def _encode_value(v: Any, kind: str, zone: tzinfo) -> Any:
    if v is None:
        return None
    if kind == "dec":
        return plain_decimal(v)
    if kind == "dt":
        return v.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")
    if kind in _ENUMS:
        return v.value
    return v


def _caching_dec(cache: dict[str, Decimal]) -> Callable[[Any], Decimal]:
    """_to_dec that remembers what it decoded from a string (only valid, finite values)."""

    def to_dec(v: Any) -> Decimal:
        if type(v) is not str:
            return _to_dec(v)
        try:
            d = Decimal(v)
        except InvalidOperation:
            raise ValueError(f"expected a decimal, got {_describe(v)}") from None
        if not d.is_finite():
            raise ValueError(f"expected a finite decimal, got {_describe(v)}")
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[v] = d
        return d

    return to_dec


def _inline_conversion(f: _WireField, i: int, ns: dict[str, Any]) -> str:
    """Python source converting the wire value ``v`` of field number i, common case inline.

    Anything unusual calls the field's converter (which raises with a reason) or raises
    KeyError/TypeError itself; either way the decoder falls back to the slow path.
    """
    kind = f.kind
    if kind == "dec":
        return "(x if (x := dcg(v)) is not None else cdec(v))"
    if kind == "int":
        return f"(v if type(v) is int else c{i}(v))"
    if kind == "str":
        return f"(v if type(v) is str else c{i}(v))"
    if kind == "bool":
        return f"(v if v is True or v is False else c{i}(v))"
    if kind == "raw":
        return "v"
    enum_type = _ENUMS.get(kind)
    if enum_type is not None:
        ns[f"e{i}"] = {member.value: member for member in enum_type}
        return f"e{i}[v]"
    return f"c{i}(v)"


def _settable_slots(cls: type[Any]) -> bool:
    """True when instances of cls may be built by setting slots (attrs would do nothing more)."""
    if hasattr(cls, "__attrs_post_init__") or hasattr(cls, "__attrs_pre_init__"):
        return False
    if "extra" not in attrs.fields_dict(cls):
        return False
    for f in attrs.fields(cls):
        if f.validator is not None or f.converter is not None or not f.init:
            return False
        if not isinstance(cls.__dict__.get(f.name), types.MemberDescriptorType):
            return False
    return True


class Codec:
    """Compiled decoders and encoders for every record, for one venue time zone."""

    def __init__(self, zone: tzinfo = UTC) -> None:
        self.zone = zone
        self._converters: dict[str, Callable[[Any], Any]] = {
            "str": _to_str,
            "id": _to_id,
            "int": _to_int,
            "bool": _to_bool,
            "dec": _to_dec,
            "raw": _to_raw,
            "dt": _dt_converter(zone),
        }
        for name, enum_type in _ENUMS.items():
            self._converters[name] = _enum_converter(enum_type)
        self._decoders: dict[type[Any], Callable[..., Any]] = {}
        # Decimal texts seen, each decoded once: prices and quantities repeat a lot, a dict
        # hit is several times cheaper than Decimal(str), and Decimals are immutable.
        self._decimals: dict[str, Decimal] = {}
        self._push_decoders: dict[str, Callable[..., Any]] | None = None

    def decoder(self, cls: type[R]) -> Callable[..., R]:
        """The decoder of a record class: dict -> record (keyword args fill non-wire fields)."""
        fn = self._decoders.get(cls)
        if fn is None:
            fn = self._decoders[cls] = self._compile(cls)
        return fn

    def decode(self, cls: type[R], obj: Any) -> R:
        """Decode one wire object into a record of cls."""
        return self.decoder(cls)(obj)

    def decode_list(self, cls: type[R], obj: Any) -> list[R]:
        """Decode a wire array of objects; a non-array is a DecodeError."""
        if type(obj) is not list:
            raise DecodeError(cls.__name__, None, f"expected an array, got {_describe(obj)}")
        fn = self.decoder(cls)
        return [fn(item) for item in obj]

    def decode_frame(self, obj: Any) -> Frame:
        """Decode one WebSocket frame (already parsed JSON) into a push or an acknowledgement."""
        if type(obj) is not dict:
            raise DecodeError("frame", None, f"expected an object, got {_describe(obj)}")
        event = obj.get("event")
        # The push decoders are looked up once per codec: this runs for every push.
        push_decoders = self._push_decoders
        if push_decoders is None:
            push_decoders = self._push_decoders = {
                "api_position": self.decoder(m.PositionPush),
                "api_account": self.decoder(m.AccountPush),
            }
        fn = push_decoders.get(event) if type(event) is str else None
        if fn is not None:
            success = obj.get("success", True)
            if success is not True and success is not False:
                name = "PositionPush" if event == "api_position" else "AccountPush"
                raise DecodeError(name, "success", f"expected a boolean, got {success!r}")
            return fn(obj.get("data"), success)  # type: ignore[no-any-return]
        if type(event) is str and event.endswith("_res"):
            return self.decoder(m.SubscribeAck)(obj)
        raise DecodeError("frame", "event", f"unknown event {_describe(event)}")

    def encode(self, record: Any, *, omit_none: bool = False) -> dict[str, Any]:
        """A record as its wire object, keys in declaration order, extra keys kept at the end."""
        out: dict[str, Any] = {}
        for f in attrs.fields(type(record)):
            if "wire" not in f.metadata:
                continue
            value = getattr(record, f.name)
            if value is None and omit_none:
                continue
            out[f.metadata["wire"]] = _encode_value(value, f.metadata["kind"], self.zone)
        extra = getattr(record, "extra", None)
        if extra:
            for k, v in extra.items():
                out.setdefault(k, v)
        return out

    def _fields(self, cls: type[Any]) -> list[_WireField]:
        return [
            _WireField(
                f.name,
                f.metadata["wire"],
                f.metadata.get("alias"),
                f.metadata["required"],
                self._converters[f.metadata["kind"]],
                f.metadata["kind"],
            )
            for f in attrs.fields(cls)
            if "wire" in f.metadata
        ]

    def _compile(self, cls: type[Any]) -> Callable[..., Any]:
        fields = self._fields(cls)
        params = [f for f in attrs.fields(cls) if "wire" not in f.metadata and f.name != "extra"]
        known = frozenset(
            [f.key for f in fields] + [f.alias for f in fields if f.alias is not None]
        )
        ns: dict[str, Any] = {
            "cls": cls,
            "known": known,
            "slow": self._slow_path,
            "EMPTY": m._EMPTY,
            "new": object.__new__,
            "dcg": self._decimals.get,
            "cdec": _caching_dec(self._decimals),
        }
        values = []
        for i, f in enumerate(fields):
            ns[f"c{i}"] = f.convert
            if f.alias is not None:
                get = f"(d[{f.key!r}] if {f.key!r} in d else d.get({f.alias!r}))"
            elif f.required:
                # A missing required key raises KeyError: the slow path names the field.
                get = f"d[{f.key!r}]"
            else:
                get = f"g({f.key!r})"
            convert = _inline_conversion(f, i, ns)
            if f.required:
                values.append((f.attr, get, convert))
            else:
                values.append((f.attr, get, f"(None if v is None else {convert})"))
        sig = "".join(f", {p.name}={p.name}_default" for p in params)
        for p in params:
            ns[f"{p.name}_default"] = p.default
        extra = "(EMPTY if known.issuperset(d) else {k: x for k, x in d.items() if k not in known})"
        if _settable_slots(cls):
            # Set the slots directly: the frozen class's __init__ goes through
            # object.__setattr__ and keyword parsing, and costs twice as much. Only for
            # classes with no validator, converter or post-init hook to skip.
            body = ["        o = new(cls)"]
            for j, (attr, get, convert) in enumerate(values):
                ns[f"s{j}"] = getattr(cls, attr).__set__
                body.append(f"        v = {get}; s{j}(o, {convert})")
            for p in params:
                ns[f"p_{p.name}"] = getattr(cls, p.name).__set__
                body.append(f"        p_{p.name}(o, {p.name})")
            ns["s_extra"] = cls.extra.__set__
            body.append(f"        s_extra(o, {extra})")
        else:
            body = []
            for j, (_, get, convert) in enumerate(values):
                body.append(f"        v = {get}; a{j} = {convert}")
            args = [f"{attr}=a{j}" for j, (attr, _, _) in enumerate(values)]
            args.extend(f"{p.name}={p.name}" for p in params)
            body.append(f"        o = cls({', '.join(args)}, extra={extra})")
        src = (
            f"def decode_{cls.__name__}(d{sig}):\n"
            "    if type(d) is not dict:\n"
            "        return slow(cls, d)\n"
            "    g = d.get\n"
            "    try:\n" + "\n".join(body) + "\n"
            "    except Exception:\n"
            "        return slow(cls, d)\n"
            "    return o\n"
        )
        exec(compile(src, f"<codec {cls.__name__}>", "exec"), ns)
        fn: Callable[..., Any] = ns[f"decode_{cls.__name__}"]
        fn.__doc__ = f"Decode a {cls.__name__} from its wire object."
        return fn

    def _slow_path(self, cls: type[Any], d: Any) -> Any:
        name = cls.__name__
        if type(d) is not dict:
            raise DecodeError(name, None, f"expected an object, got {_describe(d)}")
        for f in self._fields(cls):
            value = d.get(f.key)
            if value is None and f.alias is not None:
                value = d.get(f.alias)
            if value is None:
                if f.required:
                    raise DecodeError(name, f.key, "required field is missing or null")
                continue
            try:
                f.convert(value)
            except (TypeError, ValueError, ArithmeticError) as exc:
                raise DecodeError(name, f.key, str(exc)) from None
        raise DecodeError(name, None, "does not fit the record")


DEFAULT_CODEC: Final = Codec()
"""The codec for a venue that writes date-times in UTC."""


def decode(cls: type[R], obj: Any) -> R:
    """Decode one wire object with the default codec."""
    return DEFAULT_CODEC.decode(cls, obj)


def decode_frame(obj: Any) -> Frame:
    """Decode one WebSocket frame with the default codec."""
    return DEFAULT_CODEC.decode_frame(obj)


def encode(record: Any, *, omit_none: bool = False) -> dict[str, Any]:
    """Encode one record with the default codec."""
    return DEFAULT_CODEC.encode(record, omit_none=omit_none)


def encode_orders(orders: Sequence[m.OrderInput]) -> list[dict[str, Any]]:
    """Order inputs as wire objects in the SDK's key order, price left out when None."""
    out = []
    for o in orders:
        item: dict[str, Any] = {
            "clientOrderId": o.client_order_id,
            "isLong": o.is_long,
            "isMarket": o.is_market,
            "lever": o.lever,
            "matchType": int(o.match_type),
            "pairName": o.pair_name,
            "positionType": int(o.position_type),
        }
        if o.price is not None:
            item["price"] = plain_decimal(o.price)
        item["quantity"] = plain_decimal(o.quantity)
        out.append(item)
    return out
