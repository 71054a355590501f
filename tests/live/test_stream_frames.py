"""StreamClient against small local WebSocket servers: subscribe messages, bad frames, timeouts.

Each server is a real websockets server on 127.0.0.1 whose handler plays one scenario the
twin cannot: frames that are not JSON, unknown events, acknowledgements that never come, a
peer that stops reading (no pongs).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from decimal import Decimal
from typing import Any

import anyio
import orjson
import pytest
from websockets.asyncio.server import ServerConnection, serve

from framework.engine.clock import VirtualClock
from framework.live.stream import StreamClient
from framework.venue.models import AccountPush, PositionPush
from framework.venue.push import MAX_OPEN_POSITIONS, MAX_RECENT_CLOSES
from framework.venue.requests import RequestBuilder
from framework.venue.signing import Secp256k1Signer, address_of, recover_address
from tests.live.conftest import Eventually

pytestmark = pytest.mark.anyio

# A throwaway key published in eth-account's documentation: test data, never real funds.
KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
BUILDER = RequestBuilder("st_test_key", Secp256k1Signer(KEY))

Handler = Callable[[ServerConnection, int], Awaitable[None]]

POSITION_PUSH = {
    "event": "api_position",
    "success": True,
    "data": {"changeType": "NEW", "currentQuantity": "1", "symbol": "ETH-USD", "positionId": 5},
}
ACCOUNT_PUSH = {
    "event": "api_account",
    "success": True,
    "symbol": "USD",
    "data": {"availableAmount": "10", "frozenAmount": "0", "logId": 3, "symbol": "USD"},
}


def position_push(qty: str) -> dict[str, Any]:
    """An api_position frame with the given current quantity."""
    return {**POSITION_PUSH, "data": {**POSITION_PUSH["data"], "currentQuantity": qty}}  # type: ignore[dict-item]


async def ack_subscribes(ws: ServerConnection, count: int, log: list[dict[str, Any]]) -> None:
    """Read count subscribe messages and acknowledge each with success true."""
    for _ in range(count):
        message = orjson.loads(await ws.recv())
        log.append(message)
        await ws.send(
            orjson.dumps(
                {
                    "event": message["event"] + "_res",
                    "method": "SUBSCRIBE",
                    "msg": "subscribed",
                    "success": True,
                    "pair": message.get("pair"),
                    "symbol": message.get("symbol"),
                }
            ).decode()
        )


@contextlib.asynccontextmanager
async def local_server(handler: Handler) -> AsyncIterator[str]:
    """Serve handler(ws, connection_number) on 127.0.0.1; yields the ws:// URL."""
    connections = 0

    async def handle(ws: ServerConnection) -> None:
        nonlocal connections
        connections += 1
        await handler(ws, connections)

    async with serve(handle, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}/api/market/ws"
        server.close()


def client(url: str, got: list[PositionPush | AccountPush], **kwargs: Any) -> StreamClient:
    options: dict[str, Any] = {
        "pairs": ["ETH-USD"],
        "coins": ["USD"],
        "on_frame": got.append,
        "clock": VirtualClock(1_700_000_000_000),
        "ack_timeout_s": 2.0,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.05,
        "close_timeout_s": 0.2,
    }
    options.update(kwargs)
    return StreamClient(url, BUILDER, **options)


@contextlib.asynccontextmanager
async def running(stream: StreamClient) -> AsyncIterator[StreamClient]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream.run)
        try:
            yield stream
        finally:
            tg.cancel_scope.cancel()


async def test_one_signed_subscribe_per_pair_and_per_coin_is_sent(eventually: Eventually) -> None:
    seen: list[dict[str, Any]] = []

    async def handler(ws: ServerConnection, n: int) -> None:
        await ack_subscribes(ws, 3, seen)
        await ws.wait_closed()

    got: list[PositionPush | AccountPush] = []
    async with local_server(handler) as url:
        stream = client(url, got, pairs=["ETH-USD", "BTC-USD"], coins=["USD"])
        async with running(stream):
            await eventually(lambda: stream.state == "connected")
    assert [(m["event"], m.get("pair"), m.get("symbol")) for m in seen] == [
        ("api_position", "ETH-USD", None),
        ("api_position", "BTC-USD", None),
        ("api_account", None, "USD"),
    ]
    for m in seen:
        assert m["method"] == "SUBSCRIBE" and m["apiKey"] == "st_test_key"
        assert m["signType"] == "2" and m["timestamp"] == 1_700_000_000_000
        assert recover_address(str(m["timestamp"]), m["signature"]) == address_of(KEY)


