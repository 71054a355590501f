"""LiveExecutor against the venue twin over real sockets, with fault injection."""

from __future__ import annotations

import socket
from decimal import Decimal
from pathlib import Path

import attrs
import orjson
import pytest

from framework.engine.execution import Batch
from framework.engine.intents import OrderStatus
from framework.live.journal import Journal
from framework.twin.server import VenueTwin
from framework.venue.requests import OrderManagementPaths
from tests.live.conftest import Eventually
from tests.live.executor_fixtures import (
    FAST,
    market,
    resting_buy,
    trading,
    twin_settings,
)
from tests.live.test_rest_order_management import QUERY_ORDER_PATH, CannedServer, envelope, record

pytestmark = pytest.mark.anyio


def accepted_ids(twin: VenueTwin) -> set[str]:
    """Every clientOrderId the twin executed for the demo account."""
    assert twin.demo_user_id is not None
    return set(twin.exchange.accounts[twin.demo_user_id].client_ids)


async def test_45_intents_go_out_in_calls_of_20_20_5(eventually: Eventually) -> None:
    sizes: list[int] = []

    def observe(path: str, _query: str, body: bytes, /, request: bytes | None = None) -> None:
        if path.endswith("batchCreate"):
            sizes.append(len(orjson.loads(body)["data"]))

    async with VenueTwin(twin_settings(), port=0) as twin:
        async with trading(twin, observer=observe) as s:
            ids = [s.engine.submit("s", resting_buy()) for _ in range(45)]
            await eventually(lambda: len(s.updates(OrderStatus.ACCEPTED)) == 45)
        assert sorted(sizes, reverse=True) == [20, 20, 5]
        assert twin.counters.batch_calls == 3
        assert accepted_ids(twin) == set(ids)


async def test_partial_refusals_are_unknown_then_lost(eventually: Eventually) -> None:
    settings = attrs.evolve(FAST, unknown_window_s=0.2)
    async with VenueTwin(twin_settings(batch_mode="partial"), port=0) as twin:
        async with trading(twin, settings) as s:
            ids = [
                s.engine.submit("s", resting_buy("2000" if i % 4 == 0 else "0.1"))
                for i in range(12)
            ]
            refused = {c for i, c in enumerate(ids) if i % 4 == 0}
            await eventually(lambda: len(s.final()) == 12)
            final = s.final()
            assert {c for c, st in final.items() if st is OrderStatus.UNKNOWN} == refused
            assert {c for c, st in final.items() if st is OrderStatus.ACCEPTED} == set(
                ids
            ) - refused
            await eventually(lambda: len(s.updates(OrderStatus.LOST)) == 3)
        assert twin.counters.orders_refused == 3 and twin.counters.batch_calls == 1


async def test_partial_refusals_rejected_when_so_configured(eventually: Eventually) -> None:
    settings = attrs.evolve(FAST, missing_result="rejected")
    twin_cm = VenueTwin(twin_settings(batch_mode="partial"), port=0)
    async with twin_cm as twin, trading(twin, settings) as s:
        ids = [
            s.engine.submit("s", resting_buy("2000" if i in (1, 5) else "0.1")) for i in range(8)
        ]
        await eventually(lambda: len(s.final()) == 8)
        rejected = s.updates(OrderStatus.REJECTED)
        assert [(u.client_order_id, u.code) for u in rejected] == [
            (ids[1], 9010),
            (ids[5], 9010),
        ]
        assert len(s.updates(OrderStatus.ACCEPTED)) == 6


async def test_atomic_refusal_rejects_the_whole_call_with_its_code(eventually: Eventually) -> None:
    async with VenueTwin(twin_settings(batch_mode="atomic"), port=0) as twin:
        async with trading(twin) as s:
            ids = [s.engine.submit("s", resting_buy("2000" if i == 3 else "0.1")) for i in range(6)]
            await eventually(lambda: len(s.final()) == 6)
            rejected = s.updates(OrderStatus.REJECTED)
            assert [(u.client_order_id, u.code) for u in rejected] == [(c, 2302) for c in ids]
            assert rejected[0].msg == "Quantity cannot be greater than 1000"
        assert accepted_ids(twin) == set()


