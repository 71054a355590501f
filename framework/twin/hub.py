"""WebSocket fan-out: who is subscribed to what, and one send queue per connection.

The exchange's events are rendered once each (only when someone listens) and queued to every
subscribed connection without waiting; each connection's sender task writes its queue in
order. So a REST answer never waits for a slow WebSocket reader. A connection whose queue
passes the configured limit is closed (counted as ``ws_overflows``).

Routing (SPEC section 6): an api_position push goes to the connections that subscribed that
pair with the API key of the position's account; an api_account push to those that
subscribed that settlement coin with the account's key. Push faults (duplicates, reordering,
stale account frames) are applied here, per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

import orjson

from framework.sim.events import BalanceChanged, Event, PositionChanged
from framework.twin import wire
from framework.twin.faults import Counters, Faults

__all__ = ["Connection", "Hub"]

_CLOSE: Final = None
_REORDER_HOLD: Final = 0.25  # seconds a held-back push waits for a successor before going out
_SERVICE_RESTART: Final = 1012


class Connection:
    """One WebSocket client: its send queue and the writer task that drains it."""

    def __init__(
        self,
        send: Callable[[str], Awaitable[None]],
        close: Callable[[int], Awaitable[None]],
        *,
        limit: int,
        counters: Counters,
    ) -> None:
        """send writes one text frame, close ends the socket with a close code."""
        self._send = send
        self._close = close
        self._queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=limit)
        self._counters = counters
        self.closing = False

    def enqueue(self, frame: str) -> None:
        """Queue a frame; a full queue drops what is queued and closes the connection."""
        if self.closing:
            return
        try:
            self._queue.put_nowait(frame)
        except asyncio.QueueFull:
            self._counters.ws_overflows += 1
            while not self._queue.empty():
                self._queue.get_nowait()
            self.request_close()

    def request_close(self) -> None:
        """Close the connection after the frames already queued."""
        if not self.closing:
            self.closing = True
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(_CLOSE)

    async def run(self, faults: Faults) -> None:
        """Write queued frames in order until closed; applies the reorder fault."""
        queue = self._queue
        counters = self._counters
        held: str | None = None
        try:
            while True:
                if held is None:
                    frame = await queue.get()
                else:
                    try:
                        frame = await asyncio.wait_for(queue.get(), _REORDER_HOLD)
                    except TimeoutError:
                        await self._send(held)
                        counters.pushes_sent += 1
                        held = None
                        continue
                if frame is None:
                    break
                if held is None and faults.reorder_push():
                    held = frame
                    continue
                await self._send(frame)
                counters.pushes_sent += 1
                if held is not None:
                    await self._send(held)
                    counters.pushes_sent += 1
                    counters.reordered_pushes += 1
                    held = None
            if held is not None:
                await self._send(held)
            await self._close(_SERVICE_RESTART)
        except Exception:
            # The peer went away while we wrote: the receive loop sees the disconnect.
            self.closing = True


class Hub:
    """Subscriptions of every connection and the fan-out of the exchange's events."""

    def __init__(self, faults: Faults, counters: Counters) -> None:
        """Start with no connections."""
        self._faults = faults
        self._counters = counters
        self._connections: dict[Connection, None] = {}
        self._positions: dict[tuple[int, str], dict[Connection, None]] = {}
        self._accounts: dict[tuple[int, str], dict[Connection, None]] = {}
        self._last_account: dict[tuple[int, str], str] = {}

    def add(self, connection: Connection) -> None:
        """Register a new connection."""
        self._connections[connection] = None
        self._counters.ws_connections += 1

    def remove(self, connection: Connection) -> None:
        """Forget a connection and all its subscriptions."""
        self._connections.pop(connection, None)
        for table in (self._positions, self._accounts):
            for key in [k for k, subs in table.items() if connection in subs]:
                del table[key][connection]
                if not table[key]:
                    del table[key]

    def subscribe_position(self, connection: Connection, user_id: int, pair: str) -> None:
        """Send this account's api_position pushes of pair to the connection."""
        self._positions.setdefault((user_id, pair), {})[connection] = None

    def subscribe_account(self, connection: Connection, user_id: int, coin: str) -> None:
        """Send this account's api_account pushes of coin to the connection."""
        self._accounts.setdefault((user_id, coin), {})[connection] = None

    def disconnect_all(self) -> int:
        """Close every connection from the server side; returns how many."""
        connections = list(self._connections)
        for connection in connections:
            connection.request_close()
        return len(connections)

    def __len__(self) -> int:
        """How many connections are open."""
        return len(self._connections)

    def publish(self, events: Iterable[Event]) -> None:
        """Queue the pushes of events to their subscribers, in order."""
        positions, accounts = self._positions, self._accounts
        if not positions and not accounts:
            return
        for event in events:
            if type(event) is PositionChanged:
                subs = positions.get((event.user_id, event.pair))
                if subs:
                    frame = orjson.dumps(wire.position_frame(event)).decode()
                    self._fan_out(subs, frame, None)
            elif type(event) is BalanceChanged:
                key = (event.user_id, event.coin)
                subs = accounts.get(key)
                if subs:
                    frame = orjson.dumps(wire.account_frame(event)).decode()
                    previous = self._last_account.get(key)
                    self._last_account[key] = frame
                    self._fan_out(subs, frame, previous)

    def _fan_out(self, subs: dict[Connection, None], frame: str, stale: str | None) -> None:
        faults = self._faults
        for connection in list(subs):
            if connection.closing:
                continue
            connection.enqueue(frame)
            if faults.duplicate_push():
                connection.enqueue(frame)
            if stale is not None and faults.stale_account():
                connection.enqueue(stale)
