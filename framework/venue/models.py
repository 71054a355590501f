"""Typed records of the venue's resources (SPEC sections 2 and 6).

Each record is a frozen attrs class with slots. Attribute names are the snake_case of the
spec's field names; the wire key of every attribute is kept in its metadata (``wire``) with the
kind of value it carries (``kind``), which is what :mod:`framework.venue.codec` compiles its
decoders and encoders from. Decimal values are :class:`decimal.Decimal`, nulls stay ``None``,
date-times are timezone-aware, and keys the venue adds later are kept in ``extra``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

import attrs

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
    "wire",
]

_EMPTY: Mapping[str, Any] = {}


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


def wire(
    key: str, kind: str, *, required: bool = False, default: Any = None, alias: str | None = None
) -> Any:
    """An attrs field bound to a wire key; kind is str, id, int, bool, dec, dt, raw or an enum."""
    meta = {"wire": key, "kind": kind, "required": required, "alias": alias}
    if required:
        return attrs.field(metadata=meta)
    return attrs.field(default=default, metadata=meta)


def _extra() -> Any:
    return attrs.field(default=_EMPTY, repr=False, eq=False)


@attrs.frozen(slots=True, kw_only=True)
class OrderInput:
    """One order of a batchCreate call (SPEC 2.1); wire key order follows the public SDK."""

    client_order_id: str = wire("clientOrderId", "str", required=True)
    is_long: bool = wire("isLong", "bool", required=True)
    is_market: bool = wire("isMarket", "bool", required=True)
    lever: int = wire("lever", "int", required=True)
    match_type: MatchType = wire("matchType", "MatchType", required=True)
    pair_name: str = wire("pairName", "str", required=True)
    position_type: PositionType = wire("positionType", "PositionType", required=True)
    price: Decimal | None = wire("price", "dec")
    quantity: Decimal = wire("quantity", "dec", required=True)
    extra: Mapping[str, Any] = _extra()


@attrs.frozen(slots=True, kw_only=True)
class OrderResult:
    """One accepted order of a batchCreate answer (SPEC 2.2); accepts corderId and cOrderId."""

    client_order_id: str = wire("cOrderId", "str", required=True, alias="corderId")
    order_id: int = wire("orderId", "int", required=True)
    pair_name: str | None = wire("pairName", "str")
    extra: Mapping[str, Any] = _extra()


@attrs.frozen(slots=True, kw_only=True)
class Position:
    """One position of the position list (SPEC 2.3)."""

    id: int = wire("id", "int", required=True)
    entrust_id: int | None = wire("entrustId", "int")
    contract_pair_id: int | None = wire("contractPairId", "int")
    symbol: str | None = wire("symbol", "str")
    position_type: int | None = wire("positionType", "int")
    is_long: bool | None = wire("isLong", "bool")
    opening_price: Decimal | None = wire("openingPrice", "dec")
    quantity: Decimal | None = wire("quantity", "dec")
    closing_quantity: Decimal | None = wire("closingQuantity", "dec")
    remaining_close_quantity: Decimal | None = wire("remainingCloseQuantity", "dec")
    amount: Decimal | None = wire("amount", "dec")
    margin_call_amount: Decimal | None = wire("marginCallAmount", "dec")
    tariff_amount: Decimal | None = wire("tariffAmount", "dec")
    lever: int | None = wire("lever", "int")
    margin_amount: Decimal | None = wire("marginAmount", "dec")
    restrict_price: Decimal | None = wire("restrictPrice", "dec")
    unrealized_pnl: Decimal | None = wire("unrealizedPnl", "dec")
    realized_pnl: Decimal | None = wire("realizedPnl", "dec")
    profit_type: int | None = wire("profitType", "int")
    profit_price: Decimal | None = wire("profitPrice", "dec")
    loss_type: int | None = wire("lossType", "int")
    loss_price: Decimal | None = wire("lossPrice", "dec")
    lights: int | None = wire("lights", "int")
    status: int | None = wire("status", "int")
    create_time: datetime | None = wire("createTime", "dt")
    create_time_stamp: int | None = wire("createTimeStamp", "int")
    is_dual: bool | None = wire("isDual", "bool")
    face_multiplier: Decimal | None = wire("faceMultiplier", "dec")
    account_coin_id: int | None = wire("accountCoinId", "int")
    account_coin_symbol: str | None = wire("accountCoinSymbol", "str")
    account_settle_decimal: int | None = wire("accountSettleDecimal", "int")
    trade_coin_decimal: int | None = wire("tradeCoinDecimal", "int")
    is_delivery: bool | None = wire("isDelivery", "bool")
    delivery_time: datetime | None = wire("deliveryTime", "dt")
    delivery_time_stamp: int | None = wire("deliveryTimeStamp", "int")
    settle_show_decimal: int | None = wire("settleShowDecimal", "int")
    trade_coin_icon: str | None = wire("tradeCoinIcon", "str")
    settle_coin_icon: str | None = wire("settleCoinIcon", "str")
    extra: Mapping[str, Any] = _extra()


@attrs.frozen(slots=True, kw_only=True)
class AccountBalance:
    """The balance of one settlement coin (SPEC 2.4)."""

    user_id: int | None = wire("userId", "int")
    coin_id: int | None = wire("coinId", "int")
    symbol: str | None = wire("symbol", "str")
    available_amount: Decimal | None = wire("availableAmount", "dec")
    frozen_amount: Decimal | None = wire("frozenAmount", "dec")
    extra: Mapping[str, Any] = _extra()


@attrs.frozen(slots=True, kw_only=True)
class MatchRecord:
    """One matched trade (SPEC 2.5); client_order_id and candidates are the framework's."""

    id: int = wire("id", "int", required=True)
    entrust_id: int | None = wire("entrustId", "int")
    contract_position_id: int | None = wire("contractPositionId", "int")
    contract_pair_id: int | None = wire("contractPairId", "int")
    create_time: datetime | None = wire("createTime", "dt")
    create_time_stamp: int | None = wire("createTimeStamp", "int")
    symbol: str | None = wire("symbol", "str")
    account_coin_symbol: str | None = wire("accountCoinSymbol", "str")
    account_settle_decimal: int | None = wire("accountSettleDecimal", "int")
    lever: int | None = wire("lever", "int")
    is_market: bool | None = wire("isMarket", "bool")
    is_close: bool | None = wire("isClose", "bool")
    is_long: bool | None = wire("isLong", "bool")
    is_taker: bool | None = wire("isTaker", "bool")
    average_price: Decimal | None = wire("averagePrice", "dec")
    quantity: Decimal | None = wire("quantity", "dec")
    amount: Decimal | None = wire("amount", "dec")
    trade_fee: Decimal | None = wire("tradeFee", "dec")
    position_fee: Decimal | None = wire("positionFee", "dec")
    profit_loss: Decimal | None = wire("profitLoss", "dec")
    is_delivery: bool | None = wire("isDelivery", "bool")
    delivery_time: datetime | None = wire("deliveryTime", "dt")
    delivery_time_stamp: int | None = wire("deliveryTimeStamp", "int")
    address: str | None = wire("address", "str")
    opening_price: Decimal | None = wire("openingPrice", "dec")
    type: Any = wire("type", "raw")
    restrict_price: Decimal | None = wire("restrictPrice", "dec")
    extra: Mapping[str, Any] = _extra()
    client_order_id: str | None = attrs.field(default=None, kw_only=True)
    candidates: tuple[str, ...] = attrs.field(default=(), kw_only=True)
    """Set by the framework when the match may fill any of these in-doubt intents of yours
    and which one is unknowable (client_order_id is then None); see OrderStatus.AMBIGUOUS."""


