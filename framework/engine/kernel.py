"""The kernel: what live trading and backtesting share, built one way for both runtimes.

A runtime (the live :class:`~framework.live.node.Node`, a
:class:`~framework.backtest.runner.Backtest`) provides only its edges: the clock, the client
id generator and journal, how timers are scheduled, a reference price for the risk gate, and
where batches go (it drives ``kernel.engine`` with its executor). The kernel builds and wires
everything else from the config::

    kernel = Kernel(config, clock)                  # bus, portfolio, frame intake
    executor = Executor(partial(kernel.build_engine, ids=...), ...)
    #   the executor builds the engine with its own wake as on_ready: wired at construction
    kernel.load_strategies(schedule=...)            # context, strategies, dispatch
    kernel.start()                                  # Started (on_start), then recovery
    kernel.feeds("stream", types) / add_source(s)   # each record type to its consumer
    ... edges feed kernel.intake (records) and kernel.on_match (match polls) ...
    kernel.stopping(reason)                         # Stopping (on_stop)
    kernel.close()                                  # the engine refuses new intents

A strategy whose constructor raises is a :class:`StrategyBuildError` naming it as
``strategies[N] (name)``, in both runtimes. Strategies are attached to the bus when they
start: ``start`` publishes Started and, while it is dispatched, calls each strategy's
on_start itself; one that raises is logged in one line (``strategy s: on_start raised
RuntimeError: boom``, the traceback only at DEBUG), stopped and left out of ``started``.
What on_start publishes (an order refused at once...) is dispatched after every on_start. Event sources are plug-ins at the edges: they
declare the record types they feed (``feeds``, or ``add_source`` for a configured
:class:`~framework.engine.strategy.Source`) and hand decoded records to ``intake``, which
routes each type to its consumer (``routes``: the portfolio takes the two pushes, the engine
matches, the bus the event of a hook-table row); a type nothing takes is refused when it is
declared. Nothing else in the house changes for a new one. Pure: no I/O, no clock of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

from framework.config import Config, StrategyConfig
from framework.engine.bus import Bus
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import Clock
from framework.engine.events import MatchFilled, Started, Stopping
from framework.engine.execution import ExecutionEngine
from framework.engine.intents import OrderIntent
from framework.engine.journaling import JournalProtocol
from framework.engine.portfolio import Portfolio, push_routes
from framework.engine.raised import raised
from framework.engine.strategy import (
    BasicContext,
    Source,
    Strategy,
    attach,
    hook_takes,
    load_strategy,
)
from framework.venue.errors import ConfigError
from framework.venue.models import MatchRecord

__all__ = ["Kernel", "StrategyBuildError", "StrategyFactory", "StrategyStopped"]

log = logging.getLogger("framework.kernel")

StrategyFactory = Callable[[BasicContext], Strategy]
"""Builds one strategy on the kernel's context (tests and sweeps pass these)."""

Scheduler = Callable[[str, str, float], None]
Submitter = Callable[[str, OrderIntent], str]
StrategyStopped = Callable[[str, str], None]
"""Called with (strategy name, why) when a strategy is stopped for failing."""


class StrategyBuildError(ConfigError):
    """A strategy of the config could not be built; the message names it and says why."""


