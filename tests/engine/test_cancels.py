"""Cancels in the pure engine: what each state of an order does with a cancel, and evidence."""

from __future__ import annotations

from decimal import Decimal

import attrs

from framework.engine.cancels import (
    NO_ANSWER,
    NO_CANCELS,
    NOT_OWNER,
    NOTHING_TO_CANCEL,
    CancelAnswer,
)
from framework.engine.events import CancelRejected, Event, OrderUpdate
from framework.engine.execution import ExecutionEngine
from framework.engine.intents import OrderStatus
from framework.engine.risk import RiskSettings
from framework.venue.errors import ExtensionUnavailable, SendFailed, ServerFault, VenueError
from framework.venue.models import MatchType, OrderResult
from tests.engine.test_execution import match
from tests.engine.test_risk import engine_with, order


@attrs.frozen
class Record:
    """A venue order record as the engine reads one (queryOrder, the open-order list)."""

    client_order_id: str | None
    entrust_id: int | None
    filled_quantity: Decimal | None
    state: str


def updates(events: list[Event]) -> list[tuple[str, OrderStatus]]:
    """(client order id, status) of every OrderUpdate, in order."""
    return [(e.client_order_id, e.status) for e in events if isinstance(e, OrderUpdate)]


def refusals(events: list[Event]) -> list[tuple[str, int | None]]:
    """(client order id, code) of every CancelRejected, in order."""
    return [(e.client_order_id, e.code) for e in events if isinstance(e, CancelRejected)]


def accepted(engine: ExecutionEngine, count: int, **changes: object) -> list[str]:
    """Submit count resting limit orders and answer them ACCEPTED with order ids 100, 101..."""
    ids = [engine.submit("s", order(**changes)) for _ in range(count)]
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_results(
        batch, [OrderResult(client_order_id=c, order_id=100 + i) for i, c in enumerate(ids)]
    )
    return ids


def test_a_resting_order_is_cancelled_by_its_order_id() -> None:
    engine, events, _ = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    (coid,) = accepted(engine, 1)
    assert [o.client_order_id for o in engine.open_orders("s")] == [coid]
    assert engine.open_quantity("ETH-USD") == Decimal("0.1")
    assert engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None and batch.order_ids == [100] and not batch.by_client_id
    assert not engine.idle  # a cancel in flight keeps a drain waiting
    engine.on_cancel_answers(batch, {100: CancelAnswer(200, filled=Decimal("0.04"))})
    assert updates(events)[-1] == (coid, OrderStatus.CANCELED)
    last = events[-1]
    assert isinstance(last, OrderUpdate) and last.msg is not None and "0.04 of 0.1" in last.msg
    assert engine.open_orders() == []
    assert engine.open_quantity("ETH-USD") == Decimal(0)  # the booking is released
    assert engine.idle


def test_many_cancels_go_in_batches_of_at_most_cancel_batch() -> None:
    engine, events, _ = engine_with()
    ids = accepted(engine, 20) + accepted(engine, 5)
    assert engine.cancel_all("s") == 25
    first, second = engine.next_cancels(), engine.next_cancels()
    assert first is not None and second is not None and engine.next_cancels() is None
    assert (len(first.order_ids), len(second.order_ids)) == (20, 5)
    engine.on_cancel_answers(first, {i: CancelAnswer(200) for i in first.order_ids})
    engine.on_cancel_answers(second, {i: CancelAnswer(200) for i in second.order_ids})
    assert sorted(c for c, s in updates(events) if s is OrderStatus.CANCELED) == sorted(ids)


def test_an_order_never_sent_is_cancelled_at_once_and_never_sent() -> None:
    engine, events, _ = engine_with()
    coid = engine.submit("s", order())
    assert engine.cancel("s", coid)
    assert updates(events) == [(coid, OrderStatus.CANCELED)]
    assert engine.next_batch() is None and engine.next_cancels() is None


def test_a_cancel_waits_for_the_answer_of_an_order_in_flight() -> None:
    engine, _events, _ = engine_with()
    coid = engine.submit("s", order())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    assert engine.cancel("s", coid)
    assert engine.next_cancels() is None  # nothing to name yet: waits for the answer
    engine.on_results(batch, [OrderResult(client_order_id=coid, order_id=7)])
    cancels = engine.next_cancels()
    assert cancels is not None and cancels.order_ids == [7]


