"""SimVenue's reads equal what RestClient decodes from the twin's HTTP answers, same state.

One exchange read both ways: the twin's, served over real sockets to a RestClient, and the
same exchange under a SimVenue (its paper account's exchange replaced by the twin's, whose
demo account is the paper venue's user 1). Every read of the Venue protocol is compared:
records, pages, cursors and refusals (type, code, message).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest

from framework.backtest.paper import PaperSettings, PaperVenue
from framework.backtest.prices import PriceTrack
from framework.backtest.sim_venue import SimVenue
from framework.engine.cancels import CancelAnswer, CancelBatch
from framework.live.rest import RestClient
from framework.twin.demo import DEMO_API_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from framework.venue.errors import VenueError
from framework.venue.models import AccountPush, MatchType, OrderInput, PositionPush, PositionType
from framework.venue.rules import PairRules

pytestmark = pytest.mark.anyio
D = Decimal


@pytest.fixture
def twin_settings() -> TwinSettings:
    """Still prices; a second coin the demo account does not hold (balance 2122)."""
    return TwinSettings(prices=PriceSettings(tick_interval=0), coins={"USD": 1, "EUR": 2})


@pytest.fixture
def pushes() -> list[PositionPush | AccountPush]:
    return []


@pytest.fixture
def sim(twin: VenueTwin, pushes: list[PositionPush | AccountPush]) -> SimVenue:
    """A SimVenue whose paper account is the twin's demo account."""
    assert twin.demo_user_id == 1
    rules = {pair: PairRules() for pair in twin.exchange.markets}
    paper = PaperVenue(
        PaperSettings(),
        rules=rules,
        track=PriceTrack([]),
        deliver=pushes.append,
        now_ms=twin.now_ms,
    )
    paper.exchange = twin.exchange
    return SimVenue(paper, now_ms=twin.now_ms, schedule=lambda at, callback: None)


def order(
    cid: str, *, pair: str = "ETH-USD", is_long: bool = True, quantity: str, price: str | None
) -> OrderInput:
    return OrderInput(
        client_order_id=cid,
        is_long=is_long,
        is_market=price is None,
        lever=10,
        match_type=MatchType.IOC if price is None else MatchType.GTC,
        pair_name=pair,
        position_type=PositionType.ISOLATED,
        price=None if price is None else D(price),
        quantity=D(quantity),
    )


async def both(
    rest: RestClient, sim: SimVenue, call: Callable[[Any], Awaitable[Any]]
) -> tuple[Any, Any]:
    """The answer (or the VenueError as (type, code, msg)) of call on each venue."""
    answers = []
    for venue in (rest, sim):
        try:
            answers.append(await call(venue))
        except VenueError as exc:
            answers.append((type(exc), exc.code, exc.msg))
    return answers[0], answers[1]


async def same(rest: RestClient, sim: SimVenue, call: Callable[[Any], Awaitable[Any]]) -> Any:
    over_http, in_process = await both(rest, sim, call)
    assert in_process == over_http
    return in_process


async def trade(twin: VenueTwin, rest: RestClient) -> None:
    """A long ETH position made of two fills, resting orders on both pairs, a filled one."""
    await rest.batch_create([order("m1", quantity="1", price=None)])
    await rest.batch_create([order("m2", quantity="0.5", price=None)])
    await rest.batch_create(
        [
            order("r1", quantity="0.2", price="1900"),
            order("r2", quantity="0.3", price="1950"),
            order("r3", pair="BTC-USD", is_long=False, quantity="0.01", price="70000"),
            order("r4", quantity="0.1", price="1990"),
        ]
    )
    twin.set_mark("ETH-USD", "1980")  # r4 fills as maker: a FILLED record, a third match


async def test_positions_balance_and_refusals_read_alike(
    twin: VenueTwin, rest: RestClient, sim: SimVenue
) -> None:
    await trade(twin, rest)
    (position,) = await same(rest, sim, lambda v: v.positions("ETH-USD"))
    assert position.quantity == D("1.6") and position.unrealized_pnl is not None
    assert position.remaining_close_quantity == D("1.6") and position.restrict_price
    assert await same(rest, sim, lambda v: v.positions("BTC-USD")) == []
    assert await same(rest, sim, lambda v: v.positions("ETH-USD", 2, 1)) == []
    assert len(await same(rest, sim, lambda v: v.positions("ETH-USD", 1, 1))) == 1
    refused = await same(rest, sim, lambda v: v.positions("XRP-USD"))
    assert refused[1:] == (2001, "Illegal parameter:pairName")
    balance = await same(rest, sim, lambda v: v.balance("USD"))
    assert balance.frozen_amount > 0 and balance.user_id == 1
    assert (await same(rest, sim, lambda v: v.balance("EUR")))[1] == 2122
    assert (await same(rest, sim, lambda v: v.balance("DOGE")))[1] == 4001


