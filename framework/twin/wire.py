"""The twin's wire: what it reads from a request and what it writes back.

Reading is strict on purpose, so a client bug shows up against the twin rather than the
venue. Query-string parameters (the SPEC endpoints and the order-management extension read
a page or an id the same way):

* A missing or empty required parameter is ``2002 Required parameter:<name>``; a value that
  does not parse is ``2001 Illegal parameter:<name>``.
* pageNo is 1-based (default 1); pageSize has a default and a limit (above it: 2001).
* An id is a positive decimal integer of at most 18 digits; an id list is ids joined by
  commas, with no empty element and at most a given number of them.
* A flag is exactly ``true`` or ``false``.

A batchCreate body's orders (:func:`parse_orders`, to OrderInput records or refusals):

* ``orders`` missing gives ``2002 Required parameter:orders``; not an array, empty, or more
  than ``max_orders`` (20) elements gives ``2001 Illegal parameter:orders`` for the whole call.
* In each order, the first missing required field (SPEC 2.1 order) gives ``2002 Required
  parameter:<field>``; ``price`` is required when ``isMarket`` is false.
* A value of the wrong JSON type or outside its enum gives ``2001 Illegal parameter:<field>``:
  ``clientOrderId`` a non-empty string of at most 64 characters, ``isLong``/``isMarket``
  booleans, ``lever`` and ``matchType`` (1-4) integers, ``pairName`` a configured pair,
  ``price`` and ``quantity`` decimal strings (``"12.5"``; JSON numbers, exponents and
  non-finite values are refused), ``price`` above zero.
* ``positionType`` is an integer; a value other than 3 or 4 gives ``2325``.

Writing: envelopes, SPEC section 2 objects and section 6 frames, and the order record of the
order-management extension (its shape is the twin's own, see
:mod:`framework.twin.order_management`). Built as plain dicts straight from SPEC.md's field
names (not through the framework's codec, so the twin stays an independent check of it).
Decimals are plain strings (``"10"``, never ``"1E+1"``), missing values are ``null``,
date-times are ``yyyy-MM-dd HH:mm:ss`` in UTC. Fields the twin has no model for are written
with neutral values: ``marginCallAmount`` 0, ``profitType``/``lossType`` 0 with null prices,
``lights`` 0, ``status`` 1 (holding), ``isDual`` false, ``faceMultiplier`` 1, icons null,
``positionFee`` 0, ``type`` null.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from framework.sim.events import BalanceChanged, Match, PositionChanged
from framework.sim.exchange import Exchange
from framework.sim.history import OrderRecord
from framework.sim.state import Account, Balance, Market, Position, Refusal
from framework.venue.codec import plain_decimal
from framework.venue.errors import render_message
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.rules import PairRules, position_type_error

__all__ = [
    "REQUIRED_FIELDS",
    "Refused",
    "account_frame",
    "balance_object",
    "envelope",
    "flag",
    "id_list",
    "match_object",
    "order_object",
    "page",
    "pair_object",
    "parse_orders",
    "position_frame",
    "position_object",
    "positive",
    "required",
    "required_id",
    "subscribe_ack",
]

# ---------------------------------------------------------------------------- reading


class Refused(Exception):
    """A venue error answer for the whole call: its code and filled message."""

    def __init__(self, code: int, *params: object, msg: str | None = None) -> None:
        """The message is the code's SPEC text filled with params unless msg is given."""
        super().__init__(code)
        self.code = code
        self.msg = render_message(code, *params) if msg is None else msg


def positive(value: str | None, default: int | None = None) -> int | None:
    """A positive decimal integer (at most 18 digits), default when absent, None when bad."""
    if value is None or value == "":
        return default
    if value.isascii() and value.isdigit() and len(value) <= 18 and int(value) > 0:
        return int(value)
    return None


def page(params: Mapping[str, str], *, default_size: int, max_size: int) -> tuple[int, int]:
    """pageNo and pageSize, or Refused 2001 naming the bad one."""
    page_no = positive(params.get("pageNo"), 1)
    if page_no is None:
        raise Refused(2001, "pageNo")
    page_size = positive(params.get("pageSize"), default_size)
    if page_size is None or page_size > max_size:
        raise Refused(2001, "pageSize")
    return page_no, page_size


