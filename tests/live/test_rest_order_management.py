"""RestClient's order-management calls over real sockets: a canned local server, then the twin."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import orjson
import pytest

from framework.live.rest import RestClient
from framework.twin.demo import DEMO_API_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from framework.venue.errors import (
    AmbiguousOutcome,
    ExtensionUnavailable,
    OrderStateError,
    ServerFault,
    TooManyPages,
)
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.order_management import OrderState
from framework.venue.requests import (
    BATCH_CANCEL_PATH,
    BATCH_CANCEL_WITH_RESULTS_PATH,
    CANCEL_ALL_PATH,
    CANCEL_BY_CLIENT_ID_PATH,
    CANCEL_PATH,
    OPEN_ORDERS_PATH,
    QUERY_ORDER_PATH,
    OrderManagementPaths,
)
from framework.venue.signing import Secp256k1Signer, Signer
from tests.live.signing_server import recover

# A throwaway key published in eth-account's documentation: test data, never real funds.
KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
SIGNER = Secp256k1Signer(KEY)
TS = 1700000000000
pytestmark = pytest.mark.anyio

Seen = tuple[str, dict[str, str], bytes]  # request line, headers (lower-case names), body
Answer = Callable[[str, str], tuple[int, bytes]]  # (path, query) -> (status, body)


def envelope(data: Any, code: int = 200, msg: str = "SUCCESS") -> bytes:
    return orjson.dumps({"error": code != 200, "code": code, "msg": msg, "data": data, "sid": "1"})


def record(entrust_id: int, **kw: Any) -> dict[str, Any]:
    return {
        "entrustId": entrust_id,
        "clientOrderId": f"c{entrust_id}",
        "pairName": "ETH-USD",
        "isLong": True,
        "isMarket": False,
        "matchType": 1,
        "positionType": 3,
        "lever": 10,
        "price": "1850.5",
        "quantity": "1",
        "filledQuantity": "0",
        "status": "OPEN",
        "createTimeStamp": TS,
        "updateTimeStamp": TS,
        **kw,
    }


class CannedServer:
    """HTTP/1.1 on 127.0.0.1: records each request line, headers and body; answers canned."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.seen: list[Seen] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> CannedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                headers = {}
                for line in head[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.seen.append((head[0], headers, body))
                target = head[0].split(" ")[1]
                path, _, query = target.partition("?")
                status, payload = self.answer(path, query)
                writer.write(
                    b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                    % (status, len(payload))
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def lines(self) -> list[str]:
        """The request lines seen, in order."""
        return [line for line, _, _ in self.seen]


def client(server: CannedServer, **kw: Any) -> RestClient:
    return RestClient(server.base_url, "st_demo", SIGNER, now_ms=lambda: TS, **kw)


def assert_signed_query_posts(server: CannedServer) -> None:
    """Every request: POST, empty body, text/plain, APIKEY, sign type 2, a signature that verifies."""
    for line, headers, body in server.seen:
        method, target, _ = line.split(" ")
        query = target.partition("?")[2]
        assert method == "POST" and body == b""
        assert headers["content-length"] == "0" and headers["content-type"] == "text/plain"
        assert headers["apikey"] == "st_demo" and headers["x-sapi-sign-type"] == "2"
        assert recover(unquote(query), headers["signature"]) == SIGNER.address


async def test_cancel_order_request_and_record() -> None:
    canned = envelope(record(77, status="CANCELED", extraField=1))
    async with CannedServer(lambda p, q: (200, canned)) as server, client(server) as rest:
        result = await rest.cancel_order(77)
    assert server.lines() == [f"POST {CANCEL_PATH}?entrustId=77&timestamp={TS} HTTP/1.1"]
    assert_signed_query_posts(server)
    assert server.seen[0][1]["signature"] == SIGNER.sign(f"entrustId=77&timestamp={TS}")
    assert result is not None and result.state is OrderState.CANCELED
    assert result.extra == {"extraField": 1}


async def test_cancel_by_client_id_data_true_is_success_without_record() -> None:
    async with CannedServer(lambda p, q: (200, envelope(True))) as server, client(server) as rest:
        assert await rest.cancel_by_client_id("pf 1") is None
    assert server.lines() == [
        f"POST {CANCEL_BY_CLIENT_ID_PATH}?clientOrderId=pf%201&timestamp={TS} HTTP/1.1"
    ]
    assert_signed_query_posts(server)


async def test_cancel_refused_for_order_state_raises() -> None:
    canned = envelope(None, 2341, "order already completed")
    async with CannedServer(lambda p, q: (200, canned)) as server, client(server) as rest:
        with pytest.raises(OrderStateError) as err:
            await rest.cancel_order(5)
    assert err.value.order_done and err.value.refuses and err.value.http_status == 200


async def test_batch_cancel_chunks_dedupes_and_reports() -> None:
    def answer(path: str, query: str) -> tuple[int, bytes]:
        ids = unquote(query.split("&")[0].removeprefix("entrustIds=")).split(",")
        if ids[0] == "5":  # the last chunk: no per-order word
            return 200, envelope(None)
        return 200, envelope([{"entrustId": int(i), "code": 200, "msg": "SUCCESS"} for i in ids])

    async with CannedServer(answer) as server, client(server) as rest:
        report = await rest.batch_cancel([1, 2, 2, 3, 4, 5], with_results=True, chunk_size=2)
    assert server.lines() == [
        f"POST {BATCH_CANCEL_WITH_RESULTS_PATH}?entrustIds=1%2C2&timestamp={TS} HTTP/1.1",
        f"POST {BATCH_CANCEL_WITH_RESULTS_PATH}?entrustIds=3%2C4&timestamp={TS} HTTP/1.1",
        f"POST {BATCH_CANCEL_WITH_RESULTS_PATH}?entrustIds=5&timestamp={TS} HTTP/1.1",
    ]
    assert_signed_query_posts(server)
    assert [r.entrust_id for r in report.results if r.ok] == [1, 2, 3, 4]
    assert report.unreported == (5,)


async def test_batch_cancel_default_chunk_is_twenty_without_results() -> None:
    async with CannedServer(lambda p, q: (200, envelope(None))) as server, client(server) as rest:
        report = await rest.batch_cancel(list(range(1, 46)))
        assert await rest.batch_cancel([]) == type(report)()
    assert [line.split("?")[0] for line in server.lines()] == [f"POST {BATCH_CANCEL_PATH}"] * 3
    sizes = [
        len(unquote(line.split("entrustIds=")[1].split("&")[0]).split(","))
        for line in server.lines()
    ]
    assert sizes == [20, 20, 5]
    assert report.results == () and report.unreported == tuple(range(1, 46))


@pytest.mark.parametrize(
    ("kw", "query", "data", "ids"),
    [
        ({}, f"timestamp={TS}", {"entrustIds": [1, 2]}, (1, 2)),
        ({"pair": "ETH-USD"}, f"pairName=ETH-USD&timestamp={TS}", [3], (3,)),
        (
            {"pair": "ETH-USD", "is_long": False},
            f"isLong=false&pairName=ETH-USD&timestamp={TS}",
            None,
            None,
        ),
    ],
)
async def test_cancel_all(kw: dict[str, Any], query: str, data: Any, ids: Any) -> None:
    async with CannedServer(lambda p, q: (200, envelope(data))) as server, client(server) as rest:
        assert await rest.cancel_all(**kw) == ids
    assert server.lines() == [f"POST {CANCEL_ALL_PATH}?{query} HTTP/1.1"]
    assert_signed_query_posts(server)


async def test_query_order() -> None:
    canned = envelope(record(9, price=1850.25, filledQuantity="0.4", status="OPEN"))
    async with CannedServer(lambda p, q: (200, canned)) as server, client(server) as rest:
        found = await rest.query_order(9)
    assert server.lines() == [f"POST {QUERY_ORDER_PATH}?entrustId=9&timestamp={TS} HTTP/1.1"]
    assert_signed_query_posts(server)
    assert found is not None and found.price == Decimal("1850.25")
    assert found.remaining == Decimal("0.6")


async def test_all_open_orders_pages_until_a_short_page() -> None:
    def answer(path: str, query: str) -> tuple[int, bytes]:
        page = int(query.split("pageNo=")[1].split("&")[0])
        ids = {1: [1, 2], 2: [3, 4], 3: [5]}[page]
        return 200, envelope({"list": [record(i) for i in ids], "pageNo": page, "pageSize": 2})

    async with CannedServer(answer) as server, client(server) as rest:
        orders = await rest.all_open_orders("ETH-USD", page_size=2)
    assert [o.entrust_id for o in orders] == [1, 2, 3, 4, 5]
    assert server.lines() == [
        f"POST {OPEN_ORDERS_PATH}?pageNo={n}&pageSize=2&pairName=ETH-USD&timestamp={TS} HTTP/1.1"
        for n in (1, 2, 3)
    ]
    assert_signed_query_posts(server)


async def test_all_open_orders_stops_at_total_and_reads_each_id_once() -> None:
    def answer(path: str, query: str) -> tuple[int, bytes]:
        page = int(query.split("pageNo=")[1].split("&")[0])
        ids = {1: [1, 2], 2: [2, 3], 3: [4, 5]}[page]  # an order moved between reads
        return 200, envelope({"records": [record(i) for i in ids], "total": 6})

    async with CannedServer(answer) as server, client(server) as rest:
        orders = await rest.all_open_orders("ETH-USD", page_size=2)
    assert [o.entrust_id for o in orders] == [1, 2, 3, 4, 5]
    assert len(server.seen) == 3  # 3 pages of 2 reach the total of 6: no 4th call


async def test_all_open_orders_bounded_by_max_pages() -> None:
    full = envelope([record(1), record(2)])  # a venue ignoring pageNo: always full
    async with CannedServer(lambda p, q: (200, full)) as server, client(server) as rest:
        with pytest.raises(TooManyPages) as err:
            await rest.all_open_orders("ETH-USD", page_size=2, max_pages=3)
    assert len(server.seen) == 3
    assert err.value.pages == 3 and err.value.path == OPEN_ORDERS_PATH
    assert [r.entrust_id for r in err.value.records] == [1, 2]  # type: ignore[attr-defined]


async def test_open_orders_string_list_is_extension_unavailable() -> None:
    canned = envelope("no open orders")
    async with CannedServer(lambda p, q: (200, canned)) as server, client(server) as rest:
        with pytest.raises(ExtensionUnavailable) as err:
            await rest.open_orders("ETH-USD")
    assert err.value.path == OPEN_ORDERS_PATH


async def test_404_on_every_path_is_extension_unavailable() -> None:
    async with (
        CannedServer(lambda p, q: (404, b'{"status":404,"error":"Not Found"}')) as server,
        client(server) as rest,
    ):
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: rest.cancel_order(1),
            lambda: rest.cancel_by_client_id("c1"),
            lambda: rest.batch_cancel([1]),
            lambda: rest.batch_cancel([1], with_results=True),
            lambda: rest.cancel_all(),
            lambda: rest.open_orders("ETH-USD"),
            lambda: rest.all_open_orders("ETH-USD"),
            lambda: rest.query_order(1),
        ]
        paths = []
        for call in calls:
            with pytest.raises(ExtensionUnavailable) as err:
                await call()
            assert err.value.http_status == 404
            paths.append(err.value.path)
    assert paths == [
        CANCEL_PATH,
        CANCEL_BY_CLIENT_ID_PATH,
        BATCH_CANCEL_PATH,
        BATCH_CANCEL_WITH_RESULTS_PATH,
        CANCEL_ALL_PATH,
        OPEN_ORDERS_PATH,
        OPEN_ORDERS_PATH,
        QUERY_ORDER_PATH,
    ]


async def test_http_500_is_a_server_fault_never_a_refusal() -> None:
    canned = envelope(None, 2340, "order does not exist")
    async with CannedServer(lambda p, q: (500, canned)) as server, client(server) as rest:
        with pytest.raises(ServerFault) as err:
            await rest.cancel_order(1)
    assert isinstance(err.value, AmbiguousOutcome) and err.value.http_status == 500
    assert len(server.seen) == 1


async def test_configured_paths_and_the_observer() -> None:
    seen: list[tuple[str, str, bytes]] = []
    paths = OrderManagementPaths(cancel="/x/cancel")
    async with (
        CannedServer(lambda p, q: (200, envelope(None))) as server,
        client(server, order_paths=paths, observer=lambda *a: seen.append(a)) as rest,
    ):
        await rest.cancel_order(3)
    assert server.lines() == [f"POST /x/cancel?entrustId=3&timestamp={TS} HTTP/1.1"]
    assert seen == [("/x/cancel", "entrustId=3", envelope(None))]


# ---------------------------------------------------------------------------- the venue twin


def resting(i: int) -> OrderInput:
    """A buy limit far below the twin's ETH-USD price (2000): it rests."""
    return OrderInput(
        client_order_id=f"rest-{i}",
        is_long=True,
        is_market=False,
        lever=10,
        match_type=MatchType.GTC,
        pair_name="ETH-USD",
        position_type=PositionType.ISOLATED,
        price=Decimal("1000"),
        quantity=Decimal("0.01"),
    )


async def test_twin_round_trip(rest: RestClient) -> None:
    placed = await rest.batch_create([resting(i) for i in range(5)])
    ids = [r.order_id for r in placed]
    listed = await rest.all_open_orders("ETH-USD", page_size=2)
    assert sorted(o.entrust_id for o in listed) == sorted(ids)
    assert {o.client_order_id for o in listed} == {f"rest-{i}" for i in range(5)}
    assert all(o.state is OrderState.OPEN and o.price == Decimal("1000") for o in listed)
    queried = await rest.query_order(ids[0])
    assert queried is not None and queried.remaining == Decimal("0.01")

    canceled = await rest.cancel_order(ids[0])
    assert canceled is not None and canceled.state is OrderState.CANCELED
    with pytest.raises(OrderStateError) as done:
        await rest.cancel_order(ids[0])
    assert done.value.order_done
    by_client = await rest.cancel_by_client_id("rest-1")
    assert by_client is not None and by_client.entrust_id == ids[1]

    report = await rest.batch_cancel([ids[2], ids[0]], with_results=True)
    assert [(r.entrust_id, r.ok, r.order_done) for r in report.results] == [
        (ids[2], True, False),
        (ids[0], False, True),
    ]
    assert report.unreported == ()
    assert await rest.cancel_all(pair="ETH-USD", is_long=True) == tuple(sorted(ids[3:]))
    assert await rest.all_open_orders("ETH-USD") == []
    with pytest.raises(OrderStateError) as missing:
        await rest.query_order(max(ids) + 1000)
    assert missing.value.order_missing


async def test_twin_without_the_extension_answers_unavailable(demo_signer: Signer) -> None:
    settings = TwinSettings(prices=PriceSettings(tick_interval=0), order_management=False)
    async with (
        VenueTwin(settings, host="127.0.0.1", port=0) as twin,
        RestClient(twin.base_url, DEMO_API_KEY, demo_signer) as rest,
    ):
        with pytest.raises(ExtensionUnavailable) as err:
            await rest.open_orders("ETH-USD")
        assert err.value.http_status == 404
        with pytest.raises(ExtensionUnavailable):
            await rest.cancel_all()
