"""What travels on the event bus: the venue's pushes, and events named in the past tense.

A push travels as the record it decodes to (:class:`~framework.venue.models.PositionPush`,
:class:`~framework.venue.models.AccountPush`: no wrapper event, one object less per push and
a strategy's hook subscribed as it is); an AccountPush is published only when it is newer
than any seen for its coin (logId). The other inbound events wrap the decoded venue records,
so strategy hooks receive the snake_case fields of SPEC sections 2 and 6. ``strategy`` on an
event addresses it to one strategy by name; ``None`` means every strategy. Every event is a
frozen record.

Events are frozen msgspec Structs: one is made per push, and a Struct is made in C (about
a fifth of what a frozen attrs class's ``__init__`` costs). Those that hold only records,
strings and tuples are not tracked by the garbage collector (``gc=False``: they can hold no
reference cycle); OrderUpdate holds the strategy's own OrderIntent and stays tracked.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from framework.engine.intents import OrderIntent, OrderStatus
from framework.venue.models import AccountBalance, AccountPush, MatchRecord, Position, PositionPush

__all__ = [
    "BalanceSynced",
    "CancelRejected",
    "ConnectionChanged",
    "Event",
    "MatchFilled",
    "OrderUpdate",
    "PositionsSynced",
    "Started",
    "Stopping",
    "Timer",
]


class PositionsSynced(msgspec.Struct, frozen=True, gc=False):
    """A REST snapshot of one pair's positions that changed what was known (live only)."""

    pair: str
    positions: tuple[Position, ...]


class BalanceSynced(msgspec.Struct, frozen=True, gc=False):
    """A REST snapshot of one coin's balance (no logId: never overrides a newer push)."""

    balance: AccountBalance


class MatchFilled(msgspec.Struct, frozen=True, gc=False):
    """A new match record; match.client_order_id is set when it fills a known intent.

    ``candidates``: the in-doubt intents (client order ids) the match may belong to when no
    single one can be named (see OrderStatus.AMBIGUOUS); empty otherwise.
    """

    match: MatchRecord
    strategy: str | None = None
    external: bool = False
    candidates: tuple[str, ...] = ()


class OrderUpdate(msgspec.Struct, frozen=True):
    """A transition of one intent, delivered only to the strategy that submitted it."""

    client_order_id: str
    status: OrderStatus
    strategy: str
    order_id: int | None = None
    code: int | None = None
    msg: str | None = None
    intent: OrderIntent | None = None
    """The intent itself (left out of repr: logs stay one line)."""
    group: tuple[str, ...] = ()
    """AMBIGUOUS only: every client order id of the same-looking in-doubt group."""
    group_filled: int | None = None
    """AMBIGUOUS only: how many orders of the group the venue's matches show filled."""

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__struct_fields__ if name != "intent"
        )
        return f"OrderUpdate({shown})"


class CancelRejected(msgspec.Struct, frozen=True, gc=False):
    """A cancel did not happen; the order keeps its state (delivered to its strategy).

    ``code``: the venue's code, or the framework's (9020 nothing to cancel, 9021 another
    strategy's order, 9022 the venue offers no cancels, 9023 the answer did not say).
    """

    client_order_id: str
    strategy: str
    code: int | None
    msg: str


class Timer(msgspec.Struct, frozen=True, gc=False):
    """A timer a strategy scheduled has fired."""

    name: str
    strategy: str
    at: datetime


class ConnectionChanged(msgspec.Struct, frozen=True, gc=False):
    """A link changed state: component 'stream' or 'rest', state e.g. connected/lost."""

    component: str
    state: str
    detail: str = ""


class Started(msgspec.Struct, frozen=True, gc=False):
    """The node (live or backtest) has started; strategies' on_start follows."""

    at: datetime


class Stopping(msgspec.Struct, frozen=True, gc=False):
    """The node is stopping; strategies' on_stop follows."""

    at: datetime
    reason: str = ""


Event = (
    PositionPush
    | AccountPush
    | PositionsSynced
    | BalanceSynced
    | MatchFilled
    | OrderUpdate
    | CancelRejected
    | Timer
    | ConnectionChanged
    | Started
    | Stopping
)
"""Any event the bus carries."""
