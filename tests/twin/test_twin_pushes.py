"""WebSocket: SPEC section 6 acknowledgements and pushes, checked field by field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from framework.twin import VenueTwin
from tests.twin.twin_client import TwinClient, order, recv_json

pytestmark = pytest.mark.anyio

POSITION_FIELDS = {
    "changeType": str,
    "currentQuantity": str,
    "direction": str,
    "operateQuantity": str,
    "positionId": int,
    "symbol": str,
    "canClosedQuantity": str,
    "contractPairId": int,
    "positionType": int,
    "openingPrice": str,
    "marginAmount": str,
    "marginCallAmount": str,
}
ACCOUNT_FIELDS = {
    "availableAmount": str,
    "frozenAmount": str,
    "logId": int,
    "operateAmount": str,
    "symbol": str,
    "coinId": int,
}


@pytest.fixture
async def ws(twin: VenueTwin) -> AsyncIterator[ClientConnection]:
    async with connect(twin.ws_url) as socket:
        yield socket


async def subscribe(ws: ClientConnection, client: TwinClient, event: str, **kw: Any) -> Any:
    await ws.send(client.subscribe_message(event, **kw))
    return await recv_json(ws)


def check_position_push(frame: dict[str, Any]) -> dict[str, Any]:
    assert set(frame) == {"event", "success", "data"}
    assert frame["event"] == "api_position" and frame["success"] is True
    data = frame["data"]
    assert set(data) == set(POSITION_FIELDS)
    for name, kind in POSITION_FIELDS.items():
        assert type(data[name]) is kind, name
    assert data["changeType"] in {"NEW", "INCREASE", "CLOSE", "LIQUIDATE", "REDUCE"}
    assert data["direction"] in {"LONG", "SHORT"}
    return dict(data)


def check_account_push(frame: dict[str, Any]) -> dict[str, Any]:
    assert set(frame) == {"event", "success", "symbol", "data"}
    assert frame["event"] == "api_account" and frame["success"] is True
    data = frame["data"]
    assert set(data) == set(ACCOUNT_FIELDS)
    for name, kind in ACCOUNT_FIELDS.items():
        assert type(data[name]) is kind, name
    assert frame["symbol"] == data["symbol"]
    return dict(data)


async def test_acknowledgements_are_exactly_as_the_spec_shows(
    ws: ClientConnection, trader: TwinClient
) -> None:
    assert await subscribe(ws, trader, "api_position", pair="ETH-USD") == {
        "event": "api_position_res",
        "method": "SUBSCRIBE",
        "msg": "Subscribe api_position success",
        "success": True,
        "pair": "ETH-USD",
    }
    assert await subscribe(ws, trader, "api_account", symbol="USD") == {
        "event": "api_account_res",
        "method": "SUBSCRIBE",
        "msg": "Subscribe api_account success",
        "success": True,
        "symbol": "USD",
    }


async def test_sign_type_may_be_an_integer(ws: ClientConnection, trader: TwinClient) -> None:
    trader.sign_type = 2  # type: ignore[assignment]
    ack = await subscribe(ws, trader, "api_account", symbol="USD")
    assert ack["success"] is True


async def test_position_pushes_follow_every_change(
    ws: ClientConnection, trader: TwinClient
) -> None:
    await subscribe(ws, trader, "api_position", pair="ETH-USD")
    steps = [
        (order("open", quantity="0.5", lever=10), "NEW", "0.5", "LONG"),
        (order("add", quantity="0.25", lever=10), "INCREASE", "0.75", "LONG"),
        (order("cut", long=False, quantity="0.5", lever=10), "REDUCE", "0.25", "LONG"),
        (order("shut", long=False, quantity="0.25", lever=10), "CLOSE", "0", "LONG"),
        (
            order("short", long=False, quantity="0.1", lever=5, position_type=4),
            "NEW",
            "0.1",
            "SHORT",
        ),
    ]
    position_ids = []
    for item, change, quantity, direction in steps:
        await trader.batch([item])
        data = check_position_push(await recv_json(ws))
        assert data["changeType"] == change
        assert data["currentQuantity"] == quantity
        assert data["direction"] == direction
        assert data["operateQuantity"] == item["quantity"]
        assert data["symbol"] == "ETH-USD"
        assert data["contractPairId"] == 1
        assert data["positionType"] == item["positionType"]
        assert data["marginCallAmount"] == "0"
        position_ids.append(data["positionId"])
        if change != "CLOSE":
            listed = (await trader.positions())["data"][0]
            assert data["positionId"] == listed["id"]
            assert data["openingPrice"] == listed["openingPrice"]
            assert data["marginAmount"] == listed["marginAmount"]
            assert data["canClosedQuantity"] == listed["quantity"]
        else:
            assert data["marginAmount"] == "0"
            assert (await trader.positions())["data"] == []
    assert position_ids[:4] == [position_ids[0]] * 4
    assert position_ids[4] != position_ids[0]  # a new position after the close


async def test_account_pushes_carry_the_balance_and_growing_log_ids(
    ws: ClientConnection, trader: TwinClient
) -> None:
    await subscribe(ws, trader, "api_account", symbol="USD")
    log_ids = []
    for item in (
        order("a", quantity="0.5"),
        order("b", long=False, quantity="0.2"),
        order("c", market=False, match_type=1, price="1500", quantity="0.1"),
    ):
        before = (await trader.balance())["data"]
        await trader.batch([item])
        data = check_account_push(await recv_json(ws))
        after = (await trader.balance())["data"]
        assert data["availableAmount"] == after["availableAmount"]
        assert data["frozenAmount"] == after["frozenAmount"]
        assert data["symbol"] == "USD" and data["coinId"] == after["coinId"] == 1
        operate = Decimal(after["availableAmount"]) - Decimal(before["availableAmount"])
        assert Decimal(data["operateAmount"]) == operate
        log_ids.append(data["logId"])
    assert log_ids == sorted(set(log_ids))


async def test_liquidation_pushes_liquidate(
    twin: VenueTwin, ws: ClientConnection, trader: TwinClient
) -> None:
    await subscribe(ws, trader, "api_position", pair="ETH-USD")
    await trader.batch([order("long", lever=100, quantity="1")])
    check_position_push(await recv_json(ws))
    twin.set_mark("ETH-USD", Decimal("1900"))
    data = check_position_push(await recv_json(ws))
    assert (data["changeType"], data["currentQuantity"], data["operateQuantity"]) == (
        "LIQUIDATE",
        "0",
        "1",
    )


async def test_bad_signature_is_refused_with_a_reason_and_no_pushes(
    ws: ClientConnection, trader: TwinClient
) -> None:
    good_sign = trader.sign
    trader.sign = lambda text: good_sign(text + "0")
    ack = await subscribe(ws, trader, "api_position", pair="ETH-USD")
    assert ack["event"] == "api_position_res"
    assert ack["method"] == "SUBSCRIBE"
    assert ack["success"] is False
    assert ack["pair"] == "ETH-USD"
    assert "signature does not verify" in ack["msg"]
    trader.sign = good_sign
    await trader.batch([order("a")])  # would push api_position if the subscription had held
    ack = await subscribe(ws, trader, "api_account", symbol="USD")
    assert ack["event"] == "api_account_res" and ack["success"] is True
    await trader.batch([order("b")])
    frame = await recv_json(ws)
    assert frame["event"] == "api_account"  # no api_position frame ever came


async def test_incomplete_or_stale_subscriptions_are_refused(
    twin: VenueTwin, ws: ClientConnection, trader: TwinClient, clock: Any
) -> None:
    ack = await subscribe(ws, trader, "api_position")
    assert (ack["success"], ack["msg"]) == (False, "Required parameter:pair")
    ack = await subscribe(ws, trader, "api_account")
    assert (ack["success"], ack["msg"]) == (False, "Required parameter:symbol")
    ack = await subscribe(ws, trader, "api_trades", pair="ETH-USD")
    assert (ack["event"], ack["success"]) == ("api_trades_res", False)
    trader.api_key = "st_nobody"
    ack = await subscribe(ws, trader, "api_account", symbol="USD")
    assert ack["success"] is False and "unknown APIKEY" in ack["msg"]
    assert twin.counters.subscribe_refusals == 4
    assert twin.counters.subscriptions == 0


async def test_pushes_of_other_accounts_do_not_arrive(
    ws: ClientConnection, trader: TwinClient, other: TwinClient
) -> None:
    await subscribe(ws, trader, "api_position", pair="ETH-USD")
    await other.batch([order("theirs")])
    await trader.batch([order("mine", quantity="0.02")])
    data = check_position_push(await recv_json(ws))
    assert data["operateQuantity"] == "0.02"


async def test_ping_is_answered_pong(ws: ClientConnection) -> None:
    await ws.send("ping")
    assert await ws.recv() == "pong"
    await ws.send("{not json")
    assert (await recv_json(ws))["success"] is False