def required(params: Mapping[str, str], name: str) -> str:
    """A parameter that must be present and not empty, or Refused 2002."""
    value = params.get(name)
    if not value:
        raise Refused(2002, name)
    return value


def required_id(params: Mapping[str, str], name: str) -> int:
    """A required positive integer id: Refused 2002 when missing, 2001 when malformed."""
    found = positive(required(params, name))
    if found is None:
        raise Refused(2001, name)
    return found


def id_list(params: Mapping[str, str], name: str, *, limit: int) -> list[int]:
    """Comma-joined ids in the given order: 2002 when missing, 2001 when bad or too many."""
    parts = required(params, name).split(",")
    if len(parts) > limit:
        raise Refused(2001, name)
    ids = [positive(part) for part in parts]
    if any(i is None for i in ids):
        raise Refused(2001, name)
    return [i for i in ids if i is not None]


def flag(params: Mapping[str, str], name: str) -> bool | None:
    """An optional ``true``/``false`` parameter (None when absent or empty), else 2001."""
    value = params.get(name)
    if not value:
        return None
    if value == "true":
        return True
    if value == "false":
        return False
    raise Refused(2001, name)


REQUIRED_FIELDS: Final = (
    "clientOrderId",
    "isLong",
    "isMarket",
    "lever",
    "matchType",
    "pairName",
    "positionType",
    "quantity",
)
"""Fields every order must carry (SPEC 2.1), in the order they are checked."""

_DECIMAL: Final = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")
_MATCH_TYPES: Final = {int(m): m for m in MatchType}
_POSITION_TYPES: Final = {int(p): p for p in PositionType}
_MAX_CLIENT_ID: Final = 64
_TYPED: Final = (("isLong", bool), ("isMarket", bool), ("lever", int))


def _illegal(name: str) -> Refusal:
    return 2001, render_message(2001, name)


def _decimal(value: Any) -> Decimal | None:
    if type(value) is str and len(value) <= 40 and _DECIMAL.fullmatch(value) is not None:
        return Decimal(value)
    return None


def parse_order(raw: Any, pairs: Mapping[str, PairRules]) -> OrderInput | Refusal:
    """One wire order as an OrderInput, or the (code, message) refusing it."""
    if type(raw) is not dict:
        return _illegal("orders")
    for name in REQUIRED_FIELDS:
        if raw.get(name) is None:
            return 2002, render_message(2002, name)
    client_id = raw["clientOrderId"]
    if type(client_id) is not str or not 0 < len(client_id) <= _MAX_CLIENT_ID:
        return _illegal("clientOrderId")
    for name, kind in _TYPED:
        if type(raw[name]) is not kind:
            return _illegal(name)
    match_type = _MATCH_TYPES.get(raw["matchType"]) if type(raw["matchType"]) is int else None
    if match_type is None:
        return _illegal("matchType")
    pair = raw["pairName"]
    rules = pairs.get(pair) if type(pair) is str else None
    if rules is None:
        return _illegal("pairName")
    raw_type = raw["positionType"]
    if type(raw_type) is not int:
        return _illegal("positionType")
    position_type = _POSITION_TYPES.get(raw_type)
    if position_type is None:
        return position_type_error(rules, raw_type) or _illegal("positionType")
    price = _price(raw.get("price"), raw["isMarket"])
    if isinstance(price, tuple):
        return price
    quantity = _decimal(raw["quantity"])
    if quantity is None:
        return _illegal("quantity")
    return OrderInput(
        client_order_id=client_id,
        is_long=raw["isLong"],
        is_market=raw["isMarket"],
        lever=raw["lever"],
        match_type=match_type,
        pair_name=pair,
        position_type=position_type,
        price=price,
        quantity=quantity,
    )


