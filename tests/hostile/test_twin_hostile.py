"""The venue twin as a server under hostile input: real sockets on 127.0.0.1, small inputs.

Each test sends what an attacker or a broken client would and checks the twin's answer is
one clear refusal (a status and the venue's error envelope, or a refusal ack) and that it
kept nothing of what it refused. Every wait is bounded by ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from framework.twin import VenueTwin
from framework.twin.settings import ServerSettings
from tests.twin.twin_client import (
    BALANCE,
    BATCH,
    OTHER_KEY,
    TRADER_API_KEY,
    TRADER_KEY,
    Clock,
    TwinClient,
    eth_sign,
    order,
    recv_json,
    settings,
)

pytestmark = pytest.mark.anyio

_ABSENT: Any = object()


@pytest.fixture
async def twin() -> AsyncIterator[VenueTwin]:
    """A twin with the test accounts on a free port; its clock (a Clock) stands still."""
    async with VenueTwin(settings(), port=0, clock=Clock()) as running:
        yield running


def signer(twin: VenueTwin) -> TwinClient:
    """The trader's client, only to sign (its http client is never used here)."""
    sign = functools.partial(eth_sign, TRADER_KEY)
    return TwinClient(None, TRADER_API_KEY, sign, twin.clock)  # type: ignore[arg-type]


# -- WebSocket ---------------------------------------------------------------------------------


def _variants(base: dict[str, Any]) -> list[str]:
    """Subscribe messages with one field malformed or missing each, as JSON text."""
    bad_values: dict[str, list[Any]] = {
        "apiKey": [["x"], [], {"k": 1}, {}, 5, 5.5, True, None, "", _ABSENT],
        "signature": [["0x00"], {}, 7, True, None, "", "0xzz", _ABSENT],
        "signType": [[2], {}, 9, "9", 2.5, True],
        "timestamp": [[1], {}, "abc", 1.5, True, None, "", _ABSENT],
        "pair": [["ETH-USD"], {"p": "ETH-USD"}, 1, None, "", "NOPE-USD", _ABSENT],
        "event": [["api_position"], {}, 1, None, "api_nothing", _ABSENT],
        "method": [["SUBSCRIBE"], {}, None, "UNSUBSCRIBE", _ABSENT],
    }
    texts = []
    for name, values in bad_values.items():
        for value in values:
            message = dict(base)
            if value is _ABSENT:
                del message[name]
            else:
                message[name] = value
            texts.append(orjson.dumps(message).decode())
    account = {**base, "event": "api_account"}
    del account["pair"]
    for value in (["USD"], {"s": "USD"}, 1, None, "", "XXX"):
        texts.append(orjson.dumps({**account, "symbol": value}).decode())
    huge = orjson.dumps({**base, "timestamp": 0}).decode().replace(":0", ":" + "9" * 40)
    return [*texts, huge]


_NOT_A_SUBSCRIBE = [
    "[]",
    "1",
    '"SUBSCRIBE"',
    "null",
    "{",
    "[" * 5000 + "]" * 5000,
]


async def test_every_malformed_subscribe_gets_a_refusal_ack_and_the_socket_lives(
    twin: VenueTwin,
) -> None:
    client = signer(twin)
    base = orjson.loads(client.subscribe_message("api_position", pair="ETH-USD"))
    malformed = _variants(base)
    async with connect(twin.ws_url) as ws:
        for text in [*malformed, *_NOT_A_SUBSCRIBE]:
            await ws.send(text)
            ack = await recv_json(ws)
            assert ack["success"] is False, text
            assert isinstance(ack["msg"], str) and ack["msg"], text
            assert ack["event"] == "error" or ack["event"].endswith("_res"), text
            for echoed in ("pair", "symbol"):
                assert isinstance(ack.get(echoed), str | None), (text, ack)
        await ws.send(b"\xff\xfe not text")
        assert (await recv_json(ws))["success"] is False
        # the same socket still serves a valid subscription
        await ws.send(client.subscribe_message("api_position", pair="ETH-USD"))
        assert (await recv_json(ws))["success"] is True
    assert twin.counters.subscriptions == 1
    assert twin.counters.subscribe_refusals == len(malformed)


async def _refusal(ws: ClientConnection, text: str) -> dict[str, Any]:
    await ws.send(text)
    return await recv_json(ws)


# -- REST bodies -------------------------------------------------------------------------------

_BAD_SIGNATURE = "0x" + "11" * 65  # well formed, verifies for nobody


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
    """The status and the JSON body of one HTTP/1.1 response with a Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if line)
    body = await reader.readexactly(int(headers["content-length"]))
    return status, orjson.loads(body)


async def _send(
    port: int, head: str, body: bytes = b"", *, timeout: float = 5.0
) -> tuple[int, dict[str, Any]]:
    """Send a request head and (part of) a body on a new connection; read the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(timeout):
            writer.write(head.encode("latin-1") + b"\r\n" + body)
            await writer.drain()
            return await _read_response(reader)
    finally:
        writer.close()


def _head(path: str, headers: dict[str, str]) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return "\r\n".join(lines) + "\r\n"


