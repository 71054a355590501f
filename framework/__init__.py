"""perpframe: automated trading of perpetual contracts; the public API strategies import.

A strategy is a :class:`Strategy` subclass that reacts to events with order intents::

    from framework import OrderIntent, Strategy

Everything listed in ``__all__`` is stable API; other modules are the framework's internals.
"""

from __future__ import annotations

from framework.engine.events import (
    BalanceSynced,
    CancelRejected,
    ConnectionChanged,
    Event,
    MatchFilled,
    OrderUpdate,
    PositionsSynced,
    Started,
    Stopping,
    Timer,
)
from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.market import MarketView
from framework.engine.open_orders import OpenOrder
from framework.engine.portfolio import Balance, Portfolio, PositionState
from framework.engine.strategy import Strategy, StrategyContext, StrategyLoadError, load_strategy
from framework.venue.market import Bar, Book, IndexPrice, MarkPrice, Trade
from framework.venue.models import (
    AccountBalance,
    AccountPush,
    ChangeType,
    Direction,
    MatchRecord,
    MatchType,
    Position,
    PositionPush,
    PositionType,
)

__all__ = [
    "AccountBalance",
    "AccountPush",
    "Balance",
    "BalanceSynced",
    "Bar",
    "Book",
    "CancelRejected",
    "ChangeType",
    "ConnectionChanged",
    "Direction",
    "Event",
    "IndexPrice",
    "MarkPrice",
    "MarketView",
    "MatchFilled",
    "MatchRecord",
    "MatchType",
    "OpenOrder",
    "OrderIntent",
    "OrderStatus",
    "OrderUpdate",
    "Portfolio",
    "Position",
    "PositionPush",
    "PositionState",
    "PositionType",
    "PositionsSynced",
    "Started",
    "Stopping",
    "Strategy",
    "StrategyContext",
    "StrategyLoadError",
    "Timer",
    "Trade",
    "load_strategy",
]