def _price(raw: Any, is_market: bool) -> Decimal | Refusal | None:
    """An order's price: above zero when given, required unless the order is a market one."""
    if raw is None:
        return None if is_market else (2002, render_message(2002, "price"))
    price = _decimal(raw)
    return _illegal("price") if price is None or price <= 0 else price


def parse_orders(
    raw: Any, pairs: Mapping[str, PairRules], *, max_orders: int
) -> list[OrderInput | Refusal] | Refusal:
    """Every order of a batch (each parsed or refused), or the refusal of the whole call."""
    if raw is None:
        return 2002, render_message(2002, "orders")
    if type(raw) is not list or not 0 < len(raw) <= max_orders:
        return _illegal("orders")
    return [parse_order(item, pairs) for item in raw]


# ---------------------------------------------------------------------------- writing


def _dec(value: Decimal | None) -> str | None:
    return None if value is None else plain_decimal(value)


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _dt(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ms(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


def envelope(code: int, msg: str, data: Any, sid: int) -> dict[str, Any]:
    """The REST envelope of SPEC section 2 (error is true unless code is 200)."""
    return {"error": code != 200, "code": code, "msg": msg, "data": data, "sid": str(sid)}


def position_object(exchange: Exchange, account: Account, position: Position) -> dict[str, Any]:
    """A position of the position list (SPEC 2.3)."""
    market = exchange.markets[position.pair]
    rules = market.rules
    can_close = exchange.can_close(account, position)
    return {
        "id": position.id,
        "entrustId": position.entrust_id,
        "contractPairId": market.contract_pair_id,
        "symbol": position.pair,
        "positionType": position.position_type,
        "isLong": position.is_long,
        "openingPrice": _dec(position.opening_price),
        "quantity": _dec(position.quantity),
        "closingQuantity": _dec(position.quantity - can_close),
        "remainingCloseQuantity": _dec(can_close),
        "amount": _dec(position.quantity * position.opening_price),
        "marginCallAmount": "0",
        "tariffAmount": _dec(position.fees),
        "lever": position.lever,
        "marginAmount": _dec(position.margin),
        "restrictPrice": _dec(exchange.liquidation_price(position)),
        "unrealizedPnl": _dec(exchange.unrealized_pnl(position)),
        "realizedPnl": _dec(position.realized_pnl),
        "profitType": 0,
        "profitPrice": None,
        "lossType": 0,
        "lossPrice": None,
        "lights": 0,
        "status": 1,
        "createTime": _time(position.create_ms),
        "createTimeStamp": position.create_ms,
        "isDual": False,
        "faceMultiplier": "1",
        "accountCoinId": market.coin_id,
        "accountCoinSymbol": market.coin,
        "accountSettleDecimal": market.settings.settle_decimals,
        "tradeCoinDecimal": rules.quantity_decimals,
        "isDelivery": rules.delivery_time is not None,
        "deliveryTime": _dt(rules.delivery_time),
        "deliveryTimeStamp": _ms(rules.delivery_time),
        "settleShowDecimal": rules.price_decimals,
        "tradeCoinIcon": None,
        "settleCoinIcon": None,
    }


def pair_object(market: Market) -> dict[str, Any]:
    """A pair of the public pair list, with the rules the twin enforces (camelCase)."""
    rules = market.rules
    return {
        "pairName": market.name,
        "contractPairId": market.contract_pair_id,
        "settleCoin": market.coin,
        "priceDecimals": rules.price_decimals,
        "quantityDecimals": rules.quantity_decimals,
        "minQuantity": plain_decimal(rules.min_quantity),
        "maxQuantity": plain_decimal(rules.max_quantity),
        "minLever": rules.min_lever,
        "maxLever": rules.max_lever,
        "maxOneWayQuantity": plain_decimal(rules.max_one_way_quantity),
        "maxTotalQuantity": plain_decimal(rules.max_total_quantity),
        "minNotional": plain_decimal(rules.min_notional),
        "trading": rules.trading,
        "positionTypes": list(rules.position_types),
    }


def balance_object(user_id: int, balance: Balance) -> dict[str, Any]:
    """The balance of one coin (SPEC 2.4)."""
    return {
        "userId": user_id,
        "coinId": balance.coin_id,
        "symbol": balance.coin,
        "availableAmount": plain_decimal(balance.available),
        "frozenAmount": plain_decimal(balance.frozen),
    }


def match_object(match: Match) -> dict[str, Any]:
    """A match record (SPEC 2.5)."""
    return {
        "id": match.id,
        "entrustId": match.order_id,
        "contractPositionId": match.position_id,
        "contractPairId": match.contract_pair_id,
        "createTime": _time(match.time_ms),
        "createTimeStamp": match.time_ms,
        "symbol": match.pair,
        "accountCoinSymbol": match.coin,
        "accountSettleDecimal": match.settle_decimals,
        "lever": match.lever,
        "isMarket": match.is_market,
        "isClose": match.is_close,
        "isLong": match.is_long,
        "isTaker": match.is_taker,
        "averagePrice": plain_decimal(match.price),
        "quantity": plain_decimal(match.quantity),
        "amount": plain_decimal(match.amount),
        "tradeFee": plain_decimal(match.fee),
        "positionFee": "0",
        "profitLoss": plain_decimal(match.profit_loss),
        "isDelivery": match.delivery_time is not None,
        "deliveryTime": _dt(match.delivery_time),
        "deliveryTimeStamp": _ms(match.delivery_time),
        "address": match.address,
        "openingPrice": plain_decimal(match.opening_price),
        "type": None,
        "restrictPrice": None,
    }


def order_object(record: OrderRecord) -> dict[str, Any]:
    """An order record of the order-management extension (its shape: the twin's own)."""
    return {
        "entrustId": record.order_id,
        "clientOrderId": record.client_order_id,
        "pairName": record.pair,
        "isLong": record.is_long,
        "isMarket": record.is_market,
        "matchType": record.match_type,
        "positionType": record.position_type,
        "lever": record.lever,
        "price": _dec(record.price),
        "quantity": plain_decimal(record.quantity),
        "filledQuantity": plain_decimal(record.filled),
        "status": record.status,
        "createTimeStamp": record.create_ms,
        "updateTimeStamp": record.update_ms,
    }


def position_frame(event: PositionChanged) -> dict[str, Any]:
    """An api_position push (SPEC 6.1)."""
    return {
        "event": "api_position",
        "success": True,
        "data": {
            "changeType": event.change_type,
            "currentQuantity": plain_decimal(event.current_quantity),
            "direction": "LONG" if event.is_long else "SHORT",
            "operateQuantity": plain_decimal(event.operate_quantity),
            "positionId": event.position_id,
            "symbol": event.pair,
            "canClosedQuantity": plain_decimal(event.can_closed_quantity),
            "contractPairId": event.contract_pair_id,
            "positionType": event.position_type,
            "openingPrice": plain_decimal(event.opening_price),
            "marginAmount": plain_decimal(event.margin_amount),
            "marginCallAmount": plain_decimal(event.margin_call_amount),
        },
    }


def account_frame(event: BalanceChanged) -> dict[str, Any]:
    """An api_account push (SPEC 6.2)."""
    return {
        "event": "api_account",
        "success": True,
        "symbol": event.coin,
        "data": {
            "availableAmount": plain_decimal(event.available),
            "frozenAmount": plain_decimal(event.frozen),
            "logId": event.log_id,
            "operateAmount": plain_decimal(event.operate_amount),
            "symbol": event.coin,
            "coinId": event.coin_id,
        },
    }


def subscribe_ack(
    event: str,
    *,
    success: bool,
    msg: str,
    pair: str | None = None,
    symbol: str | None = None,
    method: str = "SUBSCRIBE",
) -> dict[str, Any]:
    """A subscription acknowledgement (SPEC section 6), echoing the pair or the symbol."""
    frame: dict[str, Any] = {
        "event": f"{event}_res",
        "method": method,
        "msg": msg,
        "success": success,
    }
    if event == "api_account" or symbol is not None:
        frame["symbol"] = symbol
    else:
        frame["pair"] = pair
    return frame