async def test_busy_storm_is_retried_and_each_id_accepted_once(eventually: Eventually) -> None:
    settings = attrs.evolve(FAST, retry_attempts=30, max_inflight=2)
    async with VenueTwin(twin_settings(), port=0) as twin:
        twin.faults.configure(busy_rate=0.5)
        async with trading(twin, settings) as s:
            ids = [s.engine.submit(f"s{i % 3}", resting_buy()) for i in range(100)]
            await eventually(lambda: len(s.final()) == 100, timeout=20)
            assert set(s.final().values()) == {OrderStatus.ACCEPTED}
            assert s.engine.counters()["retries"] > 0
        assert twin.counters.busy_answers > 0
        assert twin.counters.orders_refused == 0  # no clientOrderId was ever sent twice
        assert twin.counters.orders_accepted == 100
        assert accepted_ids(twin) == set(ids)


async def test_dropped_response_is_unknown_then_filled_by_evidence(eventually: Eventually) -> None:
    async with VenueTwin(twin_settings(), port=0) as twin:
        twin.faults.configure(drop_response_rate=1.0)
        async with trading(twin) as s:
            ids = [
                s.engine.submit("s", market("0.1")),
                s.engine.submit("s", market("0.2")),
            ]
            await eventually(lambda: len(s.updates(OrderStatus.UNKNOWN)) == 2)
            twin.faults.clear()
            matches = await s.rest.matches("ETH-USD")
            assert len(matches) == 2
            linked = [s.engine.attribute(m) for m in matches]
            assert {(f.match.client_order_id, f.strategy) for f in linked} == {
                (ids[0], "s"),
                (ids[1], "s"),
            }
            filled = {u.client_order_id: u.order_id for u in s.updates(OrderStatus.FILLED)}
            assert filled == {f.match.client_order_id: f.match.entrust_id for f in linked}
        assert twin.counters.dropped_responses == 1
        assert twin.counters.batch_calls == 1  # never resent


async def test_dropped_response_without_evidence_is_lost_never_resent(
    eventually: Eventually,
) -> None:
    settings = attrs.evolve(FAST, unknown_window_s=0.2)
    async with VenueTwin(twin_settings(), port=0) as twin:
        twin.faults.configure(drop_response_rate=1.0)
        async with trading(twin, settings) as s:
            coid = s.engine.submit("s", resting_buy())
            await eventually(lambda: s.final().get(coid) is OrderStatus.LOST)
            assert [u.status for u in s.updates()] == [OrderStatus.UNKNOWN, OrderStatus.LOST]
        assert twin.counters.batch_calls == 1
        assert accepted_ids(twin) == {coid}  # it does rest on the venue: LOST says "unknown"


async def test_fills_of_accepted_orders_carry_the_client_order_id(eventually: Eventually) -> None:
    async with VenueTwin(twin_settings(), port=0) as twin, trading(twin) as s:
        coid = s.engine.submit("alpha", market("0.3", long=False))
        await eventually(lambda: s.final().get(coid) is OrderStatus.ACCEPTED)
        (fill,) = await s.rest.matches("ETH-USD")
        event = s.engine.attribute(fill)
        assert (event.strategy, event.match.client_order_id, event.external) == (
            "alpha",
            coid,
            False,
        )
        assert s.final()[coid] is OrderStatus.FILLED


async def test_drain_waits_for_what_is_queued_and_in_flight(eventually: Eventually) -> None:
    settings = attrs.evolve(FAST, linger_ms=100)
    async with VenueTwin(twin_settings(), port=0) as twin:
        twin.faults.configure(latency=0.05)
        async with trading(twin, settings) as s:
            await eventually(lambda: s.executor.running)
            for _ in range(7):
                s.engine.submit("s", resting_buy())
            await s.executor.drain(5.0)
            assert s.engine.idle
            assert len(s.updates(OrderStatus.ACCEPTED)) == 7


async def test_unreachable_venue_is_retried_then_rejected(eventually: Eventually) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = attrs.evolve(FAST, retry_attempts=2)
    async with VenueTwin(twin_settings(), port=0) as twin:
        closed = f"http://127.0.0.1:{port}"  # connection refused: nothing was sent
        async with trading(twin, settings, base_url=closed) as s:
            coid = s.engine.submit("s", resting_buy())
            await eventually(lambda: s.final().get(coid) is OrderStatus.REJECTED)
            (update,) = s.updates()
            assert update.code == 9011
            assert s.engine.counters()["batches_sent"] == 3
        assert twin.counters.rest_calls == 0


async def test_orders_of_two_pairs_share_a_call(eventually: Eventually) -> None:
    async with VenueTwin(twin_settings(), port=0) as twin:
        async with trading(twin) as s:
            btc = s.engine.submit(
                "s", attrs.evolve(resting_buy(), pair="BTC-USD", price=Decimal("50000"))
            )
            eth = s.engine.submit("s", resting_buy())
            await eventually(lambda: len(s.updates(OrderStatus.ACCEPTED)) == 2)
        assert twin.counters.batch_calls == 1
        assert accepted_ids(twin) == {btc, eth}