def _orders_body(client: TwinClient, count: int, padding: int = 0) -> bytes:
    orders = [{**order(f"h{i}"), "pad": "x" * padding} for i in range(count)]
    return orjson.dumps({"orders": orders, "timestamp": client.stamp()})


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"APIKEY": "st_nobody", "signature": _BAD_SIGNATURE},
        {"APIKEY": TRADER_API_KEY},
        {"APIKEY": TRADER_API_KEY, "signature": _BAD_SIGNATURE, "X-SAPI-SIGN-TYPE": "1"},
    ],
    ids=["unsigned", "unknown-key", "no-signature", "no-key-for-sign-type"],
)
async def test_a_body_that_cannot_verify_is_refused_before_it_is_read(
    twin: VenueTwin, headers: dict[str, str]
) -> None:
    body = _orders_body(signer(twin), 20)
    # 60000 bytes declared (under the limit), 1/30 of them sent: the answer cannot wait for
    # the rest, so the twin answered from the headers alone.
    head = _head(BATCH, {**headers, "Content-Length": "60000"})
    status, answer = await _send(twin.port, head, body[:2000])
    assert status == 401
    assert (answer["error"], answer["code"]) == (True, 401)
    assert answer["msg"].startswith("Unauthorized: ")
    assert len(twin.received_orders) == 0 and twin.received_orders.nbytes == 0


async def test_a_declared_oversize_body_is_refused_413_unread(
    twin: VenueTwin,
) -> None:
    client = signer(twin)
    headers = {"APIKEY": TRADER_API_KEY, "signature": _BAD_SIGNATURE, "X-SAPI-SIGN-TYPE": "2"}
    head = _head(BATCH, {**headers, "Content-Length": "50000000"})
    status, answer = await _send(twin.port, head, _orders_body(client, 20)[:2000])
    assert status == 413
    assert (answer["error"], answer["code"], answer["data"]) == (True, 413, None)
    assert answer["msg"] == (
        "Request Entity Too Large: a body of 50000000 bytes,"
        " more than server.max_body_bytes (65536)"
    )
    # the query paths take no body: a declared one above the bound is refused as well
    head = _head(f"{BALANCE}?symbol=USD", {**headers, "Content-Length": "50000000"})
    status, answer = await _send(twin.port, head, b"x" * 2000)
    assert (status, answer["code"]) == (413, 413)
    assert twin.counters.bodies_too_large == 2
    assert len(twin.received_orders) == 0


async def test_a_chunked_body_is_refused_413_as_it_crosses_the_bound(
    twin: VenueTwin,
) -> None:
    client = signer(twin)
    body = _orders_body(client, 20, padding=5000)  # about 100 KB
    headers = {
        "APIKEY": TRADER_API_KEY,
        "signature": client.sign(body.decode()),
        "Transfer-Encoding": "chunked",
    }
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + 8192]), body[i : i + 8192])
        for i in range(0, len(body), 8192)
    )  # never the last (empty) chunk: the body never ends
    status, answer = await _send(twin.port, _head(BATCH, headers), chunks)
    assert (status, answer["code"]) == (413, 413)
    assert answer["msg"].endswith("a chunked body, more than server.max_body_bytes (65536)")
    assert len(twin.received_orders) == 0


async def test_nothing_is_kept_of_a_body_whose_signature_fails(
    twin: VenueTwin,
) -> None:
    client = signer(twin)
    body = _orders_body(client, 20)
    forged = {"APIKEY": TRADER_API_KEY, "signature": eth_sign(OTHER_KEY, body.decode())}
    for headers in (forged, {**forged, "signature": _BAD_SIGNATURE}, {}):
        head = _head(BATCH, {**headers, "Content-Length": str(len(body))})
        status, answer = await _send(twin.port, head, body)
        assert (status, answer["code"]) == (401, 401)
    assert len(twin.received_orders) == 0 and twin.received_orders.nbytes == 0
    signed = {"APIKEY": TRADER_API_KEY, "signature": client.sign(body.decode())}
    head = _head(BATCH, {**signed, "Content-Length": str(len(body))})
    status, answer = await _send(twin.port, head, body)
    assert (status, answer["code"]) == (200, 200)
    assert [cid for cid, _ in twin.received_orders] == [f"h{i}" for i in range(20)]


async def test_received_orders_are_bounded_in_bytes() -> None:
    bound = 5000
    changes = {"received_orders_max_bytes": bound}
    async with VenueTwin(settings(**changes), port=0, clock=Clock()) as twin:
        client = signer(twin)
        for batch in range(6):
            orders = [{**order(f"b{batch}-{i}"), "pad": "y" * 1000} for i in range(2)]
            body = orjson.dumps({"orders": orders, "timestamp": client.stamp()})
            head = _head(
                BATCH,
                {
                    "APIKEY": TRADER_API_KEY,
                    "signature": client.sign(body.decode()),
                    "Content-Length": str(len(body)),
                },
            )
            assert (await _send(twin.port, head, body))[0] == 200
        kept = twin.received_orders
        assert 0 < kept.nbytes <= bound
        assert sum(len(c) + len(p) for c, p in kept) == kept.nbytes
        assert [c for c, _ in kept] == ["b4-0", "b4-1", "b5-0", "b5-1"]  # the newest


