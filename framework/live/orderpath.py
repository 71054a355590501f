"""OrderPath: the order path's HTTP/1.1 connections (batchCreate), one write per request.

Why not httpx here: measured on loopback (issue 13), httpx's ``request()`` took 1.4 ms to
the first socket write of a batchCreate (header and body written separately, two loop
iterations before the write, h11/httpcore state machines), where a bare client takes
~0.05 ms. This module keeps keep-alive sockets of its own over asyncio transports (TCP_NODELAY,
TLS through the same transport when the base URL is https) and:

- writes a request (head + body) with ONE ``transport.write``, synchronously
  (:meth:`OrderPath.write`), so the executor can put a batch on the wire from the call
  stack that cut it, without a task hop;
- parses the answer with a small hand parser (status line, headers, Content-Length,
  chunked, or close-delimited bodies; 1xx skipped). h11 would be correct too, but it is a
  general state machine: ~25-40 us of Python per exchange here against ~5 us for this
  parser, for the one response shape the venue sends. Everything else (polls, snapshots)
  stays on httpx (:class:`framework.live.rest.RestClient`).

Error translation, the rules of the REST edge (the only place socket errors become
framework errors; rest.py applies the same two functions to httpx errors):

- nothing written yet (connect failed or timed out, or the first write failed with zero
  bytes sent) -> :class:`SendFailed` (safe to retry with the same ids);
- timeout, reset or EOF after writing -> :class:`AmbiguousOutcome` (the venue may have
  executed it; never resent);
- the answer itself is judged by :func:`framework.venue.requests.parse_response` (HTTP >= 500
  is a ServerFault, never a refusal).

A pooled socket the venue closed while idle is noticed before writing (the transport saw
EOF, or, after ``PEEK_AFTER_S`` of idleness, a non-blocking ``MSG_PEEK`` finds EOF or stray
bytes the loop has not processed yet) and replaced by a new connection; a request is never
written on a connection known to be dead.

Figures (loopback, 2 shared cores, ``tests/benchmarks/bench_tick_to_trade.py``, medians of
rounds): push -> batchCreate arrival p50 2.2-2.9 ms with httpx (floor 0.5-0.6 ms in the same
runs) and 0.9-1.1 ms with this module (floor 0.6 ms); in the daemon, from the frame's
decode to the request's write: 0.43 ms, of which the journal commit ~0.09 ms and signing
~0.1 ms (the floor signs too).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from typing import Final
from urllib.parse import urlsplit

from framework.venue.errors import AmbiguousOutcome, SendFailed
from framework.venue.requests import PreparedRequest

__all__ = ["Exchange", "OrderPath", "no_answer", "send_failed"]

PEEK_AFTER_S: Final = 1.0
"""A connection idle this long is peeked at before reuse (a syscall, ~10 us): idle-closing
servers close after seconds; within this time the loop's own EOF notice is trusted."""
_MAX_HEAD: Final = 64 * 1024
_MAX_BODY: Final = 16 * 1024 * 1024


def send_failed(path: str, exc: BaseException | str) -> SendFailed:
    """The error of a request of which no byte reached the venue (safe to retry)."""
    why = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return SendFailed(f"{path}: could not send ({why})")


def no_answer(path: str, exc: BaseException | str) -> AmbiguousOutcome:
    """The error of a request sent without an answer (the venue may have executed it)."""
    why = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return AmbiguousOutcome(
        f"{path}: no answer after sending ({why}); the venue may have executed it"
    )


class _BadAnswer(Exception):
    """The bytes that came back are not an HTTP/1.1 response."""