async def test_malformed_frames_and_unknown_events_are_counted_and_skipped(
    eventually: Eventually,
) -> None:
    bad = [
        "not json {",
        orjson.dumps({"event": "api_fancy", "data": {}}).decode(),
        orjson.dumps({"event": "api_position", "data": {"symbol": "ETH-USD"}}).decode(),
        orjson.dumps([1, 2, 3]).decode(),
    ]

    async def handler(ws: ServerConnection, n: int) -> None:
        await ack_subscribes(ws, 2, [])
        await ws.send(bad[0])
        await ws.send(orjson.dumps(POSITION_PUSH).decode())
        for frame in bad[1:]:
            await ws.send(frame)
        await ws.send(orjson.dumps(ACCOUNT_PUSH).decode())
        await ws.wait_closed()

    got: list[PositionPush | AccountPush] = []
    raw: list[str] = []
    async with local_server(handler) as url:
        stream = client(url, got, on_raw=raw.append)
        async with running(stream):
            await eventually(lambda: len(got) == 2)
            assert stream.stats.malformed == 3
            assert stream.stats.unknown_events == 1
    assert isinstance(got[0], PositionPush) and got[0].current_quantity == Decimal(1)
    assert isinstance(got[1], AccountPush) and got[1].log_id == 3
    assert stream.stats.connects == 1 and stream.stats.disconnects == 0
    assert len(raw) == 2 + 6 and raw[2] == "not json {"


async def test_an_acknowledgement_that_never_comes_fails_the_session_and_is_retried(
    eventually: Eventually,
) -> None:
    async def handler(ws: ServerConnection, n: int) -> None:
        if n == 1:
            async for _ in ws:  # read the subscribes, never answer
                pass
        else:
            await ack_subscribes(ws, 2, [])
            await ws.wait_closed()

    states: list[tuple[str, str]] = []
    got: list[PositionPush | AccountPush] = []
    async with local_server(handler) as url:
        # Long enough that the second session's (prompt) acks never miss it under load.
        stream = client(url, got, ack_timeout_s=1.0, on_state=lambda s, d: states.append((s, d)))
        async with running(stream):
            await eventually(lambda: stream.state == "connected")
    failed = [d for s, d in states if s == "failed"]
    assert len(failed) == 1 and "no subscribe acknowledgement within 1.0 s" in failed[0]
    assert stream.stats.failures == 1 and stream.stats.connects == 1
    assert stream.stats.reconnects == 0  # a first session that never got subscribed


async def test_a_peer_that_stops_answering_pings_counts_as_dead_and_is_replaced(
    eventually: Eventually,
) -> None:
    async def handler(ws: ServerConnection, n: int) -> None:
        await ack_subscribes(ws, 2, [])
        if n == 1:
            ws.transport.pause_reading()  # no more pongs: silence, far longer than the
            await anyio.sleep(2.0)  # client's 0.25 s to notice even when it is starved
            ws.transport.resume_reading()
        await ws.wait_closed()

    got: list[PositionPush | AccountPush] = []
    async with local_server(handler) as url:
        stream = client(url, got, ping_interval_s=0.05, silence_timeout_s=0.2)
        async with running(stream):
            await eventually(lambda: stream.stats.connects == 2)
    assert stream.stats.disconnects == 1 and stream.stats.reconnects == 1
    assert "keepalive ping timeout" in stream.last_error


async def test_a_resubscribe_is_signed_again_with_a_fresh_timestamp(eventually: Eventually) -> None:
    seen: list[dict[str, Any]] = []

    async def handler(ws: ServerConnection, n: int) -> None:
        await ack_subscribes(ws, 2, seen)
        if n == 1:
            await ws.close(1012, "restart")
        else:
            await ws.wait_closed()

    clock = VirtualClock(1_700_000_000_000)

    def on_state(state: str, detail: str) -> None:
        if state == "lost":
            clock.advance(7_000)

    got: list[PositionPush | AccountPush] = []
    async with local_server(handler) as url:
        stream = client(url, got, clock=clock, on_state=on_state)
        async with running(stream):
            await eventually(lambda: stream.stats.connects == 2)
    assert [m["timestamp"] for m in seen] == [1_700_000_000_000] * 2 + [1_700_000_007_000] * 2
    assert seen[0]["signature"] != seen[2]["signature"]
    assert all(
        recover_address(str(m["timestamp"]), m["signature"]) == address_of(KEY) for m in seen
    )
    assert "code 1012" in stream.last_error or "1012" in stream.last_error


