"""Memory bounds: what the twin keeps per order, match and request stays at its limit.

Settings ``match_history_limit``, ``client_id_history_limit``, ``order_history_limit`` and
``received_orders_limit`` (framework/twin/settings.py), set low here (50) and exceeded.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import attrs
import pytest

from framework.sim.events import Match
from framework.sim.history import MatchHistory
from framework.sim.state import Account
from framework.twin import VenueTwin
from tests.twin.twin_client import TRADER_API_KEY, TwinClient, order

pytestmark = pytest.mark.anyio

LIMIT = 50
BOUNDS = {
    "match_history_limit": LIMIT,
    "client_id_history_limit": LIMIT,
    "order_history_limit": LIMIT,
    "received_orders_limit": LIMIT,
}


def account_of(twin: VenueTwin) -> Account:
    """The trader's account in the exchange."""
    return twin.exchange.accounts[twin.user_id(TRADER_API_KEY)]


async def fills(trader: TwinClient, count: int, prefix: str = "f") -> list[int]:
    """count market orders (one fill each), alternating long and short; their orderIds."""
    ids: list[int] = []
    for start in range(0, count, 20):
        batch = [
            order(f"{prefix}{i}", long=i % 2 == 0) for i in range(start, min(count, start + 20))
        ]
        answer = await trader.batch(batch)
        assert answer["code"] == 200 and len(answer["data"]) == len(batch), answer
        ids += [d["orderId"] for d in answer["data"]]
    return ids


async def listed_ids(trader: TwinClient, **params: Any) -> list[int]:
    """The match ids of one page of selectContractMatchPairList."""
    answer = await trader.matches(**params)
    assert answer["code"] == 200, answer
    return [m["id"] for m in answer["data"]]


def match(match_id: int) -> Match:
    """A match record that only its id tells apart."""
    return Match(
        id=match_id,
        order_id=match_id,
        position_id=1,
        contract_pair_id=1,
        time_ms=0,
        pair="ETH-USD",
        coin="USD",
        settle_decimals=8,
        lever=10,
        is_market=True,
        is_close=False,
        is_long=True,
        is_taker=True,
        price=Decimal(2000),
        quantity=Decimal(1),
        amount=Decimal(2000),
        fee=Decimal(0),
        profit_loss=Decimal(0),
        opening_price=Decimal(2000),
        address=None,
        delivery_time=None,
    )


def test_a_match_history_keeps_the_newest_with_a_bounded_list() -> None:
    history = MatchHistory(8)
    for i in range(1, 101):
        history.append(match(i))
        forgotten = history.trim()
        assert [m.id for m in forgotten] == ([i - 8] if i > 8 else [])
        assert len(history._items) <= 8 + 8 // 4  # forgotten ones go in slices
    assert [m.id for m in history] == list(range(93, 101))
    assert (history[0].id, history[-1].id, len(history), history.end) == (93, 100, 8, 100)
    assert [m.id for m in history[2:5]] == [95, 96, 97]
    assert [m.id for m in history[::-3]] == [100, 97, 94]
    assert [history.count_below(i) for i in (50, 93, 94, 100, 101, 500)] == [0, 0, 1, 7, 8, 8]
    with pytest.raises(IndexError):
        history[8]
    savepoint = history.end
    history.append(match(101))
    history.append(match(102))
    history.truncate(savepoint)
    assert [m.id for m in history] == list(range(93, 101)) and history.end == savepoint
    with pytest.raises(ValueError, match="positive"):
        MatchHistory(0)


