"""Plug-ins: the Strategy base class, its hook table and loading, and event sources.

A strategy overrides any of the plain (not async) hooks ``on_start``, ``on_position``,
``on_account``, ``on_match``, ``on_order``, ``on_timer``, ``on_stop`` and the market's
``on_trade``, ``on_book``, ``on_bar`` and ``on_mark``; it acts through ``submit``/
``submit_many`` and reads ``params``, ``portfolio``, ``market``, ``now()`` and ``log``. What it
touches outside itself goes through a :class:`StrategyContext` the runtime provides (live
node or backtest), so the same class runs in both.

Dispatch rule: one table, :data:`HOOKS`, a row per hook (its name, the bus event that calls
it, and who gets it), drives :func:`attach`: position pushes and matches reach the strategies
trading their pair; account pushes reach every strategy; an OrderUpdate or Timer reaches only
the strategy named in it; a match's ``client_order_id`` is kept only for the strategy that
owns the order and is None for the others. Hooks a subclass does not override are not
subscribed. A plug-in adds a hook with one row (:func:`register_hook`) and, with a
:class:`Source`, the records that call it: they share the loading of ``module:Class``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any, Protocol, TypeVar

import attrs
import msgspec

from framework.engine.bus import Bus
from framework.engine.clock import Clock
from framework.engine.events import (
    CancelRejected,
    MatchFilled,
    OrderUpdate,
    Started,
    Stopping,
    Timer,
)
from framework.engine.intents import OrderIntent
from framework.engine.market import MarketView
from framework.engine.open_orders import OpenOrder
from framework.engine.portfolio import Portfolio
from framework.venue.errors import ConfigError
from framework.venue.market import Bar, Book, MarkPrice, Trade
from framework.venue.models import AccountPush, MatchRecord, PositionPush

__all__ = [
    "HOOKS",
    "BasicContext",
    "Hook",
    "OrderDesk",
    "Source",
    "Strategy",
    "StrategyContext",
    "StrategyLoadError",
    "attach",
    "hook_takes",
    "load_source",
    "load_strategy",
    "register_hook",
]


class StrategyContext(Protocol):
    """What the runtime (live node or backtest) gives strategies."""

    @property
    def portfolio(self) -> Portfolio:
        """The shared portfolio, kept current from pushes and snapshots."""
        ...

    def submit(self, strategy: str, intent: OrderIntent) -> str:
        """Queue intent for strategy (the execution engine's submit); returns its client id."""
        ...

    def now(self) -> datetime:
        """The current time (wall clock live, virtual time in a backtest)."""
        ...

    def schedule(self, strategy: str, name: str, every_s: float) -> None:
        """Publish Timer(name, strategy) every every_s seconds."""
        ...

    @property
    def orders(self) -> OrderDesk | None:
        """Cancels and open orders (the execution engine); None where there is none."""
        ...

    @property
    def market(self) -> MarketView | None:
        """The latest market records per pair (the kernel's read model); None where none."""
        ...


class OrderDesk(Protocol):
    """What a strategy may ask of the execution engine besides submitting (cancels)."""

    def cancel(self, strategy: str | None, client_order_id: str) -> bool:
        """Ask for the cancel of one order of strategy."""
        ...

    def cancel_all(
        self, strategy: str | None, pair: str | None = None, is_long: bool | None = None
    ) -> int:
        """Cancel every open order of strategy (of pair and side, or all of them)."""
        ...

    def open_orders(self, strategy: str | None = None, pair: str | None = None) -> list[OpenOrder]:
        """The open (resting) orders of strategy and pair."""
        ...


@attrs.define
class BasicContext:
    """A StrategyContext from plain parts: a portfolio, a clock and two callables."""

    portfolio: Portfolio
    clock: Clock
    submitter: Callable[[str, OrderIntent], str]
    scheduler: Callable[[str, str, float], None] | None = None
    orders: OrderDesk | None = None
    market: MarketView | None = None

    def submit(self, strategy: str, intent: OrderIntent) -> str:
        """Delegate to submitter(strategy, intent)."""
        return self.submitter(strategy, intent)

    def now(self) -> datetime:
        """The clock's current time."""
        return self.clock.now()

    def schedule(self, strategy: str, name: str, every_s: float) -> None:
        """Delegate to scheduler(strategy, name, every_s); an error when there is none."""
        if self.scheduler is None:
            raise RuntimeError("this runtime has no timer scheduler")
        self.scheduler(strategy, name, every_s)


class StrategyLoadError(ConfigError):
    """A 'module:Class' that does not name a loadable Strategy subclass."""


class Strategy:
    """Base class of trading strategies; override the hooks you need (all optional)."""

    def __init__(
        self,
        name: str,
        context: StrategyContext,
        params: Mapping[str, Any] | None = None,
        *,
        pairs: Iterable[str] | None = None,
    ) -> None:
        self.name = name
        self.params: dict[str, Any] = dict(params or {})
        self._context = context
        self.log = logging.getLogger(f"strategy.{name}")
        self.pairs: frozenset[str] | None = (
            frozenset(pairs) if pairs is not None else _pairs_from_params(self.params)
        )
        self.stopped = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # ---- hooks (plain methods; the base versions do nothing)

    def on_start(self) -> None:
        """The node has started: set up state, schedule timers."""

    def on_position(self, push: PositionPush) -> None:
        """A position of a traded pair changed (api_position push)."""

    def on_account(self, push: AccountPush) -> None:
        """A balance changed (api_account push newer than any seen)."""

    def on_match(self, match: MatchRecord) -> None:
        """A new match on a traded pair; client_order_id is set only for this strategy's orders."""

    def on_order(self, update: OrderUpdate) -> None:
        """One of this strategy's intents changed status."""

    def on_timer(self, name: str) -> None:
        """A timer this strategy scheduled fired."""

    def on_cancel_rejected(self, event: CancelRejected) -> None:
        """A cancel of one of this strategy's orders did not happen (code and msg say why)."""

    def on_stop(self) -> None:
        """The node is stopping: last chance to log or submit."""

    def on_trade(self, trade: Trade) -> None:
        """A trade of the market on a traded pair (price, quantity, taker side, time)."""

    def on_book(self, book: Book) -> None:
        """A book snapshot of a traded pair (best_bid, best_ask, mid; levels best first)."""

    def on_bar(self, bar: Bar) -> None:
        """A bar of a traded pair (open, high, low, close of its period)."""

    def on_mark(self, mark: MarkPrice) -> None:
        """A mark price of a traded pair (polled: the venue pushes none)."""

    # ---- what a strategy may do

    @property
    def portfolio(self) -> Portfolio:
        """Positions and balances, kept current from pushes and snapshots."""
        return self._context.portfolio

    @property
    def market(self) -> MarketView:
        """The market as last heard: last(pair), mark, index, book, bar(pair, period), age."""
        market: MarketView | None = getattr(self._context, "market", None)
        if market is None:
            raise RuntimeError("this runtime has no market view")
        return market

    def trades(self, pair: str | None) -> bool:
        """True when this strategy trades pair (every pair when pairs is None)."""
        return self.pairs is None or pair in self.pairs

    def submit(self, intent: OrderIntent) -> str:
        """Queue an order intent; returns its client_order_id (outcome arrives in on_order)."""
        return self._context.submit(self.name, intent)

    def submit_many(self, intents: Sequence[OrderIntent]) -> list[str]:
        """Queue several intents in order; returns their client_order_ids."""
        submit = self._context.submit
        return [submit(self.name, intent) for intent in intents]

    def cancel(self, client_order_id: str) -> bool:
        """Cancel one of this strategy's orders; outcome in on_order or on_cancel_rejected.

        Returns False when the cancel is refused at once (on_cancel_rejected has run).
        """
        return self._desk().cancel(self.name, client_order_id)

    def cancel_all(self, pair: str | None = None, is_long: bool | None = None) -> int:
        """Cancel this strategy's open orders (on pair and side; None: every pair, both sides)."""
        return self._desk().cancel_all(self.name, pair, is_long)

    def open_orders(self, pair: str | None = None) -> list[OpenOrder]:
        """This strategy's open (resting) orders, oldest first, adopted ones included."""
        return self._desk().open_orders(self.name, pair)

    def _desk(self) -> OrderDesk:
        desk: OrderDesk | None = getattr(self._context, "orders", None)
        if desk is None:
            raise RuntimeError("this runtime has no execution engine for cancels")
        return desk

    def now(self) -> datetime:
        """The current time of the runtime (virtual in a backtest)."""
        return self._context.now()

    def schedule(self, name: str, every_s: float) -> None:
        """Call on_timer(name) every every_s seconds."""
        if not every_s > 0:
            raise ValueError(f"schedule({name!r}): every_s must be positive, got {every_s!r}")
        self._context.schedule(self.name, name, every_s)


def _pairs_from_params(params: Mapping[str, Any]) -> frozenset[str] | None:
    pairs = params.get("pairs")
    if isinstance(pairs, list | tuple) and all(isinstance(p, str) for p in pairs):
        return frozenset(pairs)
    pair = params.get("pair")
    if isinstance(pair, str):
        return frozenset([pair])
    return None


def load_strategy(spec: str) -> type[Strategy]:
    """The Strategy subclass named by 'package.module:ClassName', or a StrategyLoadError."""
    cls: type[Strategy] = _load(spec, "strategy", Strategy)
    return cls


def load_source(spec: str) -> Callable[[str, Mapping[str, Any]], Source]:
    """The event source class named by 'package.module:ClassName', or a StrategyLoadError."""
    cls: Callable[[str, Mapping[str, Any]], Source] = _load(spec, "source", None)
    return cls


def _load(spec: str, kind: str, base: type[Any] | None) -> Any:
    """The class spec names (a subclass of base, when given), or a StrategyLoadError."""
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise StrategyLoadError(f"{kind} class {spec!r}: expected the form 'module:ClassName'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            raise StrategyLoadError(
                f"{kind} class {spec!r}: module {module_name!r} not found (the commands "
                "look among installed packages, in the working directory and beside the config)"
            ) from None
        raise StrategyLoadError(
            f"{kind} class {spec!r}: module {module_name!r} failed to import: {exc}"
        ) from exc
    except Exception as exc:
        raise StrategyLoadError(
            f"{kind} class {spec!r}: module {module_name!r} failed to import: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    obj: Any = module
    for part in class_name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            found = sorted(
                n
                for n, v in vars(module).items()
                if isinstance(v, type) and issubclass(v, base or ()) and v is not base
            )
            hint = f"; Strategy subclasses there: {', '.join(found)}" if found else ""
            raise StrategyLoadError(
                f"{kind} class {spec!r}: module {module_name!r} has no {class_name!r}{hint}"
            ) from None
    if not isinstance(obj, type) or (base is not None and not issubclass(obj, base)):
        what = f"class {obj.__name__}" if isinstance(obj, type) else type(obj).__name__
        wanted = "a class" if base is None else "a subclass of framework.Strategy"
        raise StrategyLoadError(f"{kind} class {spec!r}: {what} is not {wanted}")
    return obj


class Source(Protocol):
    """An event source plugged in at the edge (config ``sources:``): built as cls(name, params).

    It declares the record types it feeds (:attr:`records`); the kernel routes each to its
    consumer (the portfolio for the venue's pushes; the bus, hence the strategies, for the
    event of a hook-table row) and refuses one nothing takes when the source is added.
    """

    name: str
    records: tuple[type[Any], ...]
    """The record types it feeds the intake."""

    async def run(self, feed: Callable[[Any], None]) -> None:
        """Live: feed records as they come, until cancelled (a task of the node)."""

    def timed(self, start_ms: int) -> Iterable[tuple[int, Any]]:
        """Backtest: (virtual ms, record) in time order from start_ms, fed as time gets there."""
        ...


@attrs.frozen
class Hook:
    """One row of the hook table: a strategy hook, the bus event that calls it, who gets it."""

    name: str
    event: type[Any]
    owner: bool = False
    """True: only the strategy the event names (``event.strategy``) gets it, others see
    ``others(argument)`` when others is set; False: every strategy gets it."""
    by_pair: bool = False
    """The pairs filter: a strategy trading some pairs gets it when the argument's pair
    (its attribute named by ``pair``) is one of them (never applied to the owner)."""
    pair: str = "symbol"
    """The argument's attribute naming its pair (the venue's pushes: symbol; market: pair)."""
    arg: str | None = ""
    """What the hook is called with: the event (""), its attribute of that name, or nothing."""
    others: Callable[[Any], Any] | None = None
    """Owner rows: what a strategy that is not the owner gets instead (None: nothing)."""


def _not_owned(match: MatchRecord) -> MatchRecord:
    """A match as a strategy that does not own it sees it: no client id, no candidates."""
    if match.client_order_id is None and not match.candidates:
        return match
    return msgspec.structs.replace(match, client_order_id=None, candidates=())


HOOKS: list[Hook] = [
    Hook("on_start", Started, arg=None),
    Hook("on_position", PositionPush, by_pair=True),
    Hook("on_account", AccountPush),
    Hook("on_match", MatchFilled, owner=True, by_pair=True, arg="match", others=_not_owned),
    Hook("on_order", OrderUpdate, owner=True),
    Hook("on_timer", Timer, owner=True, arg="name"),
    Hook("on_cancel_rejected", CancelRejected, owner=True),
    Hook("on_stop", Stopping, arg=None),
    Hook("on_trade", Trade, by_pair=True, pair="pair"),
    Hook("on_book", Book, by_pair=True, pair="pair"),
    Hook("on_bar", Bar, by_pair=True, pair="pair"),
    Hook("on_mark", MarkPrice, by_pair=True, pair="pair"),
]
"""The hook table: it drives :func:`attach`, the README's hook list and the scaffold."""


def register_hook(row: Hook) -> Hook:
    """Add a row to the hook table (a plug-in's hook); a name it has already must be that row."""
    known = next((h for h in HOOKS if h.name == row.name), None)
    if known is None:
        HOOKS.append(row)
    elif known != row:
        raise ValueError(f"hook {row.name}: already in the table as {known}")
    return row


def hook_takes(event_type: type[Any]) -> bool:
    """True when a row of the hook table is called by events of event_type."""
    return any(h.event is event_type for h in HOOKS)


def attach(bus: Bus, strategy: Strategy) -> None:
    """Subscribe strategy's hooks to bus under its name, each by its row of the hook table.

    A hook is subscribed when the strategy's class defines it other than the base class
    does (a plug-in's hook the base lacks: when the class defines it at all).
    """
    name = strategy.name

    def stopped(owner: str, exc: BaseException) -> None:
        if owner == name:
            strategy.stopped = True

    bus.on_owner_stopped(stopped)
    cls = type(strategy)
    for row in list(HOOKS):
        method = getattr(cls, row.name, None)
        if method is not None and method is not getattr(Strategy, row.name, None):
            handler = _handler(row, getattr(strategy, row.name), name, strategy.pairs)
            bus.subscribe(row.event, handler, owner=name)


def _handler(
    row: Hook, method: Callable[..., None], name: str, pairs: frozenset[str] | None
) -> Callable[[Any], None]:
    """The bus handler of one strategy's hook, by its row; named after the hook."""
    filtered = pairs if row.by_pair else None
    if not row.owner and row.arg == "":  # the hot path: a push is its own event
        if filtered is None:
            return method  # the hook itself
        some = filtered
        if row.pair != "symbol":
            pair_of = attrgetter(row.pair)

            def by_named_pair(event: Any) -> None:
                if pair_of(event) in some:
                    method(event)

            return _named(by_named_pair, row.name)

        def by_pair(event: Any) -> None:
            if event.symbol in some:
                method(event)

        return _named(by_pair, row.name)
    hook: Callable[[Any], None] = method if row.arg is not None else (lambda _: method())
    get = attrgetter(row.arg) if row.arg else None
    others = row.others
    if not row.owner:

        def every(event: Any) -> None:
            x = event if get is None else get(event)
            if filtered is None or x.symbol in filtered:
                hook(x)

        return _named(every, row.name)

    def owned(event: Any) -> None:
        if event.strategy == name:  # the owner always hears of its own, others by pair
            hook(event if get is None else get(event))
        elif others is not None:
            x = event if get is None else get(event)
            if filtered is None or x.symbol in filtered:
                hook(others(x))

    return _named(owned, row.name)


_F = TypeVar("_F", bound=Callable[..., Any])


def _named(handler: _F, hook: str) -> _F:
    """Name a dispatch closure after the hook it calls, so a failure log names the hook."""
    handler.__qualname__ = handler.__name__ = hook
    return handler
