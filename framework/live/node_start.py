"""The node's start-up: wires a Config to clients, journal, engine, strategies and tasks.

Start-up, one log line per step: venue (the embedded twin when ``venue.embedded``) -> REST
client -> journal -> execution engine and executor -> strategies -> initial REST sync
(positions, balances; a refused key or an unreachable venue is fatal here, with a one-line
reason) -> match cursors -> scheduler and ``Started`` (strategies' on_start) -> stream, market
(:class:`MarketFeed`), executor and metrics tasks. The stream runs the resync after every
(re)subscribe; the market feed stops at the stop's first step (:func:`stop_jobs`).

Apart from :class:`~framework.live.node.Node` (control, callbacks, summary) and its stop
(:mod:`framework.live.node_stop`): what is built, in which order, and what fails there.
"""

from __future__ import annotations

import gc
import logging
import random
from contextlib import AsyncExitStack
from functools import partial
from typing import TYPE_CHECKING, Final

import anyio.abc
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.engine.client_ids import ClientIdGenerator
from framework.engine.kernel import Snapshot
from framework.engine.strategy import Source
from framework.live.embedded import open_venue
from framework.live.executor import LiveExecutor
from framework.live.journal import Journal
from framework.live.market_feed import MarketFeed
from framework.live.metrics import serve_metrics
from framework.live.poller import MatchPoller
from framework.live.recorder import Recorder
from framework.live.rest import RestClient
from framework.live.startup import FatalError, initial_sync
from framework.live.stream import RestResync, StreamClient
from framework.live.venue_jobs import OpenOrderCheck, PositionRefresh
from framework.output_path import unwritable
from framework.venue.codec import push_types
from framework.venue.errors import ConfigError, FrameworkError
from framework.venue.signing import make_signer

if TYPE_CHECKING:
    from framework.live.node import Node

__all__ = ["TEMPORARY_JOURNAL", "start", "start_tasks", "stop_jobs"]

log = logging.getLogger("framework.node")

TEMPORARY_JOURNAL: Final = ""
"""The journal without journal.path (embedded twin): SQLite's private temporary database. As
with ":memory:" nothing survives the run, but only its page cache stays in memory; in memory,
every intent's row (about 130 bytes) would stay for the whole run."""


async def start(node: Node, stack: AsyncExitStack) -> None:
    """Build the node's parts in order (module docstring); what closes them goes on stack."""
    config = node.config
    venue = node.venue = await stack.enter_async_context(open_venue(config))
    signer = make_signer(venue.sign_type, venue.api_secret.reveal())
    if config.recording.path is not None:
        path = config.recording.path
        problem = unwritable(path, directory=False)
        if problem is not None:
            raise FatalError(f"cannot write the recording to {path}: {problem}")
        node.recorder = Recorder(
            config.recording.path,
            now_ms=node.clock.now_ms,
            redact=[venue.api_key, venue.api_secret.reveal(), *config.secrets()],
        )
        stack.callback(node.recorder.close)
    rest = node.rest = await stack.enter_async_context(
        RestClient(
            venue.base_url,
            venue.api_key,
            signer,
            language=config.venue.language,
            timeout=config.venue.timeout_s,
            now_ms=node.clock.now_ms,
            observer=node.recorder.on_rest if node.recorder is not None else None,
            order_paths=config.venue.order_paths,
        )
    )
    log.info("rest client ready", extra={"base_url": venue.base_url})
    path = config.journal.path or TEMPORARY_JOURNAL
    try:
        node.journal = journal = Journal.open(path)
    except (OSError, FrameworkError) as exc:
        raise FatalError(f"journal.path: {exc}") from None
    stack.callback(partial(_close_journal, journal))
    log.info("journal open", extra={"path": path or "(temporary, removed at stop)"})
    node.portfolio.seed_log_ids(
        {c: i for c in config.coins() if (i := journal.get_log_id(c)) is not None}
    )
    node.executor = LiveExecutor(
        partial(
            node.kernel.build_engine,
            ids=ClientIdGenerator(config.node.name, journal),
            journal=journal,
            random=random.SystemRandom().random,
        ),
        rest,
        journal=journal,
    )
    engine = node.engine = node.executor.engine
    log.info("execution engine ready", extra={"node": config.node.name})
    node.scheduler = AsyncIOScheduler(timezone="UTC")
    # Registered after the REST client, so it runs before the client closes, on any exit.
    stack.callback(stop_jobs, node)
    node.trading.follow(node.bus, node.portfolio, engine.status)
    try:
        node.kernel.load_strategies(schedule=node.schedule, submit=node.submit)
        node.kernel.feeds("stream", push_types())  # every push type the stream decodes
        node.kernel.load_sources(config.sources)  # run as tasks (start_tasks)
        node.market_feed = MarketFeed.plug(
            config, node.kernel, ws_url=venue.ws_url, builder=rest.builder, send=rest.send,
            intake=partial(node.timed, "market", node.kernel.intake), metrics=node.metrics,
            recorder=node.recorder,
        )  # fmt: skip
    except ConfigError as exc:  # a strategy or source that cannot be built: one line
        raise FatalError(str(exc)) from None
    for spec in config.strategies:
        log.info("strategy loaded", extra={"strategy": spec.name, "class": spec.class_})
    pairs, coins = list(config.pairs), config.coins()
    node.poller = MatchPoller(
        rest,
        pairs=pairs,
        interval_s=config.polling.match_interval_s,
        page_size=config.polling.page_size,
        store=journal,
        on_match=node.on_match,
        backfill=config.polling.backfill,
        on_state=node.on_poller_state,
        reread_ids=config.polling.reread_ids,
        reread_age_s=config.polling.reread_age_s,
    )
    snapshots = partial(
        RestResync, rest, pairs=pairs, coins=coins, portfolio=node.portfolio,
        publish=node.bus.publish, on_snapshot=node.trading.on_snapshot,
    )  # fmt: skip
    resync = node.resync = snapshots(poller=node.poller)
    # The first REST calls, before strategies start: the kernel's Snapshot step (balances,
    # positions, match cursors, open orders), run here so that a FatalError arrives unwrapped.
    await initial_sync(snapshots(), node.poller, engine, rest, pairs=pairs, base_url=venue.base_url)
    node.stream = StreamClient(
        venue.ws_url,
        rest.builder,
        pairs=pairs,
        coins=coins,
        on_frame=node.on_frame,
        on_state=node.on_stream_state,
        on_raw=node.recorder.on_ws if node.recorder is not None else None,
        resync=resync,
        clock=node.clock,
        ack_timeout_s=config.stream.ack_timeout_s,
        ping_interval_s=config.stream.ping_interval_s,
        silence_timeout_s=config.stream.silence_timeout_s,
        backoff_initial_s=config.stream.backoff_initial_s,
        backoff_max_s=config.stream.backoff_max_s,
    )


