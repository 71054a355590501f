"""The order-management extension: open orders, queries and cancels, over real sockets."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import connect

from framework.sim.state import PairSettings
from framework.twin import VenueTwin
from framework.twin.order_management import ORDER_MANAGEMENT_PATHS
from framework.venue.requests import (
    BATCH_CANCEL_PATH,
    BATCH_CANCEL_WITH_RESULTS_PATH,
    CANCEL_ALL_PATH,
    CANCEL_BY_CLIENT_ID_PATH,
    CANCEL_PATH,
    OPEN_ORDERS_PATH,
    QUERY_ORDER_PATH,
)
from tests.twin.twin_client import START_BALANCE, TwinClient, order, recv_json
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

RECORD_FIELDS = {
    "entrustId": int,
    "clientOrderId": str,
    "pairName": str,
    "isLong": bool,
    "isMarket": bool,
    "matchType": int,
    "positionType": int,
    "lever": int,
    "price": str,
    "quantity": str,
    "filledQuantity": str,
    "status": str,
    "createTimeStamp": int,
    "updateTimeStamp": int,
}
NOT_FOUND = {"code": 2340, "msg": "Order does not exist"}
COMPLETED = {"code": 2341, "msg": "Order is already completed"}


def gtc(cid: str, price: str, *, long: bool = True, quantity: str = "0.1", **kw: Any) -> Any:
    """A GTC limit order."""
    return order(cid, long=long, market=False, match_type=1, price=price, quantity=quantity, **kw)


async def place(trader: TwinClient, orders: list[dict[str, Any]]) -> list[int]:
    """batchCreate that must accept every order; their entrustIds in order."""
    answer = await trader.batch(orders)
    assert answer["code"] == 200, answer
    assert [a["corderId"] for a in answer["data"]] == [o["clientOrderId"] for o in orders]
    return [a["orderId"] for a in answer["data"]]


async def rest_bids(trader: TwinClient, n: int, prefix: str = "bid") -> list[int]:
    """n resting long orders below the mark (2000), at 1900, 1899, ..., 0.1 each."""
    ids: list[int] = []
    for start in range(0, n, 20):
        batch = [gtc(f"{prefix}{i}", str(1900 - i)) for i in range(start, min(n, start + 20))]
        ids += await place(trader, batch)
    return ids


async def query(trader: TwinClient, order_id: int) -> dict[str, Any]:
    """queryOrder's envelope."""
    return await trader.query(QUERY_ORDER_PATH, entrustId=order_id)


async def record(trader: TwinClient, order_id: int) -> dict[str, Any]:
    """The order record queryOrder gives (it must exist)."""
    answer = await query(trader, order_id)
    assert answer["code"] == 200, answer
    found: dict[str, Any] = answer["data"]
    return found


async def balance(trader: TwinClient) -> tuple[Decimal, Decimal]:
    """(available, frozen) of USD."""
    data = (await trader.balance())["data"]
    return Decimal(data["availableAmount"]), Decimal(data["frozenAmount"])


def check_record(data: dict[str, Any]) -> None:
    """Exactly the documented fields, each of its type (price may be null)."""
    assert set(data) == set(RECORD_FIELDS)
    for name, kind in RECORD_FIELDS.items():
        if name == "price" and data[name] is None:
            continue
        assert type(data[name]) is kind, name
    assert data["status"] in {"OPEN", "FILLED", "CANCELED"}


# -- open orders and queries ---------------------------------------------------------------


