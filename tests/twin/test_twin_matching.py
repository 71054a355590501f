"""The matching model: fills against the mark, slippage, GTC/IOC/FOK/POST_ONLY, liquidation."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from framework.sim.state import PairSettings
from framework.twin import VenueTwin
from framework.twin.settings import PriceSettings
from tests.twin.twin_client import Clock, TwinClient, order, settings

pytestmark = pytest.mark.anyio


async def last_match(trader: TwinClient) -> dict[str, Any]:
    matches = (await trader.matches())["data"]
    assert matches, "no match recorded"
    return matches[0]


async def test_market_orders_fill_at_the_mark_plus_or_minus_slippage(
    trader: TwinClient,
) -> None:
    await trader.batch([order("buy", quantity="0.5")])
    buy = await last_match(trader)
    assert buy["averagePrice"] == "2001"  # 2000 x 1.0005, rounded up to 2 decimals
    assert buy["isTaker"] is True and buy["isMarket"] is True and buy["isClose"] is False
    assert buy["tradeFee"] == "0.50025"  # 0.5 x 2001 x 0.0005
    await trader.batch([order("sell", long=False, quantity="0.5")])
    sell = await last_match(trader)
    assert sell["averagePrice"] == "1999"
    assert sell["isClose"] is True
    assert sell["profitLoss"] == "-1"  # (1999 - 2001) x 0.5


async def test_gtc_rests_then_fills_as_maker_when_the_mark_crosses(
    twin: VenueTwin, trader: TwinClient
) -> None:
    answer = await trader.batch(
        [order("bid", market=False, match_type=1, price="1990", quantity="1")]
    )
    assert answer["code"] == 200
    assert (await trader.matches())["data"] == []
    balance = (await trader.balance())["data"]
    # Reserve: 1 x 1990 / 10 margin + 1 x 1990 x 0.0002 maker fee.
    assert balance["frozenAmount"] == "199.398"
    twin.set_mark("ETH-USD", Decimal("1995"))
    assert (await trader.matches())["data"] == []
    twin.set_mark("ETH-USD", Decimal("1989.5"))
    fill = await last_match(trader)
    assert (fill["averagePrice"], fill["isTaker"], fill["tradeFee"]) == ("1990", False, "0.398")
    assert fill["entrustId"] == answer["data"][0]["orderId"]
    balance = (await trader.balance())["data"]
    assert balance["frozenAmount"] == "199"
    assert twin.exchange.resting_orders("ETH-USD") == []


async def test_marketable_limit_fills_no_worse_than_its_price(trader: TwinClient) -> None:
    await trader.batch([order("lim", market=False, match_type=1, price="2000.5", quantity="1")])
    fill = await last_match(trader)
    assert fill["averagePrice"] == "2000.5"
    assert fill["isTaker"] is True


async def test_ioc_that_does_not_cross_is_accepted_without_a_fill(trader: TwinClient) -> None:
    answer = await trader.batch([order("ioc", market=False, match_type=2, price="1900")])
    assert answer["data"][0]["corderId"] == "ioc"
    assert (await trader.matches())["data"] == []
    assert (await trader.positions())["data"] == []


async def test_fok_is_all_or_nothing_against_the_liquidity(make_twin: Callable[..., Any]) -> None:
    pairs = {"ETH-USD": PairSettings(initial_price=Decimal("2000"), liquidity=Decimal("1"))}
    async with make_twin(pairs=pairs) as (_, trader):
        assert (await trader.batch([order("fok", match_type=3, quantity="2")]))["code"] == 200
        assert (await trader.matches())["data"] == []
        await trader.batch([order("fok2", match_type=3, quantity="1")])
        assert (await last_match(trader))["quantity"] == "1"
        await trader.batch([order("ioc", match_type=2, quantity="1.5")])
        assert (await last_match(trader))["quantity"] == "1"  # the rest is dropped
        positions = (await trader.positions())["data"]
        assert positions[0]["quantity"] == "2"


async def test_post_only_that_does_not_cross_rests(twin: VenueTwin, trader: TwinClient) -> None:
    answer = await trader.batch([order("po", market=False, match_type=4, price="1950")])
    assert answer["code"] == 200
    assert len(twin.exchange.resting_orders("ETH-USD")) == 1


async def test_post_only_crossing_can_be_cancelled_instead(make_twin: Callable[..., Any]) -> None:
    async with make_twin(post_only_crossing="cancel") as (twin, trader):
        answer = await trader.batch([order("po", market=False, match_type=4, price="2100")])
        assert answer["code"] == 200
        assert (await trader.matches())["data"] == []
        assert twin.exchange.resting_orders("ETH-USD") == []


async def test_isolated_position_is_liquidated_when_the_mark_crosses_its_price(
    twin: VenueTwin, trader: TwinClient
) -> None:
    await trader.batch([order("long", lever=50, quantity="1")])
    position = (await trader.positions())["data"][0]
    liquidation = Decimal(position["restrictPrice"])
    assert liquidation < Decimal("2000")
    twin.set_mark("ETH-USD", liquidation + 1)
    assert (await trader.positions())["data"] != []
    twin.set_mark("ETH-USD", liquidation - 1)
    assert (await trader.positions())["data"] == []
    fill = await last_match(trader)
    assert fill["isClose"] is True and fill["isLong"] is False
    # The loss is capped at the margin: nothing else of the balance is touched.
    assert Decimal(fill["profitLoss"]) >= -Decimal(position["marginAmount"])


async def test_cross_positions_liquidate_only_when_the_account_runs_out(
    twin: VenueTwin, trader: TwinClient
) -> None:
    await trader.batch([order("long", lever=50, quantity="100", position_type=4)])
    position = (await trader.positions())["data"][0]
    assert position["restrictPrice"] is None
    twin.set_mark("ETH-USD", Decimal("1900"))  # an isolated 50x long would be gone already
    assert (await trader.positions())["data"] != []
    twin.set_mark("ETH-USD", Decimal("1100"))  # a 90100 USD loss: still covered
    assert (await trader.positions())["data"] != []
    twin.set_mark("ETH-USD", Decimal("1000"))
    assert (await trader.positions())["data"] == []
    balance = (await trader.balance())["data"]
    assert Decimal(balance["availableAmount"]) >= 0
    assert balance["frozenAmount"] == "0"


async def test_random_walk_is_reproducible_with_a_seed(clock: Clock) -> None:
    walks = []
    for _ in range(2):
        twin = VenueTwin(settings(seed=42), port=0, clock=clock)
        twin.step(50)
        walks.append((twin.mark("ETH-USD"), twin.mark("BTC-USD")))
    assert walks[0] == walks[1]
    assert walks[0] != (Decimal("2000"), Decimal("60000"))
    other = VenueTwin(settings(seed=43), port=0, clock=clock)
    other.step(50)
    assert (other.mark("ETH-USD"), other.mark("BTC-USD")) != walks[0]


async def test_csv_price_track_replays_its_rows(tmp_path: Path, clock: Clock) -> None:
    track = tmp_path / "track.csv"
    track.write_text("time,ETH-USD,BTC-USD\n0,2000,60000\n1,2010.5,\n2,1990,60100\n")
    prices = PriceSettings(model="csv", csv_path=str(track), tick_interval=0, loop=False)
    twin = VenueTwin(settings(prices=prices), port=0, clock=clock)
    assert twin.mark("ETH-USD") == Decimal("2000")
    twin.step()
    assert (twin.mark("ETH-USD"), twin.mark("BTC-USD")) == (Decimal("2010.5"), Decimal("60000"))
    twin.step(5)
    assert (twin.mark("ETH-USD"), twin.mark("BTC-USD")) == (Decimal("1990"), Decimal("60100"))


async def test_background_ticks_move_the_mark(make_twin: Callable[..., Any]) -> None:
    from tests.waiting import eventually

    async with make_twin(prices=PriceSettings(tick_interval=0.01, max_step_ticks=50)) as (
        twin,
        _,
    ):
        start = twin.mark("ETH-USD")
        await eventually(lambda: twin.mark("ETH-USD") != start)
