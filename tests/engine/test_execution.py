"""The pure execution core: batching, reconciliation, retries, attribution (no sockets)."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from decimal import Decimal

import attrs
import pytest

from framework.engine.client_ids import ClientIdError, ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import Event, MatchFilled, OrderUpdate
from framework.engine.execution import Batch, ExecutionEngine, ExecutionSettings
from framework.engine.intents import OrderIntent, OrderStatus
from framework.venue.errors import (
    AmbiguousOutcome,
    BadResponse,
    BusyError,
    LimitError,
    SendFailed,
    ServerFault,
    VenueError,
    error_for,
)
from framework.venue.models import MatchRecord, MatchType, OrderResult
from framework.venue.rules import PairRules

PAIRS: Mapping[str, PairRules] = {"ETH-USD": PairRules(), "BTC-USD": PairRules()}
START_MS = 1_700_000_000_000


@attrs.define
class Harness:
    """An engine on a virtual clock, recording what it publishes and sends."""

    engine: ExecutionEngine
    clock: VirtualClock
    events: list[Event]
    sent: list[Batch] = attrs.Factory(list)
    next_order_id: int = 1000

    def updates(self, status: OrderStatus | None = None) -> list[OrderUpdate]:
        """OrderUpdate events published so far (optionally of one status)."""
        return [
            e
            for e in self.events
            if isinstance(e, OrderUpdate) and (status is None or e.status is status)
        ]

    def pump(self) -> list[Batch]:
        """Cut and 'send' every batch due now."""
        out = []
        while (batch := self.engine.next_batch()) is not None:
            self.engine.begin_send(batch)
            self.sent.append(batch)
            out.append(batch)
        return out

    def accept(self, batch: Batch, *, skip: frozenset[str] = frozenset()) -> None:
        """Answer a batch with every order accepted except those in skip."""
        results = []
        for order in batch.orders:
            if order.client_order_id in skip:
                continue
            self.next_order_id += 1
            results.append(
                OrderResult(
                    client_order_id=order.client_order_id,
                    order_id=self.next_order_id,
                    pair_name=order.pair_name,
                )
            )
        self.engine.on_results(batch, results)


def make(settings: ExecutionSettings | None = None, **kw: object) -> Harness:
    """A harness with the given settings (defaults: linger 0, fast bucket)."""
    clock = VirtualClock(START_MS)
    events: list[Event] = []
    if settings is None:
        settings = ExecutionSettings(calls_per_second=1000.0, **kw)  # type: ignore[arg-type]
    engine = ExecutionEngine(
        settings,
        rules=PAIRS,
        publish=events.append,
        now_ms=clock.now_ms,
        ids=ClientIdGenerator.ephemeral("t", now_ms=START_MS, random_bits=7),
        random=random.Random(1).random,
    )
    return Harness(engine, clock, events)


def intent(
    qty: str = "0.1", price: str | None = "2000", *, pair: str = "ETH-USD", long: bool = True
) -> OrderIntent:
    """A small valid intent."""
    return OrderIntent(
        pair=pair,
        is_long=long,
        quantity=Decimal(qty),
        price=None if price is None else Decimal(price),
    )


def match(
    match_id: int, entrust_id: int, qty: str = "0.1", *, pair: str = "ETH-USD", long: bool = True
) -> MatchRecord:
    """A match record as the poller would decode it."""
    return MatchRecord(
        id=match_id,
        entrust_id=entrust_id,
        symbol=pair,
        is_long=long,
        quantity=Decimal(qty),
        average_price=Decimal("2000"),
    )


def test_45_intents_make_batches_of_20_20_5() -> None:
    h = make(linger_ms=10)
    for _ in range(45):
        h.engine.submit("s", intent())
    first = h.pump()
    assert [len(b.orders) for b in first] == [20, 20]
    assert h.engine.next_wakeup_ms() == 10
    h.clock.advance(10)
    assert [len(b.orders) for b in h.pump()] == [5]


def test_linger_zero_sends_at_once() -> None:
    h = make(linger_ms=0)
    h.engine.submit("s", intent())
    assert [len(b.orders) for b in h.pump()] == [1]


def test_batch_waits_for_linger_then_goes() -> None:
    h = make(linger_ms=50)
    h.engine.submit("s", intent())
    h.clock.advance(49)
    assert h.pump() == []
    h.clock.advance(1)
    assert len(h.pump()) == 1


def test_max_inflight_bounds_batches_in_flight() -> None:
    h = make(max_inflight=2)
    for _ in range(100):
        h.engine.submit("s", intent())
    batches = h.pump()
    assert len(batches) == 2
    assert h.engine.next_wakeup_ms() is None  # only an answer can free a slot
    h.accept(batches[0])
    assert len(h.pump()) == 1


def test_token_bucket_limits_calls_per_second() -> None:
    h = make(ExecutionSettings(calls_per_second=10.0, max_inflight=100))
    for _ in range(20 * 5):
        h.engine.submit("s", intent())
    assert len(h.pump()) == 1  # a burst of one call at 10 calls/s
    wait = h.engine.next_wakeup_ms()
    assert wait == 100
    h.clock.advance(wait)
    assert len(h.pump()) == 1


def test_pairs_share_a_batch_and_each_strategy_keeps_its_order() -> None:
    h = make(linger_ms=5)
    submitted: dict[str, list[str]] = {"a": [], "b": []}
    for i in range(30):
        strategy = "a" if i % 3 else "b"
        pair = "ETH-USD" if i % 2 else "BTC-USD"
        submitted[strategy].append(h.engine.submit(strategy, intent(pair=pair)))
    h.clock.advance(5)
    batches = h.pump()
    assert {o.pair_name for o in batches[0].orders} == {"ETH-USD", "BTC-USD"}
    order = [o.client_order_id for b in batches for o in b.orders]
    for ids in submitted.values():
        assert [c for c in order if c in ids] == ids


def test_results_bound_by_client_order_id_not_position() -> None:
    h = make()
    ids = [h.engine.submit("s", intent()) for _ in range(5)]
    (batch,) = h.pump()
    results = [OrderResult(client_order_id=c, order_id=100 + int(i)) for i, c in enumerate(ids)]
    h.engine.on_results(batch, list(reversed(results)))
    accepted = {u.client_order_id: u.order_id for u in h.updates(OrderStatus.ACCEPTED)}
    assert accepted == {c: 100 + i for i, c in enumerate(ids)}


def test_missing_from_a_successful_answer_is_unknown() -> None:
    h = make()
    ids = [h.engine.submit("s", intent()) for _ in range(4)]
    (batch,) = h.pump()
    h.accept(batch, skip=frozenset(ids[1:3]))
    assert [u.client_order_id for u in h.updates(OrderStatus.UNKNOWN)] == ids[1:3]
    assert [u.client_order_id for u in h.updates(OrderStatus.ACCEPTED)] == [ids[0], ids[3]]


def test_missing_result_rejected_setting_rejects_with_9010() -> None:
    h = make(missing_result="rejected")
    ids = [h.engine.submit("s", intent()) for _ in range(3)]
    (batch,) = h.pump()
    h.accept(batch, skip=frozenset({ids[1]}))
    (rejected,) = h.updates(OrderStatus.REJECTED)
    assert (rejected.client_order_id, rejected.code) == (ids[1], 9010)


def test_whole_call_error_rejects_every_intent_with_its_code() -> None:
    h = make()
    ids = [h.engine.submit("s", intent()) for _ in range(3)]
    (batch,) = h.pump()
    h.engine.on_failure(batch, LimitError(2305, "The quantity of one-way positions ..."))
    rejected = h.updates(OrderStatus.REJECTED)
    assert [(u.client_order_id, u.code) for u in rejected] == [(c, 2305) for c in ids]
    assert h.engine.idle


def test_busy_answer_is_retried_with_same_ids_and_payloads() -> None:
    h = make()
    for _ in range(3):
        h.engine.submit("s", intent())
    (batch,) = h.pump()
    payload = batch.orders
    h.engine.on_failure(batch, BusyError(2329, "The server is updating, please wait a moment..."))
    assert h.pump() == []  # backoff first
    wait = h.engine.next_wakeup_ms()
    assert wait is not None and 100 <= wait <= 200  # base 0.2 s, equal jitter
    h.clock.advance(wait)
    (again,) = h.pump()
    assert again is batch and again.orders == payload and again.attempt == 2
    h.accept(again)
    assert len(h.updates(OrderStatus.ACCEPTED)) == 3
    assert h.engine.counters()["retries"] == 1


def test_busy_retries_exhausted_reject_with_2329() -> None:
    h = make(retry_attempts=2)
    h.engine.submit("s", intent())
    busy = error_for(2329, "The server is updating, please wait a moment...")
    for _ in range(3):
        (batch,) = h.pump()
        h.engine.on_failure(batch, busy)
        h.clock.advance(10_000)
    assert [u.code for u in h.updates(OrderStatus.REJECTED)] == [2329]
    assert h.engine.counters()["batches_sent"] == 3


def test_send_failed_is_retried_then_rejected_9011() -> None:
    h = make(retry_attempts=1)
    h.engine.submit("s", intent())
    (batch,) = h.pump()
    h.engine.on_failure(batch, SendFailed("connect refused"))
    h.clock.advance(10_000)
    (again,) = h.pump()
    h.engine.on_failure(again, SendFailed("connect refused"))
    assert [u.code for u in h.updates(OrderStatus.REJECTED)] == [9011]


def test_no_new_batch_is_cut_while_a_retry_waits() -> None:
    h = make()
    first = h.engine.submit("s", intent())
    (batch,) = h.pump()
    h.engine.on_failure(batch, BusyError(2329, "busy"))
    second = h.engine.submit("s", intent())
    assert h.pump() == []
    h.clock.advance(10_000)
    retry, fresh = h.pump()
    assert retry is batch and retry.attempt == 2  # the retry goes first
    assert [o.client_order_id for o in retry.orders + fresh.orders] == [first, second]


@pytest.mark.parametrize(
    "exc",
    [
        AmbiguousOutcome("read timeout"),
        BadResponse("HTTP 404", http_status=404),
        ServerFault("HTTP 500", http_status=500, code=500),
        ServerFault("HTTP 503 with a 2329 envelope", http_status=503, code=2329),
        VenueError(500, "Internal Server Error", http_status=200),  # a code SPEC 7 lacks
    ],
)
def test_ambiguous_outcome_is_unknown_and_never_retried(exc: Exception) -> None:
    h = make()
    ids = [h.engine.submit("s", intent()) for _ in range(2)]
    (batch,) = h.pump()
    h.engine.on_failure(batch, exc)
    assert [u.client_order_id for u in h.updates(OrderStatus.UNKNOWN)] == ids
    h.clock.advance(100_000)
    assert h.pump() == []
    assert h.engine.counters()["batches_sent"] == 1


def test_the_only_in_doubt_intent_a_match_agrees_with_is_resolved_by_it() -> None:
    h = make()
    lone = h.engine.submit("s", intent("0.3"))
    pair_a = h.engine.submit("s", intent("0.2"))
    (batch,) = h.pump()
    h.engine.on_failure(batch, AmbiguousOutcome("reset"))
    wrong_side = h.engine.attribute(match(1, 777, "0.3", long=False))
    assert wrong_side.external and h.updates(OrderStatus.FILLED) == []
    filled = h.engine.attribute(match(2, 778, "0.3"))
    assert filled.strategy == "s" and filled.match.client_order_id == lone
    assert filled.candidates == ()
    (update,) = h.updates(OrderStatus.FILLED)
    assert (update.client_order_id, update.order_id) == (lone, 778)
    assert h.engine.status(pair_a) is OrderStatus.UNKNOWN
    # a later match of the same order still names its intent, never evidence for another
    again = h.engine.attribute(match(3, 778, "0.3"))
    assert again.match.client_order_id == lone and not again.external


def test_same_looking_in_doubt_intents_are_settled_by_count_never_named() -> None:
    h = make()
    ids = [h.engine.submit("s", intent("0.2")) for _ in range(3)]
    (batch,) = h.pump()
    h.engine.on_failure(batch, ServerFault("HTTP 500", http_status=500, code=500))
    first = h.engine.attribute(match(1, 901, "0.2"))
    assert first.match.client_order_id is None and not first.external
    assert (first.strategy, first.candidates) == ("s", tuple(ids))
    assert first.match.candidates == tuple(ids)  # what the strategy's on_match reads
    assert h.updates(OrderStatus.FILLED) == []
    assert all(h.engine.status(c) is OrderStatus.UNKNOWN for c in ids)
    h.engine.attribute(match(2, 902, "0.2"))
    h.engine.attribute(match(3, 903, "0.2"))  # as many orders as intents: settled at once
    settled = h.updates(OrderStatus.AMBIGUOUS)
    assert [u.client_order_id for u in settled] == ids
    assert all(u.group == tuple(ids) and u.group_filled == 3 for u in settled)
    assert settled[0].msg is not None and "3 of 3" in settled[0].msg
    assert h.updates(OrderStatus.FILLED) == [] and h.updates(OrderStatus.LOST) == []
    late = h.engine.attribute(match(4, 902, "0.2"))  # a later match of a counted order
    assert late.candidates == tuple(ids) and not late.external
    assert h.engine.counters()["orders_ambiguous"] == 3 and h.engine.unknown_count == 0


def test_a_doubt_group_with_fewer_fills_than_members_settles_when_its_window_ends() -> None:
    h = make(unknown_window_s=30)
    ids = [h.engine.submit("s", intent("0.2")) for _ in range(4)]
    (batch,) = h.pump()
    h.engine.on_failure(batch, AmbiguousOutcome("reset"))
    h.engine.attribute(match(1, 901, "0.2"))
    h.clock.advance(29_999)
    assert h.engine.tick() == 0 and h.engine.next_wakeup_ms() == 1
    h.clock.advance(1)
    assert h.engine.tick() == 4
    settled = h.updates(OrderStatus.AMBIGUOUS)
    assert [u.client_order_id for u in settled] == ids
    assert {u.group_filled for u in settled} == {1}
    assert h.updates(OrderStatus.LOST) == []
    # They may rest (GTC): adoptable by a list for lost_memory_s, then forgotten.
    assert h.engine.next_wakeup_ms() == 3_600_000


def test_a_match_held_for_an_answer_is_never_evidence_for_another_intent() -> None:
    h = make(max_inflight=2)
    doubt = h.engine.submit("s", intent("0.2"))
    (first,) = h.pump()
    h.engine.on_failure(first, AmbiguousOutcome("reset"))
    inflight = h.engine.submit("s", intent("0.2"))
    (second,) = h.pump()
    # the fill of the order in flight is seen before its answer: held, not given to `doubt`
    assert h.engine.attribute(match(1, h.next_order_id + 1, "0.2")) is None
    h.accept(second)
    (filled,) = h.updates(OrderStatus.FILLED)
    assert filled.client_order_id == inflight and h.engine.status(doubt) is OrderStatus.UNKNOWN
    linked = [e for e in h.events if isinstance(e, MatchFilled)]
    assert [e.match.client_order_id for e in linked] == [inflight]


def test_unknown_without_evidence_becomes_lost_loudly(caplog: pytest.LogCaptureFixture) -> None:
    h = make(unknown_window_s=30)
    coid = h.engine.submit("s", intent())
    (batch,) = h.pump()
    h.engine.on_failure(batch, AmbiguousOutcome("timeout"))
    h.clock.advance(29_999)
    assert h.engine.tick() == 0
    assert h.engine.next_wakeup_ms() == 1
    h.clock.advance(1)
    with caplog.at_level(logging.ERROR, logger="framework.execution"):
        assert h.engine.tick() == 1
    (lost,) = h.updates(OrderStatus.LOST)
    assert lost.client_order_id == coid and lost.strategy == "s"
    assert any("LOST" in r.getMessage() and coid in r.getMessage() for r in caplog.records)
    assert h.engine.status(coid) is OrderStatus.LOST  # remembered: a list may still name it


def test_matches_link_to_intents_and_complete_fills() -> None:
    h = make()
    coid = h.engine.submit("mm", intent("0.3"))
    (batch,) = h.pump()
    h.accept(batch)
    order_id = h.updates(OrderStatus.ACCEPTED)[0].order_id
    assert order_id is not None
    part = h.engine.attribute(match(1, order_id, "0.1"))
    assert (part.strategy, part.match.client_order_id, part.external) == ("mm", coid, False)
    assert h.updates(OrderStatus.FILLED) == []
    h.engine.attribute(match(2, order_id, "0.2"))
    (filled,) = h.updates(OrderStatus.FILLED)
    assert (filled.client_order_id, filled.order_id) == (coid, order_id)


def test_match_of_no_intent_is_external() -> None:
    h = make()
    event = h.engine.attribute(match(5, 424242))
    assert event == MatchFilled(event.match, None, True)
    assert event.match.client_order_id is None
    assert h.engine.counters()["matches_external"] == 1


def test_order_updates_are_addressed_to_the_submitting_strategy() -> None:
    h = make()
    a = h.engine.submit("alpha", intent())
    b = h.engine.submit("beta", intent(long=False))
    (batch,) = h.pump()
    h.accept(batch)
    by_id = {u.client_order_id: u.strategy for u in h.updates()}
    assert by_id == {a: "alpha", b: "beta"}


def test_venue_rule_refusal_has_no_round_trip() -> None:
    h = make()
    coid = h.engine.submit("s", intent("0.0001"))
    (rejected,) = h.updates(OrderStatus.REJECTED)
    assert (rejected.client_order_id, rejected.code) == (coid, 2312)
    assert h.pump() == [] and h.engine.idle


def test_user_client_order_id_is_validated_and_never_reused() -> None:
    h = make()
    ok = attrs.evolve(intent(), client_order_id="my-order_1")
    assert h.engine.submit("s", ok) == "my-order_1"
    with pytest.raises(ClientIdError, match="already used"):
        h.engine.submit("s", ok)
    with pytest.raises(ClientIdError, match="characters"):
        h.engine.submit("s", attrs.evolve(intent(), client_order_id="bad id!"))
    with pytest.raises(ClientIdError, match="characters"):
        h.engine.submit("s", attrs.evolve(intent(), client_order_id="x" * 33))
    with pytest.raises(ClientIdError, match="reserved"):
        h.engine.submit("s", attrs.evolve(intent(), client_order_id="t123"))


def test_counters_add_up() -> None:
    h = make()
    ids = [h.engine.submit("s", intent()) for _ in range(4)]
    h.engine.submit("s", intent("5000"))  # 2302 quantity too large
    (batch,) = h.pump()
    h.accept(batch, skip=frozenset({ids[0]}))
    c = h.engine.counters()
    assert c["orders_submitted"] == 5
    assert (c["orders_sent"], c["orders_accepted"], c["orders_unknown"]) == (4, 3, 1)
    assert (c["orders_rejected"], c["orders_risk_rejected"], c["batches_sent"]) == (1, 1, 1)


def test_market_ioc_intent_carries_its_fields_to_the_wire() -> None:
    h = make()
    h.engine.submit(
        "s",
        OrderIntent(
            pair="BTC-USD",
            is_long=False,
            quantity=Decimal("0.5"),
            match_type=MatchType.IOC,
            lever=5,
        ),
    )
    (batch,) = h.pump()
    (order,) = batch.orders
    assert (order.pair_name, order.is_long, order.is_market, order.price) == (
        "BTC-USD",
        False,
        True,
        None,
    )
    assert (order.match_type, order.lever, order.quantity) == (MatchType.IOC, 5, Decimal("0.5"))


def test_late_match_of_a_filled_order_is_linked_never_evidence() -> None:
    h = make()
    done = h.engine.submit("s", intent("0.1"))
    (batch,) = h.pump()
    h.accept(batch)
    order_id = h.updates(OrderStatus.ACCEPTED)[0].order_id
    assert order_id is not None
    h.engine.attribute(match(1, order_id, "0.1"))  # FILLED
    doubt = h.engine.submit("s", intent("0.1"))
    (batch,) = h.pump()
    h.engine.on_failure(batch, AmbiguousOutcome("reset"))
    late = h.engine.attribute(match(2, order_id, "0.1"))
    assert (late.match.client_order_id, late.strategy) == (done, "s")
    assert h.engine.status(doubt) is OrderStatus.UNKNOWN