async def test_open_orders_are_listed_in_pages_by_entrust_id(
    trader: TwinClient, other: TwinClient
) -> None:
    ids = await rest_bids(trader, 25)
    await place(trader, [gtc("btc", "59000", pair="BTC-USD", quantity="0.01")])
    await place(other, [gtc("theirs", "1950")])
    await place(trader, [order("mkt", quantity="0.01")])  # filled at once: not open
    pages = []
    for page_no in (1, 2, 3, 4):
        answer = await trader.query(
            OPEN_ORDERS_PATH, pairName="ETH-USD", pageNo=page_no, pageSize=10
        )
        assert answer["code"] == 200
        data = answer["data"]
        assert set(data) == {"list", "total", "pageNo", "pageSize"}
        assert (data["total"], data["pageNo"], data["pageSize"]) == (25, page_no, 10)
        pages.append(data["list"])
    assert [len(p) for p in pages] == [10, 10, 5, 0]
    listed = [r for p in pages for r in p]
    assert [r["entrustId"] for r in listed] == ids == sorted(ids)
    for i, item in enumerate(listed):
        check_record(item)
        assert item["clientOrderId"] == f"bid{i}"
        assert (item["status"], item["filledQuantity"], item["quantity"]) == ("OPEN", "0", "0.1")
        assert (item["pairName"], item["price"], item["matchType"]) == ("ETH-USD", str(1900 - i), 1)
    default = (await trader.query(OPEN_ORDERS_PATH, pairName="ETH-USD"))["data"]
    assert (len(default["list"]), default["pageSize"], default["pageNo"]) == (20, 20, 1)
    btc = (await trader.query(OPEN_ORDERS_PATH, pairName="BTC-USD"))["data"]
    assert [r["clientOrderId"] for r in btc["list"]] == ["btc"]


async def test_query_order_knows_every_order_the_account_placed(
    twin: VenueTwin, trader: TwinClient, other: TwinClient
) -> None:
    open_id, market_id, ioc_id, fok_id = await place(
        trader,
        [
            gtc("open", "1900", quantity="0.5"),
            order("mkt", quantity="0.2"),
            order("ioc", market=False, match_type=2, price="1900"),
            order("fok", market=False, match_type=3, price="2100", quantity="0.3"),
        ],
    )
    opened = await record(trader, open_id)
    check_record(opened)
    assert opened == {
        "entrustId": open_id,
        "clientOrderId": "open",
        "pairName": "ETH-USD",
        "isLong": True,
        "isMarket": False,
        "matchType": 1,
        "positionType": 3,
        "lever": 10,
        "price": "1900",
        "quantity": "0.5",
        "filledQuantity": "0",
        "status": "OPEN",
        "createTimeStamp": twin.now_ms(),
        "updateTimeStamp": twin.now_ms(),
    }
    market = await record(trader, market_id)
    check_record(market)
    assert (market["isMarket"], market["price"], market["status"]) == (True, None, "FILLED")
    assert market["filledQuantity"] == "0.2"
    ioc = await record(trader, ioc_id)  # did not cross: nothing filled, nothing rests
    assert (ioc["status"], ioc["filledQuantity"]) == ("CANCELED", "0")
    fok = await record(trader, fok_id)
    assert (fok["status"], fok["filledQuantity"], fok["matchType"]) == ("FILLED", "0.3", 3)
    assert {k: v for k, v in (await query(trader, 999)).items() if k in NOT_FOUND} == NOT_FOUND
    assert (await query(other, open_id))["code"] == 2340  # not that account's order


async def test_a_resting_order_that_fills_becomes_filled(
    twin: VenueTwin, clock: Any, trader: TwinClient
) -> None:
    (order_id,) = await place(trader, [gtc("bid", "1990", quantity="1")])
    created = twin.now_ms()
    clock.now += 2
    twin.set_mark("ETH-USD", Decimal("1989"))
    filled = await record(trader, order_id)
    assert (filled["status"], filled["filledQuantity"]) == ("FILLED", "1")
    assert (filled["createTimeStamp"], filled["updateTimeStamp"]) == (created, created + 2000)
    listed = (await trader.query(OPEN_ORDERS_PATH, pairName="ETH-USD"))["data"]
    assert (listed["list"], listed["total"]) == ([], 0)


async def test_the_excess_the_twin_cancels_leaves_the_order_canceled_part_filled(
    twin: VenueTwin, trader: TwinClient
) -> None:
    await place(trader, [order("open", quantity="1")])
    (close_id,) = await place(trader, [gtc("close", "2100", long=False, quantity="1")])
    await place(trader, [order("cut", long=False, quantity="0.4")])  # position now 0.6
    twin.set_mark("ETH-USD", Decimal("2100"))
    closed = await record(trader, close_id)
    assert (closed["status"], closed["filledQuantity"], closed["quantity"]) == (
        "CANCELED",
        "0.6",
        "1",
    )
    assert (await trader.positions())["data"] == []


