"""The twin's WebSocket side: subscriptions, their fan-out, one send queue per connection.

The exchange's events are rendered once each (only when someone listens) and queued to every
subscribed connection without waiting; each connection's sender task writes its queue in
order. So a REST answer never waits for a slow WebSocket reader. A connection whose queue
passes the configured limit is closed (counted as ``ws_overflows``).

Routing (SPEC section 6): an api_position push goes to the connections that subscribed that
pair with the API key of the position's account; an api_account push to those that
subscribed that settlement coin with the account's key. Push faults (duplicates, reordering,
stale account frames) are applied here, per connection.

The endpoint (:class:`Sockets`), at ``ws_path``: text frames of JSON. A subscribe whose
apiKey is unknown, whose signature (over ``str(timestamp)``) does not verify, whose timestamp
is outside the window or which lacks pair/symbol is acknowledged with ``success: false`` and
a reason in ``msg``, and registers nothing. So is any field of the wrong type (an apiKey that
is a list, a pair that is a number...): the ack echoes pair and symbol only when they are
strings (else null), and the socket stays open. A text frame ``ping`` is answered ``pong``.

Market events (api_depth, api_trade, api_kline: :mod:`framework.twin.market_feed`) are
subscribed with the same signed message plus ``pair`` (and ``period`` for api_kline), and
unsubscribed with ``method: UNSUBSCRIBE`` (acknowledged the same way, ``method``
``UNSUBSCRIBE``); their acks echo the pair and the period.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect

from framework.sim.events import BalanceChanged, Event, PositionChanged
from framework.sim.exchange import Exchange
from framework.twin import wire
from framework.twin.auth import AuthRefused, Verifier, parse_timestamp, within_window
from framework.twin.faults import Counters, Faults
from framework.twin.market_feed import MARKET_EVENTS, TwinMarket
from framework.venue.errors import render_message

__all__ = ["Connection", "Hub", "Sockets"]

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
        self.counters = counters
        self.closing = False

    def enqueue(self, frame: str) -> None:
        """Queue a frame; a full queue drops what is queued and closes the connection."""
        if self.closing:
            return
        try:
            self._queue.put_nowait(frame)
        except asyncio.QueueFull:
            self.counters.ws_overflows += 1
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
        counters = self.counters
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
        self.faults = faults
        self.counters = counters
        self._connections: dict[Connection, None] = {}
        self._positions: dict[tuple[int, str], dict[Connection, None]] = {}
        self._accounts: dict[tuple[int, str], dict[Connection, None]] = {}
        self._last_account: dict[tuple[int, str], str] = {}

    def add(self, connection: Connection) -> None:
        """Register a new connection."""
        self._connections[connection] = None
        self.counters.ws_connections += 1

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
        faults = self.faults
        for connection in list(subs):
            if connection.closing:
                continue
            connection.enqueue(frame)
            if faults.duplicate_push():
                connection.enqueue(frame)
            if stale is not None and faults.stale_account():
                connection.enqueue(stale)


class Sockets:
    """The WebSocket endpoint: reads subscriptions, registers them in the hub, answers pings."""

    def __init__(
        self,
        hub: Hub,
        exchange: Exchange,
        verifier: Verifier,
        *,
        queue_limit: int,
        clock_ms: Callable[[], int],
        window_ms: int,
        market: TwinMarket | None = None,
    ) -> None:
        """clock_ms: the venue clock the timestamp window is checked against."""
        self.market = market
        self.hub = hub
        self.exchange = exchange
        self.verifier = verifier
        self.queue_limit = queue_limit
        self.clock_ms = clock_ms
        self.window_ms = window_ms

    async def serve(self, websocket: WebSocket) -> None:
        """SPEC section 6: subscriptions and pushes on one socket."""
        await websocket.accept()

        async def close(code: int) -> None:
            await websocket.close(code)

        connection = Connection(
            websocket.send_text,
            close,
            limit=self.queue_limit,
            counters=self.hub.counters,
        )
        self.hub.add(connection)
        sender = asyncio.create_task(connection.run(self.hub.faults))
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                text = message.get("text")
                if text is None:
                    data = message.get("bytes") or b""
                    text = data.decode("utf-8", "replace")
                if text.strip().lower() == "ping":
                    connection.enqueue("pong")
                    continue
                reply = self._subscribe(connection, text)
                connection.enqueue(orjson.dumps(reply).decode())
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            self.hub.remove(connection)
            if self.market is not None:
                self.market.forget(connection)
            connection.request_close()
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender

    def _subscribe(self, connection: Connection, text: str) -> dict[str, Any]:
        try:
            message = orjson.loads(text)
        except orjson.JSONDecodeError:
            message = None
        if type(message) is not dict:
            return {"event": "error", "success": False, "msg": "Illegal parameter:message"}
        event = message.get("event")
        pair = message.get("pair")
        symbol = message.get("symbol")
        name = event if isinstance(event, str) else "unknown"
        method = message.get("method")

        def refuse(reason: str) -> dict[str, Any]:
            self.hub.counters.subscribe_refusals += 1
            return wire.subscribe_ack(
                name,
                success=False,
                msg=reason,
                pair=pair if isinstance(pair, str) else None,
                symbol=symbol if isinstance(symbol, str) else None,
                method=method if method == "UNSUBSCRIBE" else "SUBSCRIBE",
            )

        if self.market is not None and event in MARKET_EVENTS:
            return self._market(connection, message, refuse)
        if method != "SUBSCRIBE":
            return refuse(render_message(2001, "method"))
        if event not in ("api_position", "api_account"):
            return refuse(render_message(2001, "event"))
        if event == "api_position" and not (isinstance(pair, str) and pair):
            return refuse(render_message(2002, "pair"))
        if event == "api_account" and not (isinstance(symbol, str) and symbol):
            return refuse(render_message(2002, "symbol"))
        if event == "api_position" and pair not in self.exchange.markets:
            return refuse(render_message(2001, "pair"))
        if event == "api_account" and not self.exchange.knows_coin(str(symbol)):
            return refuse(render_message(2001, "symbol"))
        timestamp = message.get("timestamp")
        stamp = parse_timestamp(timestamp)
        if stamp is None:
            return refuse(render_message(2001, "timestamp"))
        try:
            credentials = self.verifier.authenticate(
                message.get("apiKey"),
                message.get("signType"),
                message.get("signature"),
                (str(timestamp),),
            )
        except AuthRefused as exc:
            return refuse(f"Unauthorized: {exc}")
        if not within_window(stamp, self.clock_ms(), self.window_ms):
            return refuse(render_message(2001, "timestamp"))
        self.hub.counters.subscriptions += 1
        if event == "api_position":
            assert isinstance(pair, str)
            self.hub.subscribe_position(connection, credentials.user_id, pair)
            return wire.subscribe_ack(
                event, success=True, msg=f"Subscribe {event} success", pair=pair
            )
        assert isinstance(symbol, str)
        self.hub.subscribe_account(connection, credentials.user_id, symbol)
        return wire.subscribe_ack(
            event, success=True, msg=f"Subscribe {event} success", symbol=symbol
        )

    def _verified(self, message: dict[str, Any]) -> str | None:
        """Why a signed message's timestamp or signature is refused (None: it verifies)."""
        timestamp = message.get("timestamp")
        stamp = parse_timestamp(timestamp)
        if stamp is None:
            return render_message(2001, "timestamp")
        try:
            self.verifier.authenticate(
                message.get("apiKey"),
                message.get("signType"),
                message.get("signature"),
                (str(timestamp),),
            )
        except AuthRefused as exc:
            return f"Unauthorized: {exc}"
        if not within_window(stamp, self.clock_ms(), self.window_ms):
            return render_message(2001, "timestamp")
        return None

    def _market(
        self,
        connection: Connection,
        message: dict[str, Any],
        refuse: Callable[[str], dict[str, Any]],
    ) -> dict[str, Any]:
        """A market (UN)SUBSCRIBE: checked, signed as api_position's, then (un)registered."""
        assert self.market is not None
        event, pair, period = message["event"], message.get("pair"), message.get("period")
        method = message.get("method")
        if method not in ("SUBSCRIBE", "UNSUBSCRIBE"):
            return refuse(render_message(2001, "method"))
        reason = self.market.check(event, pair, period) or self._verified(message)
        if reason is not None:
            return refuse(reason)
        assert isinstance(pair, str)
        kept = period if isinstance(period, str) else None
        if method == "UNSUBSCRIBE":
            self.market.unsubscribe(connection, event, pair, kept)
            ack = wire.subscribe_ack(
                event, success=True, msg=f"Unsubscribe {event} success", pair=pair,
                method="UNSUBSCRIBE",
            )  # fmt: skip
        else:
            reason = self.market.subscribe(connection, event, pair, kept)
            if reason is not None:
                return refuse(reason)
            self.hub.counters.subscriptions += 1
            ack = wire.subscribe_ack(
                event, success=True, msg=f"Subscribe {event} success", pair=pair
            )
        if kept is not None:
            ack["period"] = kept
        return ack
