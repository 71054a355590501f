"""Fault injection: each fault happens when asked, is counted, and leaves the twin usable."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from framework.twin import VenueTwin
from framework.twin.settings import FaultSettings
from tests.twin.twin_client import TwinClient, eventually, order, recv_json

pytestmark = pytest.mark.anyio


async def test_latency_is_added_to_every_call(twin: VenueTwin, trader: TwinClient) -> None:
    twin.faults.configure(latency=0.2)
    assert (await trader.balance())["code"] == 200
    assert twin.counters.latency_injected == 1
    twin.faults.clear()
    await trader.balance()
    assert twin.counters.latency_injected == 1


async def test_busy_answers_2329_without_executing(twin: VenueTwin, trader: TwinClient) -> None:
    twin.faults.configure(busy_rate=1.0)
    answer = await trader.batch([order("a")])
    assert (answer["error"], answer["code"], answer["msg"]) == (
        True,
        2329,
        "The server is updating, please wait a moment...",
    )
    assert twin.counters.busy_answers == 1
    twin.faults.clear()
    assert (await trader.positions())["data"] == []
    assert (await trader.batch([order("a")]))["code"] == 200  # the id was never used


async def test_unavailable_answers_http_503(twin: VenueTwin, trader: TwinClient) -> None:
    twin.faults.configure(unavailable_rate=1.0)
    response = await trader.batch_raw([order("a")])
    assert response.status_code == 503
    response = await trader.query_raw("/api/third/hot/order/balance", {"symbol": "USD"})
    assert response.status_code == 503
    assert twin.counters.unavailable_answers == 2


async def test_dropped_response_executes_but_never_answers(
    twin: VenueTwin, trader: TwinClient
) -> None:
    twin.faults.configure(drop_response_rate=1.0)
    with pytest.raises(httpx.TransportError):
        await trader.batch_raw([order("lost", quantity="0.3")])
    assert twin.counters.dropped_responses == 1
    twin.faults.clear()
    positions = (await trader.positions())["data"]
    assert [p["quantity"] for p in positions] == ["0.3"]  # it did execute
    answer = await trader.batch([order("lost")])
    assert answer["msg"] == "Illegal parameter:clientOrderId"  # a blind retry is caught


async def test_faults_can_come_from_the_settings(make_twin: Callable[..., Any]) -> None:
    async with make_twin(faults=FaultSettings(busy_rate=1.0)) as (twin, trader):
        assert (await trader.balance())["code"] == 2329
        assert twin.counters.busy_answers == 1


async def test_fault_draws_follow_the_seed(make_twin: Callable[..., Any]) -> None:
    runs = []
    for _ in range(2):
        async with make_twin(seed=7, faults=FaultSettings(busy_rate=0.5)) as (twin, trader):
            codes = [(await trader.balance())["code"] for _ in range(16)]
            assert codes.count(2329) == twin.counters.busy_answers
            runs.append(codes)
    assert runs[0] == runs[1]
    assert 0 < runs[0].count(2329) < 16


def test_fault_settings_are_validated() -> None:
    from framework.twin.counters import Counters
    from framework.twin.faults import Faults

    faults = Faults(FaultSettings(), random.Random(1), Counters())
    with pytest.raises(ValueError, match="share between 0 and 1"):
        faults.configure(busy_rate=1.5)
    with pytest.raises(TypeError):
        faults.configure(no_such_fault=1)


async def subscribed(twin: VenueTwin, trader: TwinClient, ws: Any, *events: str) -> None:
    for event in events:
        extra = {"pair": "ETH-USD"} if event == "api_position" else {"symbol": "USD"}
        await ws.send(trader.subscribe_message(event, **extra))
        assert (await recv_json(ws))["success"] is True


async def test_websockets_close_on_demand(twin: VenueTwin, trader: TwinClient) -> None:
    async with connect(twin.ws_url) as ws:
        await subscribed(twin, trader, ws, "api_account")
        assert twin.disconnect_websockets() == 1
        with pytest.raises(ConnectionClosed):
            await recv_json(ws)
    assert twin.counters.ws_disconnects == 1
    await eventually(lambda: len(twin.hub) == 0)


async def test_websockets_close_every_n_seconds(twin: VenueTwin) -> None:
    twin.faults.configure(ws_disconnect_every=0.05)
    async with connect(twin.ws_url) as ws:
        with pytest.raises(ConnectionClosed):
            await recv_json(ws)
    await eventually(lambda: twin.counters.ws_disconnects >= 1)


async def test_duplicated_pushes(twin: VenueTwin, trader: TwinClient) -> None:
    async with connect(twin.ws_url) as ws:
        await subscribed(twin, trader, ws, "api_position")
        twin.faults.configure(push_duplicate_rate=1.0)
        await trader.batch([order("a")])
        first, second = await recv_json(ws), await recv_json(ws)
        assert first == second and first["event"] == "api_position"
    assert twin.counters.duplicated_pushes == 1


async def test_reordered_pushes(twin: VenueTwin, trader: TwinClient) -> None:
    async with connect(twin.ws_url) as ws:
        await subscribed(twin, trader, ws, "api_position", "api_account")
        twin.faults.configure(push_reorder_rate=1.0)
        await trader.batch([order("a")])  # position push, then account push
        first, second = await recv_json(ws), await recv_json(ws)
        assert (first["event"], second["event"]) == ("api_account", "api_position")
    assert twin.counters.reordered_pushes == 1


async def test_stale_account_pushes_repeat_an_older_log_id(
    twin: VenueTwin, trader: TwinClient
) -> None:
    async with connect(twin.ws_url) as ws:
        await subscribed(twin, trader, ws, "api_account")
        await trader.batch([order("a")])
        older = await recv_json(ws)
        twin.faults.configure(stale_account_rate=1.0)
        await trader.batch([order("b")])
        newer, stale = await recv_json(ws), await recv_json(ws)
        assert newer["data"]["logId"] > older["data"]["logId"]
        assert stale == older
    assert twin.counters.stale_account_pushes == 1
