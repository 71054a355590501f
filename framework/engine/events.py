"""What travels on the event bus; names are past tense, every event is a frozen record.

Inbound events wrap the decoded venue records, so strategy hooks receive the snake_case
fields of SPEC sections 2 and 6. ``strategy`` on an event addresses it to one strategy by
name; ``None`` means every strategy.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from framework.engine.intents import OrderIntent, OrderStatus
from framework.venue.models import AccountBalance, AccountPush, MatchRecord, Position, PositionPush

__all__ = [
    "AccountChanged",
    "BalanceSynced",
    "ConnectionChanged",
    "Event",
    "MatchFilled",
    "OrderUpdate",
    "PositionChanged",
    "PositionsSynced",
    "Started",
    "Stopping",
    "Timer",
]


@attrs.frozen(slots=True)
class PositionChanged:
    """An api_position push reached the framework."""

    push: PositionPush


@attrs.frozen(slots=True)
class AccountChanged:
    """An api_account push newer than any seen for its coin reached the framework."""

    push: AccountPush


@attrs.frozen(slots=True)
class PositionsSynced:
    """A REST snapshot of one pair's positions (after connect or reconnect)."""

    pair: str
    positions: tuple[Position, ...]


@attrs.frozen(slots=True)
class BalanceSynced:
    """A REST snapshot of one coin's balance (no logId: never overrides a newer push)."""

    balance: AccountBalance


@attrs.frozen(slots=True)
class MatchFilled:
    """A new match record; match.client_order_id is set when it fills a known intent.

    ``candidates``: the in-doubt intents (client order ids) the match may belong to when no
    single one can be named (see OrderStatus.AMBIGUOUS); empty otherwise.
    """

    match: MatchRecord
    strategy: str | None = None
    external: bool = False
    candidates: tuple[str, ...] = ()


@attrs.frozen(slots=True)
class OrderUpdate:
    """A transition of one intent, delivered only to the strategy that submitted it."""

    client_order_id: str
    status: OrderStatus
    strategy: str
    order_id: int | None = None
    code: int | None = None
    msg: str | None = None
    intent: OrderIntent | None = attrs.field(default=None, repr=False, eq=False)
    group: tuple[str, ...] = ()
    """AMBIGUOUS only: every client order id of the same-looking in-doubt group."""
    group_filled: int | None = None
    """AMBIGUOUS only: how many orders of the group the venue's matches show filled."""


@attrs.frozen(slots=True)
class Timer:
    """A timer a strategy scheduled has fired."""

    name: str
    strategy: str
    at: datetime


@attrs.frozen(slots=True)
class ConnectionChanged:
    """A link changed state: component 'stream' or 'rest', state e.g. connected/lost."""

    component: str
    state: str
    detail: str = ""


@attrs.frozen(slots=True)
class Started:
    """The node (live or backtest) has started; strategies' on_start follows."""

    at: datetime


@attrs.frozen(slots=True)
class Stopping:
    """The node is stopping; strategies' on_stop follows."""

    at: datetime
    reason: str = ""


Event = (
    PositionChanged
    | AccountChanged
    | PositionsSynced
    | BalanceSynced
    | MatchFilled
    | OrderUpdate
    | Timer
    | ConnectionChanged
    | Started
    | Stopping
)
"""Any event the bus carries."""
