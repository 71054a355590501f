"""Child process of the crash test: ``python -m tests.faults.crash_child MODE BASE WS JOURNAL LOG SETTINGS``.

Runs a live Node (FaultTrader, FILE journal) against the twin at BASE/WS. The strategy
appends every start, submit, OrderUpdate and delivered match to the JSONL file LOG, a flushed
line each. SETTINGS is a JSON object: ``execution`` and ``polling`` (node config sections),
``burst`` (intents), ``go`` (the file whose existence lets the strategy submit), ``kill``,
``params`` (more FaultTrader params, e.g. ``quantity``, ``prices``, ``cancel_every``).

``first``: submit one burst once ``go`` exists, and SIGKILL this process at the kill point
(none: the parent kills it):
``held`` (the engine holds a match polled before its batch's answer: matches_held > 0),
``queued`` (a batch answered, the next one at the venue for 0.1 s, intents still queued) or ``backoff``
(a 2329 retry was sent and every failed batch waits for its next attempt).
``restart``: the same journal, no new intents; run until SIGTERM (a graceful stop), then
print the node's summary as JSON on stdout.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import anyio
import orjson

from framework.engine.execution import ExecutionEngine
from framework.live.node import Node
from tests.faults.harness import node_config
from tests.faults.trader import PAIR, QUANTITY


def due(engine: ExecutionEngine, point: str, in_flight_s: float) -> bool:
    """True at the kill point; in_flight_s: how long the latest batch has been in flight."""
    c = engine.counters()
    batcher = engine._batcher  # the engine's queue, in flight and backoff counts
    if point == "held":
        return c["matches_held"] > 0
    if point == "queued":
        # A batch answered, the next one at the venue (its request long written: the
        # twin's latency holds the answer), intents still queued behind it.
        queued = c["orders_submitted"] - c["orders_risk_rejected"] - c["orders_sent"]
        return (
            c["orders_accepted"] > 0 and queued > 0 and batcher.inflight > 0 and in_flight_s > 0.1
        )
    if point == "backoff":
        return c["retries"] >= 1 and batcher.retrying > 0 and batcher.inflight == 0
    raise ValueError(f"unknown kill point {point!r}")


async def kill_at(node: Node, point: str) -> None:
    """SIGKILL this process as soon as the kill point is reached."""
    await node.started.wait()
    engine = node.engine
    assert engine is not None
    sends, since = 0, time.monotonic()
    while True:
        if engine.counters()["batches_sent"] != sends:
            sends, since = engine.counters()["batches_sent"], time.monotonic()
        if due(engine, point, time.monotonic() - since):
            os.kill(os.getpid(), signal.SIGKILL)
        await anyio.sleep(0.001)


async def main(argv: list[str]) -> int:
    """One life of the process."""
    mode, base_url, ws_url, journal, log = argv[:5]
    settings: dict[str, Any] = orjson.loads(argv[5]) if len(argv) > 5 else {}
    params = {
        "pair": PAIR,
        "quantity": str(QUANTITY),
        "bursts": 1 if mode == "first" else 0,
        "burst_size": int(settings.get("burst", 60)),
        "every_s": 0.05,
        "go": settings.get("go"),
        "log": log,
        **settings.get("params", {}),
    }
    config = node_config(
        base_url,
        ws_url,
        journal=journal,
        params=params,
        execution=settings.get("execution"),
        polling=settings.get("polling"),
    )
    node = Node(config)
    async with anyio.create_task_group() as tg:
        if mode == "first" and settings.get("kill"):
            tg.start_soon(kill_at, node, str(settings["kill"]))
        summary = await node.run()
        tg.cancel_scope.cancel()
    sys.stdout.write(orjson.dumps(summary).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