async def test_match_pages_and_cursors_read_alike(
    twin: VenueTwin, rest: RestClient, sim: SimVenue
) -> None:
    await trade(twin, rest)
    newest_first = await same(rest, sim, lambda v: v.matches("ETH-USD"))
    assert len(newest_first) == 3
    assert [m.id for m in newest_first] == sorted((m.id for m in newest_first), reverse=True)
    second = await same(rest, sim, lambda v: v.matches("ETH-USD", page_no=2, page_size=1))
    assert second == newest_first[1:2]
    below = await same(rest, sim, lambda v: v.matches("ETH-USD", match_id=newest_first[0].id))
    assert below == newest_first[1:]
    assert await same(rest, sim, lambda v: v.matches("BTC-USD")) == []
    assert (await same(rest, sim, lambda v: v.matches("XRP-USD")))[1] == 2001


async def test_open_orders_and_queries_read_alike(
    twin: VenueTwin, rest: RestClient, sim: SimVenue
) -> None:
    await trade(twin, rest)
    ids = twin.executed_orders(DEMO_API_KEY)
    open_eth = await same(rest, sim, lambda v: v.all_open_orders("ETH-USD"))
    assert [o.client_order_id for o in open_eth] == ["r1", "r2"]
    assert [o.state for o in open_eth] == ["open", "open"]
    assert len(await same(rest, sim, lambda v: v.all_open_orders("BTC-USD"))) == 1
    assert (await same(rest, sim, lambda v: v.all_open_orders("XRP-USD")))[1] == 2001
    for cid, state in (("m1", "filled"), ("r1", "open"), ("r4", "filled")):
        queried = await same(rest, sim, lambda v, i=ids[cid]: v.query_order(i))
        assert (queried.client_order_id, queried.state) == (cid, state)
    refused = await same(rest, sim, lambda v: v.query_order(999_999_999))
    assert refused[1:] == (2340, "Order does not exist")


async def test_cancel_all_answers_alike(
    twin: VenueTwin, rest: RestClient, sim: SimVenue, pushes: list[PositionPush | AccountPush]
) -> None:
    await trade(twin, rest)
    open_long = [o.entrust_id for o in await rest.all_open_orders("ETH-USD")]
    assert await sim.cancel_all("ETH-USD", is_long=True) == tuple(open_long)
    assert pushes and isinstance(pushes[-1], AccountPush)  # the reserves released, pushed
    assert await same(rest, sim, lambda v: v.all_open_orders("ETH-USD")) == []
    await rest.batch_create(
        [order("r5", quantity="0.2", price="1900"), order("r6", quantity="0.2", price="1901")]
    )
    again = [o.entrust_id for o in await sim.all_open_orders("ETH-USD")]
    assert len(again) == 2
    assert await rest.cancel_all("ETH-USD", is_long=True) == tuple(again)
    (btc,) = await sim.all_open_orders("BTC-USD")
    assert await sim.cancel_all() == (btc.entrust_id,)
    assert await same(rest, sim, lambda v: v.cancel_all()) == ()
    assert (await same(rest, sim, lambda v: v.cancel_all("XRP-USD")))[1] == 2001


async def test_cancels_answer_alike_one_order_and_a_batch(
    twin: VenueTwin, rest: RestClient, sim: SimVenue
) -> None:
    """A batch cancel names no filled quantity or orderId per order on either venue."""
    placed = await rest.batch_create(
        [order(f"c{i}", quantity="0.1", price=str(1800 + i)) for i in range(6)]
    )
    # a cancel call reads only the orderIds and clientOrderIds of its entries
    entry: list[Any] = [
        SimpleNamespace(order_id=r.order_id, client_order_id=r.client_order_id) for r in placed
    ]
    over_http = await rest.cancel(CancelBatch(1, entry[0:2]))
    in_process = await sim.cancel(CancelBatch(2, entry[2:4]))
    assert list(over_http.values()) == list(in_process.values())
    assert set(in_process.values()) == {CancelAnswer(200, "SUCCESS")}
    one_http = await rest.cancel(CancelBatch(3, entry[4:5]))
    one_sim = await sim.cancel(CancelBatch(4, entry[5:6]))
    assert [(a.code, a.filled) for a in one_http.values()] == [(200, D(0))]
    assert [(a.code, a.filled) for a in one_sim.values()] == [(200, D(0))]
    assert [a.order_id for a in one_http.values()] == [placed[4].order_id]
    assert [a.order_id for a in one_sim.values()] == [placed[5].order_id]
