"""Hypothesis: any sequence of intents, answers, failures and evidence ends well.

Every intent ends in exactly one terminal state reached by a legal path, no clientOrderId is
ever sent with two different payloads, nothing is sent after it became UNKNOWN or was
answered, batches hold at most 20 orders, and each strategy's intents leave in order.
Matches may be seen before the answer that names their order (the poller runs beside the
send): every match reaches the bus exactly once, and one seen early names its order.
"""

from __future__ import annotations

import itertools
import random
from decimal import Decimal

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.engine.events import MatchFilled
from framework.engine.execution import Batch, ExecutionSettings
from framework.engine.intents import OrderStatus
from framework.venue.errors import (
    AmbiguousOutcome,
    BadResponse,
    BusyError,
    DecodeError,
    LimitError,
    SendFailed,
)
from framework.venue.models import MatchRecord, OrderInput, OrderResult
from tests.engine.test_execution import Harness, intent, make

S = OrderStatus
LEGAL_PATHS = {
    (S.REJECTED,),
    (S.ACCEPTED,),
    (S.ACCEPTED, S.FILLED),
    (S.UNKNOWN, S.FILLED),
    (S.UNKNOWN, S.LOST),
    (S.UNKNOWN, S.AMBIGUOUS),  # one of same-looking in-doubt intents a match agreed with
}

ops = st.one_of(
    st.tuples(
        st.just("submit"),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["0.1", "0.2", "5000"]),  # 5000: refused by the risk check
        st.booleans(),
    ),
    st.tuples(st.just("advance"), st.integers(0, 3000)),
    st.tuples(st.just("pump")),
    st.tuples(
        st.just("answer"),
        st.integers(0, 10),
        st.sampled_from(
            ["all", "some", "strangers", "venue", "busy", "send", "ambiguous", "bad", "decode"]
        ),
        st.randoms(use_true_random=False),
    ),
    st.tuples(st.just("evidence"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("early"), st.integers(0, 50)),
    st.tuples(st.just("tick")),
)


@attrs.define
class World:
    """The harness plus what the test saw go out."""

    h: Harness
    inflight: list[Batch] = attrs.Factory(list)
    submitted: dict[str, list[str]] = attrs.Factory(dict)
    payloads: dict[str, OrderInput] = attrs.Factory(dict)
    first_sends: list[str] = attrs.Factory(list)
    settled: set[str] = attrs.Factory(set)  # answered or in doubt: must never go out again
    match_ids: itertools.count[int] = attrs.Factory(lambda: itertools.count(1))
    order_ids: itertools.count[int] = attrs.Factory(lambda: itertools.count(10_000))
    early: dict[str, int] = attrs.Factory(dict)  # fill seen before the answer: its orderId
    early_matches: dict[int, str] = attrs.Factory(dict)  # match id -> client order id
    returned: list[MatchFilled] = attrs.Factory(list)  # what attribute() handed back
    match_count: int = 0

    def statuses(self, coid: str) -> list[OrderStatus]:
        return [u.status for u in self.h.updates() if u.client_order_id == coid]

    def pump(self) -> None:
        while (batch := self.h.engine.next_batch()) is not None:
            assert 1 <= len(batch.orders) <= 20
            for order in batch.orders:
                coid = order.client_order_id
                # Never resent once answered or UNKNOWN: only PENDING intents go out.
                assert self.statuses(coid) == [], (coid, self.statuses(coid))
                assert coid not in self.settled, f"{coid} resent after an answer or a doubt"
                seen = self.payloads.setdefault(coid, order)
                assert seen == order, f"{coid} sent with two payloads"
                if batch.attempt == 0:
                    self.first_sends.append(coid)
            self.h.engine.begin_send(batch)
            self.inflight.append(batch)

    def answer(self, index: int, kind: str, rnd: random.Random) -> None:
        if not self.inflight:
            return
        batch = self.inflight.pop(index % len(self.inflight))
        engine = self.h.engine
        if kind in ("busy", "send", "venue") and any(
            c in self.early for c in batch.client_order_ids
        ):
            kind = "all"  # the venue executed the batch (its fills were seen): no such answer
        if kind not in ("busy", "send"):
            self.settled.update(batch.client_order_ids)
        if kind in ("all", "some", "strangers"):
            orders = list(batch.orders)
            if kind != "all":
                orders = [o for o in orders if rnd.random() < 0.5]
            rnd.shuffle(orders)
            results = [
                OrderResult(
                    client_order_id=o.client_order_id,
                    order_id=self.early.get(o.client_order_id) or next(self.order_ids),
                )
                for o in orders
            ]
            if kind == "strangers":
                results.append(OrderResult(client_order_id="zz-stranger", order_id=1))
            engine.on_results(batch, results)
            return
        failures: dict[str, BaseException] = {
            "venue": LimitError(2305, "The quantity of one-way positions ..."),
            "busy": BusyError(2329, "The server is updating, please wait a moment..."),
            "send": SendFailed("connection refused"),
            "ambiguous": AmbiguousOutcome("read timeout"),
            "bad": BadResponse("HTTP 503", http_status=503),
            "decode": DecodeError("OrderResult", "orderId", "expected an integer"),
        }
        engine.on_failure(batch, failures[kind])

    def evidence(self, pick: int, agree: bool) -> None:
        unknown = [
            c
            for ids in self.submitted.values()
            for c in ids
            if self.h.engine.status(c) is S.UNKNOWN
        ]
        if unknown and agree:
            order = self.payloads[unknown[pick % len(unknown)]]
            record = MatchRecord(
                id=next(self.match_ids),
                entrust_id=next(self.order_ids),
                symbol=order.pair_name,
                is_long=order.is_long,
                quantity=order.quantity,
            )
        else:
            record = MatchRecord(
                id=next(self.match_ids),
                entrust_id=next(self.order_ids),
                symbol="ETH-USD",
                is_long=True,
                quantity=Decimal("0.7"),
            )
        self.attribute(record)

    def attribute(self, record: MatchRecord) -> None:
        self.match_count += 1
        event = self.h.engine.attribute(record)
        if event is not None:
            self.returned.append(event)

    def fill_early(self, pick: int) -> None:
        """A poll finds the whole fill of an order whose batch is still in flight."""
        candidates = [
            o for b in self.inflight for o in b.orders if o.client_order_id not in self.early
        ]
        if not candidates:
            return
        order = candidates[pick % len(candidates)]
        order_id = self.early[order.client_order_id] = next(self.order_ids)
        match_id = next(self.match_ids)
        self.early_matches[match_id] = order.client_order_id
        self.attribute(
            MatchRecord(
                id=match_id,
                entrust_id=order_id,
                symbol=order.pair_name,
                is_long=order.is_long,
                quantity=order.quantity,
            )
        )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=80), st.sampled_from(["unknown", "rejected"]))
