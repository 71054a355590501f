"""Throughput of the venue twin: batchCreate calls of 20 orders per second, over real sockets.

Starts the twin in a subprocess (``python -m framework.twin.cli --port 0``), then drives it
from this machine with several concurrent httpx connections (optionally from several client
processes) for a fixed time, and prints calls/s, orders/s and latency percentiles. Each call
carries 20 IOC market orders of the minimum size, alternating long and short, so positions
open and close all the time (NEW/CLOSE fills, match records, balance updates). With ``--ws``
a WebSocket client subscribes to the demo account's pushes during the run.

    python tests/benchmarks/bench_twin.py [--seconds 10] [--connections 4] [--processes 1] [--ws]

Not a pytest test: it prints figures, the issue's target is 300 calls/s of 20 orders.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY  # noqa: E402
from framework.venue.signing import Secp256k1Signer  # noqa: E402

BATCH_PATH = "/api/third/hot/order/batchCreate"
ORDERS_PER_CALL = 20


def _orders(prefix: str, n: int) -> list[dict[str, Any]]:
    return [
        {
            "clientOrderId": f"{prefix}-{n}-{i}",
            "isLong": i % 2 == 0,
            "isMarket": True,
            "lever": 10,
            "matchType": 2,
            "pairName": "ETH-USD",
            "positionType": 3,
            "quantity": "0.001",
        }
        for i in range(ORDERS_PER_CALL)
    ]


async def _drive(base_url: str, seconds: float, connections: int, tag: str) -> dict[str, Any]:
    signer = Secp256k1Signer(DEMO_PRIVATE_KEY)
    latencies: list[float] = []
    failures: dict[str, int] = {}
    accepted = 0
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=10) as client:
        deadline = time.perf_counter() + seconds

        async def worker(w: int) -> None:
            nonlocal accepted
            n = 0
            while time.perf_counter() < deadline:
                n += 1
                body = orjson.dumps(
                    {
                        "orders": _orders(f"{tag}-{w}", n),
                        "timestamp": str(int(time.time() * 1000)),
                    }
                )
                headers = {
                    "APIKEY": DEMO_API_KEY,
                    "signature": signer.sign(body.decode()),
                    "X-SAPI-SIGN-TYPE": "2",
                    "Content-Type": "application/json",
                }
                started = time.perf_counter()
                try:
                    response = await client.post(BATCH_PATH, content=body, headers=headers)
                    answer = response.json()
                except httpx.HTTPError as exc:
                    failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                    continue
                latencies.append(time.perf_counter() - started)
                if answer.get("code") != 200:
                    key = f"code {answer.get('code')}"
                    failures[key] = failures.get(key, 0) + 1
                else:
                    accepted += len(answer["data"])

        await asyncio.gather(*(worker(w) for w in range(connections)))
    return {"latencies": latencies, "failures": failures, "accepted": accepted}


def _client_process(base_url: str, seconds: float, connections: int, tag: str, out: Any) -> None:
    out.put(asyncio.run(_drive(base_url, seconds, connections, tag)))


async def _watch_pushes(ws_url: str, stop: asyncio.Event) -> int:
    from websockets.asyncio.client import connect

    signer = Secp256k1Signer(DEMO_PRIVATE_KEY)
    received = 0
    async with connect(ws_url, max_queue=None) as ws:
        for event, key, value in (
            ("api_position", "pair", "ETH-USD"),
            ("api_account", "symbol", "USD"),
        ):
            stamp = int(time.time() * 1000)
            await ws.send(
                json.dumps(
                    {
                        "method": "SUBSCRIBE",
                        "event": event,
                        "apiKey": DEMO_API_KEY,
                        "signType": "2",
                        "signature": signer.sign(str(stamp)),
                        "timestamp": stamp,
                        key: value,
                    }
                )
            )
        while not stop.is_set():
            try:
                await asyncio.wait_for(ws.recv(), 0.5)
            except TimeoutError:
                continue
            received += 1
    return received


def _start_twin() -> tuple[subprocess.Popen[str], str, str]:
    twin = subprocess.Popen(
        [sys.executable, "-m", "framework.twin.cli", "--port", "0", "--balance", "100000000"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert twin.stdout is not None
    base_url = ws_url = ""
    for line in twin.stdout:
        if line.strip().startswith("REST"):
            base_url = line.split()[-1]
        elif line.strip().startswith("WebSocket"):
            ws_url = line.split()[-1]
            break
    if not base_url:
        twin.kill()
        raise SystemExit("the twin did not start")
    return twin, base_url, ws_url


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far; None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--ws", action="store_true", help="also subscribe to the pushes")
    args = parser.parse_args()

    twin, base_url, ws_url = _start_twin()
    try:
        # Warm up (imports, first connections) before measuring.
        asyncio.run(_drive(base_url, 0.5, 2, "warm"))
        queue: Any = multiprocessing.get_context("spawn").Queue()
        pushes = 0
        cpu_before = _cpu_seconds(twin.pid)
        started = time.perf_counter()
        procs = [
            multiprocessing.get_context("spawn").Process(
                target=_client_process,
                args=(base_url, args.seconds, args.connections, f"p{p}", queue),
            )
            for p in range(args.processes)
        ]
        for proc in procs:
            proc.start()
        results: list[dict[str, Any]] = []
        if args.ws:

            async def watch() -> int:
                stop = asyncio.Event()
                task = asyncio.create_task(_watch_pushes(ws_url, stop))
                got = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: [queue.get() for _ in procs]
                )
                results.extend(got)
                stop.set()
                return await task

            pushes = asyncio.run(watch())
        else:
            results = [queue.get() for _ in procs]
        _join_all(procs)
        elapsed = time.perf_counter() - started
        cpu_after = _cpu_seconds(twin.pid)
    finally:
        twin.terminate()
        twin.wait(10)

    latencies = sorted(x for r in results for x in r["latencies"])
    calls = len(latencies)
    accepted = sum(r["accepted"] for r in results)
    failures: dict[str, int] = {}
    for r in results:
        for k, v in r["failures"].items():
            failures[k] = failures.get(k, 0) + v
    seconds = min(elapsed, args.seconds) or 1.0
    print(
        f"venue twin benchmark: {args.processes} client process(es) x "
        f"{args.connections} connections, {args.seconds:.0f} s, {ORDERS_PER_CALL} orders/call"
    )
    print(f"  calls        {calls}  ({calls / seconds:.0f} calls/s)")
    print(f"  orders       {accepted} accepted  ({accepted / seconds:.0f} orders/s)")
    if latencies:
        q = statistics.quantiles(latencies, n=100)
        print(
            f"  latency ms   p50 {q[49] * 1000:.1f}  p90 {q[89] * 1000:.1f}  "
            f"p99 {q[98] * 1000:.1f}  max {latencies[-1] * 1000:.1f}"
        )
    if cpu_before is not None and cpu_after is not None and calls:
        used = cpu_after - cpu_before
        print(
            f"  twin CPU     {used:.1f} s for {calls} calls = {used / calls * 1000:.2f} ms/call "
            f"(one core could serve ~{calls / used:.0f} calls/s)"
        )
    if args.ws:
        print(f"  pushes       {pushes} received on one WebSocket")
    print(f"  failures     {failures or 'none'}")
    print(f"  target 300 calls/s: {'met' if calls / seconds >= 300 else 'NOT met'}")


def _join_all(procs: list[Any]) -> None:
    for proc in procs:
        proc.join()


if __name__ == "__main__":
    main()
