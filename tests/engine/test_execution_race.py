"""Matches seen before the answer that names their order: held, never external or evidence.

The match poller runs beside the executor's send, so the venue may have executed a batch
(and a poll found its fills) while the answer is still in flight. Pure engine, no sockets.
"""

from __future__ import annotations

from decimal import Decimal

from framework.engine.events import MatchFilled
from framework.engine.execution import ExecutionSettings
from framework.engine.intents import OrderStatus
from framework.engine.risk import MAX_OPEN_QUANTITY, RiskSettings
from framework.venue.errors import AmbiguousOutcome, BusyError
from framework.venue.models import OrderResult
from tests.engine.test_execution import Harness, intent, make, match


def matches_of(h: Harness, returned: list[MatchFilled | None]) -> list[MatchFilled]:
    """Every MatchFilled a bus would carry: those attribute() returned and those published."""
    published = [e for e in h.events if isinstance(e, MatchFilled)]
    return [e for e in returned if e is not None] + published


def statuses(h: Harness, coid: str) -> list[OrderStatus]:
    """The OrderUpdate statuses published for one intent, in order."""
    return [u.status for u in h.updates() if u.client_order_id == coid]


def test_fill_seen_before_the_answer_fills_the_order_and_frees_its_exposure() -> None:
    h = make(
        ExecutionSettings(
            calls_per_second=1000.0, risk=RiskSettings(max_open_quantity=Decimal("0.15"))
        )
    )
    coid = h.engine.submit("s", intent("0.1"))
    (batch,) = h.pump()
    returned = [h.engine.attribute(match(1, 5001, "0.1"))]
    h.engine.on_results(batch, [OrderResult(client_order_id=coid, order_id=5001)])
    following = h.engine.submit("s", intent("0.1"))
    assert [u.code for u in h.updates(OrderStatus.REJECTED)] == []  # not 9003
    assert h.engine.status(following) is OrderStatus.PENDING
    assert statuses(h, coid) == [OrderStatus.ACCEPTED, OrderStatus.FILLED]
    (delivered,) = matches_of(h, returned)
    assert (delivered.strategy, delivered.match.client_order_id, delivered.external) == (
        "s",
        coid,
        False,
    )
    assert h.engine.counters()["matches_external"] == 0


def test_fill_seen_before_the_answer_is_not_evidence_for_an_unknown_twin() -> None:
    h = make()
    doubtful = h.engine.submit("s", intent("0.1"))
    (first,) = h.pump()
    h.engine.on_failure(first, AmbiguousOutcome("read timeout"))
    owner = h.engine.submit("s", intent("0.1"))
    (second,) = h.pump()
    returned = [h.engine.attribute(match(1, 7002, "0.1"))]
    assert statuses(h, doubtful) == [OrderStatus.UNKNOWN]  # not taken as its evidence
    h.engine.on_results(second, [OrderResult(client_order_id=owner, order_id=7002)])
    assert statuses(h, owner) == [OrderStatus.ACCEPTED, OrderStatus.FILLED]
    assert statuses(h, doubtful) == [OrderStatus.UNKNOWN]
    assert h.engine.status(doubtful) is OrderStatus.UNKNOWN
    (delivered,) = matches_of(h, returned)
    assert (delivered.strategy, delivered.match.client_order_id) == ("s", owner)


def test_held_match_of_no_answered_order_is_external_once_nothing_is_in_flight() -> None:
    h = make()
    coid = h.engine.submit("s", intent("0.1"))
    (batch,) = h.pump()
    returned = [h.engine.attribute(match(1, 9999, "0.3"))]
    assert matches_of(h, returned) == []  # not decided while the answer is in flight
    h.engine.on_results(batch, [OrderResult(client_order_id=coid, order_id=5001)])
    (delivered,) = matches_of(h, returned)
    assert delivered.external and delivered.strategy is None
    assert delivered.match.client_order_id is None and delivered.match.id == 1
    assert statuses(h, coid) == [OrderStatus.ACCEPTED]
    assert h.engine.counters()["matches_external"] == 1


def test_held_match_of_an_order_missing_from_the_answer_resolves_it_by_evidence() -> None:
    h = make()
    coid = h.engine.submit("s", intent("0.1"))
    (batch,) = h.pump()
    returned = [h.engine.attribute(match(1, 9999, "0.1"))]
    h.engine.on_results(batch, [])  # the order is missing from the answer: UNKNOWN
    assert statuses(h, coid) == [OrderStatus.UNKNOWN, OrderStatus.FILLED]
    (filled,) = h.updates(OrderStatus.FILLED)
    assert filled.order_id == 9999
    (delivered,) = matches_of(h, returned)
    assert (delivered.strategy, delivered.match.client_order_id) == ("s", coid)


