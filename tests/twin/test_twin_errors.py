"""Every SPEC section 7 code the twin gives, with its exact text, over real sockets."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from framework.sim.state import PairSettings
from framework.venue.rules import PairRules
from tests.twin.conftest import client_for
from tests.twin.twin_client import (
    NOCOIN_API_KEY,
    NOW,
    OTHER_API_KEY,
    POOR_API_KEY,
    POSITIONS,
    Clock,
    TwinClient,
    order,
)

pytestmark = pytest.mark.anyio


def refused(answer: dict[str, Any], code: int, msg: str) -> None:
    assert answer["error"] is True
    assert (answer["code"], answer["msg"]) == (code, msg)
    assert answer["data"] is None


def eth(rules: PairRules, price: str = "2000") -> dict[str, PairSettings]:
    return {"ETH-USD": PairSettings(initial_price=Decimal(price), rules=rules)}


async def test_more_than_20_orders_is_2001(trader: TwinClient) -> None:
    orders = [order(f"c{i}") for i in range(21)]
    refused(await trader.batch(orders), 2001, "Illegal parameter:orders")


async def test_empty_or_non_array_orders_is_2001(trader: TwinClient) -> None:
    refused(await trader.batch([]), 2001, "Illegal parameter:orders")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"matchType": 7}, "matchType"),
        ({"matchType": "1"}, "matchType"),
        ({"isLong": "true"}, "isLong"),
        ({"isMarket": 1}, "isMarket"),
        ({"lever": "10"}, "lever"),
        ({"pairName": "DOGE-USD"}, "pairName"),
        ({"quantity": 0.5}, "quantity"),
        ({"quantity": "1e3"}, "quantity"),
        ({"price": "-1"}, "price"),
        ({"clientOrderId": ""}, "clientOrderId"),
        ({"positionType": "3"}, "positionType"),
    ],
)
async def test_bad_values_and_enums_are_2001(
    trader: TwinClient, changes: dict[str, Any], field: str
) -> None:
    refused(await trader.batch([{**order("c1"), **changes}]), 2001, f"Illegal parameter:{field}")


async def test_page_size_above_100_is_2001(trader: TwinClient) -> None:
    refused(await trader.positions(pageSize=101), 2001, "Illegal parameter:pageSize")
    refused(await trader.matches(pageSize=101), 2001, "Illegal parameter:pageSize")
    refused(await trader.matches(pageNo=0), 2001, "Illegal parameter:pageNo")
    assert (await trader.positions(pageSize=100))["code"] == 200


async def test_missing_or_unknown_pair_on_lists_is_2001(trader: TwinClient) -> None:
    refused(await trader.query(POSITIONS), 2001, "Illegal parameter:pairName")
    refused(await trader.matches("DOGE-USD"), 2001, "Illegal parameter:pairName")
    refused(await trader.matches(matchId="abc"), 2001, "Illegal parameter:matchId")


async def test_duplicate_client_order_id_in_one_batch_is_2001(trader: TwinClient) -> None:
    answer = await trader.batch([order("dup"), order("dup", long=False)])
    assert answer["code"] == 200
    assert [d["corderId"] for d in answer["data"]] == ["dup"]
    assert len(answer["data"]) == 1


async def test_duplicate_client_order_id_of_an_earlier_order_is_2001(trader: TwinClient) -> None:
    assert (await trader.batch([order("once")]))["code"] == 200
    refused(await trader.batch([order("once")]), 2001, "Illegal parameter:clientOrderId")


@pytest.mark.parametrize(
    "field",
    [
        "clientOrderId",
        "isLong",
        "isMarket",
        "lever",
        "matchType",
        "pairName",
        "positionType",
        "quantity",
    ],
)
async def test_missing_required_field_is_2002_naming_it(trader: TwinClient, field: str) -> None:
    item = order("c1")
    del item[field]
    refused(await trader.batch([item]), 2002, f"Required parameter:{field}")


async def test_limit_order_without_price_is_2002(trader: TwinClient) -> None:
    refused(
        await trader.batch([order("c1", market=False, match_type=1)]),
        2002,
        "Required parameter:price",
    )


async def test_missing_timestamp_and_symbol_are_2002(trader: TwinClient) -> None:
    import orjson

    from tests.twin.twin_client import BATCH

    body = orjson.dumps({"orders": [order("c1")]})
    response = await trader.http.post(BATCH, content=body, headers=trader.headers(body.decode()))
    refused(response.json(), 2002, "Required parameter:timestamp")
    body = orjson.dumps({"timestamp": trader.stamp()})
    response = await trader.http.post(BATCH, content=body, headers=trader.headers(body.decode()))
    refused(response.json(), 2002, "Required parameter:orders")
    from tests.twin.twin_client import BALANCE

    refused(await trader.query(BALANCE), 2002, "Required parameter:symbol")


async def test_insufficient_balance_for_margin_and_fee_is_2102(trader: TwinClient) -> None:
    # 100 ETH at ~2001 with lever 1 needs ~200100 USD of margin; the account has 100000.
    big = order("big", lever=1, quantity="100")
    refused(await trader.batch([big]), 2102, "Insufficient balance:USD")


async def test_nothing_available_is_2201(http: Any, clock: Clock) -> None:
    poor = client_for(http, POOR_API_KEY, clock)
    refused(await poor.batch([order("p1")]), 2201, "Insufficient balance available")


@pytest.mark.parametrize(
    ("changes", "code", "msg"),
    [
        ({"quantity": "0"}, 2301, "Quantity cannot be less than 0.001"),
        ({"quantity": "1000.5"}, 2302, "Quantity cannot be greater than 1000"),
        ({"lever": 0}, 2303, "Lever cannot be less than 1"),
        ({"lever": 125}, 2304, "Lever cannot be greater than 100"),
        ({"quantity": "0.0101"}, 2312, "Decimal places out of limit"),
        (
            {"isMarket": False, "matchType": 1, "price": "1999.999"},
            2312,
            "Decimal places out of limit",
        ),
        (
            {"quantity": "0.001", "isMarket": False, "matchType": 1, "price": "500"},
            2317,
            "Order too small",
        ),
        ({"positionType": 5}, 2325, "Position type not supported,Supported types are[3, 4]"),
    ],
)
async def test_pair_limits(
    trader: TwinClient, changes: dict[str, Any], code: int, msg: str
) -> None:
    refused(await trader.batch([{**order("c1"), **changes}]), code, msg)


async def test_one_way_position_limit_is_2305(make_twin: Callable[..., Any]) -> None:
    async with make_twin(pairs=eth(PairRules(max_one_way_quantity=Decimal("1")))) as (_, trader):
        assert (await trader.batch([order("a", quantity="0.6")]))["code"] == 200
        refused(
            await trader.batch([order("b", quantity="0.5")]),
            2305,
            "The quantity of one-way positions cannot be greater than 1",
        )


async def test_total_contract_position_limit_is_2306(
    make_twin: Callable[..., Any], clock: Clock
) -> None:
    async with make_twin(pairs=eth(PairRules(max_total_quantity=Decimal("1")))) as (_, trader):
        other = client_for(trader.http, OTHER_API_KEY, clock)
        assert (await trader.batch([order("a", quantity="0.6")]))["code"] == 200
        refused(
            await other.batch([order("b", quantity="0.6")]),
            2306,
            "Total quantity of this contract positions cannot be greater than 1",
        )


async def test_trading_off_is_2307(make_twin: Callable[..., Any]) -> None:
    async with make_twin(pairs=eth(PairRules(trading=False))) as (_, trader):
        refused(await trader.batch([order("a")]), 2307, "Contract stops trading")


async def test_position_type_differing_from_the_open_position_is_2310(trader: TwinClient) -> None:
    assert (await trader.batch([order("a", position_type=3)]))["code"] == 200
    refused(
        await trader.batch([order("b", position_type=4)]),
        2310,
        "The position margin mode is invalid, please try again.",
    )


async def test_within_10_minutes_of_delivery_is_2316(make_twin: Callable[..., Any]) -> None:
    delivery = datetime.fromtimestamp(NOW, UTC) + timedelta(minutes=5)
    async with make_twin(pairs=eth(PairRules(delivery_time=delivery))) as (_, trader):
        refused(await trader.batch([order("a")]), 2316, "10 minutes before delivery:Stop Open/Undo")
    later = datetime.fromtimestamp(NOW, UTC) + timedelta(minutes=11)
    async with make_twin(pairs=eth(PairRules(delivery_time=later))) as (_, trader):
        assert (await trader.batch([order("a")]))["code"] == 200


async def test_min_notional_is_2317_for_market_orders(make_twin: Callable[..., Any]) -> None:
    async with make_twin(pairs=eth(PairRules(min_notional=Decimal("50")))) as (_, trader):
        refused(await trader.batch([order("a", quantity="0.02")]), 2317, "Order too small")


async def test_order_through_zero_is_2318(trader: TwinClient) -> None:
    assert (await trader.batch([order("a", quantity="0.5")]))["code"] == 200
    refused(
        await trader.batch([order("b", long=False, quantity="0.6")]),
        2318,
        "The hot account not support reverse position order!",
    )
    # Closing exactly to zero is fine.
    assert (await trader.batch([order("c", long=False, quantity="0.5")]))["code"] == 200


async def test_pair_settling_in_a_coin_the_account_lacks_is_2330(http: Any, clock: Clock) -> None:
    nocoin = client_for(http, NOCOIN_API_KEY, clock)
    refused(await nocoin.batch([order("n1")]), 2330, "No settlement coin found")


async def test_balance_of_an_unknown_symbol_is_4001(trader: TwinClient) -> None:
    refused(await trader.balance("DOGE"), 4001, "Invalid address")


async def test_balance_of_a_known_coin_the_account_lacks_is_2122(http: Any, clock: Clock) -> None:
    nocoin = client_for(http, NOCOIN_API_KEY, clock)
    refused(await nocoin.balance("USD"), 2122, "No hot assets have been frozen")


async def test_post_only_that_would_cross_is_refused(trader: TwinClient) -> None:
    crossing = order("po", market=False, match_type=4, price="2100")
    refused(await trader.batch([crossing]), 2001, "Illegal parameter:price")