def test_every_intent_ends_in_exactly_one_terminal_state(
    steps: list[tuple[object, ...]], missing: str
) -> None:
    h = make(
        ExecutionSettings(
            linger_ms=20,
            max_inflight=3,
            calls_per_second=20.0,
            retry_attempts=2,
            unknown_window_s=5.0,
            missing_result=missing,  # type: ignore[arg-type]
        )
    )
    w = World(h)
    for step in steps:
        op = step[0]
        if op == "submit":
            _, strategy, qty, long = step
            coid = h.engine.submit(str(strategy), intent(str(qty), long=bool(long)))
            w.submitted.setdefault(str(strategy), []).append(coid)
        elif op == "advance":
            h.clock.advance(int(step[1]))  # type: ignore[call-overload]
        elif op == "pump":
            w.pump()
        elif op == "answer":
            w.answer(int(step[1]), str(step[2]), step[3])  # type: ignore[call-overload, arg-type]
        elif op == "evidence":
            w.evidence(int(step[1]), bool(step[2]))  # type: ignore[call-overload]
        elif op == "early":
            w.fill_early(int(step[1]))  # type: ignore[call-overload]
        else:
            h.engine.tick()
    # Quiesce: answer everything still in flight, let retries and windows run out.
    for _ in range(200):
        w.pump()
        while w.inflight:
            w.answer(0, "all", random.Random(0))
            w.pump()
        if h.engine.idle:
            break
        h.clock.advance(10_000)
    assert h.engine.idle
    h.clock.advance(10_000)
    h.engine.tick()

    every = [c for ids in w.submitted.values() for c in ids]
    assert len(set(every)) == len(every)
    for coid in every:
        path = tuple(w.statuses(coid))
        assert path in LEGAL_PATHS, (coid, path)
    assert h.engine.unknown_count == 0
    for strategy, ids in w.submitted.items():
        sent = [c for c in w.first_sends if c in set(ids)]
        assert sent == [c for c in ids if c in set(sent)], strategy
    counters = h.engine.counters()
    finals = [w.statuses(c)[-1] for c in every]
    assert counters["orders_rejected"] == finals.count(S.REJECTED)
    assert counters["orders_lost"] == finals.count(S.LOST)
    assert counters["orders_sent"] == len(w.payloads)

    # Every match reached the bus exactly once (returned, or published once it was decided).
    published = [e for e in h.events if isinstance(e, MatchFilled)]
    delivered = {e.match.id: e for e in w.returned + published}
    assert len(delivered) == len(w.returned) + len(published) == w.match_count
    linked, external = counters["matches_linked"], counters["matches_external"]
    assert linked + external + counters["matches_ambiguous"] == w.match_count
    strategy_of = {c: s for s, ids in w.submitted.items() for c in ids}
    quantity_of = {u.client_order_id: u.intent.quantity for u in h.updates()}
    for event in delivered.values():
        if event.candidates:  # named for no intent, not external
            assert event.match.client_order_id is None and not event.external
            assert event.strategy in {strategy_of[c] for c in event.candidates} | {None}
            quantities = {quantity_of[c] for c in event.candidates}
            if quantities == {event.match.quantity}:  # counted for a doubt group
                assert all(S.AMBIGUOUS in w.statuses(c) for c in event.candidates)
            else:  # perhaps a part of a larger one: evidence for none, each stays in doubt
                assert all(S.UNKNOWN in w.statuses(c) for c in event.candidates)
                assert any(quantity_of[c] > event.match.quantity for c in event.candidates)
            continue
        assert event.external == (event.match.client_order_id is None)
        assert event.strategy == strategy_of.get(event.match.client_order_id or "")
    for match_id, coid in w.early_matches.items():
        if w.statuses(coid)[:1] == [S.ACCEPTED]:  # the answer named it: the match is its own
            assert delivered[match_id].match.client_order_id == coid
            assert w.statuses(coid) == [S.ACCEPTED, S.FILLED]
