"""VenueTwin: the twin served by uvicorn inside the caller's asyncio loop.

::

    async with VenueTwin(settings, port=0) as twin:     # port 0: a free port is picked
        twin.base_url, twin.ws_url                      # http://127.0.0.1:PORT, ws://.../api/market/ws
        twin.set_mark("ETH-USD", Decimal("2010"))       # move prices by hand (fills, liquidations)
        twin.step()                                     # or one tick of the price model
        twin.market.tapes["ETH-USD"].last_trades(10)    # the public market (settings.market)
        twin.faults.configure(busy_rate=0.5)            # inject faults at run time
        twin.counters.busy_answers                      # and count them
        twin.received_orders                            # (clientOrderId, payload) of orders read
        twin.executed_orders(api_key)                   # {clientOrderId: orderId} accepted
        twin.order_records(api_key).open_orders()       # order records (order management)

The twin is asyncio-only (uvicorn). It never installs signal handlers and never configures
logging, so it is safe to embed in the daemon or a test. With ``prices.tick_interval`` above
zero a background task steps the price model; with ``faults.ws_disconnect_every`` above zero
another closes every WebSocket periodically. Time comes from ``clock`` (seconds since the
epoch); randomness from ``random.Random`` seeded with ``settings.seed``.

What the twin keeps per order, match or request is bounded by settings (``received_orders``
and ``executed_orders`` too: the newest 100000 by default; see
:mod:`framework.twin.settings`), so its memory stays flat over a long run, embedded or not.
What one request or connection may cost is bounded by ``settings.server`` (body and header
sizes, header, body and keep-alive timeouts).

The HTTP connections (:class:`LimitedHttp`): uvicorn's httptools protocol with request
deadlines and bounds. uvicorn bounds only the idle time between two requests
(``timeout_keep_alive``, disarmed by any byte received), so a connection that sends nothing,
trickles its headers or stops in the middle of its body stays open for ever, and httptools
puts no bound on the size of the headers. This subclass adds what uvicorn lacks (written here because uvicorn has no such
option; the one for headers, ``h11_max_incomplete_event_size``, serves only its h11
implementation), from :class:`~framework.twin.settings.ServerSettings`:

* ``header_timeout``: from the connection's first moment, or the first byte after an
  answered request, to the end of the request's headers.
* ``body_timeout``: from the end of the headers to the end of the body. A body the app
  answered without reading (a 401, a 413) is discarded as it comes, within the same time.
* ``keep_alive_timeout``: idle after an answered request (uvicorn's timer, and this
  class's when the answer went out before the body had ended).
* ``max_header_bytes``: the request line and headers; beyond it the answer is HTTP 431.

A deadline that passes while a request is under way is answered HTTP 408 (when nothing was
answered yet); otherwise the connection is just closed. Both answers carry the venue's
error envelope and ``connection: close``, and are counted (``counters.connections_timed_out``,
``counters.headers_too_large``). The deadlines stop at a WebSocket upgrade (uvicorn's ping
interval and timeout then close a peer that went away).

Each connection's transport is also kept by peer address while it is open, so the app can
close it without an answer (the reset and drop faults).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time
from collections.abc import Callable, Generator, Mapping
from decimal import Decimal
from http import HTTPStatus
from types import TracebackType
from typing import Any, ClassVar

import uvicorn
from uvicorn.config import WS_PROTOCOLS
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from framework.sim.exchange import Exchange
from framework.sim.fill_model import FillRule
from framework.sim.history import OrderIndex
from framework.twin.app import TwinApp
from framework.twin.auth import Credentials, Verifier
from framework.twin.demo import DEMO_ADDRESS, DEMO_API_KEY
from framework.twin.faults import Counters, Faults, ReceivedOrders
from framework.twin.hub import Hub
from framework.twin.market_feed import TwinMarket
from framework.twin.prices import RandomWalk, build_price_model
from framework.twin.settings import ServerSettings, TwinSettings
from framework.venue.rules import settle_coin_of

__all__ = ["LimitedHttp", "Peer", "RefusalBody", "VenueTwin", "limited_protocol"]

Peer = tuple[str, int]
"""A client's (host, port), as the ASGI scope reports it."""

RefusalBody = Callable[[int, str], bytes]
"""The venue's error envelope for (status, message), as bytes."""


def _peer_of(transport: asyncio.BaseTransport) -> Peer | None:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return str(peer[0]), int(peer[1])
    return None


