"""The risk gate's reference price and market staleness: the kernel's one rule for every runtime.

A market order is valued at the mark, else the last market trade, else the pair's last own
fill, else the configured ``execution.risk.reference_prices`` entry (9005 with none and
``max_notional`` set); on a pair whose market feed is stale it is refused with 9007.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from framework import MatchRecord, OrderIntent, OrderStatus, OrderUpdate
from framework.config import parse_config
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.kernel import Kernel
from framework.engine.risk import FRAMEWORK_CODES, RiskSettings
from framework.venue.market import Book, IndexPrice, MarkPrice, Trade
from framework.yaml_attrs import ConfigProblems

T0 = 1_700_000_000_000
ETH, BTC = "ETH-USD", "BTC-USD"

BASE = """\
venue: {embedded: true}
pairs:
  ETH-USD: {min_notional: "1000000"}
  BTC-USD: {}
strategies:
  - name: s
    class: tests.engine.test_kernel:Fine
"""
"""ETH-USD's min_notional refuses every order (2317), and the text names the price that
valued it: the reference price of a market order, shown as its mark."""


class Desk:
    """A kernel on a virtual clock with its engine, fed market records and matches."""

    def __init__(self, extra: str = "") -> None:
        self.clock = VirtualClock(T0)
        self.kernel = Kernel(parse_config(BASE + extra, env={}), self.clock)
        self.kernel.build_engine(ids=ClientIdGenerator.ephemeral("t", now_ms=T0, random_bits=1))
        self.kernel.feeds("market", (Trade, Book, MarkPrice, IndexPrice, MatchRecord))
        self.updates: list[OrderUpdate] = []
        self.kernel.bus.subscribe(OrderUpdate, self.updates.append)

    def feed(self, record: object) -> None:
        """One record through the kernel's intake."""
        self.kernel.intake(record)

    def submit(self, pair: str = ETH, price: str | None = None) -> tuple[int | None, str | None]:
        """Submit a buy of 0.1 (market unless price); its refusal (code, msg), or (None, None)
        when it is let through."""
        limit = None if price is None else Decimal(price)
        coid = self.kernel.engine.submit(
            "s", OrderIntent(pair=pair, is_long=True, quantity=Decimal("0.1"), price=limit)
        )
        mine = [u for u in self.updates if u.client_order_id == coid]
        refused = [u for u in mine if u.status is OrderStatus.REJECTED]
        if refused:
            return refused[0].code, refused[0].msg
        return None, None

    def valued_at(self) -> str | None:
        """The price a market buy on ETH-USD is valued at, read from its 2317 refusal."""
        code, msg = self.submit()
        if code != 2317:
            return None
        assert msg is not None
        return msg.split(" x mark ")[1].split(" = ")[0]


def trade(price: str, pair: str = ETH) -> Trade:
    """A market trade of one unit."""
    return Trade(pair=pair, price=Decimal(price), quantity=Decimal(1))


def fill(price: str, pair: str = ETH, match_id: int = 1) -> MatchRecord:
    """A match of the account (an own fill), as the poller decodes it."""
    return MatchRecord(
        id=match_id, entrust_id=9, symbol=pair, is_long=True, quantity=Decimal("0.1"),
        average_price=Decimal(price),
    )  # fmt: skip


def test_the_reference_is_the_mark_then_the_last_trade_then_an_own_fill_then_configured() -> None:
    desk = Desk('execution: {risk: {reference_prices: {ETH-USD: "1500"}}}\n')
    assert desk.kernel.references.price(ETH) == Decimal(1500)
    assert desk.valued_at() == "1500"  # configured: nothing else yet
    desk.feed(fill("1800"))
    assert desk.valued_at() == "1800"  # an own fill beats the configured price
    desk.feed(trade("1900"))
    assert desk.valued_at() == "1900"  # a market trade beats the own fill
    desk.feed(fill("1850", match_id=2))
    assert desk.valued_at() == "1900"  # ...and a later fill does not replace it
    desk.feed(IndexPrice(pair=ETH, price=Decimal("1990")))
    assert desk.valued_at() == "1900"  # the index is no reference
    desk.feed(MarkPrice(pair=ETH, price=Decimal("1950")))
    assert desk.valued_at() == "1950"  # the mark beats everything
    desk.feed(trade("1960"))
    assert desk.valued_at() == "1950"
    assert desk.kernel.references.price(BTC) is None  # per pair


