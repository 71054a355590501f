"""The limits a trader expects: net position, lever and open orders per pair (9014-9016).

Pure engine tests: the position is a dict the test moves the way pushes move the portfolio,
matches go through ``engine.attribute`` the way the match poll hands them over.
"""

from __future__ import annotations

from decimal import Decimal

import attrs
import pytest

from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import Event, OrderUpdate
from framework.engine.execution import ExecutionEngine, ExecutionSettings
from framework.engine.intents import MatchType, OrderIntent, OrderStatus
from framework.engine.risk import MAX_LEVER, MAX_OPEN_ORDERS, MAX_POSITION, RiskSettings
from framework.venue.models import MatchRecord, OrderResult
from framework.venue.rules import PairRules

ETH = "ETH-USD"
START_MS = 1_700_000_000_000
RULES = PairRules(quantity_decimals=3, min_quantity=Decimal("0.01"), max_lever=20)


@attrs.define
class Node:
    """An engine with limits, a position the test sets, and a fake venue's answers."""

    engine: ExecutionEngine
    clock: VirtualClock
    events: list[Event]
    position: dict[str, Decimal]
    order_ids: dict[str, int] = attrs.Factory(dict)
    next_match: int = 1

    def submit(self, qty: str, *, long: bool = True, price: str | None = None, **kw: object) -> str:
        """Submit an intent on ETH-USD (a market order unless price is given)."""
        intent = OrderIntent(
            pair=ETH,
            is_long=long,
            quantity=Decimal(qty),
            price=None if price is None else Decimal(price),
            **kw,  # type: ignore[arg-type]
        )
        return self.engine.submit("s", intent)

    def refusals(self) -> list[tuple[int | None, str | None]]:
        """(code, msg) of every REJECTED update so far."""
        return [
            (e.code, e.msg)
            for e in self.events
            if isinstance(e, OrderUpdate) and e.status is OrderStatus.REJECTED
        ]

    def send_and_accept(self) -> None:
        """Send every due batch and answer it: every order accepted."""
        while (batch := self.engine.next_batch()) is not None:
            self.engine.begin_send(batch)
            results = []
            for order in batch.orders:
                self.order_ids[order.client_order_id] = oid = 1000 + len(self.order_ids)
                results.append(OrderResult(client_order_id=order.client_order_id, order_id=oid))
            self.engine.on_results(batch, results)

    def fill(self, cid: str, qty: str, *, long: bool = True) -> None:
        """The match poll reads a fill of cid's order."""
        match = MatchRecord(
            id=self.next_match,
            entrust_id=self.order_ids[cid],
            symbol=ETH,
            is_long=long,
            quantity=Decimal(qty),
            average_price=Decimal("2000"),
        )
        self.next_match += 1
        event = self.engine.attribute(match)
        assert event is not None and event.match.client_order_id == cid

    def push(self, signed: str) -> None:
        """A position push: the portfolio's net position of ETH-USD is now signed."""
        self.position[ETH] = Decimal(signed)


def node(**limits: object) -> Node:
    """An engine on ETH-USD with these risk limits and a flat position."""
    clock = VirtualClock(START_MS)
    events: list[Event] = []
    position: dict[str, Decimal] = {}
    engine = ExecutionEngine(
        ExecutionSettings(risk=RiskSettings(**limits), calls_per_second=1000.0),  # type: ignore[arg-type]
        rules={ETH: RULES},
        publish=events.append,
        now_ms=clock.now_ms,
        ids=ClientIdGenerator.ephemeral("r", now_ms=START_MS, random_bits=1),
        mark_price=lambda pair: Decimal("2000"),
        position=lambda pair: position.get(pair, Decimal(0)),
    )
    return Node(engine, clock, events, position)


# -- max_position (9014) ------------------------------------------------------------------------


