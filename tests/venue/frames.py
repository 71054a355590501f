"""WebSocket push frames as the venue sends them (SPEC 6.1, 6.2), for tests that replay or file them."""

from __future__ import annotations

import orjson

_COIN_IDS = {"USD": 1, "USDT": 2}


def position_frame(
    position_id: int | None = 7,
    quantity: str | None = "1",
    change: str = "NEW",
    *,
    pair: str = "ETH-USD",
    direction: str | None = "LONG",
    opening_price: str = "2000",
    margin: str = "1",
) -> str:
    """An api_position frame, every field the spec lists."""
    return orjson.dumps(
        {
            "event": "api_position",
            "success": True,
            "data": {
                "changeType": change,
                "currentQuantity": quantity,
                "direction": direction,
                "operateQuantity": quantity,
                "positionId": position_id,
                "symbol": pair,
                "canClosedQuantity": quantity,
                "contractPairId": 1 if pair == "ETH-USD" else 2,
                "positionType": 3,
                "openingPrice": opening_price,
                "marginAmount": margin,
                "marginCallAmount": "0",
            },
        }
    ).decode()


def account_frame(
    log_id: int, available: str, coin: str = "USD", *, frozen: str = "0", operate: str = "1"
) -> str:
    """An api_account frame, every field the spec lists."""
    return orjson.dumps(
        {
            "event": "api_account",
            "success": True,
            "symbol": coin,
            "data": {
                "availableAmount": available,
                "frozenAmount": frozen,
                "logId": log_id,
                "operateAmount": operate,
                "symbol": coin,
                "coinId": _COIN_IDS.get(coin, 9),
            },
        }
    ).decode()
