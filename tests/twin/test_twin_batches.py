"""Batch behaviour the spec leaves open: partial (default) and atomic, and the result keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from framework.twin import VenueTwin
from tests.twin.twin_client import START_BALANCE, TwinClient, order

pytestmark = pytest.mark.anyio


def mixed_batch() -> list[dict[str, Any]]:
    return [
        order("ok-1", quantity="0.1"),
        order("bad-lever", lever=500),
        order("ok-2", quantity="0.2"),
        order("bad-qty", quantity="0"),
        order("ok-3", long=False, quantity="0.05"),
    ]


async def test_partial_lists_only_accepted_orders_in_submission_order(
    twin: VenueTwin, trader: TwinClient
) -> None:
    answer = await trader.batch(mixed_batch())
    assert (answer["error"], answer["code"], answer["msg"]) == (False, 200, "SUCCESS")
    data = answer["data"]
    assert [d["corderId"] for d in data] == ["ok-1", "ok-2", "ok-3"]
    assert all(set(d) == {"corderId", "orderId", "pairName"} for d in data)
    assert all(d["pairName"] == "ETH-USD" for d in data)
    ids = [d["orderId"] for d in data]
    assert ids == sorted(ids) and len(set(ids)) == 3
    positions = (await trader.positions())["data"]
    assert [p["quantity"] for p in positions] == ["0.25"]
    assert twin.counters.orders_accepted == 3
    assert twin.counters.orders_refused == 2


async def test_partial_with_every_order_refused_answers_the_first_refusal(
    trader: TwinClient,
) -> None:
    answer = await trader.batch([order("a", lever=500), order("b", quantity="0")])
    assert (answer["error"], answer["code"]) == (True, 2304)
    assert answer["msg"] == "Lever cannot be greater than 100"


async def test_atomic_first_failure_rejects_the_whole_batch(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(batch_mode="atomic") as (_, trader):
        answer = await trader.batch(mixed_batch())
        assert (answer["error"], answer["code"]) == (True, 2304)
        assert answer["msg"] == "Lever cannot be greater than 100"
        # Nothing executed: no position, no match, the balance untouched, ids reusable.
        assert (await trader.positions())["data"] == []
        assert (await trader.matches())["data"] == []
        balance = (await trader.balance())["data"]
        assert balance["availableAmount"] == str(START_BALANCE)
        assert balance["frozenAmount"] == "0"
        again = await trader.batch([order("ok-1", quantity="0.1")])
        assert again["code"] == 200
        assert again["data"][0]["orderId"] == 1_000_001


async def test_atomic_rolls_back_fills_and_resting_orders_before_the_failure(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(batch_mode="atomic") as (twin, trader):
        assert (await trader.batch([order("first", quantity="0.3")]))["code"] == 200
        before = (await trader.balance())["data"]
        batch = [
            order("close", long=False, quantity="0.3"),
            order("rest", market=False, match_type=1, price="1900", quantity="0.1"),
            order("dup", quantity="0.1"),
            order("dup", quantity="0.1"),
        ]
        answer = await trader.batch(batch)
        assert (answer["code"], answer["msg"]) == (2001, "Illegal parameter:clientOrderId")
        assert [p["quantity"] for p in (await trader.positions())["data"]] == ["0.3"]
        assert (await trader.balance())["data"] == before
        assert len((await trader.matches())["data"]) == 1
        assert twin.exchange.resting_orders("ETH-USD") == []


async def test_atomic_accepts_a_clean_batch(make_twin: Callable[..., Any]) -> None:
    async with make_twin(batch_mode="atomic") as (_, trader):
        answer = await trader.batch([order("a"), order("b"), order("c", long=False)])
        assert [d["corderId"] for d in answer["data"]] == ["a", "b", "c"]


async def test_result_key_can_be_cOrderId(make_twin: Callable[..., Any]) -> None:
    async with make_twin(order_id_key="cOrderId") as (_, trader):
        answer = await trader.batch([order("a")])
        assert answer["data"] == [{"cOrderId": "a", "orderId": 1_000_001, "pairName": "ETH-USD"}]


async def test_twenty_orders_fit_in_one_batch(trader: TwinClient) -> None:
    orders = [order(f"o{i}", long=i % 2 == 0, quantity="0.01") for i in range(20)]
    answer = await trader.batch(orders)
    assert len(answer["data"]) == 20
