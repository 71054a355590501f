"""Order truth for resting orders: a fill is never bound to another intent's order.

Every open-order list is evidence (an UNKNOWN or LOST intent it names by clientOrderId is
ACCEPTED with the list's orderId); a LOST intent that may rest stays a possible owner of
same-looking matches; a CANCELED order's late match still names it and raises what has filled.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from framework.engine.cancels import CancelAnswer
from framework.engine.clock import VirtualClock
from framework.engine.events import CancelRejected, OrderUpdate
from framework.engine.execution import ExecutionEngine
from framework.engine.intents import OrderStatus
from framework.engine.risk import RiskSettings
from framework.live.journal import Journal
from framework.venue.models import MatchRecord
from tests.engine.test_cancels import Record, accepted, unknown, updates
from tests.engine.test_risk import engine_with, order
from tests.live.test_journal import START_MS, engine_on, in_doubt

WINDOW_MS = 60_000  # ExecutionSettings.unknown_window_s's default


def match(match_id: int, order_id: int, quantity: str = "0.1", price: str = "2000") -> MatchRecord:
    """A long ETH-USD match of order_id."""
    return MatchRecord(
        id=match_id,
        entrust_id=order_id,
        symbol="ETH-USD",
        is_long=True,
        quantity=Decimal(quantity),
        average_price=Decimal(price),
    )


def gone_lost(engine: ExecutionEngine, clock: object) -> str:
    """An UNKNOWN intent (0.1 long at 2000, GTC) whose window passes with no evidence: LOST."""
    coid = unknown(engine)
    clock.advance(WINDOW_MS)  # type: ignore[attr-defined]
    engine.tick()
    assert engine.lost_count >= 1
    return coid


def test_a_lost_order_the_list_names_is_accepted_open_and_cancellable() -> None:
    # Measured: a LOST order every list named rested to the end, and cancel() said 9020.
    engine, events, clock = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    coid = gone_lost(engine, clock)
    # Not an open order (nothing says it rests), but counted by the risk limits: it may rest.
    assert engine.open_orders() == [] and engine.open_quantity("ETH-USD") == Decimal("0.1")
    counts = engine.check_open_orders("ETH-USD", [Record(coid, 5000089, Decimal(0), "open")])
    assert counts["adopted"] == 1
    assert updates(events)[-2:] == [(coid, OrderStatus.LOST), (coid, OrderStatus.ACCEPTED)]
    (order,) = engine.open_orders()
    assert (order.client_order_id, order.order_id) == (coid, 5000089)
    assert engine.open_quantity("ETH-USD") == Decimal("0.1")  # booked once: it rests
    assert engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None and batch.order_ids == [5000089]
    engine.on_cancel_answers(batch, {5000089: CancelAnswer(200, filled=Decimal(0))})
    assert updates(events)[-1] == (coid, OrderStatus.CANCELED)
    assert engine.open_quantity("ETH-USD") == 0


def test_a_match_of_a_lost_orders_looks_is_never_bound_to_a_younger_unknown_one() -> None:
    # Measured: order A went LOST while resting; its fill was bound to the younger UNKNOWN
    # intent B ("the only in-doubt intent it agrees with"), reported FILLED with A's orderId.
    engine, events, clock = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    a = gone_lost(engine, clock)
    b = unknown(engine)
    found = engine.attribute(match(1, 5000089))
    assert found is not None and found.match.client_order_id is None
    assert set(found.candidates) == {a, b}
    assert (b, OrderStatus.FILLED) not in updates(events)
    clock.advance(WINDOW_MS)
    engine.tick()  # the group's window ends: settled by count, never named
    ambiguous = [e for e in events if isinstance(e, OrderUpdate) and e.status.name == "AMBIGUOUS"]
    assert {e.client_order_id for e in ambiguous} == {a, b}
    assert {e.group_filled for e in ambiguous} == {1}


def test_a_list_naming_the_owner_of_a_counted_match_gives_it_that_match() -> None:
    engine, events, _clock = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    a, b = unknown(engine), unknown(engine)
    engine.attribute(match(1, 700))  # counted for the group {a, b}
    engine.check_open_orders(
        "ETH-USD", [Record(a, 700, Decimal("0.1"), "open"), Record(b, 701, Decimal(0), "open")]
    )
    assert updates(events)[-3:] == [
        (a, OrderStatus.ACCEPTED),
        (a, OrderStatus.FILLED),
        (b, OrderStatus.ACCEPTED),
    ]
    assert engine.unknown_count == 0
    later = engine.attribute(match(2, 700, "0"))  # order 700's: a's, by its orderId
    assert later is not None and later.match.client_order_id == a


def test_a_match_priced_beyond_the_only_unknown_orders_limit_is_not_its_fill() -> None:
    engine, events, _clock = engine_with()
    coid = unknown(engine)  # long at most 2000
    found = engine.attribute(match(1, 700, price="2001"))
    assert found is not None and found.external
    assert updates(events)[-1] == (coid, OrderStatus.UNKNOWN)
    resolved = engine.attribute(match(2, 701, price="1999.5"))
    assert resolved is not None and resolved.match.client_order_id == coid


def test_a_lost_order_is_cancelled_by_its_client_order_id() -> None:
    engine, events, clock = engine_with()
    coid = gone_lost(engine, clock)
    assert engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None and batch.by_client_id and batch.client_order_ids == [coid]
    engine.on_cancel_answers(batch, {coid: CancelAnswer(200, order_id=900)})
    assert updates(events)[-1] == (coid, OrderStatus.CANCELED)
    assert engine.lost_count == 0
    late = engine.attribute(match(1, 900, "0.02"))  # a fill listed after the cancel
    assert late is not None and late.match.client_order_id == coid


def test_a_lost_order_that_never_reached_the_venue_keeps_its_state_at_a_refused_cancel() -> None:
    engine, events, clock = engine_with()
    coid = gone_lost(engine, clock)
    engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {coid: CancelAnswer(2340, "Order not found")})
    assert [(e.client_order_id, e.code) for e in events if isinstance(e, CancelRejected)] == [
        (coid, 2340)
    ]
    assert updates(events)[-1] == (coid, OrderStatus.LOST) and engine.lost_count == 1


def test_a_list_that_lacks_a_lost_order_ends_its_candidacy_one_window_later() -> None:
    engine, events, clock = engine_with()
    a = gone_lost(engine, clock)
    engine.check_open_orders("ETH-USD", [], asked_ms=clock.now_ms())
    clock.advance(WINDOW_MS)
    engine.tick()
    assert engine.lost_count == 0
    b = unknown(engine)
    found = engine.attribute(match(1, 700))  # b alone could own it now
    assert found is not None and found.match.client_order_id == b
    assert a not in {c for c, _ in updates(events)[-1:]}


def test_a_lost_order_stays_a_candidate_for_lost_memory_then_is_forgotten() -> None:
    engine, _events, clock = engine_with()
    gone_lost(engine, clock)
    clock.advance(3_600_000 - 1)
    engine.tick()
    assert engine.lost_count == 1
    clock.advance(1)
    engine.tick()
    assert engine.lost_count == 0


def test_a_late_match_of_a_cancelled_order_names_it_and_raises_what_has_filled() -> None:
    engine, events, _clock = engine_with()
    (coid,) = accepted(engine, 1)  # 0.1, order 100
    engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {100: CancelAnswer(200)})  # no filled quantity
    msg = [e.msg for e in events if isinstance(e, OrderUpdate)][-1] or ""
    assert "filled 0 " not in msg and "0 of 0.1 known to have filled" in msg
    late = engine.attribute(match(1, 100, "0.04"))
    assert late is not None and late.match.client_order_id == coid and late.strategy == "s"
    assert updates(events)[-1] == (coid, OrderStatus.CANCELED)  # nothing follows CANCELED


def refused(engine: ExecutionEngine, events: list[object], **changes: object) -> int | None:
    """Submit one more intent (0.1 long at 2000 unless changed): its refusal code, or None."""
    before = len(events)
    coid = engine.submit("s", order(**changes))
    codes = [e.code for e in events[before:] if isinstance(e, OrderUpdate)
             and e.client_order_id == coid and e.status is OrderStatus.REJECTED]  # fmt: skip
    return codes[0] if codes else None


@pytest.mark.parametrize(
    ("limits", "code"),
    [
        (RiskSettings(max_open_orders=1), 9016),
        (RiskSettings(max_open_quantity=Decimal("0.15")), 9003),
        (RiskSettings(max_notional=Decimal(300)), 9004),
        (RiskSettings(max_position=Decimal("0.15")), 9014),
    ],
)
def test_a_lost_order_counts_in_the_risk_limits_while_it_may_rest(
    limits: RiskSettings, code: int
) -> None:
    # Before: LOST was counted by none of the limits, so an order that may rest at the venue
    # let a strategy place as much again.
    engine, events, clock = engine_with(limits)
    gone_lost(engine, clock)
    assert refused(engine, events) == code
    if code == 9014:  # the other side only reduces the position: it passes
        assert refused(engine, events, is_long=False) is None
    clock.advance(3_600_000)  # lost_memory_s: no longer a possible owner, nor counted
    engine.tick()
    assert engine.lost_count == 0
    assert refused(engine, events, quantity=Decimal("0.01")) is None


def test_a_lost_order_a_list_lacks_is_counted_one_window_more_then_given_back() -> None:
    engine, events, clock = engine_with(RiskSettings(max_open_quantity=Decimal("0.15")))
    gone_lost(engine, clock)
    engine.check_open_orders("ETH-USD", [], asked_ms=clock.now_ms())  # it does not rest
    assert engine.open_quantity("ETH-USD") == Decimal("0.1")  # its fills may still be listed
    clock.advance(WINDOW_MS)
    engine.tick()
    assert engine.open_quantity("ETH-USD") == 0 and refused(engine, events) is None


def test_a_lost_orders_fill_gives_back_what_it_held() -> None:
    engine, events, clock = engine_with(RiskSettings(max_open_quantity=Decimal("0.15")))
    coid = gone_lost(engine, clock)
    found = engine.attribute(match(1, 700, "0.1"))  # the only intent in doubt that could own it
    assert found is not None and found.match.client_order_id == coid
    assert engine.open_quantity("ETH-USD") == 0 and refused(engine, events) is None


def test_a_lost_order_read_back_at_restart_is_counted_again(tmp_path: Path) -> None:
    path, clock = tmp_path / "j.db", VirtualClock(START_MS)
    limits = RiskSettings(max_open_quantity=Decimal("0.15"))

    def life() -> tuple[Journal, ExecutionEngine]:
        journal = Journal.open(path)
        engine = engine_on(journal, clock, [], risk=limits)
        engine.restore()
        engine.recover()
        return journal, engine

    in_doubt(path, clock)  # life 1: its answer lost
    journal, engine = life()
    clock.advance(WINDOW_MS)
    engine.tick()
    assert engine.lost_count == 1 and engine.open_quantity("ETH-USD") == Decimal("0.1")
    journal.close()
    journal, engine = life()  # life 3: the LOST order may still rest
    assert engine.lost_count == 1 and engine.open_quantity("ETH-USD") == Decimal("0.1")
    journal.close()
