"""The node's start-up: wires a Config to clients, journal, engine, strategies and tasks.

Start-up, one log line per step: venue (the embedded twin when ``venue.embedded``) -> REST
client -> journal -> execution engine and executor -> strategies -> initial REST sync
(positions, balances; a refused key or an unreachable venue is fatal here, with a one-line
reason) -> match cursors -> scheduler and ``Started`` (strategies' on_start) -> stream, market
(:class:`MarketFeed`), executor and metrics tasks. The stream runs the resync after every
(re)subscribe; the market feed stops at the stop's first step (:func:`stop_jobs`).

Paper mode (``venue.mode: paper``) differs only in where orders go: the REST client serves
the market's polls alone, the orders, snapshots and match polls go to the in-process paper
venue (:class:`~framework.paper.venue.WallClockPaper`, imported only then), whose pushes
enter the intake as the stream's would; every market record reaches it right after the
strategies; no private stream is opened; the journal and the recording are marked paper.
Shadow mode (``shadow.enabled``) trades live, and places every order on such a paper venue
too, after the live request was written (:mod:`framework.paper.shadow`).

Apart from :class:`~framework.live.node.Node` (control, callbacks, summary) and its stop
(:mod:`framework.live.node_stop`): what is built, in which order, and what fails there.
"""

from __future__ import annotations

import gc
import logging
import random
from contextlib import AsyncExitStack
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import anyio.abc
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.engine.client_ids import ClientIdGenerator
from framework.engine.kernel import Snapshot
from framework.engine.strategy import Source
from framework.engine.venue import Venue
from framework.live.embedded import open_venue
from framework.live.executor import LiveExecutor
from framework.live.journal import Journal
from framework.live.market_feed import MarketFeed
from framework.live.metrics import serve_metrics
from framework.live.poller import MatchPoller
from framework.live.recorder import Recorder
from framework.live.rest import RestClient
from framework.live.startup import FatalError, initial_sync, reach_market
from framework.live.stream import RestResync, StreamClient
from framework.live.venue_jobs import OpenOrderCheck, PositionRefresh
from framework.output_path import unwritable
from framework.venue.codec import push_types
from framework.venue.errors import ConfigError, FrameworkError
from framework.venue.signing import Signer, make_signer

if TYPE_CHECKING:
    from framework.live.node import Node

__all__ = [
    "PAPER_MARK_PATH",
    "TEMPORARY_JOURNAL",
    "finish_shadow",
    "start",
    "start_tasks",
    "stop_jobs",
]

log = logging.getLogger("framework.node")

TEMPORARY_JOURNAL: Final = ""
"""The journal without journal.path (embedded twin): SQLite's private temporary database. As
with ":memory:" nothing survives the run, but only its page cache stays in memory; in memory,
every intent's row (about 130 bytes) would stay for the whole run."""
PAPER_MARK_PATH: Final = "/perpframe/mode"
"""A paper run's recording starts with a ``rest`` line of this path (no venue path: a replay
passes over it), body ``{"mode": "paper"}``: what it holds is the real market, heard while
the orders were paper."""


