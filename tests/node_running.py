"""Running a live Node inside a test: started before the block, stopped gracefully after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from framework.live.node import Node

__all__ = ["running"]


@asynccontextmanager
async def running(node: Node) -> AsyncIterator[dict[str, Any]]:
    """Run node while the block runs, then stop it gracefully; yields the summary (at exit)."""
    summary: dict[str, Any] = {}

    async def run() -> None:
        summary.update(await node.run())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await node.started.wait()
        try:
            yield summary
        finally:
            node.request_stop("test over")