def test_a_refused_create_ends_the_waiting_cancel_without_a_call() -> None:
    engine, events, _ = engine_with()
    coid = engine.submit("s", order())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.cancel("s", coid)
    engine.on_failure(batch, VenueError(2102, "Insufficient balance:x"))
    assert engine.next_cancels() is None
    assert updates(events) == [(coid, OrderStatus.REJECTED)]


def test_an_unknown_order_is_cancelled_by_client_id_and_the_answer_ends_the_doubt() -> None:
    engine, events, _ = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    coid = engine.submit("s", order())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    assert engine.unknown_count == 1
    engine.cancel("s", coid)
    cancels = engine.next_cancels()
    assert cancels is not None and cancels.by_client_id and cancels.client_order_ids == [coid]
    engine.on_cancel_answers(cancels, {coid: CancelAnswer(200, order_id=55)})
    assert updates(events)[-1] == (coid, OrderStatus.CANCELED)
    assert engine.unknown_count == 0
    assert engine.open_quantity("ETH-USD") == Decimal(0)


def test_refusals_come_as_cancel_rejected_never_as_exceptions() -> None:
    engine, events, _ = engine_with()
    (coid,) = accepted(engine, 1)
    market = engine.submit("s", order(price=None, is_market=True))
    assert not engine.cancel("s", "nobody-knows-me")
    assert not engine.cancel("other", coid)
    assert refusals(events) == [("nobody-knows-me", NOTHING_TO_CANCEL), (coid, NOT_OWNER)]
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_results(batch, [OrderResult(client_order_id=market, order_id=9)])
    assert not engine.cancel("s", market)  # a market order does not rest
    assert refusals(events)[-1] == (market, NOTHING_TO_CANCEL)


def test_a_refused_cancel_keeps_the_order_and_asks_the_venue_what_it_did() -> None:
    engine, events, _ = engine_with()
    (coid,) = accepted(engine, 1)
    engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {100: CancelAnswer(2341, "Order is already completed")})
    assert refusals(events) == [(coid, 2341)]
    assert [o.client_order_id for o in engine.open_orders()] == [coid]  # state unchanged
    assert engine.cancels.take_queries() == [100]
    assert engine.apply_order_record(Record(coid, 100, Decimal("0.1"), "filled")) == "filled"
    assert updates(events)[-1] == (coid, OrderStatus.FILLED)
    assert engine.open_orders() == [] and engine.idle


def test_an_answer_that_does_not_say_makes_a_query_and_the_record_decides() -> None:
    engine, events, _ = engine_with()
    (a, b) = accepted(engine, 2)
    engine.cancel_all("s")
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {100: CancelAnswer(200)})  # nothing about 101
    assert updates(events)[-1] == (a, OrderStatus.CANCELED)
    assert engine.cancels.take_queries() == [101]
    assert engine.cancels.take_queries() == []  # each query is given once
    assert not engine.idle
    engine.apply_order_record(Record(b, 101, Decimal(0), "canceled"))
    assert updates(events)[-1] == (b, OrderStatus.CANCELED)
    assert engine.idle


def test_an_ambiguous_cancel_call_is_queried_not_guessed() -> None:
    engine, events, _ = engine_with()
    (coid,) = accepted(engine, 1)
    engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_error(batch, ServerFault("HTTP 502", http_status=502))
    assert refusals(events) == [] and updates(events)[-1][1] is OrderStatus.ACCEPTED
    assert engine.cancels.take_queries() == [100]
    engine.apply_order_record(Record(coid, 100, Decimal(0), "open"))
    assert [o.client_order_id for o in engine.open_orders()] == [coid]


def test_a_cancel_not_sent_is_refused_with_9011_and_may_be_asked_again() -> None:
    engine, events, _ = engine_with()
    (coid,) = accepted(engine, 1)
    engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_error(batch, SendFailed("connection refused"))
    assert refusals(events) == [(coid, 9011)]
    assert engine.cancel("s", coid) and engine.next_cancels() is not None


