"""The order path (batchCreate over OrderPath) over real sockets on 127.0.0.1.

Against the venue twin, the signature-checking SigningServer, and two tiny servers of this
module: an asyncio one that answers canned bytes (a 500 envelope, a chunked answer, a close
after answering), and a blocking one in a thread that closes its socket while the client's
loop is not looking (the stale keep-alive socket a MSG_PEEK must catch before writing).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from decimal import Decimal

import orjson
import pytest

from framework.live import orderpath
from framework.live.orderpath import OrderPath
from framework.live.rest import RestClient
from framework.twin.demo import DEMO_API_KEY
from framework.twin.server import VenueTwin
from framework.venue.errors import AmbiguousOutcome, BusyError, SendFailed, ServerFault
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.requests import BATCH_CREATE_PATH
from framework.venue.signing import Signer
from tests.live.conftest import Eventually
from tests.live.signing_server import SigningServer
from tests.live.test_rest import SIGNER, echo_orders, order

pytestmark = pytest.mark.anyio


def client(base_url: str, **kw: object) -> RestClient:
    """A RestClient with the test key and a fixed clock."""
    return RestClient(base_url, "st_demo", SIGNER, now_ms=lambda: 1700000000000, **kw)  # type: ignore[arg-type]


def ok_answer(body: bytes) -> bytes:
    """A success envelope naming the first order of a batchCreate body."""
    coid = orjson.loads(body)["orders"][0]["clientOrderId"]
    return orjson.dumps(
        {"error": False, "code": 200, "msg": "SUCCESS", "sid": "1",
         "data": [{"corderId": coid, "orderId": 77, "pairName": "ETH-USD"}]}
    )  # fmt: skip


@asynccontextmanager
async def canned(answer: Callable[[bytes], bytes]) -> AsyncIterator[dict[str, int]]:
    """A server answering each request with answer(body): raw response bytes; stats yielded."""
    stats = {"port": 0, "connections": 0, "requests": 0, "closed": 0}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stats["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = await reader.readexactly(length)
                stats["requests"] += 1
                out = answer(body)
                if not out:  # close after the request, without answering
                    break
                writer.write(out.replace(b"<close>", b""))
                await writer.drain()
                if b"<close>" in out:  # answered; the venue closes the idle connection
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            await writer.wait_closed()  # the socket is closed: its FIN has left
            stats["closed"] += 1

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    stats["port"] = server.sockets[0].getsockname()[1]
    try:
        yield stats
    finally:
        server.close()
        await server.wait_closed()


def http(status: int, payload: bytes, extra: bytes = b"") -> bytes:
    """An HTTP/1.1 response with a Content-Length body."""
    return (
        b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
        % (status, len(payload), extra)
        + payload
    )


async def test_batch_create_against_the_twin_accepted(twin: VenueTwin, demo_signer: Signer) -> None:
    one = OrderInput(
        client_order_id="op1", is_long=True, is_market=False, lever=10,
        match_type=MatchType.GTC, pair_name="ETH-USD", position_type=PositionType.ISOLATED,
        price=Decimal("1500"), quantity=Decimal("0.1"),
    )  # fmt: skip
    async with RestClient(twin.base_url, DEMO_API_KEY, demo_signer) as rest:
        first = await rest.batch_create([one])
        second = await rest.batch_create([OrderInput(**{**_fields(one), "client_order_id": "op2"})])
        assert rest.orders.connects == 1  # the keep-alive socket was reused
    assert first[0].client_order_id == "op1" and first[0].order_id is not None
    assert second[0].client_order_id == "op2"


def _fields(o: OrderInput) -> dict[str, object]:
    return {
        "client_order_id": o.client_order_id, "is_long": o.is_long, "is_market": o.is_market,
        "lever": o.lever, "match_type": o.match_type, "pair_name": o.pair_name,
        "position_type": o.position_type, "price": o.price, "quantity": o.quantity,
    }  # fmt: skip


async def test_written_from_the_callers_stack_in_one_write() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server.base_url) as rest:
        server.data = echo_orders
        await rest.orders.connect()
        request = rest.prepare_batch([order(1), order(2)])
        exchange = rest.write_batch(request)  # synchronous: the bytes are on the socket
        assert exchange is not None
        results = await rest.finish_batch(request, exchange)
    assert [r.client_order_id for r in results] == ["c1", "c2"]
    path, _, headers, body = server.requests[0]
    assert path == BATCH_CREATE_PATH and headers["apikey"] == "st_demo"
    assert body == request.body and server.connections == 1


async def test_busy_2329_is_retryable_busy_error() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server.base_url) as rest:
        server.code = 2329
        with pytest.raises(BusyError) as err:
            await rest.batch_create([order(1)])
        server.code = 200
        server.data = echo_orders
        assert (await rest.batch_create([order(2)]))[0].client_order_id == "c2"
    assert err.value.retryable and server.connections == 1


async def test_500_envelope_is_a_server_fault_never_a_refusal() -> None:
    envelope = orjson.dumps({"error": True, "code": 2001, "msg": "Illegal parameter:x"})
    async with (
        canned(lambda _b: http(500, envelope)) as srv,
        client(f"http://127.0.0.1:{srv['port']}") as rest,
    ):
        with pytest.raises(ServerFault) as err:
            await rest.batch_create([order(1)])
    assert err.value.http_status == 500 and isinstance(err.value, AmbiguousOutcome)


async def test_chunked_answer_is_read() -> None:
    def chunked(body: bytes) -> bytes:
        payload = ok_answer(body)
        half = len(payload) // 2
        return (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n"
            % (half, payload[:half], len(payload) - half, payload[half:])
        )

    async with canned(chunked) as srv, client(f"http://127.0.0.1:{srv['port']}") as rest:
        results = await rest.batch_create([order(1)])
        results += await rest.batch_create([order(2)])
        assert rest.orders.connects == 1
    assert [r.client_order_id for r in results] == ["c1", "c2"]


async def test_dropped_after_sending_is_ambiguous() -> None:
    async with SigningServer("st_demo", SIGNER.address) as server, client(server.base_url) as rest:
        server.mode = "drop"
        with pytest.raises(AmbiguousOutcome):
            await rest.batch_create([order(1)])
        server.mode = "ok"
        server.data = echo_orders
        assert (await rest.batch_create([order(2)]))[0].client_order_id == "c2"
    assert len(server.requests) == 2 and server.connections == 2


async def test_timeout_after_sending_is_ambiguous() -> None:
    async with (
        SigningServer("st_demo", SIGNER.address) as server,
        client(server.base_url, timeout=0.3) as rest,
    ):
        server.mode = "stall"
        with pytest.raises(AmbiguousOutcome, match="timed out"):
            await rest.batch_create([order(1)])
    assert len(server.requests) == 1


async def test_refused_connection_is_send_failed() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with client(f"http://127.0.0.1:{port}") as rest:
        with pytest.raises(SendFailed):
            await rest.batch_create([order(1)])


async def test_idle_connection_closed_by_the_venue_reconnects(
    eventually: Eventually, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Idle past PEEK_AFTER_S (made 0 here): whether or not the loop has seen the FIN yet,
    # the connection is not written on.
    monkeypatch.setattr(orderpath, "PEEK_AFTER_S", 0.0)
    async with (
        canned(lambda b: http(200, ok_answer(b)) + b"<close>") as srv,
        client(f"http://127.0.0.1:{srv['port']}") as rest,
    ):
        await rest.batch_create([order(1)])
        await eventually(lambda: srv["closed"] == 1)
        results = await rest.batch_create([order(2)])
        assert rest.orders.connects == 2
    assert results[0].client_order_id == "c2" and srv["requests"] == 2


async def test_connection_close_header_is_not_reused() -> None:
    answer = lambda b: http(200, ok_answer(b), b"Connection: close\r\n")  # noqa: E731
    async with canned(answer) as srv, client(f"http://127.0.0.1:{srv['port']}") as rest:
        await rest.batch_create([order(1)])
        await rest.batch_create([order(2)])
        assert rest.orders.connects == 2


class ThreadServer:
    """A blocking one-connection-at-a-time server: answers one request, then closes."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.closed = threading.Event()
        self.requests = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                conn.sendall(http(200, ok_answer(body)))
            self.closed.set()

    def close(self) -> None:
        """Stop accepting."""
        self.sock.close()