# -- connections -------------------------------------------------------------------------------

_QUICK = ServerSettings(header_timeout=0.5, body_timeout=0.5, keep_alive_timeout=1)


async def _until_closed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    """Everything the twin sends until it closes the connection (a reset counts as closed)."""
    received = b""
    try:
        while chunk := await reader.read(65536):
            received += chunk
    except ConnectionResetError:
        pass
    writer.close()
    return received


async def _trickle(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
    """One header byte every 0.1 s (the pace is the attack) until the twin closes."""
    writer.write(b"POST /api/third/hot/order/balance HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    with contextlib.suppress(ConnectionError):
        while not reader.at_eof() and not writer.is_closing():
            writer.write(b"a")
            await writer.drain()
            await asyncio.sleep(0.1)


def _status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


async def test_idle_half_sent_and_trickling_connections_are_closed() -> None:
    signed = {"APIKEY": TRADER_API_KEY, "signature": _BAD_SIGNATURE, "Content-Length": "1000"}
    starts = {
        "idle": b"",
        "half-headers": b"POST /api/third/hot/order/balance HTTP/1.1\r\nHost: 127",
        "half-body": _head(BATCH, signed).encode() + b"\r\n" + b'{"orders":[',
        "unsigned-half-body": _head(BATCH, {"Content-Length": "1000"}).encode() + b"\r\n{",
        "trickle": b"",
    }
    async with VenueTwin(settings(server=_QUICK), port=0, clock=Clock()) as twin:
        kinds = [kind for kind in starts for _ in range(32)]  # 160 connections
        connections = [await asyncio.open_connection("127.0.0.1", twin.port) for _ in kinds]
        tricklers = []
        for kind, (reader, writer) in zip(kinds, connections, strict=True):
            writer.write(starts[kind])
            if kind == "trickle":
                tricklers.append(asyncio.create_task(_trickle(writer, reader)))
        async with asyncio.timeout(20):  # a bound on the test, far above the deadlines
            answers = await asyncio.gather(*(_until_closed(r, w) for r, w in connections))
            await asyncio.gather(*tricklers)
        statuses = {kind: set() for kind in starts}
        for kind, answer in zip(kinds, answers, strict=True):
            statuses[kind].add(_status_of(answer))
        assert statuses["idle"] == {0}  # closed without a word: nothing was asked
        assert statuses["half-headers"] == {408}
        assert statuses["half-body"] == {408}
        assert statuses["unsigned-half-body"] == {401}  # answered at once, then closed
        assert statuses["trickle"] <= {0, 408}
        assert twin.counters.connections_timed_out == 160
        assert len(twin.received_orders) == 0
        # and the twin still serves
        head = _head(f"{BALANCE}?symbol=USD", {"Content-Length": "0"})
        assert (await _send(twin.port, head))[0] == 401


async def test_a_timeout_answer_is_the_venue_error_envelope() -> None:
    async with VenueTwin(settings(server=_QUICK), port=0, clock=Clock()) as twin:
        reader, writer = await asyncio.open_connection("127.0.0.1", twin.port)
        writer.write(b"POST /api/third/hot/order/balance HTTP/1.1\r\nHost: 1")
        async with asyncio.timeout(10):
            status, answer = await _read_response(reader)
            assert await _until_closed(reader, writer) == b""
        assert status == 408
        assert (answer["error"], answer["code"], answer["data"]) == (True, 408, None)
        assert answer["msg"] == (
            "Request Timeout: headers not complete within server.header_timeout (0.5 s)"
        )


async def test_oversize_headers_are_refused_431(twin: VenueTwin) -> None:
    head = _head(f"{BALANCE}?symbol=USD", {"X-Pad": "a" * 20_000, "Content-Length": "0"})
    status, answer = await _send(twin.port, head)
    assert (status, answer["code"]) == (431, 431)
    assert answer["msg"] == (
        "Request Header Fields Too Large: more than server.max_header_bytes (16384)"
    )
    assert twin.counters.headers_too_large == 1


async def test_a_websocket_message_above_the_bound_closes_the_socket_1009(
    twin: VenueTwin,
) -> None:
    client = signer(twin)
    message = orjson.loads(client.subscribe_message("api_position", pair="ETH-USD"))
    async with connect(twin.ws_url) as ws:
        await ws.send(orjson.dumps({**message, "pad": "p" * 70_000}).decode())
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert twin.counters.subscribe_refusals == 0


async def test_an_oversize_websocket_handshake_is_refused_431(twin: VenueTwin) -> None:
    path = twin.ws_url.split(str(twin.port), 1)[1]
    headers = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "X-Pad": "a" * 20_000,
    }
    head = "\r\n".join([f"GET {path} HTTP/1.1", "Host: 127.0.0.1"])
    head += "".join(f"\r\n{name}: {value}" for name, value in headers.items()) + "\r\n"
    status, answer = await _send(twin.port, head)
    assert (status, answer["code"]) == (431, 431)
    assert twin.counters.ws_connections == 0