# -- cancels ---------------------------------------------------------------------------------


async def test_cancel_by_id_restores_the_frozen_balance_exactly_and_pushes_it(
    twin: VenueTwin, trader: TwinClient
) -> None:
    async with connect(twin.ws_url) as ws:
        await ws.send(trader.subscribe_message("api_account", symbol="USD"))
        assert (await recv_json(ws))["success"] is True
        await place(trader, [order("held", quantity="0.3")])  # a position's margin stays frozen
        await recv_json(ws)
        available, frozen = await balance(trader)
        (order_id,) = await place(trader, [gtc("bid", "1987.66", quantity="0.123", lever=7)])
        placed = (await recv_json(ws))["data"]
        reserve = Decimal(placed["frozenAmount"]) - frozen
        # margin notional / 7 and maker fee notional x 0.0002, each to the 8 settle decimals
        notional = Decimal("0.123") * Decimal("1987.66")
        cent = Decimal("1e-8")
        assert reserve == (notional / 7).quantize(cent) + (notional / 5000).quantize(cent)
        answer = await trader.query(CANCEL_PATH, entrustId=order_id)
        assert (answer["code"], answer["error"], answer["msg"]) == (200, False, "SUCCESS")
        check_record(answer["data"])
        assert answer["data"]["entrustId"] == order_id
        assert (answer["data"]["status"], answer["data"]["filledQuantity"]) == ("CANCELED", "0")
        pushed = (await recv_json(ws))["data"]
        assert Decimal(pushed["frozenAmount"]) == frozen
        assert Decimal(pushed["availableAmount"]) == available
        assert Decimal(pushed["operateAmount"]) == reserve
        assert pushed["logId"] > placed["logId"]
    assert await balance(trader) == (available, frozen)
    assert twin.exchange.resting_orders("ETH-USD") == []
    assert twin.exchange.accounts[twin.user_id(trader.api_key)].resting[("ETH-USD", True)] == 0
    assert (await record(trader, order_id))["status"] == "CANCELED"
    again = await trader.query(CANCEL_PATH, entrustId=order_id)
    assert {k: again[k] for k in NOT_FOUND} == COMPLETED
    assert (again["error"], again["data"]) == (True, None)


async def test_cancel_by_client_order_id(trader: TwinClient, other: TwinClient) -> None:
    (order_id,) = await place(trader, [gtc("mine", "1950", long=True)])
    await place(other, [gtc("theirs", "2050", long=False)])
    answer = await trader.query(CANCEL_BY_CLIENT_ID_PATH, clientOrderId="mine")
    assert answer["code"] == 200
    assert (answer["data"]["entrustId"], answer["data"]["status"]) == (order_id, "CANCELED")
    assert (await trader.query(CANCEL_BY_CLIENT_ID_PATH, clientOrderId="mine"))["code"] == 2341
    assert (await trader.query(CANCEL_BY_CLIENT_ID_PATH, clientOrderId="theirs"))["code"] == 2340
    assert (await trader.query(CANCEL_BY_CLIENT_ID_PATH, clientOrderId="never"))["code"] == 2340
    assert (await trader.balance())["data"]["frozenAmount"] == "0"


async def test_cancel_of_a_filled_order_is_already_completed(
    twin: VenueTwin, trader: TwinClient
) -> None:
    market_id, resting_id = await place(trader, [order("mkt"), gtc("bid", "1990")])
    twin.set_mark("ETH-USD", Decimal("1980"))
    for order_id in (market_id, resting_id):
        answer = await trader.query(CANCEL_PATH, entrustId=order_id)
        assert {k: answer[k] for k in COMPLETED} == COMPLETED
        assert (await record(trader, order_id))["status"] == "FILLED"
    assert (await trader.positions())["data"][0]["quantity"] == "0.11"