def test_a_venue_without_cancels_turns_them_off_once() -> None:
    engine, events, _ = engine_with()
    (a, b) = accepted(engine, 2)
    engine.cancel("s", a)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_error(batch, ExtensionUnavailable("/api/third/order/cancelEntrust", "404"))
    assert not engine.cancels.available
    assert not engine.cancel("s", b)
    assert refusals(events) == [(a, NO_CANCELS), (b, NO_CANCELS)]
    assert engine.next_cancels() is None


def test_a_missing_answer_for_an_order_without_id_says_so() -> None:
    engine, events, _ = engine_with()
    coid = engine.submit("s", order())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    engine.cancel("s", coid)
    cancels = engine.next_cancels()
    assert cancels is not None
    engine.on_cancel_answers(cancels, {})
    assert refusals(events) == [(coid, NO_ANSWER)]
    assert engine.unknown_count == 1  # still in doubt: nothing said otherwise


def test_adoption_confirms_resting_orders_resolves_unknown_ones_and_counts_strangers() -> None:
    engine, events, _ = engine_with()
    (resting, gone) = accepted(engine, 2)
    doubtful = engine.submit("s", order())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    counts = engine.adopt(
        "ETH-USD",
        [
            Record(resting, 100, Decimal(0), "open"),
            Record(doubtful, 300, Decimal(0), "open"),
            Record("placed-by-hand", 999, Decimal(0), "open"),
        ],
    )
    assert counts == {"adopted": 1, "open": 1, "external": 1, "orphans": 0, "missing": 1}
    assert updates(events)[-1] == (doubtful, OrderStatus.ACCEPTED)
    assert engine.unknown_count == 0
    assert {o.client_order_id for o in engine.open_orders()} == {resting, gone, doubtful}
    assert engine.cancels.take_queries() == [101]  # the one the venue no longer lists
    assert engine.cancels.external == 1


def test_a_later_check_adopts_the_unknown_order_it_names_and_queries_what_it_lacks() -> None:
    woken: list[int] = []
    engine, events, _ = engine_with(on_ready=lambda: woken.append(1))
    (resting, gone, by_id) = accepted(engine, 3)
    doubtful = engine.submit("s", order())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    before = updates(events)
    listing = [
        Record(resting, 100, Decimal(0), "open"),
        Record(None, 102, Decimal(0), "open"),  # by_id, named by its orderId only
        Record(doubtful, 300, Decimal(0), "open"),
        Record("placed-by-hand", 999, Decimal(0), "open"),
    ]
    woken.clear()
    assert engine.check_open_orders("ETH-USD", listing) == {
        "listed": 4,
        "adopted": 1,
        "missing": 1,
    }
    assert woken  # the driver is woken to send the query
    assert engine.cancels.take_queries() == [101]
    # The list names the UNKNOWN order by its clientOrderId: it rests, ACCEPTED with the
    # list's orderId (an open order again). Nothing else changed; no stranger is counted.
    assert updates(events) == [*before, (doubtful, OrderStatus.ACCEPTED)]
    assert engine.unknown_count == 0 and engine.cancels.external == 0
    assert [o.order_id for o in engine.open_orders() if o.client_order_id == doubtful] == [300]
    # Asked again while the query is out: not asked twice.
    assert engine.check_open_orders("ETH-USD", listing)["missing"] == 0
    # The query's record decides: cancelled behind the node's back.
    assert engine.apply_order_record(Record(gone, 101, Decimal(0), "canceled")) == "canceled"
    assert updates(events)[-1] == (gone, OrderStatus.CANCELED)
    assert {o.client_order_id for o in engine.open_orders()} == {resting, by_id, doubtful}
    # Another pair's check leaves ETH-USD's orders alone.
    assert engine.check_open_orders("BTC-USD", [])["missing"] == 0


def test_a_check_leaves_an_order_with_a_cancel_on_its_way_to_the_cancels_answer() -> None:
    engine, events, _ = engine_with()
    (a,) = accepted(engine, 1)
    engine.cancel("s", a)
    assert engine.check_open_orders("ETH-USD", [])["missing"] == 0  # queued
    batch = engine.next_cancels()
    assert batch is not None
    assert engine.check_open_orders("ETH-USD", [])["missing"] == 0  # in flight
    assert engine.cancels.take_queries() == []
    engine.on_cancel_answers(batch, {100: CancelAnswer(200, None)})
    assert [s for c, s in updates(events) if c == a] == [OrderStatus.ACCEPTED, OrderStatus.CANCELED]


