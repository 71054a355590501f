"""Execution engine throughput: intents/s end to end against the twin, and CPU per intent.

    python tests/benchmarks/bench_execution.py [--intents 20000] [--cpu-intents 40000]
                                               [--skip-e2e] [--skip-cpu]

1. Framework CPU per intent without the network: submit (id, risk check, queue), batching,
   encoding, signing (one secp256k1 signature per batch of 20), parsing a canned answer and
   reconciling it into ACCEPTED OrderUpdates. Printed beside a baseline measured in the same
   run: the protocol work alone on the same batches (encode the orders, sign the body, parse
   the answer), which any client of the venue pays. Also with an in-memory and an on-disk
   journal (one commit per batch plus the 'sent' mark). Target: <= 30 us per intent.
2. End to end: intents/s from the first submit() to the last ACCEPTED OrderUpdate, against
   the venue twin in a separate process (``python -m framework.twin.cli --port 0``), through
   the LiveExecutor and RestClient, with an on-disk journal. Target: >= 5,000 intents/s.

Not a pytest test: it prints figures. CPU figures are process_time (the client's own CPU).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from framework.engine.client_ids import ClientIdGenerator  # noqa: E402
from framework.engine.events import Event, OrderUpdate  # noqa: E402
from framework.engine.execution import Batch, ExecutionEngine, ExecutionSettings  # noqa: E402
from framework.engine.intents import OrderIntent, OrderStatus  # noqa: E402
from framework.live.journal import Journal  # noqa: E402
from framework.live.rest import RestClient  # noqa: E402
from framework.live.wallclock import WallClock  # noqa: E402
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY  # noqa: E402
from framework.venue.codec import dumps_compact, encode_orders  # noqa: E402
from framework.venue.models import MatchType, OrderInput, PositionType  # noqa: E402
from framework.venue.requests import BATCH_CREATE_PATH, RequestBuilder, parse_response  # noqa: E402
from framework.venue.rules import PairRules  # noqa: E402
from framework.venue.signing import Secp256k1Signer  # noqa: E402
from tests.live.executor_fixtures import build_execution  # noqa: E402

RULES = {"ETH-USD": PairRules(), "BTC-USD": PairRules()}


def intents(n: int) -> list[OrderIntent]:
    """n resting limit buys below the twin's mark, a few distinct shapes."""
    shapes = [
        OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal("0.001"), price=Decimal(p))
        for p in ("1500", "1499.5", "1498.25", "1497")
    ]
    return [shapes[i % len(shapes)] for i in range(n)]


def canned_answer(batch: Batch, first_order_id: int) -> bytes:
    """The twin's answer to a batch: every order accepted (built outside the timing)."""
    data = [
        {"corderId": o.client_order_id, "orderId": first_order_id + i, "pairName": o.pair_name}
        for i, o in enumerate(batch.orders)
    ]
    return orjson.dumps({"error": False, "code": 200, "msg": "SUCCESS", "data": data, "sid": "1"})