@pytest.mark.parametrize("path", [BATCH_CANCEL_PATH, BATCH_CANCEL_WITH_RESULTS_PATH])
async def test_batch_cancel_answers_each_id_in_request_order(
    twin: VenueTwin, trader: TwinClient, path: str
) -> None:
    first, second, third = await rest_bids(trader, 3)
    (filled,) = await place(trader, [gtc("fills", "1995")])
    twin.set_mark("ETH-USD", Decimal("1994"))
    ids = [third, 42, filled, first, third]
    answer = await trader.query(path, entrustIds=",".join(map(str, ids)))
    assert (answer["code"], answer["msg"]) == (200, "SUCCESS")
    assert answer["data"] == [
        {"entrustId": third, "code": 200, "msg": "SUCCESS"},
        {"entrustId": 42, **NOT_FOUND},
        {"entrustId": filled, **COMPLETED},
        {"entrustId": first, "code": 200, "msg": "SUCCESS"},
        {"entrustId": third, **COMPLETED},  # cancelled a moment ago
    ]
    listed = (await trader.query(OPEN_ORDERS_PATH, pairName="ETH-USD"))["data"]["list"]
    assert [r["entrustId"] for r in listed] == [second]


async def test_cancel_all_by_pair_and_by_pair_and_side(twin: VenueTwin, trader: TwinClient) -> None:
    bids = await place(trader, [gtc(f"b{i}", str(1950 - i)) for i in range(3)])
    asks = await place(trader, [gtc(f"a{i}", str(2050 + i), long=False) for i in range(2)])
    btc = await place(trader, [gtc("btc", "59000", pair="BTC-USD", quantity="0.01")])
    answer = await trader.query(CANCEL_ALL_PATH, pairName="ETH-USD", isLong="false")
    assert (answer["code"], answer["data"]) == (200, {"entrustIds": asks})
    answer = await trader.query(CANCEL_ALL_PATH, pairName="ETH-USD", isLong="false")
    assert answer["data"] == {"entrustIds": []}
    answer = await trader.query(CANCEL_ALL_PATH, pairName="ETH-USD")
    assert answer["data"] == {"entrustIds": bids}
    assert twin.exchange.resting_orders("ETH-USD") == []
    assert len(twin.exchange.resting_orders("BTC-USD")) == 1
    more = await place(trader, [gtc("again", "1900")])
    answer = await trader.query(CANCEL_ALL_PATH)
    assert answer["data"] == {"entrustIds": sorted(btc + more)}
    assert await balance(trader) == (START_BALANCE, 0)


async def test_a_partly_filled_order_cancels_its_rest(make_twin: Callable[..., Any]) -> None:
    pairs = {"ETH-USD": PairSettings(initial_price=Decimal("2000"), liquidity=Decimal("0.4"))}
    async with make_twin(pairs=pairs) as (twin, trader):
        # Crosses the mark: 0.4 fills at once (the liquidity), 0.6 rests at 2001.
        (order_id,) = await place(trader, [gtc("big", "2001", quantity="1")])
        opened = await record(trader, order_id)
        assert (opened["status"], opened["filledQuantity"]) == ("OPEN", "0.4")
        position = (await trader.positions())["data"][0]
        margin = Decimal(position["marginAmount"])
        assert (await balance(trader))[1] > margin
        answer = await trader.query(CANCEL_PATH, entrustId=order_id)
        assert (answer["data"]["status"], answer["data"]["filledQuantity"]) == ("CANCELED", "0.4")
        assert (await balance(trader))[1] == margin  # only the position's margin stays frozen
        twin.set_mark("ETH-USD", Decimal("1990"))  # would have filled the rest
        assert (await trader.positions())["data"][0]["quantity"] == "0.4"


