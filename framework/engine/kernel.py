"""The kernel: what live trading and backtesting share, built one way for both runtimes.

A runtime (the live :class:`~framework.live.node.Node`, a
:class:`~framework.backtest.runner.Backtest`) provides only its edges: the clock, the client
id generator and journal, how timers are scheduled, and where batches go (it drives
``kernel.engine`` with its executor). The kernel builds and wires everything else from the
settings it names (:class:`KernelSettings`: execution, pairs, strategies, market; a
:class:`~framework.config.Config` has them), the risk gate's reference price and market
staleness included (:mod:`framework.engine.reference`: it sees every market record and
match), and runs the one lifecycle::

    kernel = Kernel(settings, clock)                # bus, portfolio, frame intake
    executor = Executor(partial(kernel.build_engine, ids=...), ...)
    #   the executor builds the engine with its own wake as on_ready: wired at construction
    kernel.load_strategies(schedule=...)            # context, strategies, dispatch
    for step in kernel.starting(): ...              # Snapshot; then Started, recovery
    kernel.feeds("stream", types) / add_source(s)   # each record type to its consumer
    ... edges feed kernel.intake (records) and kernel.on_match (match polls) ...
    for step in kernel.stopping_steps(reason): ...  # Settle; Stopping, cancel on stop;
                                                    # Settle; close; Drain

The start and the stop are sans-I/O sequences of steps: the kernel does what is pure
(publishing Started and Stopping, recovery, ``execution.cancel_on_stop``, closing the engine)
and yields a step wherever the runtime must do I/O or let time pass (read the venue's state;
send, answer and poll until quiet; wait for what is in flight). The live node runs them on
the wall clock, a backtest on virtual time: both runtimes mean the same by every setting.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import attrs

from framework.engine.bus import Bus
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import Clock
from framework.engine.events import MatchFilled, Started, Stopping
from framework.engine.execution import ExecutionEngine
from framework.engine.execution_settings import ExecutionSettings
from framework.engine.intents import OrderIntent
from framework.engine.journaling import JournalProtocol
from framework.engine.market import MarketView, market_routes
from framework.engine.portfolio import Portfolio, push_routes
from framework.engine.raised import raised
from framework.engine.reference import MarketSettings, ReferencePrices
from framework.engine.strategy import (
    BasicContext,
    Source,
    Strategy,
    attach,
    hook_takes,
    load_source,
    load_strategy,
)
from framework.venue.errors import ConfigError
from framework.venue.models import MatchRecord
from framework.venue.rules import PairRules

__all__ = [
    "Drain",
    "Kernel",
    "KernelSettings",
    "Settle",
    "Snapshot",
    "StrategyBuildError",
    "StrategyFactory",
    "StrategySpec",
    "StrategyStopped",
    "build_strategy",
]

log = logging.getLogger("framework.kernel")

MAX_HELD = 10_000
"""Market records held for the hooks while the strategies have not started (a live node
hears its market before on_start); beyond it, the view alone keeps them."""

StrategyFactory = Callable[[BasicContext], Strategy]
"""Builds one strategy on the kernel's context (tests and sweeps pass these)."""

Scheduler = Callable[[str, str, float], None]
Submitter = Callable[[str, OrderIntent], str]
StrategyStopped = Callable[[str, str], None]
"""Called with (strategy name, why) when a strategy is stopped for failing."""


class SourceSpec(Protocol):
    """One event source to build: its unique name, ``module:Class`` and free params."""

    @property
    def name(self) -> str: ...

    @property
    def class_(self) -> str: ...

    @property
    def params(self) -> dict[str, Any]: ...


class StrategySpec(SourceSpec, Protocol):
    """One strategy to build: a source's three and the pairs it trades (None: from its
    params, else every pair)."""

    @property
    def pairs(self) -> list[str] | None: ...


class KernelSettings(Protocol):
    """What the kernel reads of a configuration (a Config has it): the execution engine's
    settings, the pairs traded with their rules, the strategies to build, the market feeds'
    staleness."""

    @property
    def execution(self) -> ExecutionSettings: ...

    @property
    def pairs(self) -> Mapping[str, PairRules]: ...

    @property
    def strategies(self) -> Sequence[StrategySpec]: ...

    @property
    def market(self) -> MarketSettings: ...


@attrs.frozen
class Snapshot:
    """Start step: the runtime reads the venue's state (balances, positions, open orders)."""


@attrs.frozen
class Settle:
    """Stop step: send, answer and poll matches until quiet, at most ``until_s`` after the
    stop began (what strategies submit in reaction is sent too)."""

    until_s: float


@attrs.frozen
class Drain:
    """Stop step: what is in flight is answered; nothing new leaves (the engine is closed)."""


class StrategyBuildError(ConfigError):
    """A strategy of the config could not be built; the message names it and says why."""