def test_max_position_counts_the_position_the_unfilled_orders_of_the_side_and_the_intent() -> None:
    n = node(max_position="0.04")
    n.push("0.02")
    n.submit("0.01")  # 0.02 + 0 + 0.01 = 0.03
    n.submit("0.01", price="1990")  # 0.02 + 0.01 + 0.01 = 0.04: at the limit, passes
    assert n.refusals() == []
    n.submit("0.01")  # 0.02 + 0.02 + 0.01 = 0.05
    assert n.refusals() == [
        (
            MAX_POSITION,
            "Position of ETH-USD could reach 0.05: position 0.02, unfilled buys 0.02,"
            " this buy 0.01; max_position is 0.04",
        )
    ]
    # Sells on the other side do not count for a buy (they may never fill) ...
    n.submit("0.05", long=False, price="2100")
    n.submit("0.01")
    assert len(n.refusals()) == 2
    # ... and a sell is checked on its own side: 0.02 - 0.05 - 0.01 = -0.04 passes.
    n.submit("0.01", long=False, price="2100")
    assert len(n.refusals()) == 2
    n.submit("0.01", long=False, price="2100")  # -0.05
    assert n.refusals()[-1] == (
        MAX_POSITION,
        "Position of ETH-USD could reach -0.05: position 0.02, unfilled sells 0.06,"
        " this sell 0.01; max_position is 0.04",
    )


def test_an_order_that_reduces_the_position_passes_one_that_flips_past_the_limit_does_not() -> None:
    n = node(max_position="0.04")
    n.push("-0.1")  # beyond the limit already (opened before it was set)
    n.submit("0.1")  # back to flat
    assert n.refusals() == []
    n.submit("0.05")  # -0.1 + 0.1 + 0.05 = 0.05 > 0.04
    assert [c for c, _ in n.refusals()] == [MAX_POSITION]
    n.submit("0.01", long=False)  # further short: -0.11
    assert [c for c, _ in n.refusals()] == [MAX_POSITION, MAX_POSITION]


def test_a_resting_order_counts_what_has_not_filled_of_it() -> None:
    n = node(max_position="0.04")
    cid = n.submit("0.03", price="1990")
    n.send_and_accept()
    n.fill(cid, "0.01")
    n.push("0.01")  # position 0.01, 0.02 of the order unfilled: 0.03 held or could be
    n.submit("0.01")
    assert n.refusals() == []
    n.submit("0.01")  # 0.01 + 0.02 + 0.01 + 0.01 = 0.05
    assert [c for c, _ in n.refusals()] == [MAX_POSITION]


def test_a_fill_read_before_its_position_push_still_counts() -> None:
    # The match is listed before the push (the stream lags): the order is FILLED and leaves
    # the open orders while the portfolio still shows no position. Without the tally the
    # next buy saw 0 + 0 + 0.01 and passed: the position could reach 0.05.
    n = node(max_position="0.04")
    cid = n.submit("0.04")
    n.send_and_accept()
    n.fill(cid, "0.04")
    assert n.engine.status(cid) is None  # FILLED: no longer tracked
    n.submit("0.01")
    assert n.refusals() == [
        (
            MAX_POSITION,
            "Position of ETH-USD could reach 0.05: position 0.04, unfilled buys 0,"
            " this buy 0.01; max_position is 0.04",
        )
    ]
    n.push("0.04")  # the push arrives: one fill, counted once (not 0.08)
    n.submit("0.01")
    assert n.refusals()[-1] == n.refusals()[0]
    n.submit("0.04", long=False)  # 0.04 - 0 - 0.04 = 0: a sell passes
    assert len(n.refusals()) == 2


def test_a_position_push_before_its_match_is_counted_once_after_the_match() -> None:
    n = node(max_position="0.04")
    cid = n.submit("0.03")
    n.send_and_accept()
    n.push("0.03")  # the push first: the order is still unfilled for the engine
    n.submit("0.01")  # 0.03 + 0.03 + 0.01: counted twice until its match is read
    assert [c for c, _ in n.refusals()] == [MAX_POSITION]
    n.fill(cid, "0.03")
    n.submit("0.01")  # 0.03 + 0 + 0.01 = 0.04
    assert len(n.refusals()) == 1


