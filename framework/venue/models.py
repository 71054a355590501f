"""Typed records of the venue's resources (SPEC sections 2 and 6): frozen msgspec Structs.

Attribute names are the snake_case of the spec's field names and each record renames them
to camelCase on the wire, so msgspec decodes a record straight from the bytes the venue sent
(:mod:`framework.venue.codec` holds the decoders and wraps their errors). Decimal values are
:class:`decimal.Decimal` (read from the JSON text, never through a binary float), nulls stay
``None``, date-times are timezone-aware (the venue writes ``yyyy-MM-dd HH:mm:ss`` in UTC),
and keys the venue adds later are skipped. Records hold no reference cycles, so the garbage
collector does not track them (``gc=False``); they are frozen: change one with
:func:`msgspec.structs.replace`.
"""

from __future__ import annotations

import enum
import inspect
import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import msgspec
from msgspec.structs import force_setattr

__all__ = [
    "AccountBalance",
    "AccountPush",
    "ChangeType",
    "Direction",
    "Envelope",
    "MatchRecord",
    "MatchType",
    "OrderInput",
    "OrderResult",
    "Position",
    "PositionPush",
    "PositionType",
    "SubscribeAck",
]


class MatchType(enum.IntEnum):
    """Order time-in-force (matchType)."""

    GTC = 1
    IOC = 2
    FOK = 3
    POST_ONLY = 4


class PositionType(enum.IntEnum):
    """Margin mode of a one-way position (positionType)."""

    ISOLATED = 3
    CROSS = 4


class ChangeType(enum.StrEnum):
    """What produced a position push (changeType)."""

    NEW = "NEW"
    INCREASE = "INCREASE"
    CLOSE = "CLOSE"
    LIQUIDATE = "LIQUIDATE"
    REDUCE = "REDUCE"


class Direction(enum.StrEnum):
    """Position direction in pushes."""

    LONG = "LONG"
    SHORT = "SHORT"


def _name_non_finite(record: msgspec.Struct) -> None:
    """Raise ValueError naming record's first decimal field that is not finite."""
    for field in msgspec.structs.fields(record):
        value = getattr(record, field.name)
        if type(value) is Decimal and not value.is_finite():
            raise ValueError(f"expected a finite decimal, got {value} - at `$.{field.encode_name}`")


_AWARE: dict[datetime, datetime] = {}
"""Naive date-times read lately -> the same in UTC (matches of one poll share their second)."""


def _aware(value: datetime) -> datetime:
    """A date-time the venue wrote without a zone, in UTC (a zone-naive one; cached)."""
    aware = _AWARE.get(value)
    if aware is None:
        if len(_AWARE) >= 4096:
            _AWARE.clear()
        aware = _AWARE[value] = value.replace(tzinfo=UTC)
    return aware


def _fields_of(cls: type, kind: str) -> list[str]:
    """The names of cls's own fields whose annotation names kind (a word of its text)."""
    word = re.compile(rf"\b{kind}\b")
    annotations = inspect.get_annotations(cls)
    return [name for name, note in annotations.items() if word.search(str(note))]


def _decoded_check(cls: type) -> Any:
    """cls's __post_init__, written once from its fields: finite decimals, aware date-times.

    It runs for every record decoded, so it is generated unrolled (one test per field, no
    loop over a tuple of names: half the cost on a push), as dataclasses writes __init__.
    """
    decimals, times = _fields_of(cls, "Decimal"), _fields_of(cls, "datetime")
    body = [f"    v{i} = self.{name}" for i, name in enumerate(decimals)]
    if decimals:
        finite = " and ".join(f"(v{i} is None or v{i}.is_finite())" for i in range(len(decimals)))
        body.append(f"    if not ({finite}):\n        name_non_finite(self)")
    for name in times:
        body.append(
            f"    t = self.{name}\n    if t is not None and t.tzinfo is None:\n"
            f"        a = cache.get(t)\n        force_setattr(self, {name!r}, aware(t) if a is None else a)"
        )
    source = "def __post_init__(self):\n" + ("\n".join(body) or "    pass")
    scope: dict[str, Any] = {
        "name_non_finite": _name_non_finite,
        "cache": _AWARE,
        "aware": _aware,
        "force_setattr": force_setattr,
    }
    exec(compile(source, f"<{cls.__name__}.__post_init__>", "exec"), scope)
    return scope["__post_init__"]


