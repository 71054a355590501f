"""What the node's WebSocket clients share: open a socket, describe its end, reconnect with backoff.

The private push stream (:mod:`framework.live.stream`) and the market feed
(:mod:`framework.live.market_feed`) each keep one connection to the venue and must behave
alike when it fails: the same keepalive (the WebSocket protocol's ping every
``ping_interval_s``; a ping unanswered for ``silence_timeout_s`` is a dead connection), a
bound on every frame, and a new session after a capped exponential backoff with full jitter
(delay drawn uniformly from 0 to min(max_s, initial_s * 2**n), n counting failures since the
last session that got subscribed), driven by stamina's retry loop. Written once here so a fix
to one is a fix to both.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import ClassVar, Final

import anyio
import stamina
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidURI, WebSocketException

from framework.venue.errors import ConfigError, TransportError

__all__ = [
    "MAX_FRAME_BYTES",
    "Backoff",
    "ReconnectingClient",
    "StreamError",
    "StreamLost",
    "SubscribeRefused",
    "SubscribeTimeout",
    "describe",
    "describe_close",
    "one_session",
    "open_socket",
    "reconnecting",
]

MAX_FRAME_BYTES: Final = 1 << 20
"""The largest frame a client takes (websockets' max_size); a larger one ends the session."""


class StreamError(TransportError):
    """The WebSocket session failed; the client reconnects with backoff."""


class StreamLost(StreamError):
    """The connection could not be opened, was closed, or fell silent."""


class SubscribeRefused(StreamError):
    """The venue acknowledged a subscribe with success false (a bad key or signature?)."""


class SubscribeTimeout(StreamError):
    """No acknowledgement of a subscribe came within ack_timeout_s."""


class Backoff:
    """Capped exponential delays with full jitter; reset() after a session that got subscribed."""

    __slots__ = ("failures", "initial_s", "max_s", "rng")

    def __init__(self, initial_s: float, max_s: float, rng: random.Random) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.rng = rng
        self.failures = 0
        """Failures since the last reset: the exponent."""

    def __repr__(self) -> str:
        return f"Backoff({self.initial_s}, {self.max_s}, failures={self.failures})"

    def delay(self) -> float:
        """The next delay in seconds (uniform in [0, ceiling]); counts one failure."""
        ceiling = min(self.max_s, self.initial_s * 2.0 ** min(self.failures, 60))
        self.failures += 1
        return self.rng.uniform(0.0, ceiling)

    def reset(self) -> None:
        """Start again from initial_s (a session got subscribed)."""
        self.failures = 0


async def reconnecting(
    session: Callable[[], Awaitable[None]],
    on_error: Callable[[Exception], bool | float],
    *,
    give_up_wait_s: float,
    log: logging.Logger,
    name: str,
) -> None:
    """Run session() again and again, forever: on_error says whether and after what delay.

    on_error is stamina's hook: False re-raises the error (a bug is never retried), a float
    is the delay. The loop only ends if stamina is deactivated or in test mode with capped
    attempts; then it waits give_up_wait_s rather than spin, and starts again.
    """
    while True:
        try:
            async for attempt in stamina.retry_context(on=on_error, attempts=None, timeout=None):
                with attempt:
                    await session()
        except StreamError as exc:
            log.warning("%s: retry loop gave up (%s); starting it again", name, exc)
            await anyio.sleep(give_up_wait_s)


def open_socket(
    url: str,
    *,
    ping_interval_s: float,
    silence_timeout_s: float,
    open_timeout_s: float,
    close_timeout_s: float,
    max_size: int = MAX_FRAME_BYTES,
) -> connect:
    """websockets' connect (an async context manager) with the clients' keepalive and bounds."""
    return connect(
        url,
        ping_interval=ping_interval_s,
        ping_timeout=silence_timeout_s,
        open_timeout=open_timeout_s,
        close_timeout=close_timeout_s,
        max_size=max_size,
        max_queue=1024,
    )


async def one_session(
    socket: connect,
    *,
    url: str,
    url_key: str,
    subscribe: Callable[[ClientConnection], Awaitable[None]],
    serve: Callable[[ClientConnection], Awaitable[str]],
    on_failed: Callable[[str], None],
) -> str:
    """One session of a WebSocket client: connect, subscribe, then serve until it ends.

    Returns why a subscribed session ended (its connection lost). A session that fails
    before it is subscribed calls on_failed(why) and raises: a StreamError of subscribe as
    it is, a connection that cannot be made as StreamLost; a bad URL is a ConfigError
    naming url_key. The stream and the market stream share it.
    """
    subscribed = False
    try:
        async with socket as ws:
            await subscribe(ws)
            subscribed = True
            return await serve(ws)
    except StreamError as exc:
        on_failed(str(exc))
        raise
    except InvalidURI as exc:
        raise ConfigError(f"{url_key}: {exc}") from None
    except (OSError, TimeoutError, WebSocketException) as exc:
        reason = describe(exc)
        if not subscribed:
            detail = f"cannot connect to {url}: {reason}"
            on_failed(detail)
            raise StreamLost(detail) from None
        return reason


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception (the type alone when it has no message)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def describe_close(ws: ClientConnection) -> str:
    """Why a connection ended, as its close frame says."""
    code = ws.close_code
    reason = ws.close_reason
    if code is None:
        return "connection closed"
    return f"closed by the venue (code {code}{': ' + reason if reason else ''})"


class ReconnectingClient:
    """A WebSocket client's loop, written once: one session after another, each connect,
    subscribe and serve (one_session), after a backoff; the state told to on_state.

    A client gives ``endpoint`` (the URL), sets in its __init__ ``backoff``, ``backoff_max_s``,
    the socket's timeouts, ``state`` and ``_on_state``; it gives ``name`` (its log prefix),
    ``url_key`` (the config key of the URL, for a bad URL's error), ``_log``, and the steps
    ``_subscribe``, ``_serve``, ``_failed`` and ``_ended`` (a subscribed session ended).
    """

    name: ClassVar[str]
    url_key: ClassVar[str]
    _log: ClassVar[logging.Logger]
    backoff: Backoff
    backoff_max_s: float
    ping_interval_s: float
    silence_timeout_s: float
    open_timeout_s: float
    close_timeout_s: float
    max_size: int = MAX_FRAME_BYTES
    state: str
    _on_state: Callable[[str, str], None] | None

    @property
    def endpoint(self) -> str:
        """The URL the client connects to."""
        raise NotImplementedError

    async def run(self) -> None:
        """Connect, subscribe and serve; reconnect on any failure. Forever."""
        await reconnecting(
            self._session,
            self._backoff,
            give_up_wait_s=self.backoff_max_s,
            log=self._log,
            name=self.name,
        )

    def _backoff(self, exc: Exception) -> bool | float:
        """stamina's hook: retry StreamErrors after a full-jitter delay; anything else raises."""
        if not isinstance(exc, StreamError):
            return False
        delay = self.backoff.delay()
        self._log.warning("%s: %s; reconnecting in %.2f s", self.name, exc, delay)
        return delay

    def _set_state(self, state: str, detail: str = "") -> None:
        self.state = state
        if self._on_state is not None:
            try:
                self._on_state(state, detail)
            except Exception:
                self._log.exception("%s: on_state callback failed", self.name)

    async def _session(self) -> None:
        self._set_state("connecting", self.endpoint)
        socket = open_socket(
            self.endpoint,
            ping_interval_s=self.ping_interval_s,
            silence_timeout_s=self.silence_timeout_s,
            open_timeout_s=self.open_timeout_s,
            close_timeout_s=self.close_timeout_s,
            max_size=self.max_size,
        )
        reason = await one_session(
            socket,
            url=self.endpoint,
            url_key=self.url_key,
            subscribe=self._subscribe,
            serve=self._serve,
            on_failed=self._failed,
        )
        self._ended(reason)
        self._set_state("lost", reason)
        raise StreamLost(f"connection lost: {reason}")

    async def _subscribe(self, ws: ClientConnection) -> None:
        raise NotImplementedError

    async def _serve(self, ws: ClientConnection) -> str:
        raise NotImplementedError

    def _failed(self, why: str) -> None:
        raise NotImplementedError

    def _ended(self, reason: str) -> None:
        """A subscribed session ended (its connection lost) for reason."""
