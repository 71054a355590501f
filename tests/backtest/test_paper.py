"""The paper venue: the twin's rules and codes, the recording's prices, pushes to the portfolio."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from framework.backtest.paper import (
    NO_PRICE,
    PAPER_ID_BASE,
    PaperSettings,
    PaperVenue,
)
from framework.backtest.prices import PriceTrack
from framework.backtest.scan import PricePoint
from framework.backtest.sim_venue import SimVenue
from framework.engine.bus import Bus
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.execution import ExecutionEngine, ExecutionSettings
from framework.engine.intents import OrderIntent
from framework.engine.portfolio import Portfolio, push_router
from framework.engine.venue import Executor
from framework.venue.errors import ConfigError, VenueError
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.rules import PairRules

D = Decimal


def order(
    cid: str,
    *,
    is_long: bool = True,
    quantity: str = "0.1",
    price: str | None = None,
    match_type: MatchType = MatchType.GTC,
) -> OrderInput:
    return OrderInput(
        client_order_id=cid,
        is_long=is_long,
        is_market=price is None,
        lever=10,
        match_type=match_type,
        pair_name="ETH-USD",
        position_type=PositionType.ISOLATED,
        price=None if price is None else D(price),
        quantity=D(quantity),
    )


def venue(
    points: list[tuple[int, str]], rules: PairRules | None = None, **settings: object
) -> tuple[PaperVenue, Portfolio]:
    portfolio = Portfolio()
    track = PriceTrack(PricePoint(ts, "ETH-USD", D(p), "matches") for ts, p in points)
    paper = PaperVenue(
        PaperSettings(**settings),  # type: ignore[arg-type]
        rules={"ETH-USD": rules or PairRules()},
        track=track,
        deliver=push_router(portfolio, Bus().publish),
        now_ms=lambda: 0,
    )
    return paper, portfolio


def test_a_market_order_fills_at_the_next_price_moved_by_slippage() -> None:
    paper, portfolio = venue([(1_000, "2000"), (5_000, "2100")], slippage=D("0.001"))
    results = paper.batch_create([order("a")], 900)
    assert results[0].client_order_id == "a" and results[0].order_id > PAPER_ID_BASE
    fill = paper.fills[0]
    assert (fill.price, fill.quantity, fill.is_taker) == (D("2002"), D("0.1"), True)
    assert fill.fee == D("2002") * D("0.1") * D("0.0005")
    assert portfolio.net_quantity("ETH-USD") == D("0.1")
    assert portfolio.available("USD") == D("100000") - D("20.02") - fill.fee


def test_last_price_mode_never_looks_ahead() -> None:
    paper, _ = venue([(1_000, "2000"), (2_000, "2100")], fill_price="last", slippage=D(0))
    with pytest.raises(VenueError) as refused:
        paper.batch_create([order("a")], 900)
    assert refused.value.code == NO_PRICE
    paper.apply_price("ETH-USD", D("2000"), 1_000)
    paper.batch_create([order("b")], 1_500)
    assert paper.fills[0].price == D("2000")


def test_next_price_mode_falls_back_to_the_last_price_beyond_max_wait() -> None:
    paper, _ = venue([(1_000, "2000"), (9_000, "2500")], max_wait_ms=100, slippage=D(0))
    paper.apply_price("ETH-USD", D("2000"), 1_000)
    paper.batch_create([order("a")], 2_000)
    assert paper.fills[0].price == D("2000")


def test_no_price_yet_is_refused_with_the_venues_code() -> None:
    paper, _ = venue([(10_000, "2000")])
    with pytest.raises(VenueError) as refused:
        paper.batch_create([order("a")], 0)
    assert refused.value.code == 2331
    assert refused.value.msg == "Market predict price was not obtained"


def test_pre_trade_codes_are_the_twins() -> None:
    paper, _ = venue([(0, "2000")], PairRules(min_quantity=D("0.05")))
    with pytest.raises(VenueError) as too_small:
        paper.batch_create([order("a", quantity="0.01")], 0)
    assert (too_small.value.code, too_small.value.msg) == (
        2301,
        "Quantity cannot be less than 0.05",
    )
    paper.batch_create([order("b", quantity="0.1")], 0)
    with pytest.raises(VenueError) as reverse:
        paper.batch_create([order("c", is_long=False, quantity="0.2")], 0)
    assert reverse.value.code == 2318
    with pytest.raises(VenueError) as places:
        paper.batch_create([order("d", quantity="0.1234")], 0)
    assert places.value.code == 2312
    assert paper.refusals == {2301: 1, 2312: 1, 2318: 1}


def test_a_partly_refused_batch_answers_the_accepted_orders_only() -> None:
    paper, _ = venue([(0, "2000")])
    results = paper.batch_create([order("ok"), order("bad", quantity="0.00001")], 0)
    assert [r.client_order_id for r in results] == ["ok"]


def test_a_resting_limit_order_fills_as_maker_when_a_price_crosses_it() -> None:
    paper, portfolio = venue([(0, "2000")], slippage=D(0))
    paper.batch_create([order("bid", price="1990")], 0)
    assert paper.fills == [] and portfolio.net_quantity("ETH-USD") == 0
    paper.apply_price("ETH-USD", D("1995"), 10)
    assert paper.fills == []
    paper.apply_price("ETH-USD", D("1989"), 20)
    (fill,) = paper.fills
    assert (fill.ts, fill.price, fill.is_taker) == (20, D("1990"), False)
    assert portfolio.net_quantity("ETH-USD") == D("0.1")
    matches = paper.take_matches()
    assert [m.average_price for m in matches] == [D("1990")]
    assert matches[0].id > PAPER_ID_BASE and matches[0].entrust_id == paper.fills[0].order_id
    assert paper.take_matches() == []


def test_pushes_carry_paper_ids_and_balances_add_up() -> None:
    paper, portfolio = venue([(0, "2000")], slippage=D(0))
    paper.batch_create([order("a", quantity="1")], 0)
    (position,) = portfolio.positions("ETH-USD")
    assert position.position_id is not None and position.position_id > PAPER_ID_BASE
    balance = portfolio.balance("USD")
    assert balance is not None and balance.log_id is not None and balance.log_id > PAPER_ID_BASE
    paper.apply_price("ETH-USD", D("2010"), 5)
    assert paper.unrealized() == {"ETH-USD": D("10")}
    assert paper.equity()["USD"] == D("100000") - paper.fills[0].fee + D("10")


def test_price_track_lookups() -> None:
    track = PriceTrack(
        [
            PricePoint(10, "X-USD", D(1), "csv"),
            PricePoint(20, "X-USD", D(2), "csv"),
            PricePoint(20, "Y-USD", D(7), "csv"),
        ]
    )
    assert track.last_at("X-USD", 9) is None
    assert track.last_at("X-USD", 10) == D(1) and track.last_at("X-USD", 25) == D(2)
    assert track.next_at("X-USD", 11, 9) == D(2) and track.next_at("X-USD", 11, 8) is None
    assert track.next_at("X-USD", 21, 1000) is None
    assert [(p.ts, p.pair) for p in track.points] == [(10, "X-USD"), (20, "X-USD"), (20, "Y-USD")]


def test_price_track_from_csv(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text(
        "time,ETH-USD,OTHER\n2024-01-01T00:00:00Z,2000.5,1\n"
        "2024-01-01T00:00:01,,2\n2024-01-01T00:00:02Z,2001,3\n"
    )
    track = PriceTrack.from_csv(path, ["ETH-USD"])
    assert [(p.ts, p.price) for p in track.points] == [
        (1_704_067_200_000, D("2000.5")),
        (1_704_067_202_000, D("2001")),
    ]
    path.write_text("ts,ETH-USD\n5,abc\n")
    with pytest.raises(ConfigError, match=r"p\.csv:2: ETH-USD 'abc' is not a positive number"):
        PriceTrack.from_csv(path, ["ETH-USD"])


def test_a_calls_answer_reaches_the_engine_before_the_pushes_of_what_it_did() -> None:
    # Live, a call's answer (ACCEPTED, CANCELED) usually comes before the stream's pushes of
    # what it did; the paper venue keeps that order, so a strategy's on_order runs first.
    seen: list[str] = []
    clock = VirtualClock(0)
    paper = PaperVenue(
        PaperSettings(),
        rules={"ETH-USD": PairRules()},
        track=PriceTrack([PricePoint(0, "ETH-USD", D("2000"), "matches")]),
        deliver=lambda push: seen.append(type(push).__name__),
        now_ms=clock.now_ms,
    )

    def engine(on_ready: Callable[[], None]) -> ExecutionEngine:
        return ExecutionEngine(
            ExecutionSettings(),
            rules={"ETH-USD": PairRules()},
            publish=lambda e: seen.append(f"{type(e).__name__} {getattr(e, 'status', '')}"),
            now_ms=clock.now_ms,
            ids=ClientIdGenerator.ephemeral("bt", now_ms=0, random_bits=1),
            on_ready=on_ready,
        )

    venue = SimVenue(paper, now_ms=clock.now_ms, schedule=lambda at, f: None)
    executor = Executor(engine, venue, start=venue.start)
    executor.engine.submit("s", OrderIntent(pair="ETH-USD", is_long=True, quantity=D("0.1")))
    executor.pump()
    assert seen == ["OrderUpdate ACCEPTED", "PositionPush", "AccountPush"]
    # A cancel's answer before the push of the balance it frees.
    bid = OrderIntent(pair="ETH-USD", is_long=True, quantity=D("0.1"), price=D("1900"))
    coid = executor.engine.submit("s", bid)
    executor.pump()
    seen.clear()
    assert executor.engine.cancel("s", coid)
    executor.pump()
    assert seen == ["OrderUpdate CANCELED", "AccountPush"]
