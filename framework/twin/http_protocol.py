"""The twin's HTTP connections: uvicorn's httptools protocol with request deadlines and bounds.

uvicorn bounds only the idle time between two requests (``timeout_keep_alive``, disarmed by
any byte received), so a connection that sends nothing, trickles its headers or stops in
the middle of its body stays open for ever, and httptools puts no bound on the size of the
headers. This subclass adds what uvicorn lacks (written here because uvicorn has no such
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
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from framework.twin.counters import Counters
from framework.twin.settings import ServerSettings

__all__ = ["Peer", "RefusalBody", "limited_protocol"]

Peer = tuple[str, int]
"""A client's (host, port), as the ASGI scope reports it."""

RefusalBody = Callable[[int, str], bytes]
"""The venue's error envelope for (status, message), as bytes."""


def _peer_of(transport: asyncio.BaseTransport) -> Peer | None:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return str(peer[0]), int(peer[1])
    return None


def limited_protocol(
    registry: dict[Peer, asyncio.Transport],
    limits: ServerSettings,
    counters: Counters,
    refusal_body: RefusalBody,
) -> type[HttpToolsProtocol]:
    """An HTTP protocol class enforcing limits and recording each transport in registry."""

    class LimitedHttp(HttpToolsProtocol):
        """HttpToolsProtocol with request deadlines, a header bound and a transport registry."""

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
            counters.connections_timed_out += 1
            cycle = self.cycle
            if what == "headers" and self._header_bytes > 0:
                limit = limits.header_timeout
                self._refuse(408, f"headers not complete within server.header_timeout ({limit} s)")
            elif what == "body" and cycle is not None and not cycle.response_started:
                limit = limits.body_timeout
                self._refuse(408, f"body not complete within server.body_timeout ({limit} s)")
            else:
                self.transport.close()

        def _refuse(self, status: int, reason: str) -> None:
            """Answer status with the venue's error envelope and close the connection."""
            phrase = HTTPStatus(status).phrase
            body = refusal_body(status, f"{phrase}: {reason}")
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
                registry[peer] = transport
            self._arm("headers", limits.header_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            """Forget the transport and the deadline."""
            self._disarm()
            peer = _peer_of(self.transport)
            if peer is not None:
                registry.pop(peer, None)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            """Start a deadline with a request's first byte; bound its headers."""
            if self._oversize:
                return
            if self._deadline is None or self._waiting_for == "idle":
                self._arm("headers", limits.header_timeout)
            if self._in_headers:
                self._header_bytes += len(data)
            super().data_received(data)
            if self._in_headers and self._header_bytes > limits.max_header_bytes:
                self._oversize = True  # still coming in: the bytes so far are too many
            if self._oversize and not self.transport.is_closing():
                counters.headers_too_large += 1
                bound = limits.max_header_bytes
                self._refuse(431, f"more than server.max_header_bytes ({bound})")

        def on_headers_complete(self) -> None:
            """The headers are in: refuse them when too large, else the body's deadline starts."""
            self._in_headers = False
            self._header_bytes = 0
            size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
            if size > limits.max_header_bytes:
                self._oversize = True  # no app call: data_received answers 431
                return
            self._arm("body", limits.body_timeout)
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
                self._arm("idle", limits.keep_alive_timeout)

        def handle_websocket_upgrade(self) -> None:
            """A WebSocket now owns the transport: no deadline, no entry in the registry."""
            if self._oversize:
                return  # refused for its headers: data_received answers 431
            self._disarm()
            peer = _peer_of(self.transport)
            if peer is not None:
                registry.pop(peer, None)
            super().handle_websocket_upgrade()

    return LimitedHttp