async def test_an_on_frame_callback_that_raises_does_not_stop_the_stream(
    eventually: Eventually,
) -> None:
    async def handler(ws: ServerConnection, n: int) -> None:
        await ack_subscribes(ws, 2, [])
        for qty in ("1", "2", "3"):
            await ws.send(orjson.dumps(position_push(qty)).decode())
        await ws.wait_closed()

    calls: list[object] = []

    def explode(push: PositionPush | AccountPush) -> None:
        calls.append(push)
        raise RuntimeError("consumer bug")

    async with local_server(handler) as url:
        stream = client(url, [], on_frame=explode)
        async with running(stream):
            await eventually(lambda: len(calls) == 3)
    assert stream.stats.callback_errors == 3 and stream.stats.disconnects == 0


def test_backoff_is_full_jitter_capped_and_resets_after_a_subscribed_session() -> None:
    from framework.live.stream import StreamLost

    stream = StreamClient(
        "ws://127.0.0.1:9/api/market/ws",
        BUILDER,
        pairs=["ETH-USD"],
        coins=[],
        on_frame=lambda push: None,
        clock=VirtualClock(0),
        backoff_initial_s=0.1,
        backoff_max_s=1.0,
        rng=random.Random(7),
    )
    ceilings = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    delays: list[float] = []
    for ceiling in ceilings:
        delay = stream._backoff(StreamLost("down"))
        assert isinstance(delay, float) and 0.0 <= delay <= ceiling
        delays.append(delay)
    assert len(set(delays)) == len(delays)  # jittered, not a fixed schedule
    assert stream._backoff(ValueError("a bug")) is False  # not retried: it propagates
    stream._failures = 0  # what a subscribed session does
    assert stream._backoff(StreamLost("down")) <= 0.1


async def test_a_refused_connection_is_retried_until_the_venue_comes_up(
    eventually: Eventually,
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"ws://127.0.0.1:{port}/api/market/ws"
    got: list[PositionPush | AccountPush] = []
    stream = client(url, got)
    async with running(stream):
        await eventually(lambda: stream.stats.failures >= 2)
        assert "cannot connect" in stream.last_error

        async def handler(ws: ServerConnection, n: int) -> None:
            await ack_subscribes(ws, 2, [])
            await ws.wait_closed()

        async with serve(lambda ws: handler(ws, 1), "127.0.0.1", port):
            await eventually(lambda: stream.state == "connected")
    assert stream.stats.connects == 1


async def test_a_repeated_position_push_is_dropped_within_a_connection_not_across(
    eventually: Eventually,
) -> None:
    async def handler(ws: ServerConnection, n: int) -> None:
        await ack_subscribes(ws, 2, [])
        frames = ["1", "1", "2", "2", "1"] if n == 1 else ["1"]
        for qty in frames:
            await ws.send(orjson.dumps(position_push(qty)).decode())
        if n == 1:
            await ws.close(1012, "restart")
        else:
            await ws.wait_closed()

    got: list[PositionPush | AccountPush] = []
    async with local_server(handler) as url:
        stream = client(url, got)
        async with running(stream):
            await eventually(lambda: stream.stats.connects == 2 and len(got) == 4)
    quantities = [p.current_quantity for p in got if isinstance(p, PositionPush)]
    assert quantities == [Decimal(q) for q in ("1", "2", "1", "1")]
    assert stream.stats.duplicates == 2


async def test_dedupe_memory_stays_flat_as_positions_open_and_close(
    eventually: Eventually,
) -> None:
    def push(pid: int, change: str, qty: str) -> str:
        data = {
            "changeType": change,
            "currentQuantity": qty,
            "symbol": "ETH-USD",
            "positionId": pid,
        }
        return orjson.dumps({**POSITION_PUSH, "data": data}).decode()

    async def handler(ws: ServerConnection, _n: int) -> None:
        await ack_subscribes(ws, 2, [])
        for pid in range(1, 601):  # 600 positions, each opened then closed
            await ws.send(push(pid, "NEW", "1"))
            await ws.send(push(pid, "CLOSE", "0"))
        await ws.send(push(600, "CLOSE", "0"))  # a duplicated close is still dropped
        for pid in range(1000, 1000 + MAX_OPEN_POSITIONS + 10):
            await ws.send(push(pid, "NEW", "1"))  # more open positions than the cap
        await ws.wait_closed()

    got: list[PositionPush | AccountPush] = []
    async with local_server(handler) as url:
        stream = client(url, got)
        async with running(stream):
            total = 1200 + MAX_OPEN_POSITIONS + 10
            await eventually(lambda: len(got) == total and stream.stats.duplicates == 1)
            assert stream.protocol.sizes() == (MAX_OPEN_POSITIONS, MAX_RECENT_CLOSES)