async def test_a_fill_applied_before_the_cancel_wins(twin: VenueTwin, trader: TwinClient) -> None:
    (order_id,) = await place(trader, [gtc("bid", "1990", quantity="1")])
    twin.faults.configure(latency=0.3)
    cancel = asyncio.create_task(trader.query(CANCEL_PATH, entrustId=order_id))
    await eventually(lambda: twin.counters.latency_injected == 1)  # the cancel is held
    twin.faults.clear()
    twin.set_mark("ETH-USD", Decimal("1985"))  # the fill comes first
    answer = await cancel
    assert answer["code"] == 2341
    assert (await record(trader, order_id))["status"] == "FILLED"
    position = (await trader.positions())["data"][0]
    assert position["quantity"] == "1"
    assert (await balance(trader))[1] == Decimal(position["marginAmount"])


async def test_cancels_racing_fills_end_consistently(twin: VenueTwin, trader: TwinClient) -> None:
    ids = await rest_bids(trader, 40)  # 1900 down to 1861
    prices = {order_id: Decimal(1900 - i) for i, order_id in enumerate(ids)}

    async def walk_down() -> None:
        for price in range(1900, 1855, -1):
            twin.set_mark("ETH-USD", Decimal(price) - Decimal("0.5"))
            await anyio.lowlevel.checkpoint()  # let cancels in between the marks

    cancelled_first = list(reversed(ids))  # the lowest bids, which fill last
    cancels = [trader.query(CANCEL_PATH, entrustId=i) for i in cancelled_first]
    *answers, _ = await asyncio.gather(*cancels, walk_down())
    codes = dict(zip(cancelled_first, (a["code"] for a in answers), strict=True))
    filled_ids = []
    for order_id in ids:
        found = await record(trader, order_id)
        if codes[order_id] == 200:
            assert (found["status"], found["filledQuantity"]) == ("CANCELED", "0")
        else:
            assert codes[order_id] == 2341
            assert (found["status"], found["filledQuantity"]) == ("FILLED", "0.1")
            filled_ids.append(order_id)
    matches = (await trader.matches(pageSize=100))["data"]
    assert sorted(m["entrustId"] for m in matches) == filled_ids
    assert all(Decimal(m["averagePrice"]) == prices[m["entrustId"]] for m in matches)
    positions = (await trader.positions())["data"]
    held = Decimal(positions[0]["quantity"]) if positions else Decimal(0)
    assert held == Decimal("0.1") * len(filled_ids)
    available, frozen = await balance(trader)
    fees = sum((Decimal(m["tradeFee"]) for m in matches), Decimal(0))
    margin = Decimal(positions[0]["marginAmount"]) if positions else Decimal(0)
    assert frozen == margin
    assert available + frozen == START_BALANCE - fees
    assert twin.exchange.resting_orders("ETH-USD") == []


# -- parameters, the setting, faults, memory ------------------------------------------------


async def test_parameters_are_checked_like_the_spec_endpoints(trader: TwinClient) -> None:
    async def code(path: str, **params: Any) -> tuple[int, str]:
        answer = await trader.query(path, **params)
        return answer["code"], answer["msg"]

    assert await code(CANCEL_PATH) == (2002, "Required parameter:entrustId")
    assert await code(CANCEL_PATH, entrustId="x1") == (2001, "Illegal parameter:entrustId")
    assert await code(CANCEL_PATH, entrustId="-5") == (2001, "Illegal parameter:entrustId")
    assert await code(CANCEL_BY_CLIENT_ID_PATH) == (2002, "Required parameter:clientOrderId")
    assert await code(QUERY_ORDER_PATH) == (2002, "Required parameter:entrustId")
    assert await code(BATCH_CANCEL_PATH) == (2002, "Required parameter:entrustIds")
    bad = (2001, "Illegal parameter:entrustIds")
    assert await code(BATCH_CANCEL_PATH, entrustIds="1,,2") == bad
    assert await code(BATCH_CANCEL_WITH_RESULTS_PATH, entrustIds="1,a") == bad
    assert await code(BATCH_CANCEL_PATH, entrustIds=",".join(["7"] * 21)) == bad
    assert (await code(BATCH_CANCEL_PATH, entrustIds=",".join(["7"] * 20)))[0] == 200
    assert await code(CANCEL_ALL_PATH, isLong="yes") == (2001, "Illegal parameter:isLong")
    assert await code(CANCEL_ALL_PATH, pairName="DOGE-USD") == (2001, "Illegal parameter:pairName")
    assert await code(OPEN_ORDERS_PATH) == (2002, "Required parameter:pairName")
    assert await code(OPEN_ORDERS_PATH, pairName="X-Y") == (2001, "Illegal parameter:pairName")
    assert await code(OPEN_ORDERS_PATH, pairName="ETH-USD", pageSize=101) == (
        2001,
        "Illegal parameter:pageSize",
    )
    assert await code(OPEN_ORDERS_PATH, pairName="ETH-USD", pageNo=0) == (
        2001,
        "Illegal parameter:pageNo",
    )
    assert await code(QUERY_ORDER_PATH, entrustId=1, timestamp=None) == (
        2002,
        "Required parameter:timestamp",
    )
    assert await code(QUERY_ORDER_PATH, entrustId=1, timestamp="1") == (
        2001,
        "Illegal parameter:timestamp",
    )