def cpu_run(n: int, journal: Journal | None) -> tuple[float, float, int]:
    """(framework s, protocol-baseline s, accepted) of CPU time for n intents, no network."""
    clock_ms = [1_700_000_000_000]
    accepted = 0

    def publish(event: Event) -> None:
        nonlocal accepted
        if type(event) is OrderUpdate and event.status is OrderStatus.ACCEPTED:
            accepted += 1

    ids = (
        ClientIdGenerator("bench", journal)
        if journal is not None
        else ClientIdGenerator.ephemeral("bench", now_ms=clock_ms[0], random_bits=1)
    )
    engine = ExecutionEngine(
        ExecutionSettings(calls_per_second=1e9, max_inflight=1_000_000),
        rules=RULES,
        publish=publish,
        now_ms=lambda: clock_ms[0],
        ids=ids,
        journal=journal,
    )
    signer = Secp256k1Signer(DEMO_PRIVATE_KEY)
    builder = RequestBuilder(DEMO_API_KEY, signer)
    work = intents(n)
    chunk = 200
    framework_ns = 0
    baseline_ns = 0
    order_id = 1
    clock = time.process_time_ns
    for start in range(0, n, chunk):
        t0 = clock()
        for it in work[start : start + chunk]:
            engine.submit("bench", it)
        while (batch := engine.next_batch()) is not None:
            engine.begin_send(batch)
            builder.batch_create(batch.orders, clock_ms[0])
            framework_ns += clock() - t0
            body = canned_answer(batch, order_id)  # not timed: the venue's work
            order_id += len(batch.orders)
            t0 = clock()
            engine.on_results(batch, parse_response(BATCH_CREATE_PATH, 200, body))
            framework_ns += clock() - t0
            # Baseline: the protocol work alone on the same batch.
            b0 = clock()
            text = dumps_compact(
                {"orders": encode_orders(batch.orders), "timestamp": str(clock_ms[0])}
            ).decode("ascii")
            signer.sign(text)
            orjson.loads(body)
            baseline_ns += clock() - b0
            t0 = clock()
        framework_ns += clock() - t0
        clock_ms[0] += 1
    engine.flush()
    return framework_ns / 1e9, baseline_ns / 1e9, accepted


def cpu_bench(n: int) -> None:
    """Print the CPU figures."""
    cpu_run(2000, None)  # warm up
    print(f"framework CPU per intent, no network ({n} intents, batches of 20):")
    rows: list[tuple[str, Callable[[], Journal | None]]] = [
        ("no journal", lambda: None),
        ("journal :memory:", lambda: Journal.open(":memory:")),
    ]
    tmp = tempfile.TemporaryDirectory()
    rows.append(("journal on disk (WAL)", lambda: Journal.open(Path(tmp.name) / "j.db")))
    for name, make_journal in rows:
        journal = make_journal()
        framework_s, baseline_s, accepted = cpu_run(n, journal)
        assert accepted == n, (accepted, n)
        fold = ""
        if journal is not None:
            t0 = time.process_time()
            journal.compact()
            fold = f"   + log fold when idle {(time.process_time() - t0) / n * 1e6:4.1f} us/intent"
            journal.close()
        per = framework_s / n * 1e6
        base = baseline_s / n * 1e6
        print(
            f"  {name:22s} framework {per:5.1f} us/intent   baseline (encode+sign+parse only)"
            f" {base:4.1f} us/intent   ratio {per / base:3.1f}x"
            f"   target <= 30 us: {'OK' if per <= 30 else 'MISSED'}{fold}"
        )
    tmp.cleanup()