async def start(node: Node, stack: AsyncExitStack) -> None:
    """Build the node's parts in order (module docstring); what closes them goes on stack."""
    config = node.config
    paper_mode = config.venue.is_paper
    venue = node.venue = await stack.enter_async_context(open_venue(config))
    secret = venue.api_secret.reveal()
    if paper_mode:  # the paper venue, and no key needed: imported only then
        from framework.paper.venue import NoSigner, WallClockPaper

        signer: Signer = (
            make_signer(venue.sign_type, secret) if secret else NoSigner(venue.sign_type)
        )
    else:
        signer = make_signer(venue.sign_type, secret)
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
        if paper_mode:
            node.recorder.writer.write_rest(
                node.clock.now_ms(), PAPER_MARK_PATH, "", b'{"mode": "paper"}'
            )
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
    orders: Venue = rest
    if paper_mode:
        try:
            paper = WallClockPaper(config, deliver=node.on_frame, now_ms=node.clock.now_ms)
        except ConfigError as exc:
            raise FatalError(str(exc)) from None
        node.paper = orders = paper
        log.info(
            "paper venue ready: orders are filled in-process and never sent", extra=paper.describe()
        )
    elif config.shadow.enabled:  # a paper venue beside the live one: imported only then
        from framework.paper.shadow import open_shadow

        try:
            shadow, alarms = open_shadow(config, rest, now_ms=node.clock.now_ms)
        except ConfigError as exc:
            raise FatalError(str(exc)) from None
        node.shadow, node.shadow_alarms = shadow, alarms
        node.paper = shadow.paper  # it hears each market record, as in paper mode
        orders = shadow
        shadow.follow(node.bus)
        if node.metrics is not None:
            from framework.paper.shadow import ShadowCollector

            node.metrics.registry.register(ShadowCollector(shadow.ledger, lambda: alarms))
        stack.callback(finish_shadow, node)
        log.info(
            "shadow ready: every live order is also placed on a paper venue, after it was sent",
            extra=shadow.paper.describe(),
        )
    node.orders = orders
    path = config.journal.path or TEMPORARY_JOURNAL
    try:
        node.journal = journal = Journal.open(path, mode=config.venue.mode)
    except (OSError, FrameworkError) as exc:
        raise FatalError(f"journal.path: {exc}") from None
    stack.callback(partial(_close_journal, journal))
    log.info(
        "journal open",
        extra={"path": path or "(temporary, removed at stop)", "mode": config.venue.mode},
    )
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
        orders,
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
        # every push type the stream decodes (the paper venue sends the same records)
        node.kernel.feeds("paper" if paper_mode else "stream", push_types())
        node.kernel.load_sources(config.sources)  # run as tasks (start_tasks)
        intake: Any = partial(node.timed, "market", node.kernel.intake)
        if node.paper is not None:  # the paper venue hears the market too, as in a backtest
            intake = node.paper.feeding(intake)
            node.source_intake = node.paper.feeding(node.kernel.intake)
        node.market_feed = MarketFeed.plug(
            config, node.kernel, ws_url=venue.ws_url, builder=rest.builder, send=rest.send,
            intake=intake, metrics=node.metrics, recorder=node.recorder,
        )  # fmt: skip
    except ConfigError as exc:  # a strategy or source that cannot be built: one line
        raise FatalError(str(exc)) from None
    for spec in config.strategies:
        log.info("strategy loaded", extra={"strategy": spec.name, "class": spec.class_})
    pairs, coins = list(config.pairs), config.coins()
    node.poller = MatchPoller(
        orders,
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
        RestResync, orders, pairs=pairs, coins=coins, portfolio=node.portfolio,
        publish=node.bus.publish, on_snapshot=node.trading.on_snapshot,
    )  # fmt: skip
    resync = node.resync = snapshots(poller=node.poller)
    # The first REST calls, before strategies start: the kernel's Snapshot step (balances,
    # positions, match cursors, open orders), run here so that a FatalError arrives unwrapped.
    where = "the paper venue" if paper_mode else venue.base_url
    await initial_sync(snapshots(), node.poller, engine, orders, pairs=pairs, base_url=where)
    if paper_mode:  # no private stream: the paper venue's pushes come in-process
        if config.market.source is None and config.market.pairs:  # the venue's market
            await reach_market(rest.send, venue.base_url)
        if node.metrics is not None:
            node.metrics.wanted["stream"] = "paper"
            node.metrics.set_state("stream", "paper")
        return
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
    assert node.executor is not None and node.scheduler is not None
    assert node.poller is not None
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
    engine, orders = node.engine, node.orders
    if interval > 0 and engine is not None and orders is not None and engine.cancels.available:
        node.order_check = OpenOrderCheck(
            engine, orders, pairs=list(config.pairs), interval_s=interval
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
    if node.shadow is not None and config.shadow.summary_every_s > 0:
        tg.start_soon(_shadow_summaries, node, config.shadow.summary_every_s)
    if not node.stopping:  # every strategy failed at on_start: no stream to open
        for source in node.kernel.sources:
            tg.start_soon(_run_source, node, source)
        if node.stream is not None:  # none in paper mode
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
        await source.run(node.source_intake)
    except Exception:
        log.exception("source %s failed; it feeds nothing more", source.name)


def _close_journal(journal: Journal) -> None:
    journal.close()
    log.info("journal closed")


async def _shadow_summaries(node: Node, every_s: float) -> None:
    """The shadow's summary lines (and due closes) every every_s, until the node stops."""
    assert node.shadow is not None
    while True:
        await anyio.sleep(every_s)
        node.shadow.log_summaries()


def finish_shadow(node: Node) -> None:
    """At stop: the last summaries, then shadow.html (when configured); never raises."""
    shadow = node.shadow
    if shadow is None:
        return
    try:
        shadow.log_summaries()
        report = node.config.shadow.report
        if report:
            from framework.shadow.report import shadow_html

            with open(report, "w", encoding="utf-8") as out:
                out.write(shadow_html(shadow.ledger))
            node.shadow_report = report
            log.info("shadow report written", extra={"path": report})
    except Exception as exc:  # the stop goes on: the report is not worth a traceback
        log.error("shadow: the report could not be written: %s", exc)