def test_a_cancel_answer_for_an_order_that_ended_meanwhile_says_nothing_more() -> None:
    engine, events, _ = engine_with()
    (a,) = accepted(engine, 1)
    engine.cancel("s", a)
    batch = engine.next_cancels()
    assert batch is not None
    assert engine.apply_order_record(Record(a, 100, Decimal(0), "canceled")) == "canceled"
    engine.on_cancel_answers(batch, {100: CancelAnswer(200, None)})
    assert [s for c, s in updates(events) if c == a] == [OrderStatus.ACCEPTED, OrderStatus.CANCELED]
    assert engine.counters()["orders_canceled"] == 1


def unknown(engine: ExecutionEngine) -> str:
    """Submit one intent (0.1 long at 2000) and answer HTTP 500: UNKNOWN."""
    coid = engine.submit("s", order())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    return coid


def test_an_adopted_order_starts_from_its_records_fill_and_its_new_matches_add() -> None:
    engine, events, _ = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    coid = unknown(engine)  # 0.1
    first = engine.attribute(match(1, 700, "0.05"))  # a part of the intent's 0.1, perhaps
    assert first is not None and first.match.client_order_id is None
    assert first.candidates == (coid,)  # named as its possible owner, bound to none
    assert engine.adopt("ETH-USD", [Record(coid, 700, Decimal("0.05"), "open")])["adopted"] == 1
    assert [o.filled for o in engine.open_orders()] == [Decimal("0.05")]
    assert engine.open_quantity("ETH-USD") == Decimal("0.05")  # what still rests
    last = engine.attribute(match(2, 700, "0.05"))
    assert last is not None and last.match.client_order_id == coid
    assert updates(events)[-1] == (coid, OrderStatus.FILLED)
    assert engine.open_quantity("ETH-USD") == 0


def test_a_partly_filled_order_cancelled_gives_back_only_what_still_rested() -> None:
    engine, _events, _ = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    (a, _b) = accepted(engine, 2)  # 0.1 each: 0.2 open
    engine.attribute(match(1, 100, "0.04"))
    assert engine.open_quantity("ETH-USD") == Decimal("0.16")
    engine.cancel("s", a)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {100: CancelAnswer(200, filled=Decimal("0.05"))})
    assert engine.open_quantity("ETH-USD") == Decimal("0.1")  # b's, untouched


def test_a_query_record_of_an_order_placed_by_this_run_adds_nothing_to_its_matches() -> None:
    engine, _events, _ = engine_with()
    (a,) = accepted(engine, 1)  # 0.1, order 100
    engine.cancel("s", a)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {100: CancelAnswer(2341, "Order is already completed")})
    assert engine.cancels.take_queries() == [100]
    # Its record says half filled; that fill's match is listed later and is what counts.
    engine.apply_order_record(Record(a, 100, Decimal("0.05"), "open"))
    engine.attribute(match(1, 100, "0.05"))
    assert engine.status(a) is OrderStatus.ACCEPTED
    assert [o.filled for o in engine.open_orders()] == [Decimal("0.05")]


def test_a_record_naming_another_client_id_is_no_evidence_for_an_unknown_order() -> None:
    engine, _events, _ = engine_with()
    engine.submit("s", order())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    assert engine.apply_order_record(Record("someone-else", 5, Decimal(0), "open")) == "external"
    assert engine.unknown_count == 1


def test_the_kill_switch_cancels_every_open_order_of_every_strategy() -> None:
    engine, _events, _ = engine_with()
    accepted(engine, 3)
    engine.kill_switch = True
    batch = engine.next_cancels()
    assert batch is not None and sorted(batch.order_ids) == [100, 101, 102]


def test_a_queued_order_is_withdrawn_even_where_the_venue_has_no_cancels() -> None:
    engine, events, _ = engine_with()
    engine.cancels.turn_off("HTTP 404")
    coid = engine.submit("s", order())
    assert engine.cancel("s", coid)  # nothing to ask the venue: it never left
    assert updates(events) == [(coid, OrderStatus.CANCELED)]
    assert engine.next_batch() is None