class LimitedHttp(HttpToolsProtocol):
    """HttpToolsProtocol with request deadlines, a header bound and a transport registry.

    One twin's class (:func:`limited_protocol`) holds what all its connections share.
    """

    registry: ClassVar[dict[Peer, asyncio.Transport]]
    limits: ClassVar[ServerSettings]
    counters: ClassVar[Counters]
    refusal_body: ClassVar[RefusalBody]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """uvicorn's arguments; no deadline armed yet."""
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting_for = ""
        self._in_headers = True
        self._header_bytes = 0
        self._oversize = False

    # -- deadlines -----------------------------------------------------------------------

    def _arm(self, what: str, seconds: float) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self._waiting_for = what
            self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._waiting_for = ""

    def _expired(self) -> None:
        what = self._waiting_for
        self._deadline = None
        self._waiting_for = ""
        if self.transport.is_closing():
            return
        self.counters.connections_timed_out += 1
        cycle = self.cycle
        if what == "headers" and self._header_bytes > 0:
            limit = self.limits.header_timeout
            self._refuse(408, f"headers not complete within server.header_timeout ({limit} s)")
        elif what == "body" and cycle is not None and not cycle.response_started:
            limit = self.limits.body_timeout
            self._refuse(408, f"body not complete within server.body_timeout ({limit} s)")
        else:
            self.transport.close()

    def _refuse(self, status: int, reason: str) -> None:
        """Answer status with the venue's error envelope and close the connection."""
        phrase = HTTPStatus(status).phrase
        body = type(self).refusal_body(status, f"{phrase}: {reason}")
        head = (
            f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        if self.cycle is not None:
            self.cycle.disconnected = True  # the app's answer, if any, is not sent
        self.transport.write(head.encode("ascii") + body)
        self.transport.close()

    # -- uvicorn's protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Remember the transport; the first request's headers are now awaited."""
        super().connection_made(transport)
        peer = _peer_of(transport)
        if peer is not None:
            self.registry[peer] = transport
        self._arm("headers", self.limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the transport and the deadline."""
        self._disarm()
        peer = _peer_of(self.transport)
        if peer is not None:
            self.registry.pop(peer, None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Start a deadline with a request's first byte; bound its headers."""
        if self._oversize:
            return
        if self._deadline is None or self._waiting_for == "idle":
            self._arm("headers", self.limits.header_timeout)
        if self._in_headers:
            self._header_bytes += len(data)
        super().data_received(data)
        if self._in_headers and self._header_bytes > self.limits.max_header_bytes:
            self._oversize = True  # still coming in: the bytes so far are too many
        if self._oversize and not self.transport.is_closing():
            self.counters.headers_too_large += 1
            bound = self.limits.max_header_bytes
            self._refuse(431, f"more than server.max_header_bytes ({bound})")

    def on_headers_complete(self) -> None:
        """The headers are in: refuse them when too large, else the body's deadline starts."""
        self._in_headers = False
        self._header_bytes = 0
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > self.limits.max_header_bytes:
            self._oversize = True  # no app call: data_received answers 431
            return
        self._arm("body", self.limits.body_timeout)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        """Nothing of a request refused for its headers goes to the app."""
        if not self._oversize:
            super().on_body(body)

    def on_message_complete(self) -> None:
        """The request is in: no deadline while it is answered (idle if it already was)."""
        if self._oversize:
            return
        super().on_message_complete()
        self._in_headers = True
        self._disarm()
        if self.cycle is not None and self.cycle.response_complete:
            self._arm("idle", self.limits.keep_alive_timeout)

    def handle_websocket_upgrade(self) -> None:
        """A WebSocket now owns the transport: no deadline, no entry in the registry."""
        if self._oversize:
            return  # refused for its headers: data_received answers 431
        self._disarm()
        peer = _peer_of(self.transport)
        if peer is not None:
            self.registry.pop(peer, None)
        super().handle_websocket_upgrade()


def limited_protocol(
    registry: dict[Peer, asyncio.Transport],
    limits: ServerSettings,
    counters: Counters,
    refusal_body: RefusalBody,
) -> type[HttpToolsProtocol]:
    """An HTTP protocol class enforcing limits and recording each transport in registry."""
    return type(
        "LimitedHttp",
        (LimitedHttp,),
        {
            "registry": registry,
            "limits": limits,
            "counters": counters,
            "refusal_body": staticmethod(refusal_body),
        },
    )


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signal handlers alone and stops as soon as asked."""

    def __init__(self, config: uvicorn.Config) -> None:
        """Wrap uvicorn.Server with a stop event."""
        super().__init__(config)
        self._stop = asyncio.Event()

    def request_stop(self) -> None:
        """Begin the graceful shutdown now."""
        self.should_exit = True
        self._stop.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Embedded: the owner of the loop decides what signals do."""
        yield

    async def main_loop(self) -> None:
        """uvicorn's loop (a tick every 0.1 s for the Date header) that wakes on stop."""
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), 0.1)


