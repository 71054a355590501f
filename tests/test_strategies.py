"""The shipped strategies use the market: Ladder quotes around the book's mid, Pulse follows
the trades; each falls back to its old behaviour without market data (the sample backtest,
which has none, gives the same report as before)."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest

from framework import OrderIntent
from framework.config import parse_config
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import Timer
from framework.engine.kernel import Kernel
from framework.venue.market import Book, Trade
from strategies.ladder import Ladder
from strategies.pulse import Pulse

T0 = 1_700_000_000_000
LADDER = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
strategies:
  - name: ladder
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD, quantity: "0.01", spacing: "1", levels: 2}
"""
PULSE = """\
venue: {embedded: true}
pairs:
  BTC-USD: {}
execution: {risk: {kill_switch: true}}  # every order refused at once: the pulse acts again
strategies:
  - name: pulse
    class: strategies.pulse:Pulse
    params: {pair: BTC-USD, quantity: "0.01", start_long: true}
"""


class Run:
    """A kernel on a virtual clock running the config's one strategy; what it submits."""

    def __init__(self, config: str) -> None:
        self.clock = VirtualClock(T0)
        self.kernel = k = Kernel(parse_config(config, env={}), self.clock)
        engine = k.build_engine(ids=ClientIdGenerator.ephemeral("t", now_ms=T0, random_bits=1))
        self.intents: list[OrderIntent] = []

        def submit(strategy: str, intent: OrderIntent) -> str:
            self.intents.append(intent)
            return engine.submit(strategy, intent)

        self.timers: list[tuple[str, str, float]] = []  # the test fires them (pulse())

        def schedule(strategy: str, name: str, every_s: float) -> None:
            self.timers.append((strategy, name, every_s))

        (self.strategy,) = k.load_strategies(schedule=schedule, submit=submit)
        k.feeds("market", (Trade, Book))

    def grid(self) -> list[tuple[bool, Decimal | None]]:
        """The limit orders submitted so far (side, price), then forgotten."""
        out = [(i.is_long, i.price) for i in self.intents if i.price is not None]
        self.intents.clear()
        return out


def book(bid: str, ask: str) -> Book:
    """An ETH-USD book of one level a side."""
    return Book(
        pair="ETH-USD", bids=((Decimal(bid), Decimal(1)),), asks=((Decimal(ask), Decimal(1)),)
    )


def grid_around(centre: int) -> list[tuple[bool, Decimal | None]]:
    """Two buys below and two sells above centre, one apart, in the ladder's order."""
    return [(True, Decimal(centre - 2)), (True, Decimal(centre - 1)),
            (False, Decimal(centre + 1)), (False, Decimal(centre + 2))]  # fmt: skip


def test_the_ladder_builds_around_the_books_mid_without_a_probe() -> None:
    run = Run(LADDER)
    run.kernel.intake(book("1999.5", "2000.5"))  # mid 2000, heard before the start
    run.kernel.start()
    assert isinstance(run.strategy, Ladder)
    assert [i.price is None for i in run.intents] == [False] * 4  # no market order
    assert run.grid() == grid_around(2000) and run.strategy.reference == Decimal(2000)


def test_the_ladder_builds_on_the_first_book_and_recentres_when_the_mid_drifts() -> None:
    run = Run(LADDER)
    run.kernel.start()
    ladder = run.strategy
    assert isinstance(ladder, Ladder)
    (probe,) = run.intents  # no book yet: today's probe, a market order
    assert probe.price is None and ladder.reference is None
    run.intents.clear()
    run.kernel.intake(book("1999", "2001"))
    assert run.grid() == grid_around(2000)
    run.kernel.intake(book("2001", "2003"))  # mid 2002: within 3 spacings, the grid stays
    assert run.grid() == [] and ladder.reference == Decimal(2000)
    run.kernel.intake(book("2003", "2005"))  # mid 2004: re-centred on it
    assert run.grid() == grid_around(2004)
    assert ladder.recentred == 1 and ladder.reference == Decimal(2004)
    run.kernel.intake(Book(pair="ETH-USD", bids=(), asks=((Decimal(3000), Decimal(1)),)))
    assert run.grid() == [] and ladder.reference == Decimal(2004)  # no mid: nothing to do


def test_a_ladder_whose_pair_is_fed_builds_on_the_first_book_when_its_probe_is_stale(
    caplog: pytest.LogCaptureFixture,
) -> None:
    market = "market: {stale_after_s: 5, pairs: {ETH-USD: {channels: [depth]}}}\n"
    run = Run(LADDER + market)
    caplog.set_level(logging.INFO, "strategy.ladder")
    run.kernel.start()  # the probe is refused (9007): nothing heard yet
    assert "no market data yet: the ladder builds on the first book" in caplog.messages
    ladder = [r for r in caplog.records if r.name == "strategy.ladder"]
    assert not [r for r in ladder if r.levelno >= logging.WARNING]  # an expected refusal
    run.intents.clear()
    run.kernel.intake(book("1999", "2001"))
    assert run.grid() == grid_around(2000)


def pulse(run: Run) -> None:
    """The pulse timer fires (as the runtime's scheduler would publish it)."""
    run.kernel.bus.publish(Timer("pulse", "pulse", run.clock.now()))


def test_the_pulse_follows_the_trades_between_its_pulses() -> None:
    run = Run(PULSE)
    run.kernel.start()
    assert isinstance(run.strategy, Pulse) and run.timers == [("pulse", "pulse", 1.0)]
    btc = "BTC-USD"
    steps: list[str | None] = [None, "100", "99", "99", "101", None]  # a trade before a pulse
    for price in steps:
        if price is not None:
            run.kernel.intake(Trade(pair=btc, price=Decimal(price), quantity=Decimal(1)))
        pulse(run)
    # start_long; the first price; down; no move; up; no trade since: no move
    assert [i.is_long for i in run.intents] == [True, True, False, False, True, True]
    assert {i.price for i in run.intents} == {None}  # market orders, each refused (9001)


def test_the_pulse_without_trades_keeps_its_direction() -> None:
    run = Run(PULSE.replace("start_long: true", "start_long: false"))
    run.kernel.start()
    for _ in range(3):
        pulse(run)
    assert [i.is_long for i in run.intents] == [False] * 3
