"""The event bus: typed events dispatched to subscribers in publish order, failures isolated.

Dispatch is synchronous and single-threaded: ``publish`` calls every handler subscribed to the
event's exact type, in subscription order. A publish made from inside a handler is queued and
dispatched after the current event has reached every handler (FIFO), so every subscriber sees
events in the same global order. The bus reads no clock and does no I/O, so live trading and
backtests share it.

A handler that raises is logged with its traceback and the others go on. Handlers may belong
to an *owner* (a strategy's name); an owner whose handlers have failed more than
``max_failures`` times in all is stopped: its handlers are removed and it gets no more events.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from framework.engine.raised import raised

__all__ = ["Bus", "Handler", "OwnerStopped"]

E = TypeVar("E")
Handler = Callable[[Any], None]
OwnerStopped = Callable[[str, BaseException], None]
"""Called with (owner, last exception) when an owner is stopped for failing too often."""

_log = logging.getLogger("framework.bus")


class _Subscription:
    """One handler of one event type; owner None means infrastructure (never stopped)."""

    __slots__ = ("handler", "owner")

    def __init__(self, handler: Handler, owner: str | None) -> None:
        self.handler = handler
        self.owner = owner


class Bus:
    """In-order, synchronous dispatch of typed events with per-owner failure isolation."""

    __slots__ = (
        "_dispatching",
        "_failures",
        "_handlers",
        "_listeners",
        "_log",
        "_queue",
        "_stopped",
        "_subs",
        "handler_errors",
        "max_failures",
        "published",
    )

    def __init__(self, *, max_failures: int = 10, log: logging.Logger | None = None) -> None:
        if max_failures < 0:
            raise ValueError(f"max_failures: expected >= 0, got {max_failures}")
        self.max_failures = max_failures
        self._log = log if log is not None else _log
        # The hot path reads _handlers: event type -> tuple of plain callables (rebuilt on every
        # subscription change, so a dispatch in progress keeps iterating its own snapshot).
        self._handlers: dict[type[Any], tuple[tuple[Handler, str | None], ...]] = {}
        self._subs: dict[type[Any], list[_Subscription]] = {}
        self._queue: deque[Any] = deque()
        self._dispatching = False
        self._failures: dict[str, int] = {}
        self._stopped: dict[str, str] = {}
        self._listeners: list[OwnerStopped] = []
        self.published = 0
        self.handler_errors = 0

    def subscribe(
        self, event_type: type[E], handler: Callable[[E], None], *, owner: str | None = None
    ) -> None:
        """Call handler(event) for every published event of exactly event_type."""
        if owner is not None and owner in self._stopped:
            raise ValueError(f"owner {owner!r} was stopped; it cannot subscribe again")
        self._subs.setdefault(event_type, []).append(_Subscription(handler, owner))
        self._rebuild(event_type)

    def unsubscribe(self, event_type: type[Any], handler: Handler) -> None:
        """Remove handler from event_type (no error when it is not subscribed).

        Handlers are compared with ==, so ``obj.method`` unsubscribes what ``obj.method``
        subscribed (each access makes a new bound-method object).
        """
        subs = self._subs.get(event_type, [])
        self._subs[event_type] = [s for s in subs if s.handler != handler]
        self._rebuild(event_type)

    def on_owner_stopped(self, listener: OwnerStopped) -> None:
        """Register listener(owner, exc), called when an owner is stopped for failing."""
        self._listeners.append(listener)

    def publish(self, event: object) -> None:
        """Dispatch event to its subscribers now, or after the event being dispatched."""
        if self._dispatching:
            self._queue.append(event)
            return
        self._dispatching = True
        try:
            # The first event is dispatched here, not by a call to _dispatch: one push is one
            # publish, and a Python call per push is a measurable share of a replay.
            self.published += 1
            handlers = self._handlers.get(type(event))
            if handlers is not None:
                for handler, owner in handlers:
                    try:
                        handler(event)
                    except Exception as exc:  # isolation: one handler never stops the bus
                        self._failed(handler, owner, event, exc)
            queue = self._queue
            while queue:
                self._dispatch(queue.popleft())
        finally:
            self._dispatching = False

    def _dispatch(self, event: object) -> None:
        self.published += 1
        handlers = self._handlers.get(type(event))
        if handlers is None:
            return
        for handler, owner in handlers:
            try:
                handler(event)
            except Exception as exc:  # isolation is the point: one handler never stops the bus
                self._failed(handler, owner, event, exc)

    def _failed(self, handler: Handler, owner: str | None, event: object, exc: Exception) -> None:
        self.handler_errors += 1
        if owner is None:
            name = getattr(handler, "__qualname__", repr(handler))
            self._log.error("handler %s failed on %s", name, type(event).__name__, exc_info=exc)
            return
        # A strategy's handler is its hook (a bound method, or a closure named after it).
        name = getattr(handler, "__name__", repr(handler))
        count = self._failures.get(owner, 0) + 1
        self._failures[owner] = count
        # One line a trader reads; the traceback only when logging is at DEBUG.
        self._log.error(
            "strategy %s: %s raised %s on %s (failure %d, stopped after %d)",
            owner,
            name,
            raised(exc),
            type(event).__name__,
            count,
            self.max_failures + 1,
            exc_info=exc if self._log.isEnabledFor(logging.DEBUG) else None,
        )
        if count > self.max_failures:
            self.stop_owner(owner, f"failed {count} times; last: {raised(exc)}")
            for listener in self._listeners:
                try:
                    listener(owner, exc)
                except Exception:
                    self._log.exception("owner-stopped listener failed for %s", owner)

    def stop_owner(self, owner: str, reason: str) -> None:
        """Remove every handler of owner; it receives no further events."""
        if owner in self._stopped:
            return
        self._stopped[owner] = reason
        self._log.critical("STRATEGY STOPPED: %s: %s", owner, reason)
        for event_type, subs in self._subs.items():
            if any(s.owner == owner for s in subs):
                self._subs[event_type] = [s for s in subs if s.owner != owner]
                self._rebuild(event_type)

    def is_stopped(self, owner: str) -> bool:
        """True when owner was stopped."""
        return owner in self._stopped

    @property
    def stopped(self) -> dict[str, str]:
        """Stopped owners and why."""
        return dict(self._stopped)

    def failures(self, owner: str) -> int:
        """How many times the handlers of owner have raised."""
        return self._failures.get(owner, 0)

    def subscribers(self, event_type: type[Any]) -> int:
        """How many handlers event_type has."""
        return len(self._handlers.get(event_type, ()))

    def event_types(self) -> Iterable[type[Any]]:
        """The event types that have at least one subscriber."""
        return [t for t, hs in self._handlers.items() if hs]

    def _rebuild(self, event_type: type[Any]) -> None:
        subs = self._subs.get(event_type, [])
        self._handlers[event_type] = tuple((s.handler, s.owner) for s in subs)