async def test_submits_of_one_call_stack_go_as_one_batch_with_one_commit(
    eventually: Eventually, tmp_path: Path
) -> None:
    path = tmp_path / "journal.db"
    seen: dict[str, list[tuple[OrderStatus, bool] | None]] = {}

    def at_commit(stage: str, batch: Batch) -> None:
        reader = Journal.open(path)  # what a restart would find at this point
        try:
            seen[stage] = [
                None if (row := reader.status_of(c)) is None else (row[0], row[1])
                for c in batch.client_order_ids
            ]
        finally:
            reader.close()

    async with VenueTwin(twin_settings(), port=0) as twin:
        journal = Journal.open(path)
        async with trading(twin, journal=journal, after_commit=at_commit) as s:
            await eventually(lambda: s.executor.running and s.rest.orders.connects == 1)
            ids = [s.engine.submit("s", resting_buy()) for _ in range(5)]  # one hook's worth
            await eventually(lambda: len(s.updates(OrderStatus.ACCEPTED)) == 5)
            assert s.rest.orders.connects == 1  # written on the warm keep-alive socket
        journal.close()
        assert twin.counters.batch_calls == 1 and accepted_ids(twin) == set(ids)
    assert seen["cut"] == [None] * 5  # before the batch's commit: nothing of it is durable
    assert seen["sent"] == [(OrderStatus.PENDING, True)] * 5  # rows and mark: one commit


async def test_a_query_the_venue_answers_404_leaves_the_order_as_known_and_cancels_on(
    eventually: Eventually, caplog: pytest.LogCaptureFixture
) -> None:
    # queryOrder at a path the twin does not serve (HTTP 404); cancels at the real ones.
    paths = attrs.evolve(OrderManagementPaths(), query_order="/api/third/order/noSuchQuery")
    calls: list[str] = []

    def observe(path: str, query: str, _body: bytes, /, request: bytes | None = None) -> None:
        if "ancel" in path:
            calls.append(f"{path.rsplit('/', 1)[-1]}?{query}")

    async with (
        VenueTwin(settings=twin_settings()) as twin,
        trading(twin, order_paths=paths, observer=observe) as s,
    ):
        cid = s.engine.submit("s", resting_buy())
        await eventually(lambda: s.final().get(cid) is OrderStatus.ACCEPTED)
        assert s.engine.check_open_orders("ETH-USD", [])["missing"] == 1  # the list lacks it
        await eventually(lambda: any("query failed" in r.getMessage() for r in caplog.records))
        assert s.engine.cancels.available and not s.engine.cancels.queries_available
        assert s.final()[cid] is OrderStatus.ACCEPTED
        # Two more, then all three cancelled: one order per call, each answer names its order.
        more = [s.engine.submit("s", resting_buy()) for _ in range(2)]
        await eventually(lambda: all(s.final().get(c) is OrderStatus.ACCEPTED for c in more))
        assert s.engine.cancel_all("s") == 3
        await eventually(lambda: all(s.final()[c] is OrderStatus.CANCELED for c in [cid, *more]))
        assert len(calls) == 3 and all(c.startswith("cancelEntrust?") for c in calls), calls
        assert s.engine.idle


async def test_a_query_record_naming_another_order_is_no_evidence_and_the_ask_ends(
    eventually: Eventually, caplog: pytest.LogCaptureFixture
) -> None:
    # A small server: batchCreate accepts with orderIds 100..., queryOrder names order 999.
    def answer(path: str, _query: str) -> tuple[int, bytes]:
        if path.endswith("batchCreate"):
            orders = orjson.loads(server.seen[-1][2])["orders"]
            results = [
                {"orderId": 100 + i, "cOrderId": o["clientOrderId"]} for i, o in enumerate(orders)
            ]
            return 200, envelope(results)
        if path == QUERY_ORDER_PATH:
            return 200, envelope(record(999, status="CANCELED", filledQuantity="0"))
        return 404, b"{}"

    async with CannedServer(answer) as server, trading(None, base_url=server.base_url) as s:
        cid = s.engine.submit("s", resting_buy())
        await eventually(lambda: s.final().get(cid) is OrderStatus.ACCEPTED)
        assert s.engine.check_open_orders("ETH-USD", [])["missing"] == 1  # queried: 100
        await eventually(lambda: s.engine.idle)  # the ask ends (it stayed open for ever)
        assert s.final()[cid] is OrderStatus.ACCEPTED  # another order's record changes nothing
        assert any("names order 999" in r.getMessage() for r in caplog.records)
