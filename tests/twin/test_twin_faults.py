"""Fault injection: each fault happens when asked, is counted, and leaves the twin usable."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from framework.twin import VenueTwin
from framework.twin.settings import FaultSettings
from tests.twin.twin_client import (
    TRADER_API_KEY,
    Clock,
    TwinClient,
    order,
    recv_json,
)
from tests.waiting import eventually

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
    from framework.twin.faults import Counters, Faults

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


async def test_error_after_accept_executes_then_answers_500(
    twin: VenueTwin, trader: TwinClient
) -> None:
    twin.faults.configure(error_after_accept_rate=1.0)
    response = await trader.batch_raw([order("e1", quantity="0.2")])
    assert response.status_code == 500
    body = response.json()
    assert body == {
        "error": True,
        "code": 500,
        "msg": "Internal Server Error",
        "data": None,
        "sid": body["sid"],
    }
    assert body["sid"].isdigit()
    assert twin.counters.errors_after_accept == 1
    executed = twin.executed_orders(TRADER_API_KEY)
    assert list(executed) == ["e1"]  # it did execute
    twin.faults.clear()
    matches = (await trader.matches())["data"]
    assert [m["entrustId"] for m in matches] == [executed["e1"]]


async def test_error_after_accept_status_is_configurable(
    twin: VenueTwin, trader: TwinClient
) -> None:
    twin.faults.configure(error_after_accept_rate=1.0, error_after_accept_status=502)
    response = await trader.batch_raw([order("e2")])
    assert response.status_code == 502
    assert (response.json()["code"], response.json()["error"]) == (502, True)
    assert "e2" in twin.executed_orders(TRADER_API_KEY)


async def test_unavailable_envelope_is_json_and_executes_nothing(
    twin: VenueTwin, trader: TwinClient
) -> None:
    twin.faults.configure(unavailable_rate=1.0, unavailable_envelope=True)
    response = await trader.batch_raw([order("u")])
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert (body["error"], body["code"], body["msg"], body["data"]) == (
        True,
        503,
        "Service Unavailable",
        None,
    )
    assert (twin.counters.unavailable_answers, twin.counters.unavailable_envelopes) == (1, 1)
    assert twin.executed_orders(TRADER_API_KEY) == {}
    twin.faults.clear()
    assert (await trader.positions())["data"] == []


async def test_reset_before_read_executes_nothing(twin: VenueTwin, trader: TwinClient) -> None:
    twin.faults.configure(reset_before_read_rate=1.0)
    with pytest.raises(httpx.TransportError):
        await trader.batch_raw([order("r", quantity="0.3")])
    assert twin.counters.resets_before_read == 1
    assert twin.counters.batch_calls == 0
    assert not twin.received_orders  # the body was never read
    twin.faults.clear()
    assert twin.executed_orders(TRADER_API_KEY) == {}
    assert (await trader.positions())["data"] == []
    assert (await trader.batch([order("r")]))["code"] == 200  # the id was never used


async def test_answer_delay_lets_a_match_poll_see_the_fill_first(
    twin: VenueTwin, trader: TwinClient
) -> None:
    twin.faults.configure(answer_delay_s=1.0)
    answer = asyncio.create_task(trader.batch([order("d")]))

    async def filled() -> bool:
        return bool((await trader.matches())["data"])

    await eventually(filled)
    assert not answer.done()  # the fill is listed while the answer is still in flight
    assert (await answer)["code"] == 200
    assert twin.counters.delayed_answers == 1


async def test_omitted_results_executed_anyway(twin: VenueTwin, trader: TwinClient) -> None:
    twin.faults.configure(omit_result_rate=1.0)
    answer = await trader.batch([order("o1"), order("o2")])
    assert (answer["code"], answer["data"]) == (200, [])
    assert twin.counters.omitted_results == 2
    assert sorted(twin.executed_orders(TRADER_API_KEY)) == ["o1", "o2"]
    assert len((await trader.matches())["data"]) == 2


async def test_omitted_results_are_a_share_of_the_accepted(
    twin: VenueTwin, trader: TwinClient
) -> None:
    twin.faults.configure(omit_result_rate=0.5)
    answer = await trader.batch([order(f"s{i}") for i in range(10)])
    executed = twin.executed_orders(TRADER_API_KEY)
    listed = {d["corderId"]: d["orderId"] for d in answer["data"]}
    assert 0 < len(listed) < 10
    assert len(listed) + twin.counters.omitted_results == 10
    assert all(executed[cid] == oid for cid, oid in listed.items())
    assert [d["corderId"] for d in answer["data"]] == sorted(listed, key=lambda c: int(c[1:]))


async def test_match_delay_holds_a_match_back(
    twin: VenueTwin, trader: TwinClient, clock: Clock
) -> None:
    twin.faults.configure(match_delay_min_s=5.0, match_delay_max_s=5.0)
    start = clock.now
    assert (await trader.batch([order("m")]))["code"] == 200
    assert twin.counters.delayed_matches == 1
    assert (await trader.matches())["data"] == []
    clock.now = start + 4.9
    assert (await trader.matches())["data"] == []
    clock.now = start + 5.0
    listed = (await trader.matches())["data"]
    assert [m["entrustId"] for m in listed] == [twin.executed_orders(TRADER_API_KEY)["m"]]


async def test_match_delay_lists_a_lower_id_after_a_higher_one(
    twin: VenueTwin, trader: TwinClient, clock: Clock
) -> None:
    start = clock.now
    await trader.batch([order("a")])  # listed at once
    twin.faults.configure(match_delay_min_s=10.0, match_delay_max_s=10.0)
    await trader.batch([order("b")])  # held back 10 s
    twin.faults.configure(match_delay_min_s=0.0, match_delay_max_s=0.0)
    await trader.batch([order("c")])  # listed at once
    oids = twin.executed_orders(TRADER_API_KEY)
    ids = {oid: i for i, oid in enumerate([oids["a"], oids["b"], oids["c"]])}

    async def listed(**params: Any) -> list[int]:
        return [ids[m["entrustId"]] for m in (await trader.matches(**params))["data"]]

    def match_id(cid: str) -> int:
        matches = twin.exchange.accounts[twin.user_id(TRADER_API_KEY)].matches["ETH-USD"]
        return next(m.id for m in matches if m.order_id == oids[cid])

    clock.now = start + 1
    assert await listed() == [2, 0]  # b's match is missing between them
    assert await listed(pageSize=1, pageNo=2) == [0]  # pages count listed matches only
    assert await listed(matchId=match_id("c")) == [0]
    clock.now = start + 10
    assert await listed() == [2, 1, 0]  # b now shows up below c, already seen
    assert await listed(matchId=match_id("c")) == [1, 0]
    assert match_id("a") < match_id("b") < match_id("c")  # ids were given at match time


async def test_match_delays_are_drawn_between_min_and_max(
    twin: VenueTwin, trader: TwinClient, clock: Clock
) -> None:
    twin.faults.configure(match_delay_min_s=1.0, match_delay_max_s=3.0)
    await trader.batch([order(f"x{i}") for i in range(8)])
    held = twin.exchange.accounts[twin.user_id(TRADER_API_KEY)].listed_from_ms
    delays = [at - clock.ms() for at in held.values()]
    assert len(delays) == 8 == twin.counters.delayed_matches
    assert all(1000 <= d <= 3000 for d in delays) and len(set(delays)) > 1


async def test_refused_atomic_batch_leaves_no_held_match(make_twin: Callable[..., Any]) -> None:
    async with make_twin(batch_mode="atomic") as (twin, trader):
        twin.faults.configure(match_delay_min_s=5.0, match_delay_max_s=5.0)
        answer = await trader.batch([order("ok"), order("bad", lever=1000)])
        assert answer["code"] != 200
        user = twin.exchange.accounts[twin.user_id(TRADER_API_KEY)]
        assert user.listed_from_ms == {} and user.order_ids == {}
        twin.faults.clear()
        await trader.batch([order("ok")])  # reuses the match id, listed at once
        assert len((await trader.matches())["data"]) == 1


async def test_received_orders_record_every_payload_read(
    twin: VenueTwin, trader: TwinClient
) -> None:
    first = await trader.batch([order("p1"), order("p2", quantity="0.02")])
    twin.faults.configure(busy_rate=1.0)
    assert (await trader.batch([order("p1", quantity="0.03")]))["code"] == 2329
    twin.faults.configure(busy_rate=0.0, drop_response_rate=1.0)
    with pytest.raises(httpx.TransportError):
        await trader.batch_raw([order("p3")])
    twin.faults.clear()
    received = twin.received_orders
    assert [cid for cid, _ in received] == ["p1", "p2", "p1", "p3"]
    assert received[0][1] == orjson.dumps(order("p1"), option=orjson.OPT_SORT_KEYS)
    payloads: dict[str, set[bytes]] = {}
    for cid, payload in received:
        payloads.setdefault(cid, set()).add(payload)
    assert [cid for cid, seen in payloads.items() if len(seen) > 1] == ["p1"]
    executed = twin.executed_orders(TRADER_API_KEY)
    assert executed == {
        **{d["corderId"]: d["orderId"] for d in first["data"]},
        "p3": executed["p3"],
    }


def test_new_fault_settings_are_validated() -> None:
    from framework.twin.faults import Counters, Faults

    faults = Faults(FaultSettings(), random.Random(1), Counters())
    with pytest.raises(ValueError, match=r"match_delay_max_s \(1\.0\).*match_delay_min_s \(2"):
        faults.configure(match_delay_min_s=2.0, match_delay_max_s=1.0)
    with pytest.raises(ValueError, match=r"error_after_accept_status.*200"):
        faults.configure(error_after_accept_status=200)
    with pytest.raises(ValueError, match=r"omit_result_rate.*share"):
        faults.configure(omit_result_rate=2.0)
    with pytest.raises(ValueError, match="answer_delay_s must not be negative"):
        faults.configure(answer_delay_s=-1.0)
    faults.configure(match_delay_min_s=1.0, match_delay_max_s=2.0, unavailable_envelope=True)
    faults.clear()
    assert faults.settings == FaultSettings()


def test_new_fault_keys_load_from_a_mapping() -> None:
    from framework.twin.settings import settings_from_mapping
    from framework.venue.errors import ConfigError

    loaded = settings_from_mapping(
        {"faults": {"error_after_accept_rate": 0.5, "match_delay_max_s": 2, "answer_delay_s": 1}}
    )
    assert loaded.faults.error_after_accept_rate == 0.5
    assert loaded.faults.match_delay_max_s == 2.0
    with pytest.raises(ConfigError, match="match_delay_max_s"):
        settings_from_mapping({"faults": {"match_delay_min_s": 3, "match_delay_max_s": 2}})
