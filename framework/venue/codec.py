"""Bytes <-> records with msgspec: frames, answers and the journal's kept records.

Records (:mod:`framework.venue.models`) are decoded straight from the bytes the venue sent
(:func:`decode_frame`, :func:`decode_json`) or from an object already parsed
(:func:`decode`). The push types are the venue's two and any a plug-in registers
(:func:`register_push`): a frame of each decodes to its record. Anything that does not fit raises :class:`DecodeError` naming the record
and the wire field, with msgspec's reason and path (``Expected `str`, got `int` - at
`$.data.symbol```). Two SPEC quirks are read here: a batch answer's client id comes as
cOrderId or corderId, and an envelope's sid as a string or a number. Encoding gives the wire
objects back (:func:`encode`, the journal's kept matches) and the batchCreate orders in the
public SDK's key order (:func:`encode_orders`, :func:`dumps_compact`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from enum import Enum
from typing import Any, Final, TypeVar

import msgspec
import orjson

from framework.venue import models as m
from framework.venue.errors import DecodeError

__all__ = [
    "DEFAULT_CODEC",
    "Codec",
    "Frame",
    "decode",
    "decode_batch_answer",
    "decode_frame",
    "decode_json",
    "decode_list",
    "decode_match_answer",
    "dumps_compact",
    "encode",
    "encode_orders",
    "plain_decimal",
    "push_types",
    "register_push",
]

R = TypeVar("R")
Frame = object
"""What a WebSocket frame decodes to: a push (of a type of :func:`push_types`) or a SubscribeAck."""


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


# ---------------------------------------------------------------------------- wire shapes


class _PositionFrame(msgspec.Struct, frozen=True, tag_field="event", tag="api_position", gc=False):
    data: m.PositionPush
    success: bool = True


class _AccountFrame(msgspec.Struct, frozen=True, tag_field="event", tag="api_account", gc=False):
    data: m.AccountPush
    success: bool = True


class _EventOnly(msgspec.Struct, gc=False):
    event: Any = None


class _OrderResultWire(msgspec.Struct, frozen=True, rename="camel", gc=False):
    order_id: int
    c_order_id: str | None = msgspec.field(default=None, name="cOrderId")
    corder_id: str | None = None
    pair_name: str | None = None


class _MatchAnswer(msgspec.Struct, frozen=True, gc=False):
    code: int
    error: bool = False
    data: list[m.MatchRecord] | None = None


class _BatchAnswer(msgspec.Struct, frozen=True, gc=False):
    code: int
    error: bool = False
    data: list[_OrderResultWire] | None = None


class _EnvelopeWire(msgspec.Struct, frozen=True, gc=False):
    error: bool
    code: int
    msg: str | None = None
    data: Any = None
    sid: str | int | None = None


_PUSH_TYPES: Final[dict[str, type[Any]]] = {
    "api_position": m.PositionPush,
    "api_account": m.AccountPush,
}
_REGISTERED: Final[dict[str, Callable[[Any], Any]]] = {}  # event -> its frame's data decoder
_Push = _PositionFrame | _AccountFrame
_decode_push: Final = msgspec.json.Decoder(_Push).decode
_decode_event: Final = msgspec.json.Decoder(_EventOnly).decode
_decode_ack: Final = msgspec.json.Decoder(m.SubscribeAck).decode
_PATH: Final = re.compile(r" - at `\$([^`]*)`")
_MISSING: Final = re.compile(r"missing required field `(?P<field>[^`]+)`")
_LAST_KEY: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)(?:\[\d+\])*$")


def _wrap(exc: msgspec.MsgspecError, record: str, *, frame: bool = False) -> DecodeError:
    """A msgspec error as a DecodeError naming the record and the wire field.

    frame: the error is a push frame's (its data object is the record; the frame's own
    success flag is the record's too, anything else is the frame's).
    """
    reason = str(exc)
    # A __post_init__'s own error carries its field's path before the record's: join them.
    paths = _PATH.findall(reason)
    path = "".join(reversed(paths))
    if len(paths) > 1:
        reason = _PATH.sub("", reason) + f" - at `${path}`"
    if frame and not (path.startswith(".data") or path == ".success"):
        record = "frame"
    missing = _MISSING.search(reason)
    if missing is not None:
        return DecodeError(record, missing.group("field"), reason)
    key = _LAST_KEY.search(path)
    return DecodeError(record, key.group(1) if key else None, reason)


def decode_frame(data: bytes | str | dict[str, Any]) -> Frame:
    """Decode one WebSocket frame (its text, or the object already parsed) into a push or an ack.

    An event that is neither a push nor an acknowledgement (``*_res``) is a DecodeError
    whose record is ``frame`` and field ``event``; a text that is not JSON one whose field
    is None.
    """
    try:
        result: _PositionFrame | _AccountFrame = (
            msgspec.convert(data, _Push) if type(data) is dict else _decode_push(data)  # type: ignore[arg-type]
        )
    except msgspec.ValidationError as exc:
        failure = exc
    except msgspec.DecodeError as exc:
        raise DecodeError("frame", None, f"not JSON: {exc}") from None
    else:
        push = result.data
        if push.success is not result.success:  # the frame's success is the push's
            push = msgspec.structs.replace(push, success=result.success)
        return push
    return _not_a_push(data, failure)  # outside the handler: no chained context


def register_push(event: str, record: type[Any]) -> None:
    """Decode frames of event as pushes of record, their data object (a plug-in's push type).

    Its frames then reach the intake from the stream and, recorded, from the replay.
    """
    known = _PUSH_TYPES.get(event)
    if known is not None and known is not record:
        raise ValueError(f"push event {event!r} decodes to {known.__name__} already")
    frame = msgspec.defstruct(f"_{record.__name__}Frame", [("data", record)], frozen=True)
    decoder = msgspec.json.Decoder(frame).decode

    def decode_data(data: Any) -> Any:
        decoded: Any = msgspec.convert(data, frame) if type(data) is dict else decoder(data)
        return decoded.data

    _REGISTERED[event], _PUSH_TYPES[event] = decode_data, record


def push_types() -> tuple[type[Any], ...]:
    """The record types push frames decode to: the venue's two, then registered ones."""
    return tuple(_PUSH_TYPES.values())


def _not_a_push(data: bytes | str | dict[str, Any], failure: msgspec.ValidationError) -> Frame:
    """A registered push, an acknowledgement, or the DecodeError of a frame that is neither."""
    try:
        event = data.get("event") if isinstance(data, dict) else _decode_event(data).event
    except msgspec.MsgspecError as exc:
        raise DecodeError("frame", None, str(exc)) from None
    record = _PUSH_TYPES.get(event) if type(event) is str else None
    if record is not None:
        registered = _REGISTERED.get(str(event))
        if registered is None:  # the venue's own push that its decoder refused
            raise _wrap(failure, record.__name__, frame=True) from None
        try:
            return registered(data)
        except msgspec.MsgspecError as exc:
            raise _wrap(exc, record.__name__, frame=True) from None
    if type(event) is str and event.endswith("_res"):
        try:
            if type(data) is dict:
                return msgspec.convert(data, m.SubscribeAck)
            return _decode_ack(data)  # type: ignore[arg-type]
        except msgspec.MsgspecError as exc:
            raise _wrap(exc, "SubscribeAck") from None
    shown = repr(event)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    raise DecodeError("frame", "event", f"unknown event {type(event).__name__} {shown}")


# ---------------------------------------------------------------------------- records


def _order_result(wire: _OrderResultWire) -> m.OrderResult:
    cid = wire.c_order_id if wire.c_order_id is not None else wire.corder_id
    if cid is None:
        raise DecodeError("OrderResult", "cOrderId", "required field is missing or null")
    return m.OrderResult(client_order_id=cid, order_id=wire.order_id, pair_name=wire.pair_name)


def _envelope(wire: _EnvelopeWire) -> m.Envelope:
    sid = wire.sid
    return m.Envelope(
        error=wire.error,
        code=wire.code,
        msg=wire.msg,
        data=wire.data,
        sid=str(sid) if type(sid) is int else sid,  # type: ignore[arg-type]
    )


# Records read through a wire shape of their own: (the shape, its conversion).
_VIA: Final[dict[type[Any], tuple[type[Any], Callable[[Any], Any]]]] = {
    m.OrderResult: (_OrderResultWire, _order_result),
    m.Envelope: (_EnvelopeWire, _envelope),
}
_DECODERS: dict[type[Any], Callable[[bytes | str], Any]] = {}


def decode(cls: type[R], obj: Any) -> R:
    """Decode one wire object (already parsed JSON) into a record of cls."""
    via = _VIA.get(cls)
    try:
        if via is None:
            return msgspec.convert(obj, cls)
        return via[1](msgspec.convert(obj, via[0]))  # type: ignore[no-any-return]
    except msgspec.MsgspecError as exc:
        raise _wrap(exc, cls.__name__) from None


def decode_list(cls: type[R], obj: Any) -> list[R]:
    """Decode a wire array of objects; a non-array is a DecodeError."""
    if type(obj) is not list:
        raise DecodeError(cls.__name__, None, f"expected an array, got {type(obj).__name__}")
    return [decode(cls, item) for item in obj]


def decode_json(cls: type[R], data: bytes | str) -> R:
    """Decode one record straight from its JSON text."""
    fn = _DECODERS.get(cls)
    if fn is None:
        via = _VIA.get(cls)
        if via is None:
            fn = _DECODERS[cls] = msgspec.json.Decoder(cls).decode
        else:
            raw, convert = msgspec.json.Decoder(via[0]).decode, via[1]
            fn = _DECODERS[cls] = lambda text: convert(raw(text))
    try:
        return fn(data)
    except msgspec.MsgspecError as exc:
        raise _wrap(exc, cls.__name__) from None


_decode_match_answer: Final = msgspec.json.Decoder(_MatchAnswer).decode
_decode_batch_answer: Final = msgspec.json.Decoder(_BatchAnswer).decode


def decode_match_answer(body: bytes | str) -> list[m.MatchRecord] | None:
    """The matches of a match-result answer, straight from its body; None when it is no success.

    No success: an envelope whose code is not 200 or whose error is true (what the REST
    client raises a VenueError for). A body that is not such an answer is a DecodeError.
    """
    try:
        answer = _decode_match_answer(body)
    except msgspec.MsgspecError as exc:
        raise _wrap(exc, "MatchRecord") from None
    if answer.code != 200 or answer.error:
        return None
    return [] if answer.data is None else answer.data


def decode_batch_answer(body: bytes | str) -> list[m.OrderResult] | None:
    """The results of a batchCreate answer, straight from its body; None when it is no success."""
    try:
        answer = _decode_batch_answer(body)
    except msgspec.MsgspecError as exc:
        raise _wrap(exc, "OrderResult") from None
    if answer.code != 200 or answer.error:
        return None
    return [_order_result(wire) for wire in answer.data or ()]


# Fields the framework sets on a record, never sent by the venue: not encoded.
_FRAMEWORK_FIELDS: Final = frozenset({"client_order_id", "candidates", "success"})
_WIRE_NAMES: dict[type[Any], tuple[tuple[str, str], ...]] = {}


def _wire_names(cls: type[Any]) -> tuple[tuple[str, str], ...]:
    names = _WIRE_NAMES.get(cls)
    if names is None:
        names = _WIRE_NAMES[cls] = tuple(
            (f.name, f.encode_name)
            for f in msgspec.structs.fields(cls)
            if cls is m.OrderInput or cls is m.OrderResult or f.name not in _FRAMEWORK_FIELDS
        )
        if cls is m.SubscribeAck:  # success is the ack's own field
            names = _WIRE_NAMES[cls] = tuple(
                (f.name, f.encode_name) for f in msgspec.structs.fields(cls)
            )
    return names


def _encode_value(value: Any) -> Any:
    if type(value) is Decimal:
        return plain_decimal(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, Enum):
        return value.value
    return value


def encode(record: Any, *, omit_none: bool = False) -> dict[str, Any]:
    """A record as its wire object, keys in declaration order (framework fields left out)."""
    out: dict[str, Any] = {}
    for name, key in _wire_names(type(record)):
        value = getattr(record, name)
        if value is None and omit_none:
            continue
        out[key] = None if value is None else _encode_value(value)
    return out


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


class Codec:
    """The module's functions as an object, for code that is handed a codec (REST, stream)."""

    def decode(self, cls: type[R], obj: Any) -> R:
        """Decode one wire object (already parsed JSON) into a record of cls."""
        return decode(cls, obj)

    def decode_list(self, cls: type[R], obj: Any) -> list[R]:
        """Decode a wire array of objects; a non-array is a DecodeError."""
        return decode_list(cls, obj)

    def decode_json(self, cls: type[R], data: bytes | str) -> R:
        """Decode one record straight from its JSON text."""
        return decode_json(cls, data)

    def decode_frame(self, data: bytes | str | dict[str, Any]) -> Frame:
        """Decode one WebSocket frame (text or parsed object) into a push or an ack."""
        return decode_frame(data)

    def encode(self, record: Any, *, omit_none: bool = False) -> dict[str, Any]:
        """A record as its wire object (see :func:`encode`)."""
        return encode(record, omit_none=omit_none)


DEFAULT_CODEC: Final = Codec()
"""The codec (the venue writes date-times in UTC)."""