def test_held_match_resolves_an_ambiguous_batch_by_evidence() -> None:
    h = make()
    coid = h.engine.submit("s", intent("0.2"))
    (batch,) = h.pump()
    returned = [h.engine.attribute(match(1, 4444, "0.2"))]
    h.engine.on_failure(batch, AmbiguousOutcome("connection reset"))
    assert statuses(h, coid) == [OrderStatus.UNKNOWN, OrderStatus.FILLED]
    (delivered,) = matches_of(h, returned)
    assert (delivered.strategy, delivered.match.client_order_id) == ("s", coid)
    assert h.engine.unknown_count == 0


def test_held_match_waits_only_for_batches_in_flight_when_it_was_seen() -> None:
    h = make()
    h.engine.submit("s", intent("0.1"))
    (older,) = h.pump()
    returned = [h.engine.attribute(match(1, 9999, "0.5"))]
    later = h.engine.submit("s", intent("0.1", long=False))
    (newer,) = h.pump()
    # The newer batch left after the match was seen: it cannot hold the match's order.
    h.accept(older)
    (delivered,) = matches_of(h, returned)
    assert delivered.external and delivered.match.id == 1
    h.accept(newer)
    assert statuses(h, later) == [OrderStatus.ACCEPTED]
    assert len(matches_of(h, returned)) == 1


def test_busy_answer_releases_a_held_match_and_the_retry_still_links_later_fills() -> None:
    h = make(retry_base_s=0.01, retry_max_s=0.01)
    coid = h.engine.submit("s", intent("0.1"))
    (batch,) = h.pump()
    returned = [h.engine.attribute(match(1, 9999, "0.4"))]
    h.engine.on_failure(batch, BusyError(2329, "The server is updating, please wait a moment..."))
    (external,) = matches_of(h, returned)  # a busy answer executed nothing
    assert external.external
    h.clock.advance(10)
    (retry,) = h.pump()
    h.engine.on_results(retry, [OrderResult(client_order_id=coid, order_id=5001)])
    returned.append(h.engine.attribute(match(2, 5001, "0.1")))
    delivered = sorted(matches_of(h, returned), key=lambda m: m.match.id)
    assert [(m.match.id, m.match.client_order_id) for m in delivered] == [(1, None), (2, coid)]
    assert statuses(h, coid) == [OrderStatus.ACCEPTED, OrderStatus.FILLED]


def test_matches_seen_before_the_answer_are_published_in_arrival_order() -> None:
    h = make()
    coid = h.engine.submit("mm", intent("0.3"))
    other = h.engine.submit("mm", intent("0.2", long=False))
    (batch,) = h.pump()
    returned = [
        h.engine.attribute(match(1, 8001, "0.1")),
        h.engine.attribute(match(2, 9999, "0.2", long=False)),  # not in the answer: external
        h.engine.attribute(match(3, 8001, "0.2")),
    ]
    h.engine.on_results(
        batch,
        [
            OrderResult(client_order_id=coid, order_id=8001),
            OrderResult(client_order_id=other, order_id=8002),
        ],
    )
    delivered = matches_of(h, returned)
    assert [(m.match.id, m.match.client_order_id) for m in delivered] == [
        (1, coid),
        (2, None),
        (3, coid),
    ]
    assert statuses(h, coid) == [OrderStatus.ACCEPTED, OrderStatus.FILLED]
    assert statuses(h, other) == [OrderStatus.ACCEPTED]  # the stray match is no evidence
    assert h.engine.counters()["matches_external"] == 1


def test_risk_refusal_code_is_the_open_quantity_limit_without_a_fill() -> None:
    # The control for the first test: with the answer read and no fill, 0.1 stays booked.
    h = make(
        ExecutionSettings(
            calls_per_second=1000.0, risk=RiskSettings(max_open_quantity=Decimal("0.15"))
        )
    )
    h.engine.submit("s", intent("0.1"))
    (batch,) = h.pump()
    h.accept(batch)
    h.engine.submit("s", intent("0.1"))
    assert [u.code for u in h.updates(OrderStatus.REJECTED)] == [MAX_OPEN_QUANTITY]
