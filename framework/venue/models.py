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
import typing
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


_DECIMALS: dict[type, tuple[str, ...]] = {}
"""Record class -> the names of its decimal fields, found once from the class's own fields."""


def _refuse_non_finite(record: msgspec.Struct) -> None:
    """Raise ValueError naming the first decimal field that is not finite (NaN, Infinity)."""
    names = _DECIMALS.get(type(record))
    if names is None:
        names = _DECIMALS[type(record)] = tuple(
            f.name
            for f in msgspec.structs.fields(record)
            if f.type is Decimal or Decimal in typing.get_args(f.type)
        )
    for name in names:
        value = getattr(record, name)
        if value is not None and not value.is_finite():
            _name_non_finite(record)


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


class Position(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
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

    def __post_init__(self) -> None:
        _refuse_non_finite(self)
        created, delivery = self.create_time, self.delivery_time
        if created is not None and created.tzinfo is None:
            force_setattr(self, "create_time", _aware(created))
        if delivery is not None and delivery.tzinfo is None:
            force_setattr(self, "delivery_time", _aware(delivery))


class AccountBalance(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """The balance of one settlement coin (SPEC 2.4)."""

    user_id: int | None = None
    coin_id: int | None = None
    symbol: str | None = None
    available_amount: Decimal | None = None
    frozen_amount: Decimal | None = None

    def __post_init__(self) -> None:
        _refuse_non_finite(self)


class MatchRecord(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
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

    def __post_init__(self) -> None:
        # Unrolled, not a loop over a tuple of the fields: this runs for every match decoded.
        a, b, c, d = self.average_price, self.quantity, self.amount, self.trade_fee
        e, f, g, h = self.position_fee, self.profit_loss, self.opening_price, self.restrict_price
        if not (
            (a is None or a.is_finite())
            and (b is None or b.is_finite())
            and (c is None or c.is_finite())
            and (d is None or d.is_finite())
            and (e is None or e.is_finite())
            and (f is None or f.is_finite())
            and (g is None or g.is_finite())
            and (h is None or h.is_finite())
        ):
            _name_non_finite(self)
        created = self.create_time
        if created is not None and created.tzinfo is None:
            aware = _AWARE.get(created)
            force_setattr(self, "create_time", _aware(created) if aware is None else aware)
        delivery = self.delivery_time
        if delivery is not None and delivery.tzinfo is None:
            force_setattr(self, "delivery_time", _aware(delivery))


class PositionPush(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
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

    def __post_init__(self) -> None:
        # Unrolled, not a loop over a tuple of the fields: this runs for every push decoded.
        a, b, c = self.current_quantity, self.operate_quantity, self.can_closed_quantity
        d, e, f = self.opening_price, self.margin_amount, self.margin_call_amount
        if not (
            (a is None or a.is_finite())
            and (b is None or b.is_finite())
            and (c is None or c.is_finite())
            and (d is None or d.is_finite())
            and (e is None or e.is_finite())
            and (f is None or f.is_finite())
        ):
            _name_non_finite(self)


class AccountPush(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """An api_account push (SPEC 6.2): the data object's fields plus the frame's success."""

    available_amount: Decimal | None = None
    frozen_amount: Decimal | None = None
    log_id: int
    operate_amount: Decimal | None = None
    symbol: str
    coin_id: int | None = None
    success: bool = True

    def __post_init__(self) -> None:
        # Unrolled, as PositionPush's.
        a, b, c = self.available_amount, self.frozen_amount, self.operate_amount
        if not (
            (a is None or a.is_finite())
            and (b is None or b.is_finite())
            and (c is None or c.is_finite())
        ):
            _name_non_finite(self)


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
