"""RestClient: the venue's REST endpoints; batchCreate over the order path, the rest on httpx.

batchCreate goes over :class:`framework.live.orderpath.OrderPath` (keep-alive sockets of its
own, one write per request, a small response parser: see that module for why and the
figures); positions, balance and matches over one pooled ``httpx.AsyncClient``. Both
transports translate their errors with the same two rules, the only place where transport
errors become framework errors (:func:`~framework.live.orderpath.send_failed`,
:func:`~framework.live.orderpath.no_answer`):

- nothing reached the venue (connect failures, pool timeouts, a first write that failed
  with zero bytes sent) -> :class:`SendFailed`;
- read/write timeouts, resets, EOF and protocol errors after sending -> :class:`AmbiguousOutcome`;
- a body that is not the envelope -> :class:`BadResponse`; an envelope code != 200 -> the
  matching :class:`VenueError`; HTTP >= 500 -> :class:`ServerFault`
  (:func:`framework.venue.requests.parse_response`).

Requests are built and responses parsed by the sans-I/O :mod:`framework.venue.requests`.

The order-management extension (cancel, batch cancel, cancel all, open orders, query one
order; VENUE-FACTS, not SPEC) goes through the same :meth:`RestClient.send` (same error
translation and observer) and is read by :mod:`framework.venue.order_management`: HTTP 404
or unreadable data raises :class:`~framework.venue.errors.ExtensionUnavailable`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Protocol

import httpx

from framework.engine.cancel_calls import CancelAnswer, CancelBatch
from framework.live.orderpath import Exchange, OrderPath, no_answer, send_failed
from framework.live.wallclock import WallClock
from framework.venue import models as m
from framework.venue import order_management as om
from framework.venue.codec import DEFAULT_CODEC, Codec
from framework.venue.errors import TooManyPages
from framework.venue.public_info import (
    PAIRS_PATH,
    TIME_PATH,
    PairListing,
    parse_pair_list,
    parse_server_time,
    public_request,
)
from framework.venue.requests import (
    MAX_CANCEL_BATCH,
    OrderManagementPaths,
    PreparedRequest,
    RequestBuilder,
    parse_response,
)
from framework.venue.signing import Signer

__all__ = ["ResponseObserver", "RestClient"]

log = logging.getLogger("framework.rest")


class ResponseObserver(Protocol):
    """Called with (path, query without timestamp, raw body) for every answer read.

    A batchCreate's also gets ``request``: the JSON body sent (its ``timestamp`` is when it
    was signed and sent; the signature travels in headers, never in it), so a recording
    holds the orders asked and the time they left, beside the answer.
    """

    def __call__(self, path: str, query: str, body: bytes, /, request: bytes | None = None) -> None:
        """Note one answer read."""


def _strip_timestamp(query: str) -> str:
    return "&".join(p for p in query.split("&") if p and not p.startswith("timestamp="))


class RestClient:
    """Async client of the venue's REST API; use as an async context manager."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        signer: Signer,
        *,
        language: str | None = None,
        timeout: float = 10.0,
        connect_timeout: float | None = None,
        max_connections: int = 16,
        now_ms: Callable[[], int] | None = None,
        codec: Codec = DEFAULT_CODEC,
        observer: ResponseObserver | None = None,
        order_paths: OrderManagementPaths | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.builder = RequestBuilder(api_key, signer, language=language, order_paths=order_paths)
        self._now_ms = now_ms if now_ms is not None else WallClock().now_ms
        self._codec = codec
        self.observer = observer
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout or timeout)
        self._limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._client: httpx.AsyncClient | None = None
        self.orders = OrderPath(
            self.base_url,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_idle=max_connections,
        )
        """The order path's connections (batchCreate)."""

    def __repr__(self) -> str:
        return f"RestClient({self.base_url!r})"

    async def __aenter__(self) -> RestClient:
        self._client = httpx.AsyncClient(
            base_url=self.base_url, timeout=self._timeout, limits=self._limits
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool and the order path."""
        await self.orders.aclose()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def send(self, request: PreparedRequest) -> tuple[int, bytes]:
        """Send a prepared request; returns (status, body) or raises a TransportError."""
        client = self._client
        if client is None:
            raise RuntimeError("RestClient is not open: use 'async with RestClient(...)'")
        url = self.base_url + request.target
        try:
            response = await client.request(
                request.method, url, content=request.body, headers=request.headers
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise send_failed(request.path, exc) from None
        except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            raise no_answer(request.path, exc) from None
        body = response.content
        if self.observer is not None:
            self.observer(request.path, _strip_timestamp(request.query), body)
        return response.status_code, body

    async def call(self, request: PreparedRequest) -> Any:
        """Send and parse: records of the endpoint, or the matching exception."""
        status, body = await self.send(request)
        return parse_response(request.path, status, body, self._codec)

    async def batch_create(self, orders: Sequence[m.OrderInput]) -> list[m.OrderResult]:
        """Create up to 20 orders; more are refused locally with a ParameterError (2001)."""
        return await self.finish_batch(self.prepare_batch(orders), None)

    def send_batch(self, orders: Sequence[m.OrderInput]) -> Awaitable[list[m.OrderResult]]:
        """Sign a batchCreate and write it now on an idle connection; awaiting answers it.

        With no idle connection, awaiting connects and sends. Raises at once: SendFailed
        (the write failed before any byte left), ParameterError (refused locally).
        """
        request = self.prepare_batch(orders)
        return self.finish_batch(request, self.write_batch(request))

    async def warm_up(self) -> None:
        """Open an order-path connection ahead of the first batch."""
        await self.orders.connect()

    def prepare_batch(self, orders: Sequence[m.OrderInput]) -> PreparedRequest:
        """The signed batchCreate request of orders (ParameterError past 20 or none)."""
        return self.builder.batch_create(orders, self._now_ms())

    def write_batch(self, request: PreparedRequest) -> Exchange | None:
        """Write a batchCreate now, from the caller's stack, if a connection is ready.

        None: no idle connection (finish_batch connects and sends). SendFailed: the write
        failed before any byte left.
        """
        return self.orders.write(request)

    async def finish_batch(
        self, request: PreparedRequest, exchange: Exchange | None
    ) -> list[m.OrderResult]:
        """The results of a batchCreate written by write_batch (or send it now if None)."""
        orders = self.orders
        if exchange is None:
            status, body = await orders.send(request)
        else:
            status, body = await orders.read(exchange)
        if self.observer is not None:
            self.observer(request.path, "", body, request=request.body)
        result: list[m.OrderResult] = parse_response(request.path, status, body, self._codec)
        return result

    async def positions(
        self, pair: str, page_no: int | None = None, page_size: int | None = None
    ) -> list[m.Position]:
        """Positions of one pair; page_size above 100 is refused locally."""
        request = self.builder.positions(pair, self._now_ms(), page_no=page_no, page_size=page_size)
        result: list[m.Position] = await self.call(request)
        return result

    async def balance(self, symbol: str) -> m.AccountBalance:
        """Balance of one settlement coin."""
        result: m.AccountBalance = await self.call(self.builder.balance(symbol, self._now_ms()))
        return result

    async def matches(
        self,
        pair: str,
        match_id: int | None = None,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> list[m.MatchRecord]:
        """Matched trades of one pair, newest first; match_id is a strict upper bound."""
        request = self.builder.matches(
            pair, self._now_ms(), match_id=match_id, page_no=page_no, page_size=page_size
        )
        result: list[m.MatchRecord] = await self.call(request)
        return result

    # ------------------------------------------------ public info calls (VENUE-FACTS, unsigned)

    async def server_time(self) -> int:
        """The venue's clock in ms (ExtensionUnavailable on HTTP 404)."""
        status, body = await self.send(public_request(TIME_PATH))
        return parse_server_time(status, body, self._codec)

    async def pair_list(self) -> dict[str, PairListing]:
        """The pairs the venue lists, with the rules each states (ExtensionUnavailable on 404)."""
        status, body = await self.send(public_request(PAIRS_PATH))
        return parse_pair_list(status, body, self._codec)

    # ------------------------------------------------ order-management extension (VENUE-FACTS)

    async def cancel_order(self, entrust_id: int) -> om.OrderRecord | None:
        """Cancel one order by the venue's id; the record after cancel if the venue sent one.

        Returning means the venue accepted the cancel (code 200); a refusal raises its
        VenueError (OrderStateError for 2340 no such order, 2341 already completed).
        """
        request = self.builder.cancel_order(entrust_id, self._now_ms())
        status, body = await self.send(request)
        return om.parse_cancel(request.path, status, body, self._codec)

    async def cancel_by_client_id(self, client_order_id: str) -> om.OrderRecord | None:
        """Cancel one order by its clientOrderId; as cancel_order."""
        request = self.builder.cancel_by_client_id(client_order_id, self._now_ms())
        status, body = await self.send(request)
        return om.parse_cancel(request.path, status, body, self._codec)

    async def batch_cancel(
        self,
        entrust_ids: Sequence[int],
        with_results: bool = False,
        *,
        chunk_size: int = MAX_CANCEL_BATCH,
    ) -> om.BatchCancelReport:
        """Cancel orders by id in calls of at most chunk_size ids (duplicates sent once).

        Calls go one after another; the first that fails raises and those before it stand
        (cancelling again is harmless: the venue refuses a completed order). Ids the venue
        accepted without a per-order word (batchCancelEntrust, or an answer without
        results) are in ``unreported``: infer nothing about them.
        """
        if chunk_size < 1:
            raise ValueError(f"chunk_size: expected >= 1, got {chunk_size}")
        ids = list(dict.fromkeys(entrust_ids))
        report = om.BatchCancelReport()
        for start in range(0, len(ids), chunk_size):
            chunk = ids[start : start + chunk_size]
            request = self.builder.batch_cancel(chunk, self._now_ms(), with_results=with_results)
            status, body = await self.send(request)
            report += om.parse_batch_cancel(request.path, status, body, chunk, self._codec)
        return report

    async def cancel(self, batch: CancelBatch) -> dict[int | str, CancelAnswer]:
        """One cancel call of the engine: by clientOrderId, one orderId, or a batch of them."""
        if batch.by_client_id:
            (coid,) = batch.client_order_ids
            return {coid: _accepted(await self.cancel_by_client_id(coid))}
        if len(batch.order_ids) == 1:
            (order_id,) = batch.order_ids
            return {order_id: _accepted(await self.cancel_order(order_id))}
        # One call: the engine cut the batch to its cancel_batch already.
        report = await self.batch_cancel(batch.order_ids, chunk_size=len(batch.order_ids))
        answers: dict[int | str, CancelAnswer] = {}
        for result in report.results:
            code = 200 if result.ok else (result.code if result.code is not None else 0)
            answers[result.entrust_id] = CancelAnswer(code, result.msg or "")
        return answers

    async def cancel_all(
        self, pair: str | None = None, is_long: bool | None = None
    ) -> tuple[int, ...] | None:
        """Cancel every open order (of pair, of one side); the ids the venue names, or None."""
        request = self.builder.cancel_all(self._now_ms(), pair=pair, is_long=is_long)
        status, body = await self.send(request)
        return om.parse_cancel_all(request.path, status, body, self._codec)

    async def open_orders(self, pair: str, page_no: int = 1, page_size: int = 50) -> om.OrderPage:
        """One page of a pair's open orders."""
        request = self.builder.open_orders(
            pair, self._now_ms(), page_no=page_no, page_size=page_size
        )
        status, body = await self.send(request)
        return om.parse_open_orders(request.path, status, body, self._codec)

    async def all_open_orders(
        self, pair: str, *, page_size: int = 50, max_pages: int = 20
    ) -> list[om.OrderRecord]:
        """Every open order of pair: pages until a short page or the total (each id once).

        More than max_pages full pages raises TooManyPages (it holds what was read).
        """
        if max_pages < 1:
            raise ValueError(f"max_pages: expected >= 1, got {max_pages}")
        found: dict[int, om.OrderRecord] = {}
        for page_no in range(1, max_pages + 1):
            page = await self.open_orders(pair, page_no, page_size)
            for record in page.records:
                found.setdefault(record.entrust_id, record)
            if len(page.records) < page_size:
                return list(found.values())
            if page.total is not None and page_no * page_size >= page.total:
                return list(found.values())
        raise TooManyPages(self.builder.order_paths.open_orders, max_pages, tuple(found.values()))

    async def query_order(self, entrust_id: int) -> om.OrderRecord | None:
        """One order by the venue's id; None when the venue answers success with no record."""
        request = self.builder.query_order(entrust_id, self._now_ms())
        status, body = await self.send(request)
        return om.parse_query_order(request.path, status, body, self._codec)


def _accepted(record: om.OrderRecord | None) -> CancelAnswer:
    """A single cancel the venue accepted: code 200, with what its record tells."""
    if record is None:
        return CancelAnswer(200)
    return CancelAnswer(200, "", record.filled_quantity, record.entrust_id)