def test_a_fill_the_portfolio_never_shows_is_forgotten_after_the_window() -> None:
    n = node(max_position="0.04")
    cid = n.submit("0.04")
    n.send_and_accept()
    n.fill(cid, "0.04")
    n.submit("0.01")
    assert len(n.refusals()) == 1
    n.clock.advance(60_001)  # unknown_window_s (60 s) with neither moving: the portfolio wins
    n.submit("0.01")
    assert len(n.refusals()) == 1


def test_max_position_refuses_at_once_orders_queued_in_one_call_stack() -> None:
    n = node(max_position="0.04")
    for _ in range(6):
        n.submit("0.01")
    assert [c for c, _ in n.refusals()] == [MAX_POSITION, MAX_POSITION]
    batch = n.engine.next_batch()
    assert batch is not None and len(batch.orders) == 4


# -- max_lever (9015) ---------------------------------------------------------------------------


def test_max_lever_refuses_a_higher_lever() -> None:
    n = node(max_lever=5)
    n.submit("0.01", lever=5)
    assert n.refusals() == []
    n.submit("0.01", lever=6)
    assert n.refusals() == [(MAX_LEVER, "Lever 6 is above max_lever 5")]


def test_the_venues_lever_bound_comes_first() -> None:
    n = node(max_lever=5)
    n.submit("0.01", lever=21)
    assert [c for c, _ in n.refusals()] == [2304]


# -- max_open_orders (9016) ---------------------------------------------------------------------


def test_max_open_orders_counts_unanswered_and_resting_orders() -> None:
    n = node(max_open_orders=3)
    first = n.submit("0.01", price="1990")
    n.submit("0.01", price="1980")
    n.send_and_accept()  # both rest
    n.submit("0.01", price="1970")  # unanswered: the third
    n.submit("0.01", price="1960")
    assert n.refusals() == [
        (MAX_OPEN_ORDERS, "Open orders of ETH-USD would exceed max_open_orders 3")
    ]
    n.engine.cancel("s", first)  # a cancel that is not answered yet: still open
    n.submit("0.01", price="1960")
    assert len(n.refusals()) == 2
    n.send_and_accept()
    n.fill(first, "0.01")  # filled: no longer open
    n.submit("0.01", price="1960")
    assert len(n.refusals()) == 2


def test_an_accepted_market_or_ioc_order_is_not_an_open_order() -> None:
    n = node(max_open_orders=1)
    n.submit("0.01")
    n.send_and_accept()
    n.submit("0.01", price="2000", match_type=MatchType.IOC)
    n.send_and_accept()
    n.submit("0.01", price="1990")
    assert n.refusals() == []
    n.submit("0.01")
    assert [c for c, _ in n.refusals()] == [MAX_OPEN_ORDERS]


# -- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["max_position", "max_lever", "max_open_orders"])
def test_risk_settings_refuse_zero_and_negative(field: str) -> None:
    for bad in (0, -1):
        with pytest.raises(ValueError, match=f"risk.{field} must be positive or null"):
            RiskSettings(**{field: bad})  # type: ignore[arg-type]


def test_without_limits_nothing_is_refused() -> None:
    n = node()
    for _ in range(50):
        n.submit("1")
    assert n.refusals() == []


def test_a_sell_read_before_its_push_counts_for_the_next_sell_not_against_a_buy() -> None:
    n = node(max_position="0.04")
    cid = n.submit("0.04", long=False)
    n.send_and_accept()
    n.fill(cid, "0.04", long=False)  # the portfolio still shows flat
    n.submit("0.01", long=False)  # -0.04 - 0 - 0.01
    assert [c for c, _ in n.refusals()] == [MAX_POSITION]
    assert "could reach -0.05: position -0.04, unfilled sells 0" in (n.refusals()[0][1] or "")
    n.submit("0.04")  # a buy counts the higher view (flat): 0 + 0 + 0.04 passes
    assert len(n.refusals()) == 1
