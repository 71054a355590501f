"""The one way tests wait: ``eventually(predicate)`` polls until it holds, with a timeout.

Never sleep for a fixed time in a test: poll a condition. The predicate may be a plain
callable or return an awaitable; on timeout the AssertionError names the predicate's source.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

__all__ = ["eventually", "until"]


async def eventually(
    predicate: Callable[[], Any | Awaitable[Any]], timeout: float = 5.0, interval: float = 0.005
) -> None:
    """Wait until predicate() is truthy; AssertionError naming it after timeout seconds."""

    async def holds() -> bool:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        return bool(result)

    with anyio.move_on_after(timeout):
        while True:
            if await holds():
                return
            await anyio.sleep(interval)
    if await holds():
        return
    try:
        where = inspect.getsource(predicate).strip()
    except (OSError, TypeError):
        where = repr(predicate)
    raise AssertionError(f"not true within {timeout} s: {where}")


def until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """eventually() for synchronous code: poll until predicate() is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {what or predicate!r}")
        time.sleep(0.01)