class _Decoded(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """A venue record checked as it is decoded (see :func:`_decoded_check`).

    A decimal that is not finite (NaN, Infinity) is refused naming its field, and a
    date-time without a zone is read as UTC, as the venue writes it.
    """

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__(**options)
        # Set before msgspec reads the class's __post_init__ (it does so after this hook).
        setattr(cls, "__post_init__", _decoded_check(cls))  # noqa: B010


class OrderInput(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """One order of a batchCreate call (SPEC 2.1); wire key order follows the public SDK."""

    client_order_id: str
    is_long: bool
    is_market: bool
    lever: int
    match_type: MatchType
    pair_name: str
    position_type: PositionType
    price: Decimal | None = None
    quantity: Decimal


class OrderResult(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """One accepted order of a batchCreate answer (SPEC 2.2).

    The spec lists the client id as cOrderId and its example answers under corderId: the
    codec reads either (:func:`framework.venue.codec.decode_order_results`).
    """

    client_order_id: str = msgspec.field(name="cOrderId")
    order_id: int
    pair_name: str | None = None


class Position(_Decoded, frozen=True, kw_only=True, rename="camel", gc=False):
    """One position of the position list (SPEC 2.3)."""

    id: int
    entrust_id: int | None = None
    contract_pair_id: int | None = None
    symbol: str | None = None
    position_type: int | None = None
    is_long: bool | None = None
    opening_price: Decimal | None = None
    quantity: Decimal | None = None
    closing_quantity: Decimal | None = None
    remaining_close_quantity: Decimal | None = None
    amount: Decimal | None = None
    margin_call_amount: Decimal | None = None
    tariff_amount: Decimal | None = None
    lever: int | None = None
    margin_amount: Decimal | None = None
    restrict_price: Decimal | None = None
    unrealized_pnl: Decimal | None = None
    realized_pnl: Decimal | None = None
    profit_type: int | None = None
    profit_price: Decimal | None = None
    loss_type: int | None = None
    loss_price: Decimal | None = None
    lights: int | None = None
    status: int | None = None
    create_time: datetime | None = None
    create_time_stamp: int | None = None
    is_dual: bool | None = None
    face_multiplier: Decimal | None = None
    account_coin_id: int | None = None
    account_coin_symbol: str | None = None
    account_settle_decimal: int | None = None
    trade_coin_decimal: int | None = None
    is_delivery: bool | None = None
    delivery_time: datetime | None = None
    delivery_time_stamp: int | None = None
    settle_show_decimal: int | None = None
    trade_coin_icon: str | None = None
    settle_coin_icon: str | None = None


class AccountBalance(_Decoded, frozen=True, kw_only=True, rename="camel", gc=False):
    """The balance of one settlement coin (SPEC 2.4)."""

    user_id: int | None = None
    coin_id: int | None = None
    symbol: str | None = None
    available_amount: Decimal | None = None
    frozen_amount: Decimal | None = None


class MatchRecord(_Decoded, frozen=True, kw_only=True, rename="camel", gc=False):
    """One matched trade (SPEC 2.5); client_order_id and candidates are the framework's.

    ``client_order_id`` is set by the framework when the match fills a known intent of
    yours; ``candidates`` when it may fill any of these in-doubt intents and which one is
    unknowable (client_order_id is then None; see OrderStatus.AMBIGUOUS). The venue sends
    neither: :func:`framework.venue.codec.encode` leaves them out.
    """

    id: int
    entrust_id: int | None = None
    contract_position_id: int | None = None
    contract_pair_id: int | None = None
    create_time: datetime | None = None
    create_time_stamp: int | None = None
    symbol: str | None = None
    account_coin_symbol: str | None = None
    account_settle_decimal: int | None = None
    lever: int | None = None
    is_market: bool | None = None
    is_close: bool | None = None
    is_long: bool | None = None
    is_taker: bool | None = None
    average_price: Decimal | None = None
    quantity: Decimal | None = None
    amount: Decimal | None = None
    trade_fee: Decimal | None = None
    position_fee: Decimal | None = None
    profit_loss: Decimal | None = None
    is_delivery: bool | None = None
    delivery_time: datetime | None = None
    delivery_time_stamp: int | None = None
    address: str | None = None
    opening_price: Decimal | None = None
    type: Any = None
    restrict_price: Decimal | None = None
    client_order_id: str | None = None
    candidates: tuple[str, ...] = ()


class PositionPush(_Decoded, frozen=True, kw_only=True, rename="camel", gc=False):
    """An api_position push (SPEC 6.1): the data object's fields plus the frame's success."""

    change_type: ChangeType
    current_quantity: Decimal | None = None
    direction: Direction | None = None
    operate_quantity: Decimal | None = None
    position_id: int | None = None
    symbol: str
    can_closed_quantity: Decimal | None = None
    contract_pair_id: int | None = None
    position_type: int | None = None
    opening_price: Decimal | None = None
    margin_amount: Decimal | None = None
    margin_call_amount: Decimal | None = None
    success: bool = True


class AccountPush(_Decoded, frozen=True, kw_only=True, rename="camel", gc=False):
    """An api_account push (SPEC 6.2): the data object's fields plus the frame's success."""

    available_amount: Decimal | None = None
    frozen_amount: Decimal | None = None
    log_id: int
    operate_amount: Decimal | None = None
    symbol: str
    coin_id: int | None = None
    success: bool = True


class SubscribeAck(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """The answer to a subscribe message (SPEC section 6)."""

    event: str
    method: str | None = None
    msg: str | None = None
    success: bool
    pair: str | None = None
    symbol: str | None = None


class Envelope(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """The REST response envelope; data is left raw for the endpoint's own decoder."""

    error: bool
    code: int
    msg: str | None = None
    data: Any = None
    sid: str | None = None
    """The response's numeric id as a string (the codec reads a number as its text)."""

    @property
    def ok(self) -> bool:
        """True when the venue reports success (code 200 and error false)."""
        return self.code == 200 and not self.error
