"""Wire samples of every SPEC record, with every field the spec lists (used by codec tests)."""

from __future__ import annotations

from typing import Any

POSITION: dict[str, Any] = {
    "id": 1001,
    "entrustId": 2002,
    "contractPairId": 3,
    "symbol": "ETH-USD",
    "positionType": 3,
    "isLong": True,
    "openingPrice": "1850.25",
    "quantity": "0.5",
    "closingQuantity": "0",
    "remainingCloseQuantity": "0.5",
    "amount": "925.125",
    "marginCallAmount": None,
    "tariffAmount": "0.01",
    "lever": 10,
    "marginAmount": "92.5125",
    "restrictPrice": "1700.5",
    "unrealizedPnl": "-1.25",
    "realizedPnl": "0",
    "profitType": 0,
    "profitPrice": None,
    "lossType": 2,
    "lossPrice": "1800",
    "lights": 1,
    "status": 1,
    "createTime": "2024-03-01 12:34:56",
    "createTimeStamp": 1709296496000,
    "isDual": False,
    "faceMultiplier": "1",
    "accountCoinId": 7,
    "accountCoinSymbol": "USD",
    "accountSettleDecimal": 6,
    "tradeCoinDecimal": 4,
    "isDelivery": False,
    "deliveryTime": None,
    "deliveryTimeStamp": None,
    "settleShowDecimal": 2,
    "tradeCoinIcon": "https://example.invalid/eth.png",
    "settleCoinIcon": "https://example.invalid/usd.png",
}

BALANCE: dict[str, Any] = {
    "userId": 42,
    "coinId": 7,
    "symbol": "USD",
    "availableAmount": "99000.123456",
    "frozenAmount": "1000",
}

MATCH: dict[str, Any] = {
    "id": 555,
    "entrustId": 2002,
    "contractPositionId": 1001,
    "contractPairId": 3,
    "createTime": "2024-03-01 12:34:57",
    "createTimeStamp": 1709296497000,
    "symbol": "ETH-USD",
    "accountCoinSymbol": "USD",
    "accountSettleDecimal": 6,
    "lever": 10,
    "isMarket": True,
    "isClose": False,
    "isLong": True,
    "isTaker": True,
    "averagePrice": "1850.25",
    "quantity": "0.5",
    "amount": "925.125",
    "tradeFee": "0.462563",
    "positionFee": "0",
    "profitLoss": "0",
    "isDelivery": False,
    "deliveryTime": None,
    "deliveryTimeStamp": None,
    "address": "0x0000000000000000000000000000000000000001",
    "openingPrice": "1850.25",
    "type": None,
    "restrictPrice": None,
}

ORDER_RESULT: dict[str, Any] = {
    "corderId": "c-1",
    "orderId": 9007199254740993,
    "pairName": "ETH-USD",
}

POSITION_PUSH: dict[str, Any] = {
    "event": "api_position",
    "success": True,
    "data": {
        "changeType": "INCREASE",
        "currentQuantity": "1.5",
        "direction": "SHORT",
        "operateQuantity": "0.5",
        "positionId": 1001,
        "symbol": "ETH-USD",
        "canClosedQuantity": "1.5",
        "contractPairId": 3,
        "positionType": 4,
        "openingPrice": "1849.5",
        "marginAmount": "277.425",
        "marginCallAmount": "0",
    },
}

ACCOUNT_PUSH: dict[str, Any] = {
    "event": "api_account",
    "success": True,
    "symbol": "USD",
    "data": {
        "availableAmount": "98722.5",
        "frozenAmount": "1277.5",
        "logId": 123456789012,
        "operateAmount": "-277.425",
        "symbol": "USD",
        "coinId": 7,
    },
}

POSITION_ACK: dict[str, Any] = {
    "event": "api_position_res",
    "method": "SUBSCRIBE",
    "msg": "api_position subscribe success",
    "success": True,
    "pair": "ETH-USD",
}

ENVELOPE: dict[str, Any] = {
    "error": False,
    "code": 200,
    "msg": "SUCCESS",
    "data": [ORDER_RESULT],
    "sid": "1234567890123",
}
