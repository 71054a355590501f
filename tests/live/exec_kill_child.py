"""Child process of the SIGKILL test (run with ``python -m tests.live.exec_kill_child``).

``first BASE_URL JOURNAL STAGE BATCH COUNT``: submit COUNT resting buys and SIGKILL this
process at stage "cut" (the batch is cut, its commit not made: nothing of it may leave) or
"sent" (right after its one commit of rows and 'sent' mark) of batch number BATCH.
``restart BASE_URL JOURNAL``: recover from the journal, send what is due, wait until the
engine is idle and print the engine's counters as JSON.
"""

from __future__ import annotations

import os
import signal
import sys
from decimal import Decimal

import anyio
import orjson

from framework.engine.execution import Batch, ExecutionSettings
from framework.engine.intents import OrderIntent
from framework.live.journal import Journal
from framework.live.rest import RestClient
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.venue.rules import PairRules
from framework.venue.signing import make_signer
from tests.live.executor_fixtures import build_execution

# One batch in flight at a time: batch 1 is answered before batch 2 is cut, so the state at
# the kill is exact.
SETTINGS = ExecutionSettings(max_inflight=1, calls_per_second=1000.0)
RULES = {"ETH-USD": PairRules()}


async def main(argv: list[str]) -> int:
    """Run one life of the process."""
    mode, base_url, path = argv[0], argv[1], argv[2]
    journal = Journal.open(path)
    signer = make_signer(2, DEMO_PRIVATE_KEY)
    async with RestClient(base_url, DEMO_API_KEY, signer, timeout=10.0) as rest:
        engine, executor = build_execution(
            SETTINGS, rest, publish=lambda _e: None, rules=RULES, journal=journal
        )
        if mode == "first":
            stage, batch_no, count = argv[3], int(argv[4]), int(argv[5])

            def kill_after_commit(at: str, batch: Batch) -> None:
                if at == stage and batch.id == batch_no:
                    os.kill(os.getpid(), signal.SIGKILL)

            executor.after_commit = kill_after_commit
        async with anyio.create_task_group() as tg:
            tg.start_soon(executor.run)
            with anyio.move_on_after(20):
                if mode == "first":
                    for _ in range(count):
                        engine.submit(
                            "s",
                            OrderIntent(
                                pair="ETH-USD",
                                is_long=True,
                                quantity=Decimal("0.1"),
                                price=Decimal("1500"),
                            ),
                        )
                    await anyio.sleep_forever()
                while not (executor.running and engine.idle):
                    await anyio.sleep(0.01)
                engine.flush()
                sys.stdout.write(orjson.dumps(dict(engine.counters())).decode() + "\n")
                tg.cancel_scope.cancel()
                return 0
            tg.cancel_scope.cancel()
    return 3  # timed out


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
