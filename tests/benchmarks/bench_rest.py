"""batch_create calls per second with 20 orders against a local server, beside raw httpx.

The server (tests/live/signing_server.py without signature checks) runs in its own process.
The baseline posts one pre-built, pre-signed body with a bare httpx.AsyncClient, so the gap
between the two lines is what the framework adds per call: encoding 20 orders, signing,
parsing and decoding the answer.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from framework.live.rest import RestClient  # noqa: E402
from framework.venue.models import MatchType, OrderInput, PositionType  # noqa: E402
from framework.venue.signing import Secp256k1Signer  # noqa: E402

KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"  # test-only key
SECONDS = float(os.environ.get("BENCH_SECONDS", "5"))
CONCURRENCY = 8

SERVER = """
import asyncio, orjson, sys
sys.path.insert(0, %r)
from tests.live.signing_server import SigningServer
from tests.live.test_rest import echo_orders
async def main():
    async with SigningServer("st_demo", "", verify=False) as s:
        s.data = echo_orders
        print(s.port, flush=True)
        await asyncio.Event().wait()
asyncio.run(main())
"""


def orders() -> list[OrderInput]:
    return [
        OrderInput(
            client_order_id=f"bench-{i}",
            is_long=i % 2 == 0,
            is_market=False,
            lever=10,
            match_type=MatchType.GTC,
            pair_name="ETH-USD",
            position_type=PositionType.ISOLATED,
            price=Decimal("1850.5") + i,
            quantity=Decimal("0.01"),
        )
        for i in range(20)
    ]


async def run_for(seconds: float, call: object) -> float:
    done = 0
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await call()  # type: ignore[operator]
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done / (time.perf_counter() - start)


async def main(port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    batch = orders()
    async with RestClient(base, "st_demo", Secp256k1Signer(KEY)) as rest:
        prepared = rest.builder.batch_create(batch, 1700000000000)
        async with httpx.AsyncClient(base_url=base) as raw:

            async def baseline() -> None:
                r = await raw.post(prepared.path, content=prepared.body, headers=prepared.headers)
                r.raise_for_status()

            async def framework() -> None:
                results = await rest.batch_create(batch)
                assert len(results) == 20

            await run_for(0.5, baseline)
            base_rate = await run_for(SECONDS, baseline)
            fw_rate = await run_for(SECONDS, framework)
    print(f"{'raw httpx post of a pre-signed body (baseline)':<52} {base_rate:>8.0f} calls/s")
    print(f"{'RestClient.batch_create, 20 orders, sign + decode':<52} {fw_rate:>8.0f} calls/s")
    print(f"{'framework / baseline':<52} {fw_rate / base_rate:>8.2f}")
    print(f"{'orders per second through RestClient':<52} {fw_rate * 20:>8.0f}")


if __name__ == "__main__":
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER % str(ROOT)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        asyncio.run(main(int(proc.stdout.readline())))
    finally:
        proc.kill()
