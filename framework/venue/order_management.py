"""The order-management extension's records and lenient answer parsing (VENUE-FACTS).

The venue's public SDK has cancel, batch cancel, cancel-all, open-order and query-order
endpoints that SPEC.md leaves out, and their ``data`` shapes are not published. So the
envelope's ``code`` is authoritative (200: done; anything else: the matching VenueError,
:class:`~framework.venue.errors.OrderStateError` for the order-state codes 2340/2341), and
``data`` is read leniently into records that keep what they do not know:

- an order record (:class:`OrderRecord`) takes ``clientOrderId``/``cOrderId``/``corderId``,
  ``pairName``/``symbol``, ``entrustId``/``orderId`` (an int or its string), decimals as
  numbers or strings (numbers read from their text, never through a float), a missing or
  unreadable optional field as None; keys it does not declare, and the raw value of any it
  could not read, are kept in ``extra``;
- an open-order page (:class:`OrderPage`) is ``{"list"|"records"|"rows": [...], "total",
  "pageNo", "pageSize"}`` or a bare list;
- batch-cancel results (:class:`CancelResult`) are a list of ``{"entrustId", "code",
  "msg"}``; any other data is no per-order evidence (:class:`BatchCancelReport.unreported`);
- cancel-all ids are ``{"entrustIds": [...]}`` or a bare list; anything else: none known.

HTTP 404 on any of these paths (unless its body is an envelope with an order-state code:
the path exists), or a success whose data cannot be read at all where a
record is required (an open-order list that is a string, a queried order that is not an
object), raises :class:`~framework.venue.errors.ExtensionUnavailable`: the caller turns the
feature off. HTTP >= 500 is a ServerFault (ambiguous) as everywhere.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Final, TypeVar

import msgspec

from framework.venue.codec import DEFAULT_CODEC, Codec
from framework.venue.errors import (
    ORDER_CODES,
    ORDER_COMPLETED,
    ORDER_NOT_FOUND,
    BadResponse,
    DecodeError,
    ExtensionUnavailable,
    order_error_for,
)
from framework.venue.requests import excerpt, read_envelope, server_fault

__all__ = [
    "BatchCancelReport",
    "CancelResult",
    "OrderPage",
    "OrderRecord",
    "OrderState",
    "decode_cancel_all_ids",
    "decode_cancel_results",
    "decode_order_page",
    "decode_order_record",
    "parse_batch_cancel",
    "parse_cancel",
    "parse_cancel_all",
    "parse_open_orders",
    "parse_query_order",
]

T = TypeVar("T")


class OrderState(enum.StrEnum):
    """What an order record's status says, as far as the framework can read it."""

    OPEN = "open"
    FILLED = "filled"
    CANCELED = "canceled"
    UNKNOWN = "unknown"


_STATES: Final = {
    "OPEN": OrderState.OPEN,
    "NEW": OrderState.OPEN,
    "PENDING": OrderState.OPEN,
    "PARTIALLY_FILLED": OrderState.OPEN,
    "PARTIAL_FILLED": OrderState.OPEN,
    "PART_FILLED": OrderState.OPEN,
    "FILLED": OrderState.FILLED,
    "CANCELED": OrderState.CANCELED,
    "CANCELLED": OrderState.CANCELED,
    "PARTIALLY_CANCELED": OrderState.CANCELED,
    "PARTIAL_CANCELED": OrderState.CANCELED,
}