async def test_a_bad_signature_is_refused(trader: TwinClient) -> None:
    trader.sign = lambda text: "0x" + "11" * 65
    response = await trader.query_raw(QUERY_ORDER_PATH, {"entrustId": 1})
    assert response.status_code == 401


async def test_turned_off_every_path_answers_404(make_twin: Callable[..., Any]) -> None:
    async with make_twin(order_management=False) as (_, trader):
        for path in ORDER_MANAGEMENT_PATHS:
            response = await trader.query_raw(path, {"entrustId": 1, "pairName": "ETH-USD"})
            assert response.status_code == 404, path
        unknown = await trader.query_raw("/api/third/order/noSuchThing", {})
        assert (unknown.status_code, unknown.text) == (404, response.text)
        assert (await trader.balance())["code"] == 200


async def test_an_error_after_the_cancel_still_cancels(twin: VenueTwin, trader: TwinClient) -> None:
    (order_id,) = await place(trader, [gtc("bid", "1950")])
    twin.faults.configure(error_after_accept_rate=1.0)
    response = await trader.query_raw(CANCEL_PATH, {"entrustId": order_id})
    assert response.status_code == 500
    assert response.json()["code"] == 500 and response.json()["data"] is None
    assert twin.counters.errors_after_accept == 1
    refused = await trader.query_raw(CANCEL_PATH, {"entrustId": "bad"})  # nothing executed
    assert (refused.status_code, refused.json()["code"]) == (200, 2001)
    listed = await trader.query_raw(OPEN_ORDERS_PATH, {"pairName": "ETH-USD"})  # a read
    assert listed.status_code == 200
    twin.faults.clear()
    assert (await record(trader, order_id))["status"] == "CANCELED"
    assert await balance(trader) == (START_BALANCE, 0)


async def test_a_dropped_answer_still_cancels(twin: VenueTwin, trader: TwinClient) -> None:
    ids = await rest_bids(trader, 2)
    twin.faults.configure(drop_response_rate=1.0)
    with pytest.raises(httpx.TransportError):
        await trader.query_raw(BATCH_CANCEL_WITH_RESULTS_PATH, {"entrustIds": f"{ids[0]},{ids[1]}"})
    assert twin.counters.dropped_responses == 1
    twin.faults.clear()
    assert [(await record(trader, i))["status"] for i in ids] == ["CANCELED", "CANCELED"]


async def test_busy_and_unavailable_cancel_nothing(twin: VenueTwin, trader: TwinClient) -> None:
    (order_id,) = await place(trader, [gtc("bid", "1950")])
    twin.faults.configure(busy_rate=1.0)
    assert (await trader.query(CANCEL_ALL_PATH))["code"] == 2329
    twin.faults.configure(busy_rate=0.0, unavailable_rate=1.0)
    response = await trader.query_raw(CANCEL_PATH, {"entrustId": order_id})
    assert response.status_code == 503
    twin.faults.clear()
    assert (await record(trader, order_id))["status"] == "OPEN"
    assert (twin.counters.busy_answers, twin.counters.unavailable_answers) == (1, 1)