class _Conn(asyncio.Protocol):
    """One keep-alive connection: bytes in, a waiter woken on data, EOF or loss."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.sock: socket.socket | None = None
        self.buf = bytearray()
        self.eof = False
        self.lost: BaseException | None = None
        self.closed = False
        self.waiter: asyncio.Future[None] | None = None
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        """Buffer the bytes and wake the reader."""
        self.buf += data
        self._wake()

    def eof_received(self) -> bool | None:
        """The venue closed its side: nothing more will come."""
        self.eof = True
        self._wake()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone (reset, closed by either side)."""
        self.closed = True
        self.lost = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def usable(self, now: float) -> bool:
        """True if a request may be written now: open, quiet, and the peer has not closed."""
        if self.closed or self.eof or self.buf or self.transport is None:
            return False
        if self.transport.is_closing():
            return False
        sock = self.sock
        if sock is None or now - self.idle_since < PEEK_AFTER_S:
            return True
        try:
            # EOF (b"") or stray bytes pending on an idle connection: the venue closed it
            # (a FIN this loop has not processed yet) or is out of step: do not reuse.
            sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return True  # nothing pending: the connection is quiet and open
        except OSError:
            pass
        return False

    def close(self) -> None:
        """Close at once (the connection is never reused)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    async def more(self) -> None:
        """Wait for more bytes, EOF or loss."""
        loop = asyncio.get_running_loop()
        self.waiter = loop.create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None


class Exchange:
    """One request written on a connection; :meth:`OrderPath.read` awaits its answer."""

    __slots__ = ("conn", "expired", "path", "timer")

    def __init__(self, conn: _Conn, path: str, timeout: float) -> None:
        self.conn = conn
        self.path = path
        self.expired = False
        self.timer = asyncio.get_running_loop().call_later(timeout, self._expire)

    def _expire(self) -> None:
        self.expired = True
        self.conn._wake()


class OrderPath:
    """Keep-alive HTTP/1.1 connections to the venue for the order path (batchCreate)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 10.0,
        connect_timeout: float | None = None,
        max_idle: int = 8,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"OrderPath: expected an http(s) base URL, got {base_url!r}")
        self.host = parts.hostname
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self._prefix = parts.path
        self._host_header = parts.netloc.rpartition("@")[2]
        self._ssl = (ssl_context or ssl.create_default_context()) if self.tls else None
        self.timeout = timeout
        self.connect_timeout = connect_timeout or timeout
        self.max_idle = max_idle
        self._idle: list[_Conn] = []
        self._busy: set[_Conn] = set()
        self.connects = 0
        """Connections opened so far (for tests and metrics)."""

    def __repr__(self) -> str:
        return f"OrderPath({self.host!r}, {self.port})"

    # -- connections --------------------------------------------------------------------

    async def connect(self) -> None:
        """Open one connection ahead of the first order (failure here is not fatal)."""
        conn = await self._open(path="connect")
        self._release(conn)

    async def _open(self, path: str) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
                last: OSError | None = None
                for family, type_, proto, _name, addr in infos:
                    sock = socket.socket(family, type_, proto)
                    sock.setblocking(False)
                    try:
                        await loop.sock_connect(sock, addr)
                    except OSError as exc:
                        sock.close()
                        last = exc
                        continue
                    except BaseException:  # cancelled, or the connect timed out: no leak
                        sock.close()
                        raise
                    try:
                        _transport, conn = await loop.create_connection(
                            _Conn,
                            sock=sock,
                            ssl=self._ssl,
                            server_hostname=self.host if self.tls else None,
                        )
                    except BaseException:
                        sock.close()
                        raise
                    # The raw socket answers MSG_PEEK only in clear text (TLS: bytes pending
                    # are records, still a sign the idle connection is not quiet).
                    conn.sock = sock
                    self.connects += 1
                    return conn
                raise last or OSError(f"no address for {self.host}")
        except TimeoutError:
            raise send_failed(path, f"connect to {self.host}:{self.port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise send_failed(path, exc) from None

    def _take(self) -> _Conn | None:
        """An idle connection that is still usable (dead ones are closed on the way)."""
        idle = self._idle
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used: the warmest
            if conn.usable(now):
                return conn
            conn.close()
        return None

    def _release(self, conn: _Conn) -> None:
        self._busy.discard(conn)
        if conn.closed or len(self._idle) >= self.max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    async def aclose(self) -> None:
        """Close every connection, and let the loop close their sockets before returning.

        An aborted transport closes its socket in a callback of the next loop turn: a loop
        closed right after (the end of a run) would leave it to the garbage collector.
        """
        conns = [*self._idle, *self._busy]
        for conn in conns:
            conn.close()
        self._idle.clear()
        self._busy.clear()
        if conns:
            await asyncio.sleep(0)

    # -- requests -----------------------------------------------------------------------

    def _bytes(self, request: PreparedRequest) -> bytes:
        head = [f"{request.method} {self._prefix}{request.target} HTTP/1.1",
                f"Host: {self._host_header}"]  # fmt: skip
        head += [f"{k}: {v}" for k, v in request.headers.items()]
        head.append(f"Content-Length: {len(request.body)}\r\n\r\n")
        return "\r\n".join(head).encode("latin-1") + request.body

    def _write(self, conn: _Conn, request: PreparedRequest, data: bytes) -> Exchange:
        transport = conn.transport
        assert transport is not None
        self._busy.add(conn)
        transport.write(data)
        # asyncio's write() sends at once when nothing is buffered; a failed send closes the
        # transport before write() returns, and then no byte of the request left.
        if transport.is_closing():
            self._busy.discard(conn)
            conn.close()
            raise send_failed(request.path, conn.lost or "the connection failed on the first write")
        return Exchange(conn, request.path, self.timeout)

    def write(self, request: PreparedRequest) -> Exchange | None:
        """Write request now on an idle live connection; None if there is none (use send).

        Raises SendFailed when the write failed before any byte left.
        """
        conn = self._take()
        if conn is None:
            return None
        return self._write(conn, request, self._bytes(request))

    async def send(self, request: PreparedRequest) -> tuple[int, bytes]:
        """Send request (connecting if needed) and return (status, body) of its answer."""
        data = self._bytes(request)
        conn = self._take()
        if conn is None:
            conn = await self._open(request.path)
        return await self.read(self._write(conn, request, data))

    async def read(self, exchange: Exchange) -> tuple[int, bytes]:
        """The answer (status, body) of a written request; AmbiguousOutcome without one."""
        conn = exchange.conn
        try:
            while True:
                try:
                    answer = _parse(conn.buf, conn.eof or conn.closed)
                except _BadAnswer as exc:
                    raise no_answer(exchange.path, f"not an HTTP answer: {exc}") from None
                if answer is not None:
                    status, body, used, keep = answer
                    del conn.buf[:used]
                    if keep and not conn.buf:
                        self._release(conn)
                    else:
                        self._busy.discard(conn)
                        conn.close()
                    return status, body
                if conn.eof or conn.closed:
                    why = conn.lost or "connection closed by the venue"
                    raise no_answer(exchange.path, why)
                if exchange.expired:
                    raise no_answer(exchange.path, f"read timed out after {self.timeout} s")
                await conn.more()
        except BaseException:
            # No answer, or cancelled mid-answer: the connection's state is unknown.
            if conn in self._busy:
                self._busy.discard(conn)
                conn.close()
            raise
        finally:
            exchange.timer.cancel()


def _parse(buf: bytearray, ended: bool) -> tuple[int, bytes, int, bool] | None:
    """(status, body, bytes used, keep-alive) of the first final response in buf, or None."""
    start = 0
    while True:
        end = buf.find(b"\r\n\r\n", start)
        if end < 0:
            if len(buf) - start > _MAX_HEAD:
                raise _BadAnswer("header block too long")
            if ended and len(buf) > start:
                raise _BadAnswer("truncated header block")
            return None
        lines = bytes(buf[start:end]).split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        if not version.startswith(b"HTTP/1."):
            raise _BadAnswer(f"status line {bytes(lines[0][:40])!r}")
        try:
            status = int(rest[:3])
        except ValueError:
            raise _BadAnswer(f"status line {bytes(lines[0][:40])!r}") from None
        length: int | None = None
        chunked = False
        keep = version == b"HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise _BadAnswer("bad Content-Length") from None
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                token = value.strip().lower()
                keep = token != b"close" and (keep or token == b"keep-alive")
        body_at = end + 4
        if 100 <= status < 200:  # interim answer (100 Continue): the final one follows
            start = body_at
            continue
        if status in (204, 304):
            return status, b"", body_at, keep
        if chunked:
            return _chunked(buf, status, body_at, keep)
        if length is not None:
            if length > _MAX_BODY:
                raise _BadAnswer("body too long")
            if len(buf) < body_at + length:
                return None
            return status, bytes(buf[body_at : body_at + length]), body_at + length, keep
        if not ended:  # delimited by the close of the connection
            return None
        return status, bytes(buf[body_at:]), len(buf), False


def _chunked(
    buf: bytearray, status: int, at: int, keep: bool
) -> tuple[int, bytes, int, bool] | None:
    body = bytearray()
    while True:
        eol = buf.find(b"\r\n", at)
        if eol < 0:
            return None
        size_text = bytes(buf[at:eol]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise _BadAnswer("bad chunk size") from None
        at = eol + 2
        if size == 0:
            # Trailers (usually none) end with an empty line.
            end = buf.find(b"\r\n\r\n", at - 2)
            if end < 0:
                return None
            return status, bytes(body), end + 4, keep
        if len(buf) < at + size + 2:
            return None
        body += buf[at : at + size]
        if len(body) > _MAX_BODY:
            raise _BadAnswer("body too long")
        at += size + 2
