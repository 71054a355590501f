"""selectContractMatchPairList: newest first, increasing ids, matchId bound, paging."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.twin.twin_client import TwinClient, order

pytestmark = pytest.mark.anyio

FIELDS = {
    "id",
    "entrustId",
    "contractPositionId",
    "contractPairId",
    "createTime",
    "createTimeStamp",
    "symbol",
    "accountCoinSymbol",
    "accountSettleDecimal",
    "lever",
    "isMarket",
    "isClose",
    "isLong",
    "isTaker",
    "averagePrice",
    "quantity",
    "amount",
    "tradeFee",
    "positionFee",
    "profitLoss",
    "isDelivery",
    "deliveryTime",
    "deliveryTimeStamp",
    "address",
    "openingPrice",
    "type",
    "restrictPrice",
}


async def make_fills(trader: TwinClient, count: int) -> list[int]:
    """count fills, alternating long and short; returns the order ids in order."""
    ids: list[int] = []
    for start in range(0, count, 20):
        batch = [order(f"f{i}", long=i % 2 == 0) for i in range(start, min(count, start + 20))]
        ids += [d["orderId"] for d in (await trader.batch(batch))["data"]]
    return ids


async def test_matches_are_newest_first_with_increasing_ids(trader: TwinClient) -> None:
    order_ids = await make_fills(trader, 5)
    data = (await trader.matches())["data"]
    assert all(set(m) == FIELDS for m in data)
    ids = [m["id"] for m in data]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 5
    assert [m["entrustId"] for m in data] == order_ids[::-1]
    assert all(m["symbol"] == "ETH-USD" and m["accountCoinSymbol"] == "USD" for m in data)
    assert data[0]["createTime"] == "2027-01-15 08:00:00"
    assert data[0]["createTimeStamp"] == 1_800_000_000_000


async def test_default_page_is_20_and_page_no_is_one_based(trader: TwinClient) -> None:
    await make_fills(trader, 25)
    first = (await trader.matches())["data"]
    assert len(first) == 20
    second = (await trader.matches(pageNo=2))["data"]
    assert len(second) == 5
    everything = (await trader.matches(pageSize=100))["data"]
    assert [m["id"] for m in first + second] == [m["id"] for m in everything]
    assert (await trader.matches(pageNo=3))["data"] == []


async def test_match_id_is_a_strict_upper_bound(trader: TwinClient) -> None:
    await make_fills(trader, 12)
    everything = (await trader.matches(pageSize=100))["data"]
    ids = [m["id"] for m in everything]
    bound = ids[4]
    below = (await trader.matches(matchId=bound, pageSize=100))["data"]
    assert [m["id"] for m in below] == ids[5:]
    # Paging backwards with the last id seen walks the whole history once.
    seen: list[int] = []
    cursor = None
    while True:
        params = {"pageSize": 5} if cursor is None else {"pageSize": 5, "matchId": cursor}
        page = (await trader.matches(**params))["data"]
        if not page:
            break
        seen += [m["id"] for m in page]
        cursor = page[-1]["id"]
    assert seen == ids
    # pageNo applies within the bound.
    page2 = (await trader.matches(matchId=bound, pageSize=3, pageNo=2))["data"]
    assert [m["id"] for m in page2] == ids[8:11]


async def test_matches_are_per_account_and_pair(trader: TwinClient, other: TwinClient) -> None:
    await make_fills(trader, 3)
    await other.batch([order("o1")])
    assert len((await trader.matches())["data"]) == 3
    assert len((await other.matches())["data"]) == 1
    assert (await trader.matches("BTC-USD"))["data"] == []


async def test_fills_sum_to_the_position(trader: TwinClient) -> None:
    await trader.batch(
        [
            order("a", quantity="0.3"),
            order("b", quantity="0.2"),
            order("c", long=False, quantity="0.1"),
        ]
    )
    matches = (await trader.matches())["data"]
    signed = sum(
        (Decimal(m["quantity"]) if m["isLong"] else -Decimal(m["quantity"]) for m in matches),
        Decimal(0),
    )
    position = (await trader.positions())["data"][0]
    assert Decimal(position["quantity"]) == signed == Decimal("0.4")