def test_an_ioc_order_that_never_fills_is_queried_after_the_window_and_ended() -> None:
    engine, events, clock = engine_with()
    (coid,) = accepted(engine, 1, match_type=MatchType.IOC)
    assert engine.next_wakeup_ms() == 60_000  # the unknown window, from its acceptance
    clock.ms += 60_000
    engine.tick()
    assert engine.cancels.take_queries() == [100]
    engine.apply_order_record(Record(coid, 100, Decimal(0), "canceled"))
    assert updates(events)[-1] == (coid, OrderStatus.CANCELED)
    assert engine.status(coid) is None  # no longer tracked


def test_without_queries_an_unfilled_ioc_is_retired_and_a_late_match_still_finds_it() -> None:
    engine, events, clock = engine_with()
    engine.cancels.turn_off("HTTP 404")
    (coid,) = accepted(engine, 1, match_type=MatchType.IOC)
    clock.ms += 60_000
    engine.tick()
    assert engine.status(coid) is None and engine.cancels.take_queries() == []
    assert updates(events)[-1] == (coid, OrderStatus.ACCEPTED)  # nothing claimed
    late = engine.attribute(match(1, 100))
    assert late is not None and late.match.client_order_id == coid and late.strategy == "s"


def test_cancel_all_takes_a_pair_and_a_side() -> None:
    engine, _events, _ = engine_with()
    bids = accepted(engine, 2)
    asks = accepted(engine, 2, is_long=False)
    assert engine.cancel_all("s", "ETH-USD", is_long=False) == 2
    batch = engine.next_cancels()
    assert batch is not None and batch.client_order_ids == asks
    assert engine.cancel_all("s", "BTC-USD") == 0
    assert engine.cancel_all("s", is_long=True) == 2
    batch = engine.next_cancels()
    assert batch is not None and batch.client_order_ids == bids


def test_a_market_order_leaves_the_unfilled_watch_as_soon_as_it_fills() -> None:
    engine, _events, _ = engine_with()
    (coid,) = accepted(engine, 1, price=None, is_market=True)
    assert engine.cancels.next_unfilled_ms() is not None
    engine.attribute(match(1, 100))
    assert engine.status(coid) is None  # FILLED
    assert engine.cancels.next_unfilled_ms() is None  # nothing kept for the window


def test_without_query_order_an_unsaid_cancel_is_told_and_later_cancels_go_one_by_one() -> None:
    engine, events, _ = engine_with()
    (a, b) = accepted(engine, 2)
    engine.cancel_all("s")
    batch = engine.next_cancels()
    assert batch is not None and batch.order_ids == [100, 101]
    engine.on_cancel_answers(batch, {})  # batchCancelEntrust: taken, nothing said per order
    assert engine.cancels.take_queries() == [100, 101]
    engine.cancels.query_failed(100, "HTTP 404", unavailable=True)  # no queryOrder here
    engine.cancels.query_failed(101, "HTTP 404", unavailable=True)
    assert not engine.cancels.queries_available and engine.cancels.available
    # Each strategy hears that its cancel's effect is unknown; the orders stay as known.
    assert refusals(events) == [(a, NO_ANSWER), (b, NO_ANSWER)]
    told = [e.msg for e in events if isinstance(e, CancelRejected)]
    assert all("queryOrder: HTTP 404" in m and m.endswith("ACCEPTED") for m in told), told
    assert [o.client_order_id for o in engine.open_orders()] == [a, b]
    assert engine.idle
    # From now on every cancel goes alone (cancelEntrust), so its answer names its order.
    assert engine.cancel_all("s") == 2
    first, second = engine.next_cancels(), engine.next_cancels()
    assert first is not None and second is not None and engine.next_cancels() is None
    assert (first.order_ids, second.order_ids) == ([100], [101])
    engine.on_cancel_answers(first, {100: CancelAnswer(200)})
    engine.on_cancel_answers(second, {101: CancelAnswer(2341, "order completed")})
    assert updates(events)[-1] == (a, OrderStatus.CANCELED)
    assert refusals(events)[-1] == (b, 2341)
    assert engine.cancels.take_queries() == [] and engine.idle  # nothing left to ask