async def test_matches_stay_at_the_limit_and_pages_list_the_newest(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(**BOUNDS) as (twin, trader):
        await fills(trader, 130)
        kept = account_of(twin).matches["ETH-USD"]
        ids = [m.id for m in kept]
        assert len(ids) == LIMIT and ids == list(range(81, 131))  # the newest 50, in id order
        newest = ids[::-1]
        # pageNo paging: the newest first, down to the oldest kept match, then nothing
        pages = [await listed_ids(trader, pageSize=20, pageNo=n) for n in (1, 2, 3, 4)]
        assert pages == [newest[:20], newest[20:40], newest[40:], []]
        # matchId paging (a strict upper bound), as a cursor walking down
        walked: list[int] = []
        bound: int | None = None
        while True:
            page = await listed_ids(trader, pageSize=15, matchId=bound)
            if not page:
                break
            walked += page
            bound = page[-1]
        assert walked == newest
        assert await listed_ids(trader, matchId=82) == [81]
        assert await listed_ids(trader, matchId=81) == []  # below the oldest kept: nothing
        assert await listed_ids(trader, pageSize=5, pageNo=2, matchId=100) == [94, 93, 92, 91, 90]
        # new matches push the oldest out at once; their ids go on from the last
        await fills(trader, 2, prefix="more")
        assert await listed_ids(trader, pageSize=3) == [132, 131, 130]
        assert [m.id for m in kept][:2] == [83, 84] and len(kept) == LIMIT


async def test_resting_fills_of_a_mark_move_are_trimmed_too(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(**BOUNDS) as (twin, trader):
        for start in (0, 20, 40):
            batch = [
                order(f"bid{i}", market=False, match_type=1, price="1990")
                for i in range(start, start + 20)
            ]
            assert (await trader.batch(batch))["code"] == 200
        assert len(twin.exchange.resting_orders("ETH-USD")) == 60
        twin.set_mark("ETH-USD", "1980")  # all 60 fill, outside any batch
        kept = account_of(twin).matches["ETH-USD"]
        assert [m.id for m in kept] == list(range(11, 61))
        assert len(await listed_ids(trader, pageSize=100)) == LIMIT
        assert len(twin.order_records(TRADER_API_KEY)) == LIMIT


async def test_client_ids_stay_at_the_limit_and_forgotten_ones_are_accepted_again(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(**BOUNDS) as (twin, trader):
        await fills(trader, 120)
        account = account_of(twin)
        newest = [f"f{i}" for i in range(70, 120)]
        assert list(account.order_ids) == newest == list(twin.executed_orders(TRADER_API_KEY))
        assert list(account.client_ids) == newest
        assert len(twin.order_records(TRADER_API_KEY)) == LIMIT
        assert [cid for cid, _ in twin.received_orders] == newest
        # a remembered id is still refused; a forgotten one is accepted again
        refused = await trader.batch([order("f119", long=False)])
        assert (refused["code"], refused["msg"]) == (2001, "Illegal parameter:clientOrderId")
        again = await trader.batch([order("f0")])
        assert again["code"] == 200
        assert twin.executed_orders(TRADER_API_KEY)["f0"] == again["data"][0]["orderId"]
        assert len(account.order_ids) == LIMIT and "f70" not in account.order_ids


async def test_an_open_order_keeps_its_client_id_taken(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(**BOUNDS) as (twin, trader):
        answer = await trader.batch([order("rest", market=False, match_type=1, price="1900")])
        (resting,) = answer["data"]
        await fills(trader, 60)
        assert "rest" not in account_of(twin).order_ids  # out of the window...
        refused = await trader.batch([order("rest")])  # ...but its order still rests
        assert (refused["code"], refused["msg"]) == (2001, "Illegal parameter:clientOrderId")
        cancel = await trader.query("/api/third/order/cancelEntrust", entrustId=resting["orderId"])
        assert cancel["code"] == 200
        await fills(trader, 60, prefix="g")  # its completed record is forgotten too
        assert twin.order_records(TRADER_API_KEY).by_client_id("rest") is None
        assert (await trader.batch([order("rest")]))["code"] == 200


async def test_held_back_listing_times_go_with_forgotten_matches(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(**BOUNDS) as (twin, trader):
        twin.faults.configure(match_delay_min_s=100.0, match_delay_max_s=100.0)
        await fills(trader, 80)
        account = account_of(twin)
        assert sorted(account.listed_from_ms) == [m.id for m in account.matches["ETH-USD"]]
        assert len(account.listed_from_ms) == LIMIT


async def test_an_atomic_batch_refused_after_trimming_rolls_back_exactly(
    make_twin: Callable[..., Any],
) -> None:
    async with make_twin(batch_mode="atomic", **BOUNDS) as (twin, trader):
        order_ids = await fills(trader, 80)
        account = account_of(twin)
        kept = account.matches["ETH-USD"]
        records = twin.order_records(TRADER_API_KEY)

        def state() -> Any:
            return (
                [attrs.astuple(m) for m in kept],
                kept.end,
                list(account.order_ids.items()),
                sorted((r.order_id, r.status, r.filled) for r in records.open_orders())
                + [(i, records.get(i) is not None) for i in order_ids],
                len(records),
                {c: (b.available, b.frozen) for c, b in account.balances.items()},
                {p: attrs.astuple(pos) for p, pos in account.positions.items()},
            )

        before = state()
        listed = await trader.matches(pageSize=100)
        assert len(kept) == LIMIT and len(account.order_ids) == LIMIT
        # two fills (beyond the limit) and a resting order, then a refusal: all undone
        batch = [
            order("x1"),
            order("x2", long=False),
            order("x3", market=False, match_type=1, price="1900"),
            order("bad", lever=1000),
        ]
        answer = await trader.batch(batch)
        assert (answer["code"], answer["msg"]) == (2304, "Lever cannot be greater than 100")
        assert state() == before
        read = [cid for cid, _ in twin.received_orders]  # what was read is recorded anyway
        assert read == [f"f{i}" for i in range(34, 80)] + ["x1", "x2", "x3", "bad"]
        assert (await trader.matches(pageSize=100)) | {"sid": 0} == listed | {"sid": 0}
        assert twin.exchange.resting_orders("ETH-USD") == []
        # the ids the refused batch used are given out again, and the bounds hold
        clean = await trader.batch([order("y1"), order("y2", long=False)])
        assert [d["orderId"] for d in clean["data"]] == [order_ids[-1] + 1, order_ids[-1] + 2]
        assert [m.id for m in kept][-2:] == [81, 82] and len(kept) == LIMIT
        assert list(account.order_ids)[-2:] == ["y1", "y2"] and len(account.order_ids) == LIMIT
