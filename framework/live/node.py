"""The live node: wires a Config to clients, engine and strategies under one anyio task group.

``Node(config)``, ``await node.run()``, then ``node.summary()``. The start-up, in order, is
:mod:`framework.live.node_start`; the stop protocol (drain, last poll, ``cancel_on_stop``, a
second signal skipping the waiting) is :mod:`framework.live.node_stop`; this module keeps
the control (signals, ``request_stop``), the callbacks the parts are wired to, and the run's
summary. Signals are watched from before the strategies start until ``run`` returns.

A strategy whose on_start raises is stopped (the kernel logs it in one line) and left out of
the ``strategies started`` line. When every strategy has been stopped for failing and
``node.exit_when_all_stopped`` is true (the default), the node stops by itself
(``Node.all_stopped``).

:meth:`Node.summary` gives the tallies and the trading state (the ``summary`` line of
``run.py live``); the metrics endpoint's trading gauges read the same state.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import attrs
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.config import Config
from framework.engine.clock import Clock
from framework.engine.events import ConnectionChanged, OrderUpdate, Timer
from framework.engine.execution import ExecutionEngine
from framework.engine.intents import OrderIntent
from framework.engine.kernel import Kernel
from framework.engine.risk import STALE_MARKET
from framework.engine.strategy import Strategy
from framework.live.embedded import VenueAccess
from framework.live.executor import LiveExecutor
from framework.live.journal import Journal
from framework.live.market_feed import MarketFeed
from framework.live.metrics import Feeds, Metrics, portfolio_feeds, summary_tallies
from framework.live.node_start import start, start_tasks
from framework.live.node_stop import Stop
from framework.live.poller import MatchPoller
from framework.live.recorder import Recorder
from framework.live.rest import RestClient
from framework.live.startup import FatalError
from framework.live.stream import RestResync, StreamClient
from framework.live.summary import SUMMARY_KEYS, market_counters, run_summary
from framework.live.trading import TradingState
from framework.live.venue_jobs import OpenOrderCheck, PositionRefresh
from framework.live.wallclock import WallClock
from framework.venue.models import MatchRecord

if TYPE_CHECKING:
    from framework.engine.venue import Venue
    from framework.paper.shadow import ShadowVenue
    from framework.paper.venue import WallClockPaper

__all__ = ["SUMMARY_KEYS", "FatalError", "Node"]

log = logging.getLogger("framework.node")

_T = TypeVar("_T")


@attrs.define
class _Tallies:
    pushes: int = 0
    matches: int = 0
    stale_refusals: int = 0


class Node:
    """One live daemon: ``Node(config)``, ``await node.run()``, then ``node.summary()``."""

    def __init__(self, config: Config, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or WallClock()
        self.kernel = Kernel(config, self.clock)
        self.bus = self.kernel.bus
        self.portfolio = self.kernel.portfolio
        self.tallies = _Tallies()
        self.trading = TradingState(list(config.pairs))
        self.metrics = (
            Metrics(lambda: summary_tallies(self.summary()), self._feeds())
            if config.metrics.enabled
            else None
        )
        self.metrics_port: int | None = None
        self.strategies: list[Strategy] = self.kernel.strategies
        self.stop_reason = ""
        self.started = anyio.Event()
        self.all_stopped = False
        """True when the node stopped because every strategy was stopped for failing."""
        self._stop = anyio.Event()
        self._stopper = Stop(self)
        self._interrupted = False  # a second signal came
        self.kernel.on_strategy_stopped(self._strategy_stopped)
        self._market = bool(config.market.pairs or config.market.source)
        if self._market:  # the summary counts the market orders refused as stale
            self.bus.subscribe(OrderUpdate, self._on_order_update)
        self._trigger: tuple[str, float] | None = None  # what is being handled, since when
        self._began = time.monotonic()
        self.venue: VenueAccess | None = None
        self.rest: RestClient | None = None
        self.journal: Journal | None = None
        self.engine: ExecutionEngine | None = None
        self.executor: LiveExecutor | None = None
        self.stream: StreamClient | None = None
        self.market_feed: MarketFeed | None = None
        self.recorder: Recorder | None = None
        self.poller: MatchPoller | None = None
        self.order_check: OpenOrderCheck | None = None
        self.position_refresh: PositionRefresh | None = None
        self.resync: RestResync | None = None
        self.scheduler: AsyncIOScheduler | None = None
        self.orders: Venue | None = None
        """Where orders go: the REST client, or the paper venue in paper mode."""
        self.paper: WallClockPaper | None = None
        """The in-process paper venue (``venue.mode: paper``), else None."""
        self.shadow: ShadowVenue | None = None
        """With ``shadow.enabled``: the live venue with a paper venue beside it, else None."""
        self.shadow_alarms: dict[str, int] = {}
        self.shadow_report: str | None = None
        self.source_intake: Callable[[Any], None] = self.kernel.intake
        """Where event sources feed (through the paper venue in paper mode)."""

    # ---------------------------------------------------------------------------- control

    def request_stop(self, reason: str) -> None:
        """Ask the node to stop gracefully (idempotent: the first reason is kept)."""
        if not self._stop.is_set():
            self.stop_reason = reason
            self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once a stop has been requested."""
        return self._stop.is_set()

    @property
    def interrupted(self) -> bool:
        """True when a second signal came while stopping (``run.py live`` exits 130)."""
        return self._interrupted

    def force(self, why: str) -> None:
        """Skip the rest of the stop's waiting (what a second signal does)."""
        self._stopper.force(why)

    def _feeds(self) -> Feeds:
        pairs = list(self.config.pairs)
        return Feeds(
            **portfolio_feeds(self.portfolio, pairs, self.config.coins()),
            pnl=self.trading.pnl,
            resting=self.trading.resting,
            unknown=lambda: self.engine.unknown_count if self.engine is not None else 0,
            stopped=lambda: self.bus.stopped,
        )

    def positions(self) -> dict[str, Decimal]:
        """Pair -> net signed quantity, for the pairs with an open position."""
        out = {}
        for pair in self.config.pairs:
            quantity = self.portfolio.net_quantity(pair)
            if quantity:
                out[pair] = quantity
        return out

    def summary(self) -> dict[str, Any]:
        """The run's tallies: SUMMARY_KEYS first, then the engine's, stream's and poller's.

        Then the trading state: ``positions`` (open ones, net signed quantity), ``resting``
        (accepted limit orders not filled, per pair) and ``pnl`` per pair (realized and fees
        of this node's matches, unrealized as of the last REST position snapshot).
        """
        summary = run_summary(
            counters=dict(self.engine.counters()) if self.engine is not None else {},
            stream=self.stream.stats.as_dict() if self.stream is not None else {},
            poller=self.poller.stats.as_dict() if self.poller is not None else {},
            pushes=self.tallies.pushes,
            matches=self.tallies.matches,
            bus=self.bus,
            start_errors=self.kernel.start_errors,
            portfolio=self.portfolio,
            trading=self.trading,
            positions=self.positions(),
            drain_skipped=self._stopper.forced,
            uptime_s=round(time.monotonic() - self._began, 3),
            reason=self.stop_reason,
            paper=self.config.venue.is_paper,
            market=market_counters(self.market_feed, stale_refusals=self.tallies.stale_refusals)
            if self._market
            else None,
        )
        if self.shadow is not None:
            ledger = self.shadow.ledger
            summary["shadow"] = {
                "outcomes": dict(sorted(ledger.outcomes.items())),
                "open": len(ledger.open),
                "alarms": dict(self.shadow_alarms),
                "pairs": {p: ledger.summary(p).text() for p in ledger.pairs()},
                "report": self.shadow_report,
            }
        return summary

    # -------------------------------------------------------------------------------- run

    async def run(self, *, duration: float | None = None) -> dict[str, Any]:
        """Run until a signal, the duration or request_stop; returns the summary."""
        self._began = time.monotonic()
        error: Exception | None = None
        # The signal watcher lives in this outer group, so it outlasts everything run opens:
        # a signal while the journal, clients and venue close is handled, never a kill.
        async with anyio.create_task_group() as watcher:
            try:
                await self._run(watcher, duration)
            except Exception as exc:  # raised as itself below, not inside a group
                error = exc
            finally:
                watcher.cancel_scope.cancel()
        if error is not None:
            raise error
        log.info("stopped", extra={"reason": self.stop_reason})
        return self.summary()

    async def _run(self, watcher: anyio.abc.TaskGroup, duration: float | None) -> None:
        async with AsyncExitStack() as stack:
            # Start-up happens outside the task group so a FatalError arrives unwrapped.
            await start(self, stack)
            # Signals are watched before strategies start: a SIGTERM from then on is a
            # graceful stop, never the default handler's kill.
            await watcher.start(self._watch_signals)
            async with anyio.create_task_group() as tg:
                await start_tasks(self, tg)
                with anyio.move_on_after(float("inf") if duration is None else duration):
                    await self._stop.wait()
                if duration is not None:
                    self.request_stop(f"duration {duration:g} s elapsed")
                await self._stopper.run()
                tg.cancel_scope.cancel()
            self._stopper.waited = True
            if self._stopper.forced:
                self._stopper.report_skipped()

    async def _watch_signals(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for signum in signals:
                name = signal.Signals(signum).name
                if self._stop.is_set():
                    self._interrupted = True
                    self.force(f"second signal ({name})")
                else:
                    log.info("signal received", extra={"signal": name})
                    self.request_stop(name)

    def _strategy_stopped(self, name: str, why: str) -> None:
        self.check_all_stopped()

    def check_all_stopped(self) -> None:
        """Stop the node when every strategy was stopped for failing (if configured)."""
        if not self.config.node.exit_when_all_stopped or not self.kernel.all_stopped():
            return
        if not self._stop.is_set():
            self.all_stopped = True
            stopped = self.bus.stopped
            log.error(
                "every strategy has been stopped for failing: %s",
                "; ".join(f"{name}: {why}" for name, why in sorted(stopped.items())),
            )
            self.request_stop("every strategy stopped for failing")

    # -------------------------------------------------------------------------- callbacks

    def on_frame(self, frame: object) -> None:
        """A decoded push of the stream: counted, then into the kernel."""
        self.tallies.pushes += 1
        self.timed("push", self.kernel.intake, frame)

    def timed(self, trigger: str, handler: Callable[[_T], None], item: _T) -> None:
        """handler(item), noting the trigger and start time for the latency histogram."""
        if self.metrics is None:
            handler(item)
            return
        self._trigger = (trigger, time.perf_counter())
        try:
            handler(item)
        finally:
            self._trigger = None

    def submit(self, strategy: str, intent: OrderIntent) -> str:
        """A strategy's intent to the engine; its tick-to-submit latency observed."""
        assert self.engine is not None
        client_order_id = self.engine.submit(strategy, intent)
        if self._trigger is not None and self.metrics is not None:
            trigger, t0 = self._trigger
            self.metrics.submit_latency.labels(trigger).observe(time.perf_counter() - t0)
        return client_order_id

    def schedule(self, strategy: str, name: str, every_s: float) -> None:
        """A strategy's timer, as a scheduler job publishing Timer on the event loop."""
        assert self.scheduler is not None
        publish: Callable[[Timer], None] = self.bus.publish
        clock = self.clock

        # A coroutine job runs on the event loop; a plain function would run in apscheduler's
        # thread pool, and the bus and strategies are single-threaded.
        async def fire() -> None:
            self.timed("timer", publish, Timer(name, strategy, clock.now()))

        self.scheduler.add_job(
            fire,
            "interval",
            seconds=every_s,
            id=f"timer:{strategy}:{name}",
            name=f"timer {name} of {strategy}",
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )

    def on_match(self, match: MatchRecord) -> None:
        """A polled match: counted, then into the kernel."""
        assert self.engine is not None
        self.tallies.matches += 1
        self.timed("match", self.kernel.on_match, match)

    def _on_order_update(self, update: OrderUpdate) -> None:
        if update.code == STALE_MARKET:
            self.tallies.stale_refusals += 1

    def on_stream_state(self, state: str, detail: str) -> None:
        """The stream's state: logged, a gauge, and ConnectionChanged on the bus."""
        log.info("stream %s", state, extra={"detail": detail} if detail else None)
        if self.metrics is not None:
            self.metrics.set_state("stream", state)
        self.bus.publish(ConnectionChanged("stream", state, detail))

    def on_poller_state(self, state: str, detail: str) -> None:
        """The match poller's state: a gauge, and ConnectionChanged on the bus."""
        if self.metrics is not None:
            self.metrics.set_state("poller", "running" if state == "ok" else state)
        self.bus.publish(ConnectionChanged("poller", state, detail))