async def test_completed_orders_beyond_the_limit_are_forgotten(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(order_history_limit=3) as (twin, trader):
        (resting,) = await place(trader, [gtc("rests", "1900")])
        done = await place(trader, [order(f"m{i}", quantity="0.01") for i in range(5)])
        assert [(await query(trader, i))["code"] for i in done] == [2340, 2340, 200, 200, 200]
        assert (await record(trader, resting))["status"] == "OPEN"  # open orders stay
        await trader.query(CANCEL_PATH, entrustId=resting)
        assert (await query(trader, done[2]))["code"] == 2340
        assert (await record(trader, resting))["status"] == "CANCELED"
        records = twin.order_records(trader.api_key)
        assert len(records) == 3
        assert [r.order_id for r in records.open_orders()] == []


async def test_a_refused_atomic_batch_leaves_no_order_records(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(batch_mode="atomic") as (_, trader):
        answer = await trader.batch([gtc("ok", "1900"), order("big", quantity="5000")])
        assert answer["code"] != 200
        assert (await query(trader, 1_000_001))["code"] == 2340
        assert (await trader.query(CANCEL_BY_CLIENT_ID_PATH, clientOrderId="ok"))["code"] == 2340
        (order_id,) = await place(trader, [gtc("ok", "1900")])
        assert (await record(trader, order_id))["clientOrderId"] == "ok"


async def test_balances_add_up_after_a_random_run_of_orders_cancels_and_marks(
    twin: VenueTwin, trader: TwinClient
) -> None:
    rng = random.Random(7)
    placed = cancels = 0
    for n in range(60):
        mark = twin.mark("ETH-USD")
        orders = []
        for i in range(rng.randint(1, 6)):
            price = (mark * (1 + Decimal(rng.randint(-30, 30)) / 1000)).quantize(Decimal("0.01"))
            quantity = str(Decimal(rng.randint(1, 500)) / 1000)
            kind = rng.choice(["gtc", "gtc", "gtc", "market"])
            long = rng.random() < 0.5
            if kind == "market":
                orders.append(order(f"r{n}.{i}", long=long, quantity=quantity, lever=5))
            else:
                orders.append(gtc(f"r{n}.{i}", str(price), long=long, quantity=quantity, lever=5))
        answer = await trader.batch(orders)
        placed += len(answer["data"] or [])
        listed = (await trader.query(OPEN_ORDERS_PATH, pairName="ETH-USD", pageSize=100))["data"]
        open_ids = [r["entrustId"] for r in listed["list"]]
        victims = rng.sample(open_ids, k=min(len(open_ids), rng.randint(0, 4)))
        if victims:
            path = rng.choice([BATCH_CANCEL_PATH, CANCEL_PATH])
            if path == CANCEL_PATH:
                results = [await trader.query(CANCEL_PATH, entrustId=i) for i in victims]
            else:
                joined = ",".join(map(str, victims))
                results = (await trader.query(path, entrustIds=joined))["data"]
            assert all(r["code"] == 200 for r in results)
            cancels += len(victims)
        step = mark * Decimal(rng.randint(-15, 15)) / 1000
        twin.set_mark("ETH-USD", (mark + step).quantize(Decimal("0.01")))
    matches = (await trader.matches(pageSize=100))["data"]
    for page_no in range(2, 100):
        more = (await trader.matches(pageSize=100, pageNo=page_no))["data"]
        if not more:
            break
        matches += more
    assert placed > 150 and cancels > 40 and len(matches) > 20
    fees = sum((Decimal(m["tradeFee"]) for m in matches), Decimal(0))
    pnl = sum((Decimal(m["profitLoss"]) for m in matches), Decimal(0))
    positions = (await trader.positions())["data"]
    margins = sum((Decimal(p["marginAmount"]) for p in positions), Decimal(0))
    reserves = sum((o.reserve for o in twin.exchange.resting_orders("ETH-USD")), Decimal(0))
    available, frozen = await balance(trader)
    assert frozen == margins + reserves
    assert available + frozen == START_BALANCE - fees + pnl
    await trader.query(CANCEL_ALL_PATH)
    assert await balance(trader) == (available + reserves, margins)