def test_a_limit_order_is_valued_at_its_own_price() -> None:
    desk = Desk()
    desk.feed(MarkPrice(pair=ETH, price=Decimal("1950")))
    code, msg = desk.submit(price="2000")
    assert code == 2317 and msg is not None and "x price 2000 =" in msg


def test_max_notional_values_a_market_order_at_the_reference_and_9005_when_there_is_none() -> None:
    desk = Desk('execution: {risk: {max_notional: "250"}}\n')
    code, msg = desk.submit(BTC)
    assert code == 9005 and msg == FRAMEWORK_CODES[9005].format(BTC)
    assert msg.startswith("No reference price for a market order on BTC-USD")
    desk.feed(fill("60000", pair=BTC))  # 0.1 x 60000 = 6000 > 250
    assert desk.submit(BTC) == (9004, "Open notional of BTC-USD would exceed 250")
    desk.feed(trade("2000", pair=BTC))  # 0.1 x 2000 = 200 <= 250
    assert desk.submit(BTC) == (None, None)


def test_the_fills_of_untraded_pairs_are_not_kept() -> None:
    desk = Desk()
    desk.feed(fill("5", pair="XRP-USD"))
    assert desk.kernel.references.price("XRP-USD") is None


def test_reference_prices_are_read_from_the_config_and_must_be_positive() -> None:
    assert RiskSettings(reference_prices={ETH: "2000"}).reference_prices == {ETH: Decimal(2000)}
    with pytest.raises(ValueError, match=r"risk.reference_prices.ETH-USD must be positive"):
        RiskSettings(reference_prices={ETH: "0"})
    with pytest.raises(ConfigProblems, match=r"execution.risk.reference_prices.ETH-USD"):
        parse_config(BASE + 'execution: {risk: {reference_prices: {ETH-USD: "x"}}}\n', env={})


STALE = """\
market:
  stale_after_s: 5
  pairs:
    ETH-USD: {channels: [trade]}
"""


def stale_text(heard: str) -> str:
    """The 9007 text of ETH-USD with a 5 s bound."""
    return FRAMEWORK_CODES[9007].format(ETH, heard, "5")


def test_a_market_order_on_a_stale_market_is_refused_until_a_fresh_record() -> None:
    desk = Desk(STALE)
    code, msg = desk.submit()
    assert (code, msg) == (9007, stale_text("no market data yet"))
    assert msg == (
        "Stale market data on ETH-USD: no market data yet, stale_after_s is 5 s"
        " (a market order needs a fresh price)"
    )
    desk.feed(trade("2000"))
    assert desk.valued_at() == "2000"  # fresh: on to the other checks
    desk.clock.advance(5000)
    assert desk.valued_at() == "2000"  # exactly the bound: not older than it yet
    desk.clock.advance(1)
    assert desk.submit() == (9007, stale_text("the latest is 5.001 s old"))
    desk.feed(trade("2010"))  # a fresh record
    assert desk.valued_at() == "2010"
    desk.clock.advance(7250)
    assert desk.submit() == (9007, stale_text("the latest is 7.25 s old"))


def test_a_limit_order_is_never_refused_as_stale() -> None:
    desk = Desk(STALE)
    assert desk.submit(price="2000")[0] == 2317  # the min_notional rule, not staleness
    assert desk.submit(price="10000000") == (None, None)  # 0.1 x 10000000: let through
    assert desk.submit()[0] == 9007  # while a market order is not


def test_a_pair_without_a_feed_is_never_stale() -> None:
    desk = Desk(STALE)
    desk.clock.advance(3_600_000)
    assert desk.submit(BTC) == (None, None)  # nothing feeds BTC-USD
    assert desk.kernel.references.stale(BTC) is None


def test_a_pair_override_of_stale_after_s_is_its_bound() -> None:
    desk = Desk(STALE.replace("{channels: [trade]}", "{channels: [trade], stale_after_s: 0.5}"))
    desk.feed(trade("2000"))
    desk.clock.advance(501)
    code, msg = desk.submit()
    assert code == 9007 and msg is not None
    assert "the latest is 0.501 s old, stale_after_s is 0.5 s" in msg


def test_without_a_market_section_nothing_is_stale() -> None:
    desk = Desk()
    desk.clock.advance(3_600_000)
    assert desk.kernel.references.stale(ETH) is None
    assert desk.submit() == (None, None)  # no reference either: min_notional is unchecked