class Kernel:
    """Bus, portfolio, execution engine and strategies of one runtime, wired one way."""

    def __init__(self, settings: KernelSettings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock
        self.bus = Bus()
        self.portfolio = Portfolio()
        self.market = MarketView(clock)
        """The market as last heard (strategies read it as ``self.market``)."""
        self.references = ReferencePrices(
            self.market,
            pairs=settings.pairs,
            configured=settings.execution.risk.reference_prices,
            settings=settings.market,
        )
        """The risk gate's reference price and staleness per pair (fills seen by on_match)."""
        self.routes: dict[type[Any], Callable[[Any], None]] = {
            **push_routes(self.portfolio, self.bus.publish),
            **market_routes(self.market, self._publish_market),
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
        self.recovered = 0
        """How many journaled intents the start's recovery queued to be sent."""
        self.refused = 0
        """How many queued intents the stop's close refused (9013, never sent)."""
        self._unattached: list[Strategy] = []
        self._held: list[Any] | None = []  # market records heard before the start (bounded)
        self.held_dropped = 0
        """Market records heard before the start beyond MAX_HELD: kept by the view only."""
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
        random: Callable[[], float] | None = None,
    ) -> ExecutionEngine:
        """The execution engine of the config, publishing on the kernel's bus.

        ``on_ready`` is its driver's wake: a runtime passes this method, bound to its ids
        and the rest, as the factory its executor calls with its own wake (None: nobody
        drives it, as in tests of the kernel alone).
        """
        if self._engine is not None:
            raise RuntimeError("Kernel.build_engine: the engine is built already")
        settings = self.settings
        self._engine = ExecutionEngine(
            settings.execution,
            rules=settings.pairs,
            publish=self.bus.publish,
            now_ms=self.clock.now_ms,
            ids=ids,
            journal=journal,
            on_ready=on_ready,
            mark_price=self.references.price,
            position=self.portfolio.net_quantity,
            random=random,
            stale=self.references.stale,
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
            self.portfolio,
            self.clock,
            submit or engine.submit,
            schedule,
            orders=engine,
            market=self.market,
        )
        built: list[Strategy] = []
        if factories is not None:
            for i, factory in enumerate(factories):
                name = getattr(factory, "__name__", type(factory).__name__)
                built.append(_build(i, name, factory, context))
        else:
            for i, spec in enumerate(self.settings.strategies):
                built.append(build_strategy(i, spec, context))
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

    def load_sources(self, specs: Iterable[SourceSpec]) -> None:
        """Build each configured source (its class called with name and params), plug it in."""
        for spec in specs:
            self.add_source(load_source(spec.class_)(spec.name, spec.params))

    def on_match(self, match: MatchRecord) -> None:
        """The one match intake: its price kept as the pair's last own fill, then linked by
        the engine and published (or held by it)."""
        self.references.filled(match)
        event = self._attribute(match)
        if event is not None:  # None: held until an answer names its order
            self.bus.publish(event)

    def starting(self) -> Iterator[Snapshot]:
        """The start: Snapshot (the runtime's), then Started, then the restart recovery.

        ``recovered`` says how many journaled intents recovery queued. Strategies get
        on_start before anything recovery publishes; ``started`` names those whose on_start
        returned.
        """
        yield Snapshot()
        self.bus.publish(Started(self.clock.now()))
        held, self._held = self._held or [], None
        # Nothing is held from now on: the market routes publish straight to the bus (one
        # call fewer per record; a route taken before still goes by _publish_market).
        self.routes.update(market_routes(self.market, self.bus.publish))
        for record in held:  # heard before on_start: the hooks hear them now, in order
            self.bus.publish(record)
        if self.held_dropped:
            log.warning("%d market records heard before the start exceeded %d: only"
                        " self.market kept them, the hooks did not hear them",
                        self.held_dropped, MAX_HELD)  # fmt: skip
        self.recovered = self.engine.recover()

    def start(self) -> int:
        """The start with nothing to read at the Snapshot step; returns what recovery queued."""
        for _ in self.starting():
            pass
        return self.recovered

    def _publish_market(self, record: Any) -> None:
        """A market record to the hooks; before the start, held for them (at most MAX_HELD)."""
        held = self._held
        if held is None:
            self.bus.publish(record)
        elif len(held) < MAX_HELD:
            held.append(record)
        else:
            self.held_dropped += 1

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

    def stopping_steps(self, reason: str) -> Iterator[Settle | Drain]:
        """The stop: Settle (half the drain timeout), Stopping (on_stop), the cancels of
        ``execution.cancel_on_stop``, Settle (to the drain timeout), close, Drain.

        ``refused`` says how many queued intents the close refused (9013). Half the time comes
        before on_stop: a strategy that never goes quiet cannot keep on_stop from running.
        """
        execution = self.settings.execution
        yield Settle(execution.drain_timeout_s / 2)
        self.stopping(reason)  # on_stop runs whatever happened before
        log.info("strategies stopped")
        if execution.cancel_on_stop:
            asked = self.engine.cancel_all(None)
            log.info("stop: cancelling the open orders (execution.cancel_on_stop)",
                     extra={"orders": asked})  # fmt: skip
        yield Settle(execution.drain_timeout_s)
        if not self.engine.closed:
            self.refused = self.close()  # nothing new leaves from here on
        yield Drain()


def build_strategy(index: int, spec: StrategySpec, context: BasicContext) -> Strategy:
    """strategies[index] of the settings, built on context; StrategyBuildError naming it when
    its constructor raises (what loading its class raises is raised as it is)."""
    cls = load_strategy(spec.class_)
    return _build(index, spec.name, _constructor(cls, spec), context)


def _constructor(cls: type[Strategy], spec: StrategySpec) -> StrategyFactory:
    def make(context: BasicContext) -> Strategy:
        return cls(spec.name, context, spec.params, pairs=spec.pairs)

    return make


def _build(index: int, name: str, make: StrategyFactory, context: BasicContext) -> Strategy:
    try:
        return make(context)
    except Exception as exc:
        raise StrategyBuildError(f"strategies[{index}] ({name}): {raised(exc)}") from exc
