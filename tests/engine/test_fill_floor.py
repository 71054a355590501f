"""What a venue record says has filled of an order is the least that has: matches listed
after the record may be fills it counted already, so they count only beyond it."""

from __future__ import annotations

from decimal import Decimal

from framework.engine.events import OrderUpdate
from framework.engine.intents import OrderStatus
from framework.engine.reconcile import UNLINKED_MEMORY
from framework.engine.risk import RiskSettings
from framework.venue.errors import BusyError, ServerFault
from framework.venue.models import MatchType, OrderResult
from tests.engine.test_cancels import Record, accepted, unknown, updates
from tests.engine.test_execution import intent, make, match
from tests.engine.test_risk import engine_with, order


def filled(engine: object) -> list[Decimal]:
    """What has filled of each open order."""
    return [o.filled for o in engine.open_orders()]  # type: ignore[attr-defined]


def test_an_adopted_orders_fill_listed_after_its_record_is_not_counted_twice() -> None:
    # The record (read at start) says 0.06 of 0.1 filled; that fill's match is listed only
    # afterwards. Counted on top of the record, it made 0.12: FILLED while 0.04 still rested.
    engine, events, _ = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    coid = unknown(engine)
    assert engine.adopt("ETH-USD", [Record(coid, 700, Decimal("0.06"), "open")])["adopted"] == 1
    assert engine.attribute(match(1, 700, "0.06")) is not None
    assert engine.status(coid) is OrderStatus.ACCEPTED
    assert filled(engine) == [Decimal("0.06")]
    assert engine.open_quantity("ETH-USD") == Decimal("0.04")  # what still rests
    engine.attribute(match(2, 700, "0.04"))
    assert updates(events)[-1] == (coid, OrderStatus.FILLED)
    assert engine.open_quantity("ETH-USD") == 0


def test_matches_count_beyond_the_record_once_their_sum_passes_it() -> None:
    engine, events, _ = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    coid = unknown(engine)
    engine.adopt("ETH-USD", [Record(coid, 700, Decimal("0.05"), "open")])
    engine.attribute(match(1, 700, "0.03"))  # within the record's 0.05
    assert filled(engine) == [Decimal("0.05")]
    engine.attribute(match(2, 700, "0.03"))  # 0.06 matched: past it
    assert filled(engine) == [Decimal("0.06")]
    assert engine.open_quantity("ETH-USD") == Decimal("0.04")
    engine.attribute(match(3, 700, "0.04"))
    assert updates(events)[-1] == (coid, OrderStatus.FILLED)


def test_an_open_order_check_raises_what_has_filled_and_its_late_match_adds_nothing() -> None:
    engine, events, _ = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    (coid,) = accepted(engine, 1)  # 0.1, order 100
    engine.attribute(match(1, 100, "0.02"))
    engine.check_open_orders("ETH-USD", [Record(coid, 100, Decimal("0.05"), "open")])
    assert filled(engine) == [Decimal("0.05")]
    assert engine.open_quantity("ETH-USD") == Decimal("0.05")
    # An older list (read before the last fill) lowers nothing.
    engine.check_open_orders("ETH-USD", [Record(coid, 100, Decimal("0.01"), "open")])
    assert filled(engine) == [Decimal("0.05")]
    engine.attribute(match(2, 100, "0.03"))  # the fill the list counted: 0.05 matched
    assert filled(engine) == [Decimal("0.05")]
    engine.attribute(match(3, 100, "0.05"))
    assert updates(events)[-1] == (coid, OrderStatus.FILLED)


def test_a_record_naming_another_client_id_raises_nothing() -> None:
    engine, _events, _ = engine_with()
    accepted(engine, 1)  # order 100
    engine.check_open_orders("ETH-USD", [Record("someone-else", 100, Decimal("0.05"), "open")])
    assert filled(engine) == [Decimal(0)]


