"""The kernel: one build of bus, portfolio, engine and strategies for every runtime."""

from __future__ import annotations

from decimal import Decimal

import pytest

from framework import OrderIntent, Strategy
from framework.config import parse_config
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import OrderUpdate, Started
from framework.engine.kernel import Kernel, StrategyBuildError
from framework.venue.market import Bar, Book, IndexPrice, MarkPrice, Trade

CONFIG = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
strategies:
  - name: fine
    class: tests.engine.test_kernel:Fine
    params: {pair: ETH-USD}
  - name: broken
    class: tests.engine.test_kernel:Broken
    params: {pair: ETH-USD}
"""


class Fine(Strategy):
    """Submits one limit buy at on_start; records its updates."""

    def on_start(self) -> None:
        self.updates: list[OrderUpdate] = []
        self.submit(
            OrderIntent(
                pair="ETH-USD", is_long=True, quantity=Decimal("0.1"), price=Decimal("1900")
            )
        )

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update)


class Broken(Strategy):
    """Raises in its constructor."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise ValueError("boom in __init__")


def kernel(text: str = CONFIG) -> Kernel:
    """A kernel on a virtual clock with an engine."""
    clock = VirtualClock(1_700_000_000_000)
    k = Kernel(parse_config(text, env={}), clock)
    k.build_engine(ids=ClientIdGenerator.ephemeral("t", now_ms=clock.ms, random_bits=1))
    return k


def test_a_strategy_that_cannot_be_built_is_one_line_naming_it() -> None:
    with pytest.raises(StrategyBuildError) as err:
        kernel().load_strategies(schedule=None)
    line = Broken.__init__.__code__.co_firstlineno + 1
    assert str(err.value) == (
        f"strategies[1] (broken): ValueError: boom in __init__ (at test_kernel.py:{line})"
    )


def test_strategies_get_on_start_from_the_kernel_and_submit_through_its_engine() -> None:
    k = kernel(CONFIG.split("  - name: broken")[0])
    (fine,) = k.load_strategies(schedule=None)
    seen: list[object] = []
    k.bus.subscribe(Started, seen.append)
    assert k.start() == 0  # no journal: nothing to recover
    assert len(seen) == 1 and isinstance(fine, Fine)
    batch = k.engine.next_batch()
    assert batch is not None and len(batch.orders) == 1
    assert k.close() == 0  # the batch is in flight, nothing queued
    refused = k.engine.submit("fine", OrderIntent(pair="ETH-USD", is_long=True,
                                                  quantity=Decimal("0.1")))  # fmt: skip
    assert [(u.client_order_id, u.code) for u in fine.updates] == [(refused, 9013)]


class Listener(Strategy):
    """Keeps the market records its hooks hear, and what self.market says at each."""

    def on_start(self) -> None:
        self.heard: list[object] = []
        self.lasts: list[object] = []

    def on_trade(self, trade: Trade) -> None:
        self.heard.append(trade)
        self.lasts.append(self.market.last(trade.pair))

    def on_book(self, book: Book) -> None:
        self.heard.append(book)

    def on_bar(self, bar: Bar) -> None:
        self.heard.append(bar)

    def on_mark(self, mark: MarkPrice) -> None:
        self.heard.append(mark)
        self.lasts.append(self.market.reference_price(mark.pair))


ONE, TWO = Decimal(1), Decimal(2)
MARKET = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
  BTC-USD: {}
strategies:
  - name: eth
    class: tests.engine.test_kernel:Listener
    params: {pair: ETH-USD}
"""


def test_market_records_reach_the_hooks_of_their_pair_and_self_market() -> None:
    k = kernel(MARKET)
    (listener,) = k.load_strategies(schedule=None)
    assert isinstance(listener, Listener)
    k.start()
    k.feeds("market", (Trade, Book, Bar, MarkPrice, IndexPrice))
    eth = [
        Trade(pair="ETH-USD", price=Decimal("2001"), quantity=Decimal("1"), time=2),
        Trade(pair="ETH-USD", price=Decimal("2000"), quantity=Decimal("1"), time=1),  # older
        Book(pair="ETH-USD", bids=((Decimal(1999), Decimal(1)),), asks=(), time=3),
        Bar(pair="ETH-USD", period="1MIN", open=ONE, high=TWO, low=ONE, close=TWO),
        MarkPrice(pair="ETH-USD", price=Decimal("2002.5")),
    ]
    btc = Trade(pair="BTC-USD", price=Decimal("60000"), quantity=Decimal("1"))
    for record in [eth[0], btc, *eth[1:], IndexPrice(pair="ETH-USD", price=Decimal("2003"))]:
        k.intake(record)
    assert listener.heard == eth  # every record of its pair, in order; BTC's not
    assert listener.lasts == [Decimal("2001"), Decimal("2001"), Decimal("2002.5")]
    assert k.market.last("BTC-USD") == Decimal("60000")  # the view keeps every pair
    assert k.market.index("ETH-USD") == Decimal("2003")  # no hook: the view takes it
    assert k.market.book("ETH-USD") == eth[2]