class Kernel:
    """Bus, portfolio, execution engine and strategies of one runtime, wired one way."""

    def __init__(self, config: Config, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.bus = Bus()
        self.portfolio = Portfolio()
        self.routes: dict[type[Any], Callable[[Any], None]] = {
            **push_routes(self.portfolio, self.bus.publish),
            MatchRecord: self.on_match,
        }
        """The intake's routes, record type -> its consumer (see feeds)."""
        self.sources: list[Source] = []
        """The event sources plugged in (add_source); the runtime runs them."""
        self.strategies: list[Strategy] = []
        self.started: list[str] = []
        """Names of the strategies whose on_start returned (filled by start)."""
        self.start_errors = 0
        """How many on_start calls raised (the bus counts the other hooks' failures)."""
        self._unattached: list[Strategy] = []
        self._engine: ExecutionEngine | None = None
        self._attribute: Callable[[MatchRecord], MatchFilled | None] = self._no_engine
        self._stopped_listeners: list[StrategyStopped] = []
        self.bus.subscribe(Started, self._on_started)
        self.bus.on_owner_stopped(self._owner_stopped)

    def __repr__(self) -> str:
        return f"Kernel(strategies={[s.name for s in self.strategies]})"

    @property
    def engine(self) -> ExecutionEngine:
        """The execution engine (after build_engine)."""
        if self._engine is None:
            raise RuntimeError("Kernel.engine: build_engine() has not run")
        return self._engine

    def _no_engine(self, match: MatchRecord) -> MatchFilled | None:
        raise RuntimeError("Kernel.on_match: build_engine() has not run")

    def build_engine(
        self,
        on_ready: Callable[[], None] | None = None,
        *,
        ids: ClientIdGenerator,
        journal: JournalProtocol | None = None,
        mark_price: Callable[[str], Decimal | None] | None = None,
        random: Callable[[], float] | None = None,
    ) -> ExecutionEngine:
        """The execution engine of the config, publishing on the kernel's bus.

        ``on_ready`` is its driver's wake: a runtime passes this method, bound to its ids
        and the rest, as the factory its executor calls with its own wake (None: nobody
        drives it, as in tests of the kernel alone).
        """
        if self._engine is not None:
            raise RuntimeError("Kernel.build_engine: the engine is built already")
        config = self.config
        self._engine = ExecutionEngine(
            config.execution,
            rules=config.pairs,
            publish=self.bus.publish,
            now_ms=self.clock.now_ms,
            ids=ids,
            journal=journal,
            on_ready=on_ready,
            mark_price=mark_price,
            position=self.portfolio.net_quantity,
            random=random,
        )
        self._attribute = self._engine.attribute
        return self._engine

    def load_strategies(
        self,
        *,
        schedule: Scheduler | None,
        submit: Submitter | None = None,
        factories: Sequence[StrategyFactory] | None = None,
    ) -> list[Strategy]:
        """Build the config's strategies (or factories') on one context and attach them.

        submit defaults to the engine's; a runtime may wrap it (the live node measures
        push-to-submit latency). A constructor that raises is a StrategyBuildError.
        """
        engine = self.engine
        context = BasicContext(
            self.portfolio, self.clock, submit or engine.submit, schedule, orders=engine
        )
        built: list[Strategy] = []
        if factories is not None:
            for i, factory in enumerate(factories):
                name = getattr(factory, "__name__", type(factory).__name__)
                built.append(_build(i, name, factory, context))
        else:
            for i, spec in enumerate(self.config.strategies):
                cls = load_strategy(spec.class_)
                built.append(_build(i, spec.name, _constructor(cls, spec), context))
        # Attached when they start (start): no event reaches a strategy before its on_start.
        self._unattached.extend(built)
        self.strategies.extend(built)
        return built

    def on_strategy_stopped(self, listener: StrategyStopped) -> None:
        """Register listener(name, why), called when a strategy is stopped for failing."""
        self._stopped_listeners.append(listener)

    def all_stopped(self) -> bool:
        """True when there are strategies and every one of them was stopped for failing."""
        return bool(self.strategies) and all(self.bus.is_stopped(s.name) for s in self.strategies)

    def intake(self, record: object) -> None:
        """The one record intake: a decoded record to the consumer of its type."""
        route = self.routes.get(type(record))
        if route is None:
            raise TypeError(f"intake: no source declared {type(record).__name__} (Kernel.feeds)")
        route(record)

    def feeds(self, source: str, records: Iterable[type[Any]]) -> None:
        """Declare that source feeds records of these types, each to its route.

        A type with no route of its own whose event a hook-table row takes is published on
        the bus (its hook's strategies get it); any other is a ConfigError naming it.
        """
        for cls in records:
            if cls not in self.routes:
                if not hook_takes(cls):
                    raise ConfigError(
                        f"source {source}: nothing takes its {cls.__name__} records "
                        "(no intake route, no strategy hook)"
                    )
                self.routes[cls] = self.bus.publish

    def add_source(self, source: Source) -> None:
        """Plug an event source in: its record types declared (feeds), then kept in sources."""
        self.feeds(source.name, source.records)
        self.sources.append(source)

    def on_match(self, match: MatchRecord) -> None:
        """The one match intake: linked by the engine, then published (or held by it)."""
        event = self._attribute(match)
        if event is not None:  # None: held until an answer names its order
            self.bus.publish(event)

    def start(self) -> int:
        """Started (every strategy's on_start), then the engine's restart recovery.

        Returns how many journaled intents recovery queued. Strategies get on_start before
        anything recovery publishes; ``started`` names those whose on_start returned.
        """
        self.bus.publish(Started(self.clock.now()))
        return self.engine.recover()

    def _on_started(self, event: Started) -> None:
        """Attach the strategies and run their on_start, each failure isolated (see module)."""
        pending, self._unattached = self._unattached, []
        for strategy in pending:
            attach(self.bus, strategy)  # its own Started handler never runs: this one is on
        for strategy in pending:
            try:
                strategy.on_start()
            except Exception as exc:
                self._start_failed(strategy, exc)
            else:
                self.started.append(strategy.name)

    def _start_failed(self, strategy: Strategy, exc: Exception) -> None:
        self.start_errors += 1
        why = f"on_start raised {raised(exc)}"
        debug = log.isEnabledFor(logging.DEBUG)
        log.error("strategy %s: %s", strategy.name, why, exc_info=exc if debug else None)
        self.bus.stop_owner(strategy.name, why)
        strategy.stopped = True
        self._notify_stopped(strategy.name, why)

    def _owner_stopped(self, owner: str, exc: BaseException) -> None:
        self._notify_stopped(owner, raised(exc))

    def _notify_stopped(self, name: str, why: str) -> None:
        for listener in self._stopped_listeners:
            listener(name, why)

    def stopping(self, reason: str) -> None:
        """Stopping: every strategy's on_stop (which may still submit)."""
        self.bus.publish(Stopping(self.clock.now(), reason))

    def close(self) -> int:
        """The end of a stop: the engine refuses what is queued and every later intent."""
        return self.engine.close()


def _constructor(cls: type[Strategy], spec: StrategyConfig) -> StrategyFactory:
    def make(context: BasicContext) -> Strategy:
        return cls(spec.name, context, spec.params, pairs=spec.pairs)

    return make


def _build(index: int, name: str, make: StrategyFactory, context: BasicContext) -> Strategy:
    try:
        return make(context)
    except Exception as exc:
        raise StrategyBuildError(f"strategies[{index}] ({name}): {raised(exc)}") from exc