class OrderRecord(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One order as the order-management extension reports it (open, queried or canceled).

    Every field but entrust_id may be None (missing, null or unreadable); ``extra`` holds
    the keys the record does not declare and the raw value of any it could not read.
    """

    entrust_id: int
    client_order_id: str | None = None
    pair_name: str | None = None
    is_long: bool | None = None
    is_market: bool | None = None
    match_type: int | None = None
    position_type: int | None = None
    lever: int | None = None
    price: Decimal | None = None
    quantity: Decimal | None = None
    filled_quantity: Decimal | None = None
    status: str | None = None
    create_time_stamp: int | None = None
    update_time_stamp: int | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def state(self) -> OrderState:
        """OPEN, FILLED, CANCELED, or UNKNOWN for a status the framework does not know."""
        if self.status is None:
            return OrderState.UNKNOWN
        return _STATES.get(self.status.strip().upper(), OrderState.UNKNOWN)

    @property
    def remaining(self) -> Decimal | None:
        """quantity - filled_quantity, or None when either is unknown."""
        if self.quantity is None or self.filled_quantity is None:
            return None
        return self.quantity - self.filled_quantity


class OrderPage(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One page of open orders; total, page_no and page_size are None when not given."""

    records: tuple[OrderRecord, ...]
    total: int | None = None
    page_no: int | None = None
    page_size: int | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class CancelResult(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The venue's per-order outcome of a batch cancel: entrustId, code (200 = canceled), msg."""

    entrust_id: int
    code: int | None = None
    msg: str | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the venue says this order was canceled (code 200)."""
        return self.code == 200

    @property
    def order_missing(self) -> bool:
        """True when the venue says it knows no such order (2340)."""
        return self.code == ORDER_NOT_FOUND

    @property
    def order_done(self) -> bool:
        """True when the venue says the order was already filled or canceled (2341)."""
        return self.code == ORDER_COMPLETED


class BatchCancelReport(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What batch cancels said: per-order results, and the ids sent with no per-order word.

    ``unreported`` ids were in a call the venue accepted (code 200) without saying what
    became of each: infer nothing about them (query them, or wait for the match list).
    """

    results: tuple[CancelResult, ...] = ()
    unreported: tuple[int, ...] = ()

    def __add__(self, other: BatchCancelReport) -> BatchCancelReport:
        """Both reports as one (the chunks of one batch cancel)."""
        return BatchCancelReport(
            results=self.results + other.results, unreported=self.unreported + other.unreported
        )


# ---------------------------------------------------------------------------- lenient values


class _Unreadable(Exception):
    """A value that cannot be read as its field's type."""


_INT_TEXT: Final = re.compile(r"\s*[+-]?\d+\s*")


def _int(value: Any) -> int:
    if type(value) is int:
        return value
    if type(value) is str and _INT_TEXT.fullmatch(value):
        return int(value)
    if type(value) is Decimal and value.is_finite() and value == value.to_integral_value():
        return int(value)
    raise _Unreadable


def _decimal(value: Any) -> Decimal:
    if type(value) is Decimal:
        result = value
    elif type(value) is int:
        result = Decimal(value)
    elif type(value) is str:
        try:
            result = Decimal(value)
        except InvalidOperation:
            raise _Unreadable from None
    else:
        raise _Unreadable
    if not result.is_finite():
        raise _Unreadable
    return result


def _bool(value: Any) -> bool:
    if type(value) is bool:
        return value
    if type(value) is int and value in (0, 1):
        return value == 1
    if type(value) is str and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _Unreadable


def _str(value: Any) -> str:
    if type(value) is str:
        return value
    if type(value) is int:
        return str(value)
    raise _Unreadable


# field -> (wire keys, first found wins; reader)
_ORDER_FIELDS: Final[tuple[tuple[str, tuple[str, ...], Callable[[Any], Any]], ...]] = (
    ("client_order_id", ("clientOrderId", "cOrderId", "corderId"), _str),
    ("pair_name", ("pairName", "symbol"), _str),
    ("is_long", ("isLong",), _bool),
    ("is_market", ("isMarket",), _bool),
    ("match_type", ("matchType",), _int),
    ("position_type", ("positionType",), _int),
    ("lever", ("lever",), _int),
    ("price", ("price",), _decimal),
    ("quantity", ("quantity",), _decimal),
    ("filled_quantity", ("filledQuantity",), _decimal),
    ("status", ("status",), _str),
    ("create_time_stamp", ("createTimeStamp",), _int),
    ("update_time_stamp", ("updateTimeStamp",), _int),
)
_ID_KEYS: Final = ("entrustId", "orderId")
_ORDER_KEYS: Final = frozenset(_ID_KEYS).union(*(keys for _, keys, _ in _ORDER_FIELDS))


def _optional(
    obj: dict[str, Any], keys: tuple[str, ...], read: Callable[[Any], T], extra: dict[str, Any]
) -> T | None:
    """The first non-null of keys read by read; an unreadable value is kept in extra."""
    for key in keys:
        value = obj.get(key)
        if value is None or value == "":
            continue
        try:
            return read(value)
        except _Unreadable:
            extra[key] = value
    return None


def decode_order_record(obj: Any) -> OrderRecord:
    """An order record from its wire object, leniently; DecodeError without a readable id."""
    if type(obj) is not dict:
        raise DecodeError("OrderRecord", None, f"expected an object, got {_kind(obj)}")
    extra = {k: v for k, v in obj.items() if k not in _ORDER_KEYS}
    entrust_id = _optional(obj, _ID_KEYS, _int, extra)
    if entrust_id is None:
        raise DecodeError("OrderRecord", "entrustId", "missing, null or not an integer")
    values = {name: _optional(obj, keys, read, extra) for name, keys, read in _ORDER_FIELDS}
    return OrderRecord(entrust_id=entrust_id, extra=extra, **values)


_LIST_KEYS: Final = ("list", "records", "rows")
_PAGE_KEYS: Final = frozenset((*_LIST_KEYS, "total", "pageNo", "pageSize"))


def decode_order_page(obj: Any) -> OrderPage:
    """An open-order page: {"list"|"records"|"rows": [...], "total", ...}, a bare list or null."""
    if obj is None:
        return OrderPage(records=())
    if type(obj) is list:
        return OrderPage(records=_records(obj))
    if type(obj) is not dict:
        raise DecodeError("OrderPage", None, f"expected an object or an array, got {_kind(obj)}")
    key = next((k for k in _LIST_KEYS if k in obj), None)
    if key is None:
        raise DecodeError("OrderPage", "list", "no list, records or rows key")
    items = obj[key]
    if items is not None and type(items) is not list:
        raise DecodeError("OrderPage", key, f"expected an array, got {_kind(items)}")
    extra = {k: v for k, v in obj.items() if k not in _PAGE_KEYS}
    return OrderPage(
        records=_records(items or []),
        total=_optional(obj, ("total",), _int, extra),
        page_no=_optional(obj, ("pageNo",), _int, extra),
        page_size=_optional(obj, ("pageSize",), _int, extra),
        extra=extra,
    )


def _records(items: list[Any]) -> tuple[OrderRecord, ...]:
    out = []
    for i, item in enumerate(items):
        try:
            out.append(decode_order_record(item))
        except DecodeError as exc:
            raise DecodeError("OrderRecord", exc.field, f"{exc.reason} - at `$[{i}]`") from None
    return tuple(out)


def decode_cancel_results(obj: Any) -> tuple[CancelResult, ...] | None:
    """Per-order batch-cancel results, or None when data is no list of {entrustId, code, msg}."""
    if type(obj) is not list:
        return None
    out = []
    for item in obj:
        if type(item) is not dict:
            return None
        extra = {k: v for k, v in item.items() if k not in ("entrustId", "orderId", "code", "msg")}
        entrust_id = _optional(item, _ID_KEYS, _int, extra)
        code = _optional(item, ("code",), _int, extra)
        if entrust_id is None or code is None:
            return None  # without both, the item names no outcome of an order
        msg = _optional(item, ("msg",), _str, extra)
        out.append(CancelResult(entrust_id=entrust_id, code=code, msg=msg, extra=extra))
    return tuple(out)


def decode_cancel_all_ids(obj: Any) -> tuple[int, ...] | None:
    """The ids cancelAll names: {"entrustIds": [...]}, a bare list (of ids or records), or None."""
    if type(obj) is dict:
        obj = obj.get("entrustIds")
    if type(obj) is not list:
        return None
    ids = []
    for item in obj:
        if type(item) is dict:
            item = next((item[k] for k in _ID_KEYS if item.get(k) is not None), None)
        try:
            ids.append(_int(item))
        except _Unreadable:
            return None
    return tuple(ids)


def _kind(obj: Any) -> str:
    return "null" if obj is None else type(obj).__name__


# ---------------------------------------------------------------------------- answers

_LOAD: Final = msgspec.json.Decoder(float_hook=Decimal).decode  # numbers from their text
_NOT_JSON: Final = object()


def _data(path: str, status: int, body: bytes, codec: Codec) -> Any:
    """The data of a success answer, or the exception of any other (404: unavailable)."""
    if status >= 500:
        raise server_fault(status, body)
    try:
        obj = _LOAD(body)
    except msgspec.DecodeError:
        obj = _NOT_JSON
    if status == 404:
        # Only an order-state code says the path exists and spoke of the order.
        code = obj.get("code") if type(obj) is dict else None
        if type(code) is not int or code not in ORDER_CODES:
            raise ExtensionUnavailable(
                path, f"HTTP 404 ({excerpt(body, 80)!r})", http_status=status
            )
    if obj is _NOT_JSON:
        raise BadResponse(
            f"HTTP {status}: body is not JSON: {excerpt(body)!r}",
            http_status=status,
            excerpt=excerpt(body),
        )
    return read_envelope(status, obj, body, codec, refusal=order_error_for).data


def _required(path: str, decode: Callable[[Any], T], data: Any) -> T:
    try:
        return decode(data)
    except DecodeError as exc:
        raise ExtensionUnavailable(path, f"unreadable data ({exc})") from None


def parse_cancel(
    path: str, status: int, body: bytes, codec: Codec = DEFAULT_CODEC
) -> OrderRecord | None:
    """A cancel's answer (by id or client id): the order record if data is one, else None.

    Returning at all means the venue accepted the cancel (code 200).
    """
    data = _data(path, status, body, codec)
    try:
        return decode_order_record(data)
    except DecodeError:
        return None  # null, true, or a shape of its own: the code says done


def parse_batch_cancel(
    path: str, status: int, body: bytes, sent: Sequence[int], codec: Codec = DEFAULT_CODEC
) -> BatchCancelReport:
    """A batch cancel's answer: per-order results, and the sent ids it says nothing of."""
    results = decode_cancel_results(_data(path, status, body, codec))
    if results is None:
        return BatchCancelReport(unreported=tuple(sent))
    named = {r.entrust_id for r in results}
    return BatchCancelReport(results=results, unreported=_missing(sent, named))


def _missing(sent: Iterable[int], named: set[int]) -> tuple[int, ...]:
    return tuple(i for i in sent if i not in named)


def parse_cancel_all(
    path: str, status: int, body: bytes, codec: Codec = DEFAULT_CODEC
) -> tuple[int, ...] | None:
    """A cancel-all's answer: the ids it names as canceled, or None when it names none."""
    return decode_cancel_all_ids(_data(path, status, body, codec))


def parse_open_orders(
    path: str, status: int, body: bytes, codec: Codec = DEFAULT_CODEC
) -> OrderPage:
    """One page of open orders; unreadable data raises ExtensionUnavailable."""
    return _required(path, decode_order_page, _data(path, status, body, codec))


def parse_query_order(
    path: str, status: int, body: bytes, codec: Codec = DEFAULT_CODEC
) -> OrderRecord | None:
    """A queried order; None for a success with data null; other shapes: ExtensionUnavailable."""
    data = _data(path, status, body, codec)
    if data is None:
        return None
    return _required(path, decode_order_record, data)
