"""What the exchange and the venue twin keep per order, measured with tracemalloc.

Each scenario places ``--orders`` orders (default 3000) and measures the bytes still traced
once they are done (after a garbage collection), twice: with the history limits of the
scenario ("kept") and with every history limit at 1 ("baseline": nothing kept but the newest
order, match and received order). The difference divided by the orders is what the histories
keep per order; the figures are printed side by side.

Scenarios: ``market`` (framework.sim Exchange in-process, IOC market orders parsed from wire
JSON as the twin does, alternating long and short), ``gtc`` (the same exchange, GTC limit
orders that rest and fill when the mark moves, as the demo's ladder), ``twin`` (a VenueTwin
over real sockets, market orders in batchCreate calls of 20, the twin's default limits) and
``embedded`` (the same with the embedded twin's limits, framework.live.embedded).

    python tests/benchmarks/bench_twin_memory.py [--orders 3000] [--top 0] [scenario ...]

Not a pytest test: it prints figures (issue 25: the embedded twin's memory per order).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tracemalloc
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import httpx
import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from framework.config import parse_config  # noqa: E402
from framework.live.embedded import twin_settings  # noqa: E402
from framework.sim.exchange import Exchange  # noqa: E402
from framework.twin.server import VenueTwin  # noqa: E402
from framework.twin.settings import TwinSettings  # noqa: E402
from framework.twin.wire import parse_orders  # noqa: E402
from tests.twin.conftest import client_for  # noqa: E402
from tests.twin.twin_client import HMAC_API_KEY, Clock, order, settings  # noqa: E402

LIMITS = (
    "order_history_limit",
    "match_history_limit",
    "client_id_history_limit",
    "received_orders_limit",
)
SIM_LIMITS = LIMITS[:3]
BATCH = 20
NOW_MS = 1_800_000_000_000


def _bodies(count: int, *, gtc: bool) -> list[bytes]:
    """batchCreate bodies of count orders, 20 a call, alternating long and short."""
    bodies = []
    for start in range(0, count, BATCH):
        orders = []
        for i in range(start, min(count, start + BATCH)):
            long = i % 2 == 0
            if gtc:
                price = "1999" if long else "2001"
                item = order(f"o{i}", long=long, market=False, match_type=1, price=price)
            else:
                item = order(f"o{i}", long=long)
            orders.append(item)
        bodies.append(orjson.dumps({"orders": orders, "timestamp": "0"}))
    return bodies


def run_exchange(count: int, limit: int | None, *, gtc: bool) -> Any:
    """Place count orders on a framework.sim Exchange; the exchange (kept alive)."""
    base = settings()
    if limit is not None:
        base = attrs.evolve(base, **dict.fromkeys(SIM_LIMITS, limit))
    exchange = Exchange(base)
    exchange.open_account(1, None, {"USD": Decimal(10_000_000)})
    rules = {name: m.rules for name, m in exchange.markets.items()}
    now = NOW_MS
    for body in _bodies(count, gtc=gtc):
        items = parse_orders(orjson.loads(body)["orders"], rules, max_orders=BATCH)
        assert isinstance(items, list)
        now += 1000
        outcome = exchange.submit(1, items, now, atomic=False)
        assert not outcome.refusals and outcome.error is None, outcome
        if gtc:  # down through the bids, then up through the asks: every order fills
            exchange.set_mark("ETH-USD", Decimal("1998"), now)
            exchange.set_mark("ETH-USD", Decimal("2002"), now)
            exchange.set_mark("ETH-USD", Decimal("2000"), now)
    return exchange


def run_twin(count: int, base: TwinSettings, limit: int | None) -> Any:
    """Send count market orders to a VenueTwin over sockets; returns nothing kept alive."""
    if limit is not None:
        base = attrs.evolve(base, **dict.fromkeys(LIMITS, limit))

    async def drive() -> None:
        clock = Clock()
        async with VenueTwin(base, port=0, clock=clock) as twin:
            async with httpx.AsyncClient(base_url=twin.base_url, timeout=10) as http:
                client = client_for(http, HMAC_API_KEY, clock)
                for body in _bodies(count, gtc=False):
                    orders = orjson.loads(body)["orders"]
                    answer = await client.batch(orders)
                    assert answer["code"] == 200 and len(answer["data"]) == len(orders), answer
                    clock.now += 1
            gc.collect()
            # Measured while the twin still runs (what the daemon holds), client closed.
            measured.append(tracemalloc.get_traced_memory()[0])
            if top and tracemalloc.is_tracing():
                snapshots.append(tracemalloc.take_snapshot())

    measured: list[int] = []
    snapshots: list[tracemalloc.Snapshot] = []
    top = _TOP
    asyncio.run(drive())
    return measured, snapshots


_TOP = 0


def embedded_base() -> TwinSettings:
    """The twin's settings as the embedded venue builds them, with the test accounts."""
    config = parse_config(
        "venue: {embedded: true}\npairs:\n  ETH-USD: {}\n  BTC-USD: {quantity_decimals: 4,"
        ' min_quantity: "0.0001"}\nstrategies:\n  - {name: p, class: "strategies.pulse:Pulse",'
        " params: {pair: ETH-USD}}\n",
        env={},
    )
    embedded = twin_settings(config)
    test = settings()
    kept = {name: getattr(embedded, name) for name in LIMITS}
    return attrs.evolve(test, **kept)


def measure(run: Callable[[int | None], Any], count: int) -> tuple[int, int, Any]:
    """Traced bytes after run(limit) with the scenario's limits and with every limit at 1."""
    figures = []
    top: Any = None
    for limit in (None, 1):
        gc.collect()
        tracemalloc.start(1)
        start = tracemalloc.get_traced_memory()[0]
        result = run(limit)
        gc.collect()
        if isinstance(result, tuple):  # the twin measures itself while running
            used, snaps = result
            end = used[0]
            if limit is None and snaps:
                top = snaps[0]
        else:
            end = tracemalloc.get_traced_memory()[0]
            if limit is None and _TOP:
                top = tracemalloc.take_snapshot()
        tracemalloc.stop()
        figures.append(end - start)
        del result
    return figures[0], figures[1], top


def main() -> None:
    """Run the scenarios and print kept, baseline and per-order bytes side by side."""
    global _TOP
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=3000)
    parser.add_argument("--top", type=int, default=0, help="show the top N lines of the kept run")
    parser.add_argument("scenarios", nargs="*", default=["market", "gtc", "twin", "embedded"])
    args = parser.parse_args()
    _TOP = args.top
    count = args.orders
    run_twin(BATCH, embedded_base(), None)  # imports and first-call caches, not traced
    runs: dict[str, Callable[[int | None], Any]] = {
        "market": lambda limit: run_exchange(count, limit, gtc=False),
        "gtc": lambda limit: run_exchange(count, limit, gtc=True),
        "twin": lambda limit: run_twin(count, settings(), limit),
        "embedded": lambda limit: run_twin(count, embedded_base(), limit),
    }
    print(f"{count} orders; bytes traced after the run (gc'd), kept vs every limit at 1")
    print(f"{'scenario':<10} {'kept':>12} {'baseline':>12} {'per order':>10}")
    for name in args.scenarios:
        kept, baseline, snapshot = measure(runs[name], count)
        print(f"{name:<10} {kept:>12,} {baseline:>12,} {(kept - baseline) / count:>10.0f}")
        if snapshot is not None:
            for stat in snapshot.statistics("lineno")[: args.top]:
                print(f"    {stat.size / count:8.1f} B/order  {stat.traceback}")


if __name__ == "__main__":
    main()