def test_without_query_order_an_order_the_list_lacks_is_told_once_and_kept() -> None:
    engine, events, _ = engine_with()
    (a, b) = accepted(engine, 2)
    engine.cancels.turn_off_queries("HTTP 404")
    listed = [Record(b, 101, Decimal(0), "open")]
    assert engine.check_open_orders("ETH-USD", listed)["missing"] == 1
    assert engine.check_open_orders("ETH-USD", listed)["missing"] == 0  # said once
    assert engine.counters()["orders_missing"] == 1
    assert engine.cancels.take_queries() == [] and engine.idle
    # No longer resting at the venue, but whether it filled or was cancelled is unknown.
    assert [o.client_order_id for o in engine.open_orders()] == [a, b]
    assert refusals(events) == []


def test_a_cancel_of_unknown_outcome_asks_nothing_of_an_order_that_filled_meanwhile() -> None:
    engine, events, _ = engine_with()
    (coid,) = accepted(engine, 1)
    engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None
    fill = engine.attribute(match(1, 100))  # the whole 0.1 filled while the cancel travelled
    assert fill is not None and fill.match.client_order_id == coid
    assert updates(events)[-1] == (coid, OrderStatus.FILLED)
    engine.on_cancel_error(batch, ServerFault("HTTP 502", http_status=502))
    assert engine.cancels.take_queries() == [] and engine.idle
    assert refusals(events) == []


def test_a_failed_query_leaves_the_answer_to_another_query_of_the_order_still_out() -> None:
    engine, events, _ = engine_with()
    (coid,) = accepted(engine, 1)
    assert engine.check_open_orders("ETH-USD", [])["missing"] == 1
    assert engine.cancels.take_queries() == [100]  # the check's query, on its way
    engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {})  # the cancel's answer does not say: asked again
    engine.cancels.query_failed(100, "ReadTimeout")  # the check's query is lost
    assert refusals(events) == []  # not yet: the cancel's own query is still to go
    assert engine.cancels.take_queries() == [100]
    engine.apply_order_record(Record(coid, 100, Decimal(0), "canceled"))
    assert updates(events)[-1] == (coid, OrderStatus.CANCELED)
    assert refusals(events) == [] and engine.idle


def test_after_a_failed_query_for_a_cancel_later_cancels_go_one_by_one() -> None:
    engine, events, _ = engine_with()
    (a, b) = accepted(engine, 2)
    engine.cancel_all("s")
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {})
    assert engine.cancels.take_queries() == [100, 101]
    engine.cancels.query_failed(100, "the venue sent no record")  # not a 404: queries stay on
    engine.cancels.query_failed(101, "the venue sent no record")
    assert engine.cancels.queries_available
    assert refusals(events) == [(a, NO_ANSWER), (b, NO_ANSWER)]
    assert engine.cancel_all("s") == 2
    first, second = engine.next_cancels(), engine.next_cancels()
    assert first is not None and second is not None
    assert (first.order_ids, second.order_ids) == ([100], [101])


def test_without_query_order_an_order_listed_again_is_told_again_when_it_goes() -> None:
    engine, _events, _ = engine_with()
    (coid,) = accepted(engine, 1)
    engine.cancels.turn_off_queries("HTTP 404")
    listed = [Record(coid, 100, Decimal(0), "open")]
    assert engine.check_open_orders("ETH-USD", [])["missing"] == 1  # read before it rested?
    assert engine.check_open_orders("ETH-USD", listed)["missing"] == 0
    assert engine.check_open_orders("ETH-USD", [])["missing"] == 1  # now it went: told again
    assert engine.counters()["orders_missing"] == 2


def test_an_order_the_lists_lack_round_after_round_is_queried_each_time_and_counted_once() -> None:
    engine, _events, _ = engine_with()
    (coid,) = accepted(engine, 1)
    for _ in range(3):  # each query says it still rests (the list was read before it rested)
        assert engine.check_open_orders("ETH-USD", [])["missing"] == 1
        assert engine.cancels.take_queries() == [100]
        engine.apply_order_record(Record(coid, 100, Decimal(0), "open"))
    assert engine.counters()["orders_missing"] == 1  # one order, not one per query
    listed = [Record(coid, 100, Decimal(0), "open")]
    assert engine.check_open_orders("ETH-USD", listed)["missing"] == 0
    assert engine.check_open_orders("ETH-USD", [])["missing"] == 1  # missing anew: counted
    assert engine.counters()["orders_missing"] == 2
