"""The twin's answers on the wire: envelopes, SPEC section 2 objects and section 6 frames.

Also the order record of the order-management extension (its shape is the twin's own, see
:mod:`framework.twin.order_management`).

Built as plain dicts straight from SPEC.md's field names (not through the framework's codec,
so the twin stays an independent check of it). Decimals are plain strings (``"10"``, never
``"1E+1"``), missing values are ``null``, date-times are ``yyyy-MM-dd HH:mm:ss`` in UTC.
Fields the twin has no model for are written with neutral values: ``marginCallAmount`` 0,
``profitType``/``lossType`` 0 with null prices, ``lights`` 0, ``status`` 1 (holding),
``isDual`` false, ``faceMultiplier`` 1, icons null, ``positionFee`` 0, ``type`` null.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from framework.sim.events import BalanceChanged, Match, PositionChanged
from framework.sim.exchange import Exchange
from framework.sim.history import OrderRecord
from framework.sim.state import Account, Balance, Position
from framework.venue.codec import plain_decimal

__all__ = [
    "account_frame",
    "balance_object",
    "envelope",
    "match_object",
    "order_object",
    "position_frame",
    "position_object",
    "subscribe_ack",
]


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
    event: str, *, success: bool, msg: str, pair: str | None = None, symbol: str | None = None
) -> dict[str, Any]:
    """A subscription acknowledgement (SPEC section 6), echoing the pair or the symbol."""
    frame: dict[str, Any] = {
        "event": f"{event}_res",
        "method": "SUBSCRIBE",
        "msg": msg,
        "success": success,
    }
    if event == "api_account" or symbol is not None:
        frame["symbol"] = symbol
    else:
        frame["pair"] = pair
    return frame
