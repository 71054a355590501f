"""The twin's HTTP front (starlette): SPEC section 4 paths; its socket is the hub's.

Decisions where SPEC.md is silent:

* Every path is POST. batchCreate's signed text is the exact body as received (UTF-8). The
  query endpoints' signed text is the query string as received; its percent-decoded form is
  accepted too. Bodies of query endpoints are ignored.
* HTTP 200 carries every envelope, success or venue error; HTTP 401 carries the envelope
  ``{"error": true, "code": 401, "msg": "Unauthorized: <reason>"}`` for a missing or unknown
  APIKEY, a missing signature or one that does not verify. HTTP 413, 408 and 431 (body too
  large, request too slow, headers too large: :class:`framework.twin.server.LimitedHttp`) carry
  the same envelope with their status as code. ``Accept-Language`` is ignored (texts are
  SPEC section 7's English ones). ``sid`` counts responses from 1.
* Checks run: faults (latency, 503, 2329), authentication, timestamp (missing: 2002 on
  batchCreate and balance, 2001 on the list endpoints, whose only listed code is 2001;
  malformed or outside the window: ``2001 Illegal parameter:timestamp``), then the call.
  A 503 fault answer is the text ``Service Unavailable``, or with ``unavailable_envelope``
  the envelope ``{"error": true, "code": 503, "msg": "Service Unavailable", ...}``.
* batchCreate, before those checks: the reset_before_read fault closes the connection
  without reading the body (nothing executes). Then what the headers say: a declared body
  above ``server.max_body_bytes`` (64 KiB) is answered HTTP 413 ``{"error": true, "code":
  413, "msg": "Request Entity Too Large: a body of N bytes, more than
  server.max_body_bytes (65536)", ...}`` without reading it, on every path (a chunked
  batchCreate body: as soon as it crosses the bound). A request whose signature cannot
  verify from its headers alone (no or unknown APIKEY, no signature, a sign type without a
  registered key) is not read at all; it gets its 401 after the fault checks above.
  Otherwise the body is read and verified; only when it verifies and is JSON is every
  order object with a string clientOrderId recorded in ``received_orders`` as
  (clientOrderId, the object re-serialized with sorted keys), whatever happens next
  (bounded: see :class:`framework.twin.faults.ReceivedOrders`). Nothing of a refused request is
  kept.
* batchCreate, after executing (orders placed, fills made, pushes published): the
  drop_response fault closes the connection without an answer; error_after_accept answers
  HTTP ``error_after_accept_status`` with ``{"error": true, "code": <status>, "msg":
  "Internal Server Error" (the status's phrase), "data": null}``; omit_result leaves some
  accepted orders out of a successful answer's data; answer_delay waits before answering.
* batchCreate in ``partial`` mode answers code 200 with only the accepted orders, in
  submission order; when every order is refused, the first refusal is the whole answer. In
  ``atomic`` mode the first refused order's code is the whole answer and nothing executes.
  Each accepted order is ``{"corderId"|"cOrderId": ..., "orderId": ..., "pairName": ...}``.
* Position list and match list: pairName required (2001 when missing or unknown); pageNo is
  1-based (default 1); pageSize defaults to 20 and may not exceed 100 (2001 pageSize); a
  matchId that is not an integer is ``2001 Illegal parameter:matchId``. A match held back
  by the match_delay fault is not listed until its time (the twin's clock) has come; the
  matchId bound and paging apply to the listed matches.
* Balance: a symbol the venue knows but the account does not hold gives 2122; a symbol the
  venue does not know at all gives 4001.
* The order-management extension (cancels, open orders, order query; shapes, codes and faults
  in :mod:`framework.twin.order_management`): seven query-string paths authenticated and
  timestamp-checked as above (a missing timestamp is 2002), routed only while the setting
  ``order_management`` is true (otherwise HTTP 404, as any unknown path). After a cancel
  path executed, drop_response and error_after_accept apply as on batchCreate.
* Public info (VENUE-FACTS: unsigned GETs; latency and refusal faults apply): the time path
  answers the twin's clock in ms plus ``clock_offset_ms`` (the clock the timestamp checks
  use too; the exchange's own times are not offset); the pairs path lists every pair with
  the rules the twin enforces, camelCase (``pairName``, ``contractPairId``, ``settleCoin``,
  ``priceDecimals``, ``minQuantity``..., decimals as strings, ``positionTypes`` a list).
* Public market GETs (mark, index, trades, depth, kline): :mod:`framework.twin.market_http`.
* WebSocket at ``ws_path``: :class:`framework.twin.hub.Sockets`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote

import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute

from framework.sim.exchange import Exchange
from framework.twin import wire
from framework.twin.auth import (
    AuthRefused,
    Credentials,
    Verifier,
    parse_timestamp,
    within_window,
)
from framework.twin.faults import Counters, Faults, ReceivedOrders
from framework.twin.hub import Hub, Sockets
from framework.twin.market_feed import TwinMarket
from framework.twin.market_http import MarketEndpoints
from framework.twin.order_management import ORDER_MANAGEMENT_PATHS, OrderManagement
from framework.twin.settings import TwinSettings
from framework.twin.wire import Refused, page, parse_orders
from framework.venue.errors import render_message
from framework.venue.public_info import PAIRS_PATH, TIME_PATH
from framework.venue.requests import BALANCE_PATH, BATCH_CREATE_PATH, MATCHES_PATH, POSITIONS_PATH

__all__ = ["Handler", "TwinApp"]

_NOT_JSON: Any = object()
"""Stands for a batchCreate body that is not JSON."""

Aborter = Callable[[Any], bool]
"""Closes the connection of an ASGI scope without an answer; False when it cannot."""

Handler = Callable[[Request, int, dict[str, str]], Awaitable[Any]]
"""An endpoint's own work, given (request, user id, query parameters): its data, answered
SUCCESS, or a whole Response; a Refused it raises is the answer."""


class TwinApp:
    """Routes SPEC calls to the exchange and pushes its events to the hub."""

    def __init__(
        self,
        settings: TwinSettings,
        *,
        exchange: Exchange,
        verifier: Verifier,
        hub: Hub,
        faults: Faults,
        counters: Counters,
        clock: Callable[[], float],
        aborter: Aborter | None = None,
        market: TwinMarket | None = None,
    ) -> None:
        """Wire the parts; clock gives seconds since the epoch."""
        self.settings = settings
        self.exchange = exchange
        self.verifier = verifier
        self.hub = hub
        self.faults = faults
        self.counters = counters
        self.clock = clock
        self.aborter = aborter
        self.received_orders = ReceivedOrders(
            limit=settings.received_orders_limit, max_bytes=settings.received_orders_max_bytes
        )
        """(clientOrderId, order re-serialized with sorted keys) of the authenticated
        batchCreate bodies read, bounded in count and bytes."""
        self._sid = 0
        self._window_ms = int(settings.timestamp_window * 1000)
        self._rules = {name: m.rules for name, m in exchange.markets.items()}
        self.order_management = OrderManagement(exchange, settings)
        self.market = (
            market
            if market is not None
            else TwinMarket(settings.market, exchange, seed=settings.seed, clock_ms=self.now_ms)
        )
        self.sockets = Sockets(
            hub,
            exchange,
            verifier,
            queue_limit=settings.ws_queue_limit,
            clock_ms=self.venue_clock_ms,
            window_ms=self._window_ms,
            market=self.market,
        )
        signed = [
            (POSITIONS_PATH, self.position_list, 2001),
            (BALANCE_PATH, self.balance, 2002),
            (MATCHES_PATH, self.match_list, 2001),
        ]
        if settings.order_management:
            signed += [(path, self.order_call, 2002) for path in ORDER_MANAGEMENT_PATHS]
        routes: list[Route | WebSocketRoute] = [
            Route(BATCH_CREATE_PATH, self.batch_create, methods=["POST"]),
            Route(TIME_PATH, self._endpoint(self.server_time), methods=["GET"]),
            Route(PAIRS_PATH, self._endpoint(self.pair_list), methods=["GET"]),
            *(
                Route(path, self._endpoint(handler), methods=["GET"])
                for path, handler in MarketEndpoints(self.market, self.now_ms).handlers()
            ),
            WebSocketRoute(settings.ws_path, self.sockets.serve),
            *(Route(p, self._endpoint(h, missing), methods=["POST"]) for p, h, missing in signed),
        ]
        self.starlette = Starlette(routes=routes)

    def now_ms(self) -> int:
        """The twin's time in milliseconds."""
        return int(self.clock() * 1000)

    def venue_clock_ms(self) -> int:
        """The clock the twin shows (time endpoint, timestamp checks): clock_offset_ms added."""
        return self.now_ms() + self.settings.clock_offset_ms

    # -- helpers -----------------------------------------------------------------------------

    def envelope_bytes(self, code: int, msg: str, data: Any = None) -> bytes:
        """The REST envelope with the next sid, serialized (also for the server's own 408/431)."""
        self._sid += 1
        return orjson.dumps(wire.envelope(code, msg, data, self._sid))

    def _answer(self, code: int, msg: str, data: Any, status: int = 200) -> Response:
        body = self.envelope_bytes(code, msg, data)
        return Response(body, status_code=status, media_type="application/json")

    async def _pre(self, request: Request) -> Response | None:
        """Latency and refusal faults, applied before anything else."""
        self.counters.rest_calls += 1
        delay = self.faults.rest_delay()
        if delay > 0:
            await asyncio.sleep(delay)
        refusal = self.faults.rest_refusal()
        if refusal == "unavailable":
            if self.faults.settings.unavailable_envelope:
                return self._answer(503, "Service Unavailable", None, status=503)
            return Response(b"Service Unavailable", status_code=503, media_type="text/plain")
        if refusal == "busy":
            return self._answer(2329, render_message(2329), None)
        return None

    def _too_large(self, request: Request) -> Response | None:
        """HTTP 413 when the declared body is above server.max_body_bytes, before reading it."""
        declared = request.headers.get("content-length")
        limit = self.settings.server.max_body_bytes
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return self._body_refused(f"a body of {declared} bytes")
        return None

    def _body_refused(self, what: str) -> Response:
        self.counters.bodies_too_large += 1
        limit = self.settings.server.max_body_bytes
        msg = f"{_status_phrase(413)}: {what}, more than server.max_body_bytes ({limit})"
        return self._answer(413, msg, None, status=413)

    @staticmethod
    def _credentials_headers(request: Request) -> tuple[str | None, str | None, str | None]:
        """(APIKEY, X-SAPI-SIGN-TYPE, signature) of SPEC section 5's headers."""
        headers = request.headers
        return headers.get("apikey"), headers.get("x-sapi-sign-type"), headers.get("signature")

    def _auth(self, request: Request, texts: tuple[str, ...]) -> Credentials:
        return self.verifier.authenticate(*self._credentials_headers(request), texts)

    def _unauthorized(self, reason: AuthRefused) -> Response:
        self.counters.auth_failures += 1
        return self._answer(401, f"Unauthorized: {reason}", None, status=401)

    def _check_timestamp(self, value: object, *, missing_code: int) -> None:
        if value is None:
            raise Refused(missing_code, "timestamp")
        stamp = parse_timestamp(value)
        if stamp is None or not within_window(stamp, self.venue_clock_ms(), self._window_ms):
            raise Refused(2001, "timestamp")

    def _endpoint(
        self, handler: Handler, missing: int | None = None
    ) -> Callable[[Request], Awaitable[Response]]:
        """The one preamble of the query-string and public endpoints, then the handler.

        Faults first (after the 413 check of a signed call); a signed call (missing: the code
        of a missing timestamp) is then authenticated and its timestamp checked. A public
        one (missing None) has neither; its query's parameters are passed as they are.
        """

        async def endpoint(request: Request) -> Response:
            early = self._too_large(request) if missing is not None else None
            early = early or await self._pre(request)
            if early is not None:
                return early
            user_id, params = 0, dict[str, str]()
            if missing is None:
                query = request.scope["query_string"].decode("latin-1")
                params = dict(parse_qsl(query, keep_blank_values=True)) if query else params
            else:
                signed = self._signed_query(request)
                if isinstance(signed, Response):
                    return signed
                user_id, params = signed
            try:
                if missing is not None:
                    self._check_timestamp(params.get("timestamp"), missing_code=missing)
                data = await handler(request, user_id, params)
            except Refused as exc:
                return self._answer(exc.code, exc.msg, None)
            return data if isinstance(data, Response) else self._answer(200, "SUCCESS", data)

        return endpoint

    def _signed_query(self, request: Request) -> tuple[int, dict[str, str]] | Response:
        """The caller's user id and the query's parameters, or the 401 answer."""
        raw = request.scope["query_string"].decode("latin-1")
        decoded = unquote(raw)
        texts = (raw,) if decoded == raw else (raw, decoded)
        try:
            credentials = self._auth(request, texts)
        except AuthRefused as exc:
            return self._unauthorized(exc)
        return credentials.user_id, dict(parse_qsl(raw, keep_blank_values=True))

    def _page(self, params: dict[str, str]) -> tuple[int, int]:
        s = self.settings
        return page(params, default_size=s.default_page_size, max_size=s.max_page_size)

    def _pair(self, params: dict[str, str]) -> str:
        pair = params.get("pairName")
        if not pair or pair not in self.exchange.markets:
            raise Refused(2001, "pairName")
        return pair

    # -- REST endpoints ----------------------------------------------------------------------

    async def batch_create(self, request: Request) -> Response:
        """SPEC 4.1: place up to 20 orders."""
        reset = (
            self.aborter is not None
            and self.faults.reset_before_read()
            and self.aborter(request.scope)
        )
        if reset:
            self.counters.rest_calls += 1
            self.counters.resets_before_read += 1
            await _until_closed(request)
            return Response(status_code=500)  # never sent: the connection is gone
        read = await self._signed_body(request)
        if isinstance(read, Response):
            return read
        early = await self._pre(request)
        if early is not None:
            return early
        self.counters.batch_calls += 1
        if isinstance(read, AuthRefused):
            return self._unauthorized(read)
        credentials, payload = read
        try:
            if type(payload) is not dict:
                raise Refused(2001, "body")
            self._check_timestamp(payload.get("timestamp"), missing_code=2002)
            items = parse_orders(
                payload.get("orders"), self._rules, max_orders=self.settings.max_orders
            )
            if isinstance(items, tuple):
                raise Refused(items[0], msg=items[1])
        except Refused as exc:
            return self._answer(exc.code, exc.msg, None)
        outcome = self.exchange.submit(
            credentials.user_id,
            items,
            self.now_ms(),
            atomic=self.settings.batch_mode == "atomic",
        )
        self.hub.publish(outcome.events)
        self.counters.orders_accepted += len(outcome.accepted)
        self.counters.orders_refused += len(items) - len(outcome.accepted)
        if await self._drop_answer(request):
            return Response(status_code=500)  # never sent: the connection is gone
        status = self.faults.error_after_accept()
        answer: Response
        if status is not None:
            answer = self._answer(status, _status_phrase(status), None, status=status)
        elif outcome.error is not None:
            answer = self._answer(outcome.error[0], outcome.error[1], None)
        else:
            key = self.settings.order_id_key
            data = [
                {key: cid, "orderId": oid, "pairName": pair}
                for cid, oid, pair in outcome.accepted
                if not self.faults.omit_result()
            ]
            answer = self._answer(200, "SUCCESS", data)
        delay = self.faults.answer_delay()
        if delay > 0:
            await asyncio.sleep(delay)
        return answer

    async def _signed_body(
        self, request: Request
    ) -> tuple[Credentials, Any] | AuthRefused | Response:
        """batchCreate's body, read only when its signature can verify, and who signed it.

        Checks what the headers say first: a request whose signature cannot verify (no or
        unknown APIKEY, no signature...) is refused without reading its body, and so is a
        declared body above server.max_body_bytes (413, as is a chunked one crossing it).
        A body that verifies is parsed (_NOT_JSON when it is not JSON) and its orders
        recorded in received_orders; nothing of a refused one is kept.
        """
        too_large = self._too_large(request)
        if too_large is not None:
            return too_large
        try:
            self.verifier.precheck(*self._credentials_headers(request))
            try:
                body = await _bounded_body(request, self.settings.server.max_body_bytes)
            except ClientDisconnect:
                return Response(status_code=400)  # never sent: the client is gone
            if body is None:
                return self._body_refused("a chunked body")
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                raise AuthRefused("signature does not verify") from None
            credentials = self._auth(request, (text,))
        except AuthRefused as exc:
            return exc
        try:
            payload: Any = orjson.loads(body)
        except orjson.JSONDecodeError:
            return credentials, _NOT_JSON
        self.received_orders.record(payload)
        return credentials, payload

    async def _drop_answer(self, request: Request) -> bool:
        """The drop_response fault on an executed call: close its connection unanswered."""
        dropped = (
            self.aborter is not None and self.faults.drop_response() and self.aborter(request.scope)
        )
        if dropped:
            self.counters.dropped_responses += 1
            await _until_closed(request)
        return dropped

    async def position_list(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """SPEC 4.2: the account's open positions on a pair."""
        pair = self._pair(params)
        account = self.exchange.accounts[user_id]
        found = self.exchange.position_page(user_id, pair, *self._page(params))
        return [wire.position_object(self.exchange, account, p) for p in found]

    async def balance(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """SPEC 4.3: the balance of one settlement coin."""
        symbol = params.get("symbol")
        if not symbol:
            raise Refused(2002, "symbol")
        balance = self.exchange.balance_answer(user_id, symbol)
        if isinstance(balance, tuple):
            raise Refused(balance[0], msg=balance[1])
        return wire.balance_object(user_id, balance)

    async def match_list(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """SPEC 4.4: the account's matches on a pair, newest first."""
        pair = self._pair(params)
        page_no, page_size = self._page(params)
        raw_before = params.get("matchId")
        before = None
        if raw_before:
            before = parse_timestamp(raw_before)
            if before is None:
                raise Refused(2001, "matchId")
        found = self.exchange.matches(
            user_id, pair, before=before, page_no=page_no, page_size=page_size, now_ms=self.now_ms()
        )
        return [wire.match_object(m) for m in found]

    async def server_time(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """Public (VENUE-FACTS): the twin's clock in ms."""
        return self.venue_clock_ms()

    async def pair_list(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """Public (VENUE-FACTS): every pair with the rules the twin enforces."""
        return [wire.pair_object(market) for market in self.exchange.markets.values()]

    async def order_call(self, request: Request, user_id: int, params: dict[str, str]) -> Any:
        """The order-management extension's paths (framework.twin.order_management)."""
        outcome = self.order_management.handle(
            request.scope["path"], user_id, params, self.now_ms()
        )
        self.hub.publish(outcome.events)
        if outcome.executed:
            if await self._drop_answer(request):
                return Response(status_code=500)  # never sent: the connection is gone
            status = self.faults.error_after_accept()
            if status is not None:
                return self._answer(status, _status_phrase(status), None, status=status)
        return self._answer(outcome.code, outcome.msg, outcome.data)


async def _bounded_body(request: Request, limit: int) -> bytes | None:
    """The whole body when it is at most limit bytes, else None (the rest is left unread)."""
    body = bytearray()
    async with contextlib.aclosing(request.stream()) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) > limit:
                return None
    return bytes(body)


async def _until_closed(request: Request) -> None:
    """Wait until the server has seen the connection's abort, so it sends nothing at all."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(1.0):
            while (await request.receive())["type"] != "http.disconnect":
                pass


def _status_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Internal Server Error"