def test_an_answer_naming_an_order_whose_match_came_first_counts_that_match() -> None:
    # The match of order 555 comes while its batch waits for a retry and another intent is
    # in doubt: a part of that one's 0.2, perhaps (bound to none). The retry's answer names
    # 555: the match is its, FILLED.
    h = make(retry_attempts=2)
    h.engine.submit("s", intent("0.2"))
    (batch,) = h.pump()
    h.engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))  # UNKNOWN
    coid = h.engine.submit("s", intent("0.1"))
    (batch,) = h.pump()
    h.engine.on_failure(batch, BusyError(2329, "busy"))
    found = h.engine.attribute(match(1, 555, "0.1"))
    assert found is not None and found.match.client_order_id is None
    h.clock.advance(10_000)
    (retry,) = h.pump()
    h.engine.on_results(retry, [OrderResult(client_order_id=coid, order_id=555)])
    assert [u.status for u in h.events if isinstance(u, OrderUpdate)][-2:] == [
        OrderStatus.ACCEPTED,
        OrderStatus.FILLED,
    ]


def test_external_matches_are_remembered_only_while_intents_are_in_doubt() -> None:
    engine, _events, _ = engine_with()
    engine.attribute(match(1, 900, "0.05"))  # nothing in doubt: no intent's order
    coid = unknown(engine)
    engine.attribute(match(2, 700, "0.03"))
    engine.attribute(match(3, 700, "0.02"))
    engine.adopt("ETH-USD", [Record(coid, 700, None, "open")])
    assert filled(engine) == [Decimal("0.05")]  # its matches found external before: its own
    other = unknown(engine)
    engine.adopt("ETH-USD", [Record(other, 900, None, "open")])
    assert [o.filled for o in engine.open_orders() if o.client_order_id == other] == [0]


def test_a_query_record_of_a_resting_order_raises_what_has_filled_at_once() -> None:
    engine, _events, _ = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    (coid,) = accepted(engine, 1)  # 0.1, order 100
    assert engine.apply_order_record(Record(coid, 100, Decimal("0.05"), "open")) == "open"
    assert filled(engine) == [Decimal("0.05")]
    assert engine.open_quantity("ETH-USD") == Decimal("0.05")


def test_an_ioc_bound_to_a_match_that_came_first_gives_its_booking_back_once() -> None:
    # Booked: a resting 0.1, an UNKNOWN 0.1, an IOC 0.1 waiting for a retry (0.3). A match of
    # 0.05 of order 555 comes first (external: nobody named 555); the retry's answer names
    # 555 for the IOC. The IOC no longer counts (it cannot rest): 0.2, not 0.15.
    engine, _events, clock = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    accepted(engine, 1)
    unknown(engine)
    ioc = engine.submit("s", order(match_type=MatchType.IOC))
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, BusyError(2329, "busy"))
    assert engine.open_quantity("ETH-USD") == Decimal("0.3")
    found = engine.attribute(match(1, 555, "0.05"))  # a part of the UNKNOWN 0.1, perhaps
    assert found is not None and found.match.client_order_id is None
    clock.advance(10_000)
    retry = engine.next_batch()
    assert retry is not None
    engine.begin_send(retry)
    engine.on_results(retry, [OrderResult(client_order_id=ioc, order_id=555)])
    assert engine.open_quantity("ETH-USD") == Decimal("0.2")


def test_external_matches_remembered_for_a_doubt_are_forgotten_when_it_ends() -> None:
    engine, _events, clock = engine_with()
    unknown(engine)
    engine.attribute(match(1, 700, "0.05"))
    ledger = engine._ledger
    assert list(ledger.unlinked) == [700]
    clock.advance(60_000)
    engine.tick()  # LOST: it may still rest, and a list may still name order 700 as its
    assert engine.unknown_count == 0 and list(ledger.unlinked) == [700]
    clock.advance(3_600_000)  # execution.lost_memory_s later: nothing is in doubt any more
    engine.tick()
    assert engine.lost_count == 0 and ledger.unlinked == {}
    later = unknown(engine)  # a new doubt: what was remembered for the old one is gone
    engine.adopt("ETH-USD", [Record(later, 700, None, "open")])
    assert filled(engine) == [Decimal(0)]


def test_the_memory_of_external_matches_is_bounded_in_matches() -> None:
    engine, _events, _ = engine_with()
    unknown(engine)
    ledger = engine._ledger
    for i in range(UNLINKED_MEMORY + 2):  # two orders: the first with most of the matches
        engine.attribute(match(i + 1, 700 if i < UNLINKED_MEMORY else 800, "0.001"))
    assert list(ledger.unlinked) == [800]  # 700's were forgotten whole, oldest first
    assert len(ledger.unlinked[800]) == 2
