"""Child process of the adoption test: ``python -m tests.live.adoption_child BASE WS JOURNAL LOG LEVELS``.

Runs a live Node with the Ladder (``reference_price`` 2000, spacing 1, ``LEVELS`` levels a
side, quantity 0.01) against the twin at BASE/WS on the FILE journal JOURNAL, until SIGTERM
(a graceful stop) or the parent's SIGKILL. It appends flushed JSON lines to LOG:

- ``start``: once on_start has run: what the ladder adopted (``adopted``), the orders the
  node found resting that it did not place (``external``), the open orders it tracks;
- ``order``: every OrderUpdate of the ladder (client id, status);
- ``idle``: once the engine is idle after the start (nothing queued, in flight or being
  cancelled or queried): the engine's counters and the ladder's resting orders.

The summary goes to stdout as JSON at a graceful stop.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import yaml

from framework import OrderUpdate
from framework.config import parse_config
from framework.live.node import Node
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from strategies.ladder import Ladder
from tests.waiting import eventually

PAIR = "ETH-USD"


def write(log: Path, kind: str, **fields: Any) -> None:
    """Append one flushed JSON line to log."""
    with log.open("ab") as out:
        out.write(orjson.dumps({"kind": kind, **fields}) + b"\n")


async def report(node: Node, log: Path) -> None:
    """Write the start line after on_start, every update, then the idle line."""
    await node.started.wait()
    ladder = node.strategies[0]
    engine = node.engine
    assert isinstance(ladder, Ladder) and engine is not None
    write(
        log,
        "start",
        adopted=ladder.adopted,
        external=engine.cancels.external,
        open=sorted(o.client_order_id for o in engine.open_orders()),
    )
    await eventually(lambda: engine.idle, timeout=20)
    write(log, "idle", counters=dict(engine.counters()), resting=sorted(ladder.resting))


async def main(argv: list[str]) -> int:
    """One life of the process."""
    base_url, ws_url, journal, log_path, levels = argv[:5]
    log = Path(log_path)
    data = {
        "node": {"name": "ad"},
        "venue": {
            "base_url": base_url,
            "ws_url": ws_url,
            "api_key": "${KEY}",
            "api_secret": "${SECRET}",
        },
        "pairs": {PAIR: {}},
        "polling": {"match_interval_s": 0.1},
        "journal": {"path": journal},
        "logging": {"level": "INFO"},
        "strategies": [
            {
                "name": "ladder",
                "class": "strategies.ladder:Ladder",
                "params": {
                    "pair": PAIR,
                    "quantity": "0.01",
                    "spacing": "1",
                    "levels": int(levels),
                    "reference_price": "2000",
                },
            }
        ],
    }
    config = parse_config(
        yaml.safe_dump(data, sort_keys=False),
        env={"KEY": DEMO_API_KEY, "SECRET": DEMO_PRIVATE_KEY},
    )
    node = Node(config)

    def on_order(update: OrderUpdate) -> None:
        write(log, "order", coid=update.client_order_id, status=update.status.value)

    node.bus.subscribe(OrderUpdate, on_order)
    async with anyio.create_task_group() as tg:
        tg.start_soon(report, node, log)
        summary = await node.run()
        tg.cancel_scope.cancel()
    sys.stdout.write(orjson.dumps(summary).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