async def test_stale_socket_seen_before_writing_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(orderpath, "PEEK_AFTER_S", 0.0)  # peek even a connection just used
    server = ThreadServer()
    try:
        async with client(f"http://127.0.0.1:{server.port}") as rest:
            await rest.batch_create([order(1)])
            # Block the loop until the server has closed: its FIN is in our socket's queue,
            # unseen by the loop. The peek before writing must catch it.
            assert server.closed.wait(5.0)
            request = rest.prepare_batch([order(2)])
            assert rest.write_batch(request) is None  # no live idle connection: not written
            results = await rest.finish_batch(request, None)
            assert rest.orders.connects == 2
        assert results[0].client_order_id == "c2" and server.requests == 2
    finally:
        server.close()


def test_base_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="http"):
        OrderPath("ftp://example.com")


async def test_a_connect_cut_short_closes_its_socket() -> None:
    # A connect that times out (or is cancelled) before the venue accepts: its socket is
    # closed there and then, never left for the garbage collector (a ResourceWarning, and a
    # file descriptor held until then). A listener that never accepts, its backlog filled
    # first, leaves the next connect hanging.
    import gc
    import warnings

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(8):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        try:
            path = OrderPath(f"http://127.0.0.1:{port}", connect_timeout=0.2)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for _ in range(3):
                    with pytest.raises(SendFailed, match="timed out"):
                        await path.connect()
                gc.collect()
            await path.aclose()
        finally:
            for filler in fillers:
                filler.close()
    leaked = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == [], [str(w.message) for w in leaked]
