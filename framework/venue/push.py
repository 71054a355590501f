"""The push subscription protocol (SPEC 6), sans-I/O: what to send, which acks settle what,
which pushes are duplicates. The socket, keepalive and backoff are
:class:`framework.live.stream.StreamClient`'s; this object only sees frames.

One :class:`PushProtocol` serves one stream for its life; :meth:`PushProtocol.connect` starts
each connection: it returns one signed subscribe message per pair (``api_position``) and per
settlement coin (``api_account``), each with a fresh timestamp, and forgets what the previous
connection delivered (a new connection may legitimately repeat a push).

Acknowledgements: an ack names its subscription by its echoed pair or symbol; one that echoes
neither settles the oldest pending subscription of its event. An ack with success false is
:class:`SubscribeRefused`. The connection is subscribed once nothing is pending.

Duplicates: within one connection nothing is lost, so a position push equal to the last one
of its position is a duplicate delivery. The last push of every open position is kept (LRU
beyond ``max_open``); a closing push (quantity 0, or CLOSE/LIQUIDATE without a quantity)
moves its position to a short list of recent closes (``max_closed``), so memory stays flat
however many positions open and close over a connection's life. Account pushes are left to
the portfolio's logId rule.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

from framework.venue.errors import FrameworkError
from framework.venue.models import PositionPush, SubscribeAck
from framework.venue.requests import RequestBuilder

__all__ = [
    "ACCOUNT",
    "MAX_OPEN_POSITIONS",
    "MAX_RECENT_CLOSES",
    "POSITION",
    "PushProtocol",
    "SubscribeRefused",
]

log = logging.getLogger("framework.stream")

POSITION: Final = "api_position"
ACCOUNT: Final = "api_account"
MAX_OPEN_POSITIONS: Final = 4096
"""Open positions whose last push is kept for duplicate detection (LRU beyond that)."""
MAX_RECENT_CLOSES: Final = 256
"""Closing pushes kept so a duplicate delivery of one is still dropped."""
_CLOSING: Final = frozenset(("CLOSE", "LIQUIDATE"))

Key = tuple[str, int | None]


class SubscribeRefused(FrameworkError):
    """The venue acknowledged a subscribe with success false (bad key or signature?)."""


class PushProtocol:
    """Subscriptions, acknowledgements and duplicate pushes of one stream; pure."""

    __slots__ = ("_builder", "_closed", "_last", "_pending", "coins", "max_closed", "max_open",
                 "pairs")  # fmt: skip

    def __init__(
        self,
        builder: RequestBuilder,
        *,
        pairs: Sequence[str],
        coins: Sequence[str],
        max_open: int = MAX_OPEN_POSITIONS,
        max_closed: int = MAX_RECENT_CLOSES,
    ) -> None:
        if not pairs and not coins:
            raise ValueError("a push stream needs at least one pair or coin to subscribe")
        self._builder = builder
        self.pairs = tuple(dict.fromkeys(pairs))
        self.coins = tuple(dict.fromkeys(coins))
        self.max_open = max_open
        self.max_closed = max_closed
        self._pending: dict[tuple[str, str], None] = {}
        self._last: dict[Key, PositionPush] = {}  # least recently pushed first
        self._closed: dict[Key, PositionPush] = {}

    def connect(self, now_ms: Callable[[], int]) -> list[dict[str, Any]]:
        """A new connection: its subscribe messages, in order; earlier state forgotten."""
        self._last.clear()
        self._closed.clear()
        self._pending.clear()
        builder = self._builder
        messages = []
        for pair in self.pairs:
            messages.append(builder.subscribe(POSITION, now_ms(), pair=pair))
            self._pending[(POSITION, pair)] = None
        for coin in self.coins:
            messages.append(builder.subscribe(ACCOUNT, now_ms(), symbol=coin))
            self._pending[(ACCOUNT, coin)] = None
        return messages

    @property
    def subscribed(self) -> bool:
        """True once every subscription of the connection was acknowledged."""
        return not self._pending

    @property
    def pending(self) -> list[str]:
        """The subscriptions still waiting for an ack, as ``event key`` texts."""
        return [f"{event} {key}" for event, key in self._pending]

    def ack(self, ack: SubscribeAck) -> bool:
        """Take an acknowledgement; True if it settled a pending subscription.

        SubscribeRefused when it says success false.
        """
        event = ack.event.removesuffix("_res")
        key = ack.pair if event == POSITION else ack.symbol
        if not ack.success:
            raise SubscribeRefused(
                f"subscribe {event} {key or '?'} refused by the venue: {ack.msg or 'no reason'}"
            )
        pending = self._pending
        if key is not None and (event, key) in pending:
            del pending[(event, key)]
            return True
        if key is None:  # an ack that does not echo its pair/symbol settles the oldest one
            for candidate in pending:
                if candidate[0] == event:
                    del pending[candidate]
                    return True
        log.info("stream: unexpected acknowledgement %s %s ignored", ack.event, key)
        return False

    def fresh(self, push: PositionPush) -> bool:
        """False when the push repeats the last one of its position (a duplicate delivery)."""
        key = (push.symbol, push.position_id)
        last = self._last
        known = last.get(key)
        if known is None:
            known = self._closed.get(key)
        if known == push:
            return False
        last.pop(key, None)
        quantity = push.current_quantity  # closed: 0, or none left by CLOSE/LIQUIDATE
        closed = self._closed
        if (not quantity) if quantity is not None else push.change_type in _CLOSING:
            closed.pop(key, None)
            closed[key] = push
            if len(closed) > self.max_closed:
                del closed[next(iter(closed))]
        else:
            closed.pop(key, None)
            last[key] = push  # re-inserted: the most recently pushed is last
            if len(last) > self.max_open:
                del last[next(iter(last))]
        return True

    def sizes(self) -> tuple[int, int]:
        """(open positions remembered, recent closes remembered): both bounded."""
        return len(self._last), len(self._closed)
