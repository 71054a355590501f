"""The live node: wires a Config to clients, engine and strategies under one anyio task group.

Start-up, one log line per step: venue (the embedded twin when ``venue.embedded``) -> REST
client -> journal -> execution engine and executor -> strategies -> initial REST sync
(positions, balances; a refused key or an unreachable venue is fatal here, with a one-line
reason) -> match cursors -> scheduler and ``Started`` (strategies' on_start) -> stream, market
(:class:`MarketFeed`), executor and metrics tasks. The stream runs the resync after every
(re)subscribe; the market feed stops at the stop's first step.

Stop, on SIGINT/SIGTERM, the duration or :meth:`Node.request_stop` (a graceful stop never
makes an order of unknown outcome): timers and polls stop, then the kernel's stop steps run
on the wall clock (:meth:`Kernel.stopping_steps`: in-flight batches answered and a last match
poll, ``Stopping``, ``execution.cancel_on_stop``, the same settling, the engine closed with
9013 for what is still queued), all within ``execution.drain_timeout_s``; then the tasks are
cancelled and the journal is closed. A second signal (``Node.interrupted``) skips the
waiting: what is in flight then is UNKNOWN, and a warning says what was skipped. Signals are
watched from before the strategies start until ``run`` returns.

A strategy whose on_start raises is stopped (the kernel logs it in one line) and left out of
the ``strategies started`` line. When every strategy has been stopped for failing and
``node.exit_when_all_stopped`` is true (the default), the node stops by itself
(``Node.all_stopped``).

:meth:`Node.summary` gives the tallies and the trading state (the ``summary`` line of
``run.py live``); the metrics endpoint's trading gauges read the same state.
"""

from __future__ import annotations

import gc
import logging
import math
import random
import signal
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from decimal import Decimal
from functools import partial
from typing import Any, Final, TypeVar

import anyio
import anyio.abc
import attrs
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.config import Config
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import Clock
from framework.engine.events import ConnectionChanged, Timer
from framework.engine.execution import ExecutionEngine
from framework.engine.intents import OrderIntent
from framework.engine.kernel import Kernel, Settle, Snapshot
from framework.engine.strategy import Source, Strategy
from framework.live.embedded import VenueAccess, open_venue
from framework.live.executor import LiveExecutor
from framework.live.journal import Journal
from framework.live.market_feed import MarketFeed
from framework.live.metrics import Feeds, Metrics, portfolio_feeds, serve_metrics, summary_tallies
from framework.live.poller import MatchPoller
from framework.live.recorder import Recorder
from framework.live.rest import RestClient
from framework.live.startup import FatalError, initial_sync
from framework.live.stream import RestResync, StreamClient
from framework.live.summary import SUMMARY_KEYS, run_summary
from framework.live.trading import TradingState
from framework.live.venue_jobs import OpenOrderCheck, PositionRefresh
from framework.live.wallclock import WallClock
from framework.output_path import unwritable
from framework.venue.codec import push_types
from framework.venue.errors import ConfigError, FrameworkError
from framework.venue.models import MatchRecord
from framework.venue.signing import make_signer

__all__ = ["SUMMARY_KEYS", "FatalError", "Node"]

log = logging.getLogger("framework.node")

_T = TypeVar("_T")

LAST_POLL_TIMEOUT_S: Final = 5.0
TEMPORARY_JOURNAL: Final = ""
"""The journal without journal.path (embedded twin): SQLite's private temporary database. As
with ":memory:" nothing survives the run, but only its page cache stays in memory; in memory,
every intent's row (about 130 bytes) would stay for the whole run."""