def start_twin() -> tuple[subprocess.Popen[str], str]:
    """The venue twin in a process of its own; returns it and its base URL."""
    twin = subprocess.Popen(
        [sys.executable, "-m", "framework.twin.cli", "--port", "0", "--balance", "100000000"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert twin.stdout is not None
    for line in twin.stdout:
        if line.strip().startswith("REST"):
            return twin, line.split()[-1]
    twin.kill()
    raise SystemExit("the twin did not start")


async def e2e_run(base_url: str, n: int, settings: ExecutionSettings, path: Path | None) -> Any:
    """(wall seconds, accepted, counters) for n intents submitted at once."""
    journal = Journal.open(path) if path is not None else None
    signer = Secp256k1Signer(DEMO_PRIVATE_KEY)
    done = anyio.Event()
    accepted = 0
    other = 0

    def publish(event: Event) -> None:
        nonlocal accepted, other
        if type(event) is OrderUpdate:
            if event.status is OrderStatus.ACCEPTED:
                accepted += 1
            else:
                other += 1
            if accepted + other == n:
                done.set()

    async with RestClient(base_url, DEMO_API_KEY, signer) as rest:
        engine, executor = build_execution(
            settings, rest, publish=publish, rules=RULES, journal=journal
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(executor.run)
            work = intents(n)
            cpu0 = time.process_time()
            t0 = time.perf_counter()
            # A burst in chunks of 100 with a checkpoint between: sending overlaps submitting.
            for start in range(0, n, 100):
                for it in work[start : start + 100]:
                    engine.submit("bench", it)
                await anyio.lowlevel.checkpoint()
            with anyio.move_on_after(120):
                await done.wait()
            elapsed = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            tg.cancel_scope.cancel()
    if journal is not None:
        journal.close()
    return elapsed, accepted, other, cpu, engine.counters()


def e2e_bench(n: int) -> None:
    """Print the end-to-end figures; each row gets a fresh twin process (same start state)."""
    # Defaults (max_inflight 4, linger 0) but the call rate: the default 50 calls/s caps at
    # 1,000 intents/s. More calls in flight only add httpcore pool overhead on 2 cores.
    settings = ExecutionSettings(calls_per_second=100_000.0)
    tmp = tempfile.TemporaryDirectory()
    print(f"end to end against the twin in another process ({n} intents, bursts of 100):")
    try:
        twin, base_url = start_twin()
        try:
            anyio.run(raw_calls, base_url, 100, "warm")  # warm up
            raw = anyio.run(raw_calls, base_url, n // 20, "run")
        finally:
            twin.terminate()
            twin.wait(10)
        print(
            f"  baseline: raw pre-signed batchCreate calls of 20, 4 at a time:  "
            f"{raw:8.0f} orders/s (the twin's ceiling from one client process)"
        )
        for name, path in (
            ("no journal", None),
            ("journal on disk (WAL)", Path(tmp.name) / "j.db"),
        ):
            twin, base_url = start_twin()
            try:
                anyio.run(e2e_run, base_url, 2000, settings, None)  # warm up
                elapsed, accepted, other, cpu, counters = anyio.run(
                    e2e_run, base_url, n, settings, path
                )
            finally:
                twin.terminate()
                twin.wait(10)
            rate = accepted / elapsed
            print(
                f"  {name:24s} {rate:8.0f} intents/s accepted ({accepted} accepted, {other} other,"
                f" {counters['batches_sent']} calls, {elapsed:.2f} s, client CPU"
                f" {cpu / max(accepted, 1) * 1e6:.0f} us/intent incl. HTTP)"
                f"   target >= 5,000/s: {'OK' if rate >= 5000 else 'MISSED'}"
            )
    finally:
        tmp.cleanup()


async def raw_calls(base_url: str, calls: int, tag: str) -> float:
    """Orders/s of pre-signed batchCreate calls sent 4 at a time through a RestClient."""
    signer = Secp256k1Signer(DEMO_PRIVATE_KEY)
    builder = RequestBuilder(DEMO_API_KEY, signer)
    requests = []
    for c in range(calls):
        orders = [
            OrderInput(
                client_order_id=f"raw{tag}x{c}x{i}",
                is_long=True,
                is_market=False,
                lever=1,
                match_type=MatchType.GTC,
                pair_name="ETH-USD",
                position_type=PositionType.ISOLATED,
                price=Decimal("1500"),
                quantity=Decimal("0.001"),
            )
            for i in range(20)
        ]
        requests.append(builder.batch_create(orders, WallClock().now_ms()))
    async with RestClient(base_url, DEMO_API_KEY, signer) as rest:
        it = iter(requests)
        t0 = time.perf_counter()

        async def worker() -> None:
            for request in it:
                await rest.call(request)

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(worker)
        return calls * 20 / (time.perf_counter() - t0)


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--intents", type=int, default=20_000)
    parser.add_argument("--cpu-intents", type=int, default=40_000)
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--skip-cpu", action="store_true")
    args = parser.parse_args()
    if not args.skip_cpu:
        cpu_bench(args.cpu_intents)
    if not args.skip_e2e:
        e2e_bench(args.intents)


if __name__ == "__main__":
    main()
