"""The venue twin as a server under hostile input: real sockets on 127.0.0.1, small inputs.

Each test sends what an attacker or a broken client would and checks the twin's answer is
one clear refusal (a status and the venue's error envelope, or a refusal ack) and that it
kept nothing of what it refused. Every wait is bounded (``eventually`` or ``asyncio.timeout``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect

from framework.twin import VenueTwin
from tests.twin.twin_client import (
    TRADER_API_KEY,
    TRADER_KEY,
    Clock,
    TwinClient,
    eth_sign,
    recv_json,
    settings,
)

pytestmark = pytest.mark.anyio

_ABSENT: Any = object()


@pytest.fixture
def anyio_backend() -> str:
    """The twin runs on asyncio (uvicorn)."""
    return "asyncio"


@pytest.fixture
def clock() -> Clock:
    """The twin's and the clients' clock, moved by hand."""
    return Clock()


@pytest.fixture
async def twin(clock: Clock) -> AsyncIterator[VenueTwin]:
    """A twin with the test accounts on a free port."""
    async with VenueTwin(settings(), port=0, clock=clock) as running:
        yield running


def signer(clock: Clock) -> TwinClient:
    """A client that only signs (its http client is never used here)."""
    return TwinClient(None, TRADER_API_KEY, lambda t: eth_sign(TRADER_KEY, t), clock)  # type: ignore[arg-type]


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
    twin: VenueTwin, clock: Clock
) -> None:
    client = signer(clock)
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
