"""RestClient over real sockets against a local server that verifies signatures itself."""

from __future__ import annotations

import logging
import socket
from decimal import Decimal
from typing import Any

import orjson
import pytest

from framework.live.rest import RestClient
from framework.venue.errors import (
    AmbiguousOutcome,
    AuthError,
    BusyError,
    LimitError,
    ParameterError,
    SendFailed,
    ServerFault,
)
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.requests import BALANCE_PATH, BATCH_CREATE_PATH, MATCHES_PATH, POSITIONS_PATH
from framework.venue.signing import Secp256k1Signer
from tests.live.signing_server import SigningServer

# A throwaway key published in eth-account's documentation: test data, never real funds.
KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
SIGNER = Secp256k1Signer(KEY)
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def order(i: int) -> OrderInput:
    return OrderInput(
        client_order_id=f"c{i}",
        is_long=i % 2 == 0,
        is_market=False,
        lever=10,
        match_type=MatchType.GTC,
        pair_name="ETH-USD",
        position_type=PositionType.ISOLATED,
        price=Decimal("1850.5"),
        quantity=Decimal("0.01"),
    )


def echo_orders(path: str, query: str, body: bytes) -> Any:
    if path == BATCH_CREATE_PATH:
        orders = orjson.loads(body)["orders"]
        return [
            {"corderId": o["clientOrderId"], "orderId": 100 + n, "pairName": o["pairName"]}
            for n, o in enumerate(orders)
        ]
    if path == BALANCE_PATH:
        return {
            "userId": 1,
            "coinId": 2,
            "symbol": "USD",
            "availableAmount": "10.5",
            "frozenAmount": "0",
        }
    if path == POSITIONS_PATH:
        return [{"id": 1, "symbol": "ETH-USD", "quantity": "2", "isLong": True}]
    if path == MATCHES_PATH:
        return [{"id": 9, "entrustId": 100, "symbol": "ETH-USD", "averagePrice": "1850.5"}]
    return None


def client(server: SigningServer, **kw: Any) -> RestClient:
    return RestClient(server.base_url, "st_demo", SIGNER, now_ms=lambda: 1700000000000, **kw)


async def test_batch_create_signed_and_reconciled() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server) as rest:
        server.data = echo_orders
        results = await rest.batch_create([order(i) for i in range(20)])
    assert [r.client_order_id for r in results] == [f"c{i}" for i in range(20)]
    assert [r.order_id for r in results] == list(range(100, 120))
    path, _, headers, body = server.requests[0]
    assert path == BATCH_CREATE_PATH and headers["content-type"] == "application/json"
    assert b" " not in body


async def test_query_endpoints_verify_and_decode() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server) as rest:
        server.data = echo_orders
        balance = await rest.balance("USD")
        positions = await rest.positions("ETH-USD", page_no=1, page_size=100)
        matches = await rest.matches("ETH-USD", match_id=50, page_size=10)
    assert balance.available_amount == Decimal("10.5")
    assert positions[0].quantity == Decimal("2")
    assert matches[0].average_price == Decimal("1850.5")
    queries = [q for _, q, _, _ in server.requests]
    assert queries == [
        "symbol=USD&timestamp=1700000000000",
        "pageNo=1&pageSize=100&pairName=ETH-USD&timestamp=1700000000000",
        "matchId=50&pageSize=10&pairName=ETH-USD&timestamp=1700000000000",
    ]
    assert all(body == b"" for *_, body in server.requests)
    assert all(h["content-type"] == "text/plain" for _, _, h, _ in server.requests)


async def test_connection_is_reused_between_calls() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server) as rest:
        server.data = echo_orders
        for _ in range(5):
            await rest.balance("USD")
    assert len(server.requests) == 5 and server.connections == 1


async def test_more_than_twenty_orders_refused_before_sending() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server) as rest:
        with pytest.raises(ParameterError) as err:
            await rest.batch_create([order(i) for i in range(21)])
    assert err.value.code == 2001 and server.requests == []


async def test_page_size_above_100_refused_before_sending() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server) as rest:
        with pytest.raises(ParameterError):
            await rest.positions("ETH-USD", page_size=101)
    assert server.requests == []


async def test_wrong_key_gets_auth_error_from_the_verifier() -> None:
    other = Secp256k1Signer("0x" + "11" * 32)
    async with (
        SigningServer("st_demo", SIGNER.address) as server,
        RestClient(server.base_url, "st_demo", other) as rest,
    ):
        with pytest.raises(AuthError) as err:
            await rest.balance("USD")
    assert err.value.http_status == 401


async def test_envelope_error_raises_family_with_sid() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server) as rest:
        server.code = 2301
        with pytest.raises(LimitError) as err:
            await rest.batch_create([order(1)])
        server.code = 2329
        with pytest.raises(BusyError) as busy:
            await rest.batch_create([order(1)])
    assert err.value.code == 2301 and err.value.sid is not None
    assert busy.value.retryable


async def test_html_503_is_a_server_fault_never_a_refusal() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server) as rest:
        server.mode = "html"
        with pytest.raises(ServerFault) as err:
            await rest.batch_create([order(1)])
    assert err.value.http_status == 503 and "Service Unavailable" in str(err.value)
    assert isinstance(err.value, AmbiguousOutcome)


async def test_dropped_connection_after_sending_is_ambiguous() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server) as rest:
        server.mode = "drop"
        with pytest.raises(AmbiguousOutcome):
            await rest.batch_create([order(1)])
    assert len(server.requests) == 1


async def test_read_timeout_after_sending_is_ambiguous() -> None:
    async with (
        SigningServer("st_demo", SIGNER.address) as server,
        client(server, timeout=0.3) as rest,
    ):
        server.mode = "stall"
        with pytest.raises(AmbiguousOutcome):
            await rest.batch_create([order(1)])
    assert len(server.requests) == 1


async def test_refused_connection_is_send_failed() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with RestClient(f"http://127.0.0.1:{port}", "st_demo", SIGNER) as rest:
        with pytest.raises(SendFailed):
            await rest.balance("USD")


async def test_observer_sees_body_and_query_without_timestamp() -> None:
    seen: list[tuple[str, str, bytes]] = []
    async with (
        SigningServer("st_demo", SIGNER.address) as server,
        client(server, observer=lambda *a: seen.append(a)) as rest,
    ):
        server.data = echo_orders
        await rest.matches("ETH-USD", match_id=5)
    assert seen[0][0] == MATCHES_PATH and seen[0][1] == "matchId=5&pairName=ETH-USD"
    assert b'"averagePrice":"1850.5"' in seen[0][2]


async def test_no_secret_in_reprs_logs_or_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with SigningServer("st_demo", SIGNER.address) as server, client(server) as rest:
        server.code = 2001
        with pytest.raises(ParameterError) as err:
            await rest.balance("USD")
        texts = [repr(rest), repr(rest.builder), repr(SIGNER), str(err.value), caplog.text]
    assert not any(KEY[2:] in t or KEY[2:].upper() in t for t in texts)


async def test_client_used_outside_context_is_a_clear_error() -> None:
    rest = RestClient("http://127.0.0.1:9", "k", SIGNER)
    with pytest.raises(RuntimeError, match="async with"):
        await rest.balance("USD")