async def start_tasks(node: Node, tg: anyio.abc.TaskGroup) -> None:
    """Metrics, scheduler and jobs, the market, on_start, then the executor, sources, stream."""
    assert node.executor is not None and node.stream is not None
    assert node.scheduler is not None and node.poller is not None
    config = node.config
    if node.metrics is not None:
        cfg = config.metrics
        try:
            node.metrics_port = await tg.start(serve_metrics, node.metrics, cfg.host, cfg.port)
        except OSError as exc:
            raise FatalError(f"metrics: {exc}") from None
    node.scheduler.start()
    node.poller.start(node.scheduler)
    interval = config.polling.open_orders_interval_s
    engine, rest = node.engine, node.rest
    if interval > 0 and engine is not None and rest is not None and engine.cancels.available:
        node.order_check = OpenOrderCheck(
            engine, rest, pairs=list(config.pairs), interval_s=interval
        )
        node.order_check.start(node.scheduler)
    if node.resync is not None:
        node.position_refresh = PositionRefresh.started(node.scheduler, node.resync, config)
    log.info("scheduler started", extra={"match_interval_s": config.polling.match_interval_s})
    # on_start first, always: what recovery publishes (UNKNOWN intents, kept matches)
    # reaches strategies that have set themselves up.
    # The kernel's start. Its Snapshot step (balances, positions, match cursors, open
    # orders) was the initial sync, run in start() so that a FatalError arrives unwrapped.
    if node.market_feed is not None:  # market: section; heard before on_start
        node.market_feed.start(tg, node.scheduler)
        await node.market_feed.ready(config.venue.timeout_s)
    for step in node.kernel.starting():
        assert isinstance(step, Snapshot) and node.resync is not None
    # What the start made lives as long as the daemon: out of the collector's sight (its
    # garbage collected first), a full collection's pause goes from ~40 to 0.4 ms (demo).
    gc.collect()
    gc.freeze()
    log.info("strategies started", extra={"strategies": list(node.kernel.started)})
    log.info("journal recovered", extra={"intents_requeued": node.kernel.recovered})
    node.check_all_stopped()
    tg.start_soon(node.executor.run)
    if not node.stopping:  # every strategy failed at on_start: no stream to open
        for source in node.kernel.sources:
            tg.start_soon(_run_source, node, source)
        tg.start_soon(node.stream.run)
        log.info("stream starting", extra={"ws_url": node.stream.ws_url})
    node.started.set()


def stop_jobs(node: Node) -> None:
    """Stop the market feed, the polls, the checks and the scheduler (idempotent)."""
    if node.market_feed is not None:
        node.market_feed.stop()
    if node.poller is not None:
        node.poller.shutdown()
    if node.order_check is not None:
        node.order_check.shutdown()
    if node.position_refresh is not None:
        node.position_refresh.shutdown()
    if node.scheduler is not None and node.scheduler.running:
        node.scheduler.shutdown(wait=False)


async def _run_source(node: Node, source: Source) -> None:
    """Run an event source feeding the intake; its failure is logged, the node goes on."""
    try:
        await source.run(node.kernel.intake)
    except Exception:
        log.exception("source %s failed; it feeds nothing more", source.name)


def _close_journal(journal: Journal) -> None:
    journal.close()
    log.info("journal closed")