class VenueTwin:
    """A local exchange speaking SPEC.md over real sockets; an async context manager."""

    def __init__(
        self,
        settings: TwinSettings | None = None,
        *,
        host: str | None = None,
        port: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Build the twin; host/port override the settings (port 0: any free port)."""
        self.settings = settings if settings is not None else TwinSettings()
        self.host = host if host is not None else self.settings.host
        self._requested_port = port if port is not None else self.settings.port
        self.clock = clock
        seed = self.settings.seed
        self.counters = Counters()
        self.faults = Faults(self.settings.faults, random.Random(f"{seed}:faults"), self.counters)
        self.exchange = Exchange(
            self.settings,
            match_delay=self.faults.match_delay_ms,
            book_fills=self.settings.market.enabled,
            fill_rule=FillRule(
                rule=self.settings.market.fill_rule,
                fill_probability=self.settings.market.fill_probability,
                seed=seed,
            ),
        )
        self.verifier = Verifier(default_sign_type=self.settings.default_sign_type)
        self.hub = Hub(self.faults, self.counters)
        self.prices = build_price_model(self.settings, random.Random(f"{seed}:prices"))
        for pair, price in self.prices.start().items():
            if pair in self.exchange.markets:
                self.exchange.markets[pair].mark = price
        self.market = TwinMarket(
            self.settings.market, self.exchange, seed=seed, clock_ms=self.now_ms
        )
        self._transports: dict[Peer, asyncio.Transport] = {}
        self.app = TwinApp(
            self.settings,
            exchange=self.exchange,
            verifier=self.verifier,
            hub=self.hub,
            faults=self.faults,
            counters=self.counters,
            clock=clock,
            aborter=self._abort,
            market=self.market,
        )
        self._next_user_id = 0
        for account in self.settings.accounts:
            self.add_account(
                account.api_key,
                address=account.address,
                hmac_secret=account.hmac_secret,
                ed25519_public_key=account.ed25519_public_key,
                balances=account.balances,
                user_id=account.user_id,
            )
        if self.settings.demo_account and self.verifier.lookup(DEMO_API_KEY) is None:
            self.demo_user_id: int | None = self.add_account(
                DEMO_API_KEY,
                address=DEMO_ADDRESS,
                balances={coin: self.settings.demo_balance for coin in self.settle_coins()},
            )
        else:
            self.demo_user_id = None
        self._server: _QuietServer | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []
        self._socket: socket.socket | None = None
        self.port = self._requested_port

    # -- accounts, prices, faults ------------------------------------------------------------

    def settle_coins(self) -> list[str]:
        """The settlement coins of the configured pairs, in pair order, once each."""
        coins = [settle_coin_of(name, m.rules) for name, m in self.exchange.markets.items()]
        return list(dict.fromkeys(coins))

    def add_account(
        self,
        api_key: str,
        *,
        address: str | None = None,
        hmac_secret: str | None = None,
        ed25519_public_key: str | None = None,
        balances: Mapping[str, Decimal] | None = None,
        user_id: int | None = None,
    ) -> int:
        """Register an API client with starting balances; returns its user id."""
        if user_id is None:
            user_id = max([self._next_user_id, *self.exchange.accounts]) + 1
        self._next_user_id = max(self._next_user_id, user_id)
        self.verifier.add(
            Credentials(
                user_id=user_id,
                api_key=api_key,
                address=address,
                hmac_secret=hmac_secret,
                ed25519_public_key=ed25519_public_key,
            )
        )
        self.exchange.open_account(user_id, address, dict(balances or {}))
        return user_id

    def user_id(self, api_key: str) -> int:
        """The user id of a registered API key (KeyError when unknown)."""
        credentials = self.verifier.lookup(api_key)
        if credentials is None:
            raise KeyError(api_key)
        return credentials.user_id

    @property
    def received_orders(self) -> ReceivedOrders:
        """(clientOrderId, order with sorted keys) of each order of each authenticated
        batchCreate read.

        Live, oldest first; only the newest ``received_orders_limit`` (100000) orders, and
        ``received_orders_max_bytes`` (32 MiB) of them, are kept.
        """
        return self.app.received_orders

    def executed_orders(self, api_key: str) -> dict[str, int]:
        """clientOrderId -> orderId of the orders the account had accepted (a copy).

        The newest ``client_id_history_limit`` (100000) accepted orders, oldest first.
        """
        return dict(self.exchange.accounts[self.user_id(api_key)].order_ids)

    def order_records(self, api_key: str) -> OrderIndex:
        """The account's order records, as the order-management extension reports them (live)."""
        return self.exchange.accounts[self.user_id(api_key)].orders

    def now_ms(self) -> int:
        """The twin's clock in milliseconds."""
        return int(self.clock() * 1000)

    def mark(self, pair: str) -> Decimal:
        """The current mark price of a pair."""
        return self.exchange.markets[pair].mark

    def set_mark(self, pair: str, price: Decimal | str | int) -> None:
        """Move a pair's mark now: resting orders fill, positions liquidate, pushes go out."""
        value = Decimal(price)
        if isinstance(self.prices, RandomWalk):
            self.prices.set(pair, value)
        now = self.now_ms()
        self.hub.publish(self.exchange.set_mark(pair, value, now))
        self.hub.publish(self.market.tick(pair, now))

    def step(self, ticks: int = 1) -> None:
        """Advance the price model by ticks, applying each new mark, then a market tick of
        every pair (its index; with the market on, its book and trades, and their fills)."""
        for _ in range(ticks):
            now = self.now_ms()
            for pair, price in self.prices.step().items():
                if pair in self.exchange.markets:
                    self.hub.publish(self.exchange.set_mark(pair, price, now))
            for pair in self.exchange.markets:
                self.hub.publish(self.market.tick(pair, now))

    def disconnect_websockets(self) -> int:
        """Close every WebSocket from the server side now; returns how many (counted)."""
        closed = self.hub.disconnect_all()
        self.counters.ws_disconnects += closed
        return closed

    def _abort(self, scope: Any) -> bool:
        client = scope.get("client")
        transport = self._transports.get(tuple(client)) if client else None
        if transport is None:
            return False
        transport.abort()
        return True

    # -- serving -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """http://HOST:PORT, the SPEC's {base_url}."""
        return f"http://{self._url_host()}:{self.port}"

    @property
    def ws_url(self) -> str:
        """ws://HOST:PORT/api/market/ws (the configured ws_path)."""
        return f"ws://{self._url_host()}:{self.port}{self.settings.ws_path}"

    def _url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    async def __aenter__(self) -> VenueTwin:
        """Bind, start serving and the background tasks; returns when ready."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # proto IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when the
        # listening socket says TCP, and without it every answer waits on delayed ACKs (40 ms).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((self.host, self._requested_port))
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self._socket = sock
        self.port = sock.getsockname()[1]
        limits = self.settings.server
        config = uvicorn.Config(
            self.app.starlette,
            lifespan="off",
            access_log=False,
            log_config=None,
            log_level="warning",
            # Every implementation is named, none left to "auto", so that what else happens
            # to be installed (uvloop, wsproto...) changes nothing. serve() runs in the
            # caller's loop; "asyncio" also keeps uvicorn's own run() off uvloop.
            loop="asyncio",
            interface="asgi3",
            # HTTP on httptools (a declared dependency), through a class that adds request
            # deadlines, a header bound and connection tracking (LimitedHttp).
            http=limited_protocol(self._transports, limits, self.counters, self.app.envelope_bytes),
            timeout_keep_alive=limits.keep_alive_timeout,
            limit_concurrency=limits.max_connections,
            ws_max_size=limits.ws_max_message_bytes,
            # WebSocket on websockets; the sans-I/O implementation suits websockets >= 14, and
            # older uvicorns lack it.
            ws="websockets-sansio" if "websockets-sansio" in WS_PROTOCOLS else "websockets",
            # No permessage-deflate: pushes are small and compressing each costs more CPU
            # than it saves on loopback; clients that offer it simply get plain frames.
            ws_per_message_deflate=False,
            backlog=2048,
            timeout_graceful_shutdown=2,
        )
        self._server = _QuietServer(config)
        self._serve_task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._serve_task.done():
                self._serve_task.result()
                raise RuntimeError("the venue twin stopped while starting")
            await asyncio.sleep(0.005)
        self._background.append(asyncio.create_task(self._tick_loop()))
        self._background.append(asyncio.create_task(self._disconnect_loop()))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the background tasks and the server, closing every connection."""
        await self.aclose()

    async def aclose(self) -> None:
        """Stop serving (idempotent)."""
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._background.clear()
        self.hub.disconnect_all()
        if self._server is not None and self._serve_task is not None:
            self._server.request_stop()
            try:
                await asyncio.wait_for(asyncio.shield(self._serve_task), 5)
            except TimeoutError:
                self._server.force_exit = True
                with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                    await asyncio.wait_for(self._serve_task, 2)
            self._server = None
            self._serve_task = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    async def _tick_loop(self) -> None:
        interval = self.settings.prices.tick_interval
        if interval <= 0:
            return
        while True:
            await asyncio.sleep(interval)
            self.step()

    async def _disconnect_loop(self) -> None:
        while True:
            every = self.faults.settings.ws_disconnect_every
            if every <= 0:
                await asyncio.sleep(0.1)
                continue
            await asyncio.sleep(every)
            if self.faults.settings.ws_disconnect_every > 0:
                self.disconnect_websockets()