@attrs.define
class _Tallies:
    pushes: int = 0
    matches: int = 0


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
        self._force = False  # the stop's waiting was cut short
        self._interrupted = False  # a second signal came
        self._waited = False  # the stop's waiting is over
        self._unknown_at_force = 0
        self.kernel.on_strategy_stopped(self._strategy_stopped)
        self._drain_scope: anyio.CancelScope | None = None
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

    # ---------------------------------------------------------------------------- control

    def request_stop(self, reason: str) -> None:
        """Ask the node to stop gracefully (idempotent: the first reason is kept)."""
        if not self._stop.is_set():
            self.stop_reason = reason
            self._stop.set()

    @property
    def interrupted(self) -> bool:
        """True when a second signal came while stopping (``run.py live`` exits 130)."""
        return self._interrupted

    def force(self, why: str) -> None:
        """Skip the rest of the stop's waiting (what a second signal does)."""
        if self._waited:
            log.warning("%s: the stop has nothing left to wait for", why)
            return
        if not self._force:
            self._unknown_at_force = self.engine.unknown_count if self.engine is not None else 0
        log.warning("%s: not waiting for the drain", why)
        self._force = True
        if self._drain_scope is not None:
            self._drain_scope.cancel()

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
        return run_summary(
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
            drain_skipped=self._force,
            uptime_s=round(time.monotonic() - self._began, 3),
            reason=self.stop_reason,
        )

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
            await self._start(stack)
            # Signals are watched before strategies start: a SIGTERM from then on is a
            # graceful stop, never the default handler's kill.
            await watcher.start(self._watch_signals)
            async with anyio.create_task_group() as tg:
                await self._start_tasks(tg)
                with anyio.move_on_after(float("inf") if duration is None else duration):
                    await self._stop.wait()
                if duration is not None:
                    self.request_stop(f"duration {duration:g} s elapsed")
                await self._shutdown()
                tg.cancel_scope.cancel()
            self._waited = True
            if self._force:
                self._report_skipped()

    def _report_skipped(self) -> None:
        """One warning saying what the second signal skipped."""
        unknown = self.engine.unknown_count if self.engine is not None else 0
        log.warning(
            "stop cut short by a second signal: skipped waiting for the answers and the last "
            "match poll; %d order(s) left UNKNOWN by it, %d queued intent(s) refused (9013)",
            max(0, unknown - self._unknown_at_force),
            self.kernel.refused,
        )

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

    async def _start(self, stack: AsyncExitStack) -> None:
        config = self.config
        venue = self.venue = await stack.enter_async_context(open_venue(config))
        signer = make_signer(venue.sign_type, venue.api_secret.reveal())
        if config.recording.path is not None:
            path = config.recording.path
            problem = unwritable(path, directory=False)
            if problem is not None:
                raise FatalError(f"cannot write the recording to {path}: {problem}")
            self.recorder = Recorder(
                config.recording.path,
                now_ms=self.clock.now_ms,
                redact=[venue.api_key, venue.api_secret.reveal(), *config.secrets()],
            )
            stack.callback(self.recorder.close)
        rest = self.rest = await stack.enter_async_context(
            RestClient(
                venue.base_url,
                venue.api_key,
                signer,
                language=config.venue.language,
                timeout=config.venue.timeout_s,
                now_ms=self.clock.now_ms,
                observer=self.recorder.on_rest if self.recorder is not None else None,
                order_paths=config.venue.order_paths,
            )
        )
        log.info("rest client ready", extra={"base_url": venue.base_url})
        path = config.journal.path or TEMPORARY_JOURNAL
        try:
            self.journal = journal = Journal.open(path)
        except (OSError, FrameworkError) as exc:
            raise FatalError(f"journal.path: {exc}") from None
        stack.callback(self._close_journal)
        log.info("journal open", extra={"path": path or "(temporary, removed at stop)"})
        self.portfolio.seed_log_ids(
            {c: i for c in config.coins() if (i := journal.get_log_id(c)) is not None}
        )
        self.executor = LiveExecutor(
            partial(
                self.kernel.build_engine,
                ids=ClientIdGenerator(config.node.name, journal),
                journal=journal,
                random=random.SystemRandom().random,
            ),
            rest,
            journal=journal,
        )
        self.engine = self.executor.engine
        log.info("execution engine ready", extra={"node": config.node.name})
        self.scheduler = AsyncIOScheduler(timezone="UTC")
        # Registered after the REST client, so it runs before the client closes, on any exit.
        stack.callback(self._stop_scheduler)
        self.trading.follow(self.bus, self.portfolio, self.engine.status)
        try:
            self.kernel.load_strategies(schedule=self._schedule, submit=self._submit)
            self.kernel.feeds("stream", push_types())  # every push type the stream decodes
            self.kernel.load_sources(config.sources)  # run as tasks (_start_tasks)
            self.market_feed = MarketFeed.plug(
                config, self.kernel, ws_url=venue.ws_url, builder=rest.builder, send=rest.send,
                intake=partial(self._timed, "market", self.kernel.intake), metrics=self.metrics,
                recorder=self.recorder,
            )  # fmt: skip
        except ConfigError as exc:  # a strategy or source that cannot be built: one line
            raise FatalError(str(exc)) from None
        for spec in config.strategies:
            log.info("strategy loaded", extra={"strategy": spec.name, "class": spec.class_})
        pairs, coins = list(config.pairs), config.coins()
        self.poller = MatchPoller(
            rest,
            pairs=pairs,
            interval_s=config.polling.match_interval_s,
            page_size=config.polling.page_size,
            store=journal,
            on_match=self._on_match,
            backfill=config.polling.backfill,
            on_state=self._on_poller_state,
            reread_ids=config.polling.reread_ids,
            reread_age_s=config.polling.reread_age_s,
        )
        snapshots = partial(
            RestResync, rest, pairs=pairs, coins=coins, portfolio=self.portfolio,
            publish=self.bus.publish, on_snapshot=self.trading.on_snapshot,
        )  # fmt: skip
        resync = self.resync = snapshots(poller=self.poller)
        await self._initial_sync(snapshots())
        self.stream = StreamClient(
            venue.ws_url,
            rest.builder,
            pairs=pairs,
            coins=coins,
            on_frame=self._on_frame_handler(),
            on_state=self._on_stream_state,
            on_raw=self.recorder.on_ws if self.recorder is not None else None,
            resync=resync,
            clock=self.clock,
            ack_timeout_s=config.stream.ack_timeout_s,
            ping_interval_s=config.stream.ping_interval_s,
            silence_timeout_s=config.stream.silence_timeout_s,
            backoff_initial_s=config.stream.backoff_initial_s,
            backoff_max_s=config.stream.backoff_max_s,
        )

    async def _initial_sync(self, resync: RestResync) -> None:
        """The first REST calls (start-up.initial_sync), before strategies start."""
        assert self.venue is not None and self.poller is not None
        assert self.engine is not None and self.rest is not None
        await initial_sync(
            resync,
            self.poller,
            self.engine,
            self.rest,
            pairs=list(self.config.pairs),
            base_url=self.venue.base_url,
        )

    async def _start_tasks(self, tg: anyio.abc.TaskGroup) -> None:
        assert self.executor is not None and self.stream is not None
        assert self.scheduler is not None and self.poller is not None
        if self.metrics is not None:
            cfg = self.config.metrics
            try:
                self.metrics_port = await tg.start(serve_metrics, self.metrics, cfg.host, cfg.port)
            except OSError as exc:
                raise FatalError(f"metrics: {exc}") from None
        self.scheduler.start()
        self.poller.start(self.scheduler)
        interval = self.config.polling.open_orders_interval_s
        engine, rest = self.engine, self.rest
        if interval > 0 and engine is not None and rest is not None and engine.cancels.available:
            self.order_check = OpenOrderCheck(
                engine, rest, pairs=list(self.config.pairs), interval_s=interval
            )
            self.order_check.start(self.scheduler)
        if self.resync is not None:
            self.position_refresh = PositionRefresh.started(
                self.scheduler, self.resync, self.config
            )
        log.info(
            "scheduler started", extra={"match_interval_s": self.config.polling.match_interval_s}
        )
        # on_start first, always: what recovery publishes (UNKNOWN intents, kept matches)
        # reaches strategies that have set themselves up.
        # The kernel's start. Its Snapshot step (balances, positions, match cursors, open
        # orders) was _initial_sync, run in _start so that a FatalError arrives unwrapped.
        if self.market_feed is not None:  # market: section; heard before on_start
            self.market_feed.start(tg, self.scheduler)
            await self.market_feed.ready(self.config.venue.timeout_s)
        for step in self.kernel.starting():
            assert isinstance(step, Snapshot) and self.resync is not None
        # What the start made lives as long as the daemon: out of the collector's sight (its
        # garbage collected first), a full collection's pause goes from ~40 to 0.4 ms (demo).
        gc.collect()
        gc.freeze()
        log.info("strategies started", extra={"strategies": list(self.kernel.started)})
        log.info("journal recovered", extra={"intents_requeued": self.kernel.recovered})
        self._check_all_stopped()
        tg.start_soon(self.executor.run)
        if not self._stop.is_set():  # every strategy failed at on_start: no stream to open
            for source in self.kernel.sources:
                tg.start_soon(self._run_source, source)
            tg.start_soon(self.stream.run)
            log.info("stream starting", extra={"ws_url": self.stream.ws_url})
        self.started.set()

    async def _run_source(self, source: Source) -> None:
        """Run an event source feeding the intake; its failure is logged, the node goes on."""
        try:
            await source.run(self.kernel.intake)
        except Exception:
            log.exception("source %s failed; it feeds nothing more", source.name)

    def _stop_scheduler(self) -> None:
        if self.market_feed is not None:
            self.market_feed.stop()
        if self.poller is not None:
            self.poller.shutdown()
        if self.order_check is not None:
            self.order_check.shutdown()
        if self.position_refresh is not None:
            self.position_refresh.shutdown()
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    async def _shutdown(self) -> None:
        """The stop protocol (module docstring): nothing is left in flight or of unknown fate.

        Timers and polls stop; what is queued or in flight is sent and answered, and a last
        poll delivers late fills (strategies may react, and what they submit is sent too);
        then on_stop runs (always) and may still submit, and the same settling follows. Then
        the engine closes: whatever is still queued, and every later submit, is refused with
        9013 and never sent, and what is in flight is answered. All of it within
        ``execution.drain_timeout_s``; a second signal skips the waiting.
        """
        log.info("stopping", extra={"reason": self.stop_reason})
        self._stop_scheduler()
        began = anyio.current_time()
        late = False
        for step in self.kernel.stopping_steps(self.stop_reason):  # the kernel's stop steps
            if isinstance(step, Settle):
                # Shielded from the task group, but a second signal cancels it (_watch_signals).
                with self._shielded(began + step.until_s) as scope:
                    await self._settle()
                late |= scope.cancel_called
                continue
            # Drain: what is in flight is answered (or times out at the REST timeout: UNKNOWN
            # then, truthfully), never cut off by the stop.
            with self._shielded(anyio.current_time() + self.config.venue.timeout_s + 1):
                if self.executor is not None and not self._force:
                    await self.executor.drain(math.inf)
        timeout = self.config.execution.drain_timeout_s
        if late and not self._force:
            log.warning("stop: drain_timeout_s %.1f s passed with work outstanding", timeout)
        if self.journal is not None:
            for coin in self.config.coins():
                log_id = self.portfolio.log_id(coin)
                if log_id is not None:
                    self.journal.set_log_id(coin, log_id)

    def _shielded(self, deadline: float) -> anyio.CancelScope:
        """A shielded scope ending at deadline, which a second signal cancels."""
        self._drain_scope = anyio.CancelScope(shield=True, deadline=deadline)
        if self._force:
            self._drain_scope.cancel()
        return self._drain_scope

    def _strategy_stopped(self, name: str, why: str) -> None:
        self._check_all_stopped()

    def _check_all_stopped(self) -> None:
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

    async def _settle(self, rounds: int = 3) -> None:
        """Drain the executor and poll the matches until a poll provokes no new intent."""
        executor, poller, engine = self.executor, self.poller, self.engine
        for _ in range(rounds):
            if self._force or executor is None or engine is None:
                return
            await executor.drain(math.inf)
            if poller is None:
                return
            with anyio.move_on_after(LAST_POLL_TIMEOUT_S):
                try:
                    await poller.poll_now()
                except (FrameworkError, OSError) as exc:
                    log.warning("last match poll failed", extra={"error": str(exc)})
            if engine.idle:
                return

    def _close_journal(self) -> None:
        if self.journal is not None:
            self.journal.close()
            log.info("journal closed")

    # -------------------------------------------------------------------------- callbacks

    def _on_frame_handler(self) -> Callable[[object], None]:
        route = self.kernel.intake
        tallies = self.tallies

        def on_frame(frame: object) -> None:
            tallies.pushes += 1
            self._timed("push", route, frame)

        return on_frame

    def _timed(self, trigger: str, handler: Callable[[_T], None], item: _T) -> None:
        """handler(item), noting the trigger and start time for the latency histogram."""
        if self.metrics is None:
            handler(item)
            return
        self._trigger = (trigger, time.perf_counter())
        try:
            handler(item)
        finally:
            self._trigger = None

    def _submit(self, strategy: str, intent: OrderIntent) -> str:
        assert self.engine is not None
        client_order_id = self.engine.submit(strategy, intent)
        if self._trigger is not None and self.metrics is not None:
            trigger, t0 = self._trigger
            self.metrics.submit_latency.labels(trigger).observe(time.perf_counter() - t0)
        return client_order_id

    def _schedule(self, strategy: str, name: str, every_s: float) -> None:
        assert self.scheduler is not None
        publish: Callable[[Timer], None] = self.bus.publish
        clock = self.clock

        # A coroutine job runs on the event loop; a plain function would run in apscheduler's
        # thread pool, and the bus and strategies are single-threaded.
        async def fire() -> None:
            self._timed("timer", publish, Timer(name, strategy, clock.now()))

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

    def _on_match(self, match: MatchRecord) -> None:
        assert self.engine is not None
        self.tallies.matches += 1
        self._timed("match", self.kernel.on_match, match)

    def _on_stream_state(self, state: str, detail: str) -> None:
        log.info("stream %s", state, extra={"detail": detail} if detail else None)
        if self.metrics is not None:
            self.metrics.set_state("stream", state)
        self.bus.publish(ConnectionChanged("stream", state, detail))

    def _on_poller_state(self, state: str, detail: str) -> None:
        if self.metrics is not None:
            self.metrics.set_state("poller", "running" if state == "ok" else state)
        self.bus.publish(ConnectionChanged("poller", state, detail))