@attrs.frozen(slots=True, kw_only=True)
class PositionPush:
    """An api_position push (SPEC 6.1): the data object's fields plus the frame's success."""

    change_type: ChangeType = wire("changeType", "ChangeType", required=True)
    current_quantity: Decimal | None = wire("currentQuantity", "dec")
    direction: Direction | None = wire("direction", "Direction")
    operate_quantity: Decimal | None = wire("operateQuantity", "dec")
    position_id: int | None = wire("positionId", "int")
    symbol: str = wire("symbol", "str", required=True)
    can_closed_quantity: Decimal | None = wire("canClosedQuantity", "dec")
    contract_pair_id: int | None = wire("contractPairId", "int")
    position_type: int | None = wire("positionType", "int")
    opening_price: Decimal | None = wire("openingPrice", "dec")
    margin_amount: Decimal | None = wire("marginAmount", "dec")
    margin_call_amount: Decimal | None = wire("marginCallAmount", "dec")
    success: bool = attrs.field(default=True, kw_only=True)
    extra: Mapping[str, Any] = _extra()


@attrs.frozen(slots=True, kw_only=True)
class AccountPush:
    """An api_account push (SPEC 6.2): the data object's fields plus the frame's success."""

    available_amount: Decimal | None = wire("availableAmount", "dec")
    frozen_amount: Decimal | None = wire("frozenAmount", "dec")
    log_id: int = wire("logId", "int", required=True)
    operate_amount: Decimal | None = wire("operateAmount", "dec")
    symbol: str = wire("symbol", "str", required=True)
    coin_id: int | None = wire("coinId", "int")
    success: bool = attrs.field(default=True, kw_only=True)
    extra: Mapping[str, Any] = _extra()


@attrs.frozen(slots=True, kw_only=True)
class SubscribeAck:
    """The answer to a subscribe message (SPEC section 6)."""

    event: str = wire("event", "str", required=True)
    method: str | None = wire("method", "str")
    msg: str | None = wire("msg", "str")
    success: bool = wire("success", "bool", required=True)
    pair: str | None = wire("pair", "str")
    symbol: str | None = wire("symbol", "str")
    extra: Mapping[str, Any] = _extra()


@attrs.frozen(slots=True, kw_only=True)
class Envelope:
    """The REST response envelope; data is left raw for the endpoint's own decoder."""

    error: bool = wire("error", "bool", required=True)
    code: int = wire("code", "int", required=True)
    msg: str | None = wire("msg", "str")
    data: Any = wire("data", "raw")
    sid: str | None = wire("sid", "id")
    extra: Mapping[str, Any] = _extra()

    @property
    def ok(self) -> bool:
        """True when the venue reports success (code 200 and error false)."""
        return self.code == 200 and not self.error
