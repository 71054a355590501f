"""The backtest runner: a config and a recording in, report data out (see :class:`Backtest`).

A backtest is built through the same :class:`~framework.engine.kernel.Kernel` as the live
node (one Bus, one Portfolio fed through the kernel's frame intake, the config's strategies
built and attached one way, one ExecutionEngine with the config's ``execution`` settings) and
differs only at the edges: a :class:`~framework.engine.clock.VirtualClock` set by the replay,
the recording instead of the stream and the poller, and the one
:class:`~framework.engine.venue.Executor` over :class:`~framework.backtest.sim_venue.SimVenue` (the
paper account) instead of the REST client.

The config file is the live one plus an optional ``backtest:`` section
(:class:`BacktestSettings`), which :func:`load_backtest_config` takes out before the live
config is parsed (line numbers of the rest stay right). The ``venue:`` section is taken out
too (a backtest has no venue): a config written for a real venue, its credentials in unset
``${ENV}`` variables, backtests as it is.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any, Literal

import attrs

from framework.backtest.paper import PaperSettings, PaperVenue
from framework.backtest.prices import PriceTrack
from framework.backtest.replay import Replayer, ReplayStats
from framework.backtest.report import ReportCollector
from framework.backtest.scan import RecordingIndex, scan
from framework.backtest.sim_venue import SimVenue
from framework.backtest.start_gate import StartGate
from framework.backtest.timeline import PRICES, SAMPLES, Repeating, Timeline
from framework.config import Config, beside_config, parse_config, split_section
from framework.engine.bus import Bus
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import BalanceSynced, Timer
from framework.engine.execution import ExecutionEngine
from framework.engine.kernel import Kernel, Settle, StrategyFactory
from framework.engine.portfolio import Portfolio
from framework.engine.strategy import Strategy, load_source
from framework.engine.venue import Executor
from framework.fill_model_file import load_fill_model
from framework.recording import RecordingReader
from framework.sim.latency import LatencySettings
from framework.venue.codec import push_types
from framework.venue.errors import ConfigError
from framework.venue.models import AccountBalance
from framework.yaml_attrs import ConfigProblems, LineMap, read_yaml, structure
from framework.yaml_read import read_config_text

__all__ = [
    "Backtest",
    "BacktestResult",
    "BacktestSettings",
    "backtest_settings",
    "load_backtest_config",
    "recording_warnings",
]

log = logging.getLogger("framework.backtest")


def _positive(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"backtest.{attribute.name} must be at least 1, got {value}")


@attrs.frozen(kw_only=True)
class BacktestSettings:
    """The ``backtest:`` section of a config file; every key has a default."""

    recording: str | None = None
    """The recording to replay when --recording is not given."""
    report: str | None = None
    """The report directory when --report is not given (default: reports/<config name>)."""
    own_activity: Literal["supersede", "deliver"] = "supersede"
    """The recorded node's own fills, positions and balances: replaced by the paper
    account's (supersede) or delivered as recorded (deliver: the recording is someone
    else's activity the strategies should see)."""
    price_sources: tuple[Literal["matches", "positions"], ...] = ("matches", "positions")
    """Where prices come from: match averagePrice; the openingPrice of NEW position pushes
    (with both, positions are used only when the recording holds no match)."""
    prices_csv: str | None = None
    """A price track CSV (``ts`` or ``time`` column, one column per pair) used instead."""
    equity_sample_ms: int = attrs.field(default=1000, validator=_positive)
    """Virtual time between equity samples (also taken at every paper fill). A timed sample
    comes after the price points of its ms and before its orders and answers."""
    seed: int = 1
    """Seeds the client ids and the retry jitter (part of what makes runs identical)."""
    strict: bool = False
    """A line of the recording that is not a record stops the backtest (one line naming the
    file and the line) instead of being counted and skipped."""
    paper: PaperSettings = PaperSettings()


# ------------------------------------------------------------------------------ config


def load_backtest_config(path: str | Path) -> tuple[Config, BacktestSettings]:
    """Read a config file: the live Config plus its ``backtest:`` section; ConfigError if bad.

    The ``venue:`` section is neither read nor required (``run.py record`` runs the live node
    on the same file: :func:`framework.config.load_live_config`).
    """
    source = str(path)
    try:
        text = read_config_text(path)  # bounded; not UTF-8 or too big: one line
    except ConfigProblems as exc:
        raise ConfigError("\n".join(exc.problems)) from None
    stripped, section, _line = split_section(text)
    stripped = split_section(stripped, "venue")[0]
    config = parse_config(stripped, source=source, venue_used=False)
    if section is None:
        return config, BacktestSettings()
    # The section alone, at its own lines: the one strict converter locates every error.
    only = "".join(
        line if kept == "\n" and line != kept else "\n"
        for line, kept in zip(
            text.splitlines(keepends=True),
            split_section(text)[0].splitlines(keepends=True),
            strict=True,
        )
    )
    settings = backtest_settings_from_text(only, source=source)
    # Files the section names are found as strategy modules are: here, else beside the file.
    recording, prices = settings.recording, settings.prices_csv
    model = settings.paper.fill_model
    if model:  # read now: a bad model file stops the start with its lines
        model = str(beside_config(model, path))
        load_fill_model(model)
    return config, attrs.evolve(
        settings,
        recording=str(beside_config(recording, path)) if recording else recording,
        prices_csv=str(beside_config(prices, path)) if prices else prices,
        paper=attrs.evolve(settings.paper, fill_model=model),
    )


def backtest_settings_from_text(text: str, *, source: str = "<config>") -> BacktestSettings:
    """The ``backtest:`` section of a YAML text, or ConfigProblems naming path and line."""
    data, lines = read_yaml(text, source=source, env=os.environ)
    return backtest_settings(data.get("backtest"), lines=lines, source=source)


def backtest_settings(
    section: Any, *, lines: LineMap | None = None, source: str = "backtest"
) -> BacktestSettings:
    """Structure a ``backtest:`` mapping (None: every default) or raise ConfigError."""
    if section is None:
        return BacktestSettings()
    if not isinstance(section, Mapping):
        raise ConfigError(f"{source}: backtest: expected a mapping of settings")
    try:
        return structure(dict(section), BacktestSettings, lines=lines, at=("backtest",))
    except ConfigProblems as exc:
        raise ConfigProblems([f"{source}: {problem}" for problem in exc.problems]) from None


# ------------------------------------------------------------------------------ runner


@attrs.define
class BacktestResult:
    """What a backtest produced: report.json's data and the live objects behind it."""

    results: dict[str, Any]
    collector: ReportCollector
    stats: ReplayStats
    index: RecordingIndex
    strategies: list[Strategy]
    portfolio: Portfolio
    engine: ExecutionEngine
    paper: PaperVenue
    elapsed_s: float
    scan_s: float
    warnings: list[str] = attrs.field(factory=list)
    """What looks wrong in the recording, one line each (see :func:`recording_warnings`)."""

    @property
    def messages_per_second(self) -> float:
        """Replay rate (wall clock): recorded lines per second, scan excluded."""
        replay = self.elapsed_s - self.scan_s
        return self.stats.lines / replay if replay > 0 else float("inf")


class Backtest:
    """One dry run: a recording replayed through the live code against a paper venue.

    Built through the kernel, as the live node: only the edges differ (a VirtualClock set by
    the replay, the recording instead of the stream and poller, the one Executor over a
    :class:`SimVenue` instead of the REST client).
    """

    def __init__(
        self,
        config: Config,
        recording: str | Path,
        settings: BacktestSettings | None = None,
        *,
        strategies: Sequence[StrategyFactory] | None = None,
    ) -> None:
        self.config = config
        self.recording = Path(recording)
        self.settings = settings or BacktestSettings()
        self._factories = strategies
        self.clock: VirtualClock | None = None
        """The replay's virtual clock, once run has made it (log lines are stamped with it)."""

    def run(self, *, progress: Callable[[int, int], None] | None = None) -> BacktestResult:
        """Replay the whole recording; progress(bytes_read, total) is called as it goes."""
        began = time.perf_counter()
        config, settings = self.config, self.settings
        reader = RecordingReader(self.recording, strict=settings.strict)
        sources = settings.price_sources
        positions: Literal["always", "fallback", "never"] = (
            "never"
            if "positions" not in sources
            else "fallback"
            if "matches" in sources
            else "always"
        )
        # Prices are read now only when own orders make the full scan needed anyway; else
        # when the paper venue first needs one (a strategy that never trades never does).
        index = scan(reader, positions=positions, prices=False)  # one mapping for both
        scanned = time.perf_counter()

        def price_rows(rows: list[tuple[int, str, Decimal, str]]) -> list[tuple[int, str, Decimal]]:
            return [(ts, pair, price) for ts, pair, price, source in rows if source in sources]

        if settings.prices_csv:
            track = PriceTrack.from_csv(settings.prices_csv, config.pairs)
        elif index.prices_scanned:
            track = PriceTrack.from_rows(price_rows(index.price_rows))
        else:
            recording = self.recording

            def load() -> PriceTrack:
                # After the replay (the report), the prices it found on the way; during it
                # (a first order), all of them: fills may look ahead.
                if replayer.finished:
                    return PriceTrack.from_pairs(replayer.prices.track_pairs(positions, sources))
                return PriceTrack.from_rows(
                    price_rows(scan(recording, positions=positions).price_rows)
                )

            track = PriceTrack.later(load)
        start = index.first_ts or 0
        clock = self.clock = VirtualClock(start)
        timeline = Timeline(clock)
        kernel = Kernel(config, clock)
        bus, portfolio, route = kernel.bus, kernel.portfolio, kernel.intake
        coins = {pair: config.settle_coin(pair) for pair in config.pairs}
        paper = PaperVenue(
            settings.paper,
            rules=config.pairs,
            track=track,
            deliver=route,
            now_ms=clock.now_ms,
            coins=coins,
            rng=random.Random(f"{settings.seed}:latency"),
        )
        venue = SimVenue(paper, now_ms=clock.now_ms, schedule=timeline.at)
        executor = Executor(
            partial(
                kernel.build_engine,
                ids=ClientIdGenerator.ephemeral("bt", now_ms=start, random_bits=settings.seed),
                random=random.Random(settings.seed).random,
            ),
            venue,
            start=venue.start,
            schedule=timeline.at,
        )
        engine = executor.engine
        timers: dict[tuple[str, str], Repeating] = {}

        def schedule(strategy: str, name: str, every_s: float) -> None:
            # As the live node's apscheduler job: a new schedule of a name replaces the old.
            interval = max(1, round(every_s * 1000))
            old = timers.pop((strategy, name), None)
            if old is not None:
                old.cancel()
            timers[(strategy, name)] = timeline.every(
                interval, _TimerFire(bus, clock, strategy, name), first_ms=clock.ms + interval
            )

        strategies = kernel.load_strategies(schedule=schedule, factories=self._factories)
        collector = ReportCollector(
            bus,
            paper,
            now_ms=clock.now_ms,
            strategies=[s.name for s in strategies],
            market=kernel.market,
            span_ms=None if index.last_ts is None else index.last_ts - start,
        )

        on_match = kernel.on_match
        supersede = settings.own_activity == "supersede"
        kernel.feeds("recording", push_types())  # what the replay decodes from its frames
        kernel.load_sources(config.sources)
        if config.market.source is not None:  # built and named as the live feed does
            kernel.add_source(load_source(config.market.source)("market", config.market.params))
        paper.read_market(kernel.market)  # the market every record reaches first
        replayer = Replayer(
            clock=clock,
            timeline=timeline,
            routes=kernel.routes,
            on_match=on_match,
            sources=kernel.sources,
            own_positions=index.own_position_ids if supersede else (),
            own_coins={coins.get(p) or p for p in index.own_pairs} if supersede else (),
            own_matches=index.own_match_ids if supersede else (),
            executor=executor,
            reread_ids=config.polling.reread_ids,
            reread_age_ms=int(config.polling.reread_age_s * 1000),
            declare=partial(kernel.feeds, "recording"),  # at its first market record
            tap=paper,  # a recorded market: the paper venue fills on it
            frame_pair=_kline_pair(config),
        )
        paper.start_prices(partial(timeline.at, rank=PRICES))

        def poll() -> None:
            for match in paper.take_matches():
                on_match(match)

        interval = max(1, round(config.polling.match_interval_s * 1000))

        def sample() -> None:
            collector.sample()
            if collector.quiet:  # nothing held or changed: the same figures
                sampler.pause()

        # Samples come before NORMAL callbacks in their ms, so the one of the ms in which an
        # order wakes the paper account up has been taken already when it resumes them.
        sampler = timeline.every(settings.equity_sample_ms, sample, first_ms=start, rank=SAMPLES)
        paper.on_change = sampler.resume
        lines = collector.market

        def sample_market() -> None:
            lines.sample(clock.ms)
            market_sampler.interval_ms = lines.step_ms  # from the run after the booked one

        market_sampler = timeline.every(lines.step_ms, sample_market, first_ms=start, rank=SAMPLES)
        periodic = [timeline.every(interval, poll, first_ms=start + interval), sampler]
        periodic.append(market_sampler)
        # What is due by the first record's time runs first: price points dated before it
        # (a first poll answers older matches) are known when the strategies start.
        timeline.run_until(clock.ms)
        # What the live node's market feed heard before it started its strategies is
        # replayed first (the kernel holds it for the hooks): on_start reads that market.
        gate = StartGate.of(config.market, config.venue.timeout_s)
        if gate is not None:
            replayer.lead(reader, gate.before_start)
        for _ in kernel.starting():  # the kernel's start; its Snapshot: the paper account's
            for coin, amount in sorted(paper.initial.items()):
                zero = Decimal(0)
                balance = AccountBalance(symbol=coin, available_amount=amount, frozen_amount=zero)
                if portfolio.apply_balance(balance, coin=coin):
                    bus.publish(BalanceSynced(balance))
        replayer.settle()
        total = reader.size
        stats = replayer.run(
            reader, progress=None if progress is None else (lambda done: progress(done, total))
        )
        stats.first_ts = index.first_ts
        stats.last_ts = max(index.last_ts or start, clock.ms)
        self._stop(kernel, timeline, replayer, poll, [*periodic, *timers.values()])
        venue.abandon()  # what still waits out its latency: answered now, within the run
        replayer.settle()
        collector.sample()
        lines.sample(clock.ms)  # the market as it stood at the end
        paper.read_all()
        results = collector.results(stats, engine.counters())
        results["recording"]["file"] = self.recording.name
        results["recording"]["truncated_tail"] = reader.stats.truncated_tail
        results["recording"]["cut_gzip_members"] = reader.stats.cut_members
        results["recording"]["own_orders_in_recording"] = len(index.own_order_ids)
        results["settings"] = _settings_summary(settings, paper)
        done = time.perf_counter()
        return BacktestResult(
            results=results,
            collector=collector,
            stats=stats,
            index=index,
            strategies=strategies,
            portfolio=portfolio,
            engine=engine,
            paper=paper,
            elapsed_s=done - began,
            scan_s=scanned - began,
            warnings=recording_warnings(
                self.recording, reader, replayer, config.pairs, fed=list(config.market.pairs)
            ),
        )

    def _stop(
        self,
        kernel: Kernel,
        timeline: Timeline,
        replayer: Replayer,
        poll: Callable[[], None],
        periodic: list[Repeating],
    ) -> None:
        """The kernel's stop steps on virtual time, as the live node runs them.

        Timers and polls end; at each Settle, what is in flight is answered and a last poll
        delivers late fills (reactions are sent too); between them Stopping (on_stop) and the
        cancels of ``execution.cancel_on_stop``; then the engine closes and the Drain answers
        what is in flight. Only what is in flight runs meanwhile (answers, retries, the
        engine's deadlines), each Settle up to its own horizon (the first at half of
        ``execution.drain_timeout_s``, as live), all within that timeout of virtual time.
        """
        for repeating in periodic:
            repeating.cancel()
        engine = kernel.engine
        began = kernel.clock.now_ms()
        end = began + int(self.config.execution.drain_timeout_s * 1000)

        def run_in_flight(horizon: int) -> None:
            while not engine.idle and timeline.due_at <= horizon:
                timeline.run_until(timeline.due_at, replayer.settle)

        def settle(horizon: int) -> None:
            for _ in range(3):
                replayer.settle()
                run_in_flight(horizon)
                poll()
                replayer.settle()
                if engine.idle:
                    return

        for step in kernel.stopping_steps("end of recording"):
            if isinstance(step, Settle):
                settle(min(end, began + int(step.until_s * 1000)))
            else:  # Drain: in-flight answers awaited up to venue.timeout_s more, as live
                run_in_flight(end + int(self.config.venue.timeout_s * 1000))
        replayer.settle()


def recording_warnings(
    path: Path,
    reader: RecordingReader,
    replayer: Replayer,
    pairs: Collection[str],
    *,
    fed: Collection[str] = (),
) -> list[str]:
    """One line for each thing a replay found wrong in its recording, naming the file
    (fed: the pairs the config's market: section feeds)."""
    read, stats = reader.stats, replayer.stats
    found = []
    if fed and not stats.market_records:
        found.append(
            f"it holds no market data, but the config's market: section feeds"
            f" {', '.join(fed)}: market orders on them were refused as stale (9007); record"
            " with that section, or drop it for this backtest"
        )
    if read.bad_lines:
        found.append(
            f"{read.bad_lines} line(s) that are not records skipped, not replayed (the first:"
            f" line {read.first_bad_line}); backtest.strict or --strict refuses them"
        )
    if stats.time_went_back:
        found.append(
            f"time goes back {stats.time_went_back} time(s) (the first: line"
            f" {replayer.first_back_line}); such records are replayed in file order, at the"
            " latest time reached before them"
        )
    shown = replayer.pairs(pairs)
    if not shown.intersection(pairs):
        found.append(
            f"none of the config's pairs ({', '.join(sorted(pairs))}) is in it (it shows:"
            f" {', '.join(sorted(shown)) or 'no pair'}): they get no recorded price or match"
        )
    if read.truncated_tail:
        found.append("its last line is cut short (a killed writer?): skipped")
    if read.cut_members:
        found.append(
            f"{read.cut_members} gzip member(s) cut short (a killed writer?): read up to each"
            " cut, then from the next member"
        )
    return [f"recording {path}: {line}" for line in found]


def _kline_pair(config: Config) -> str | None:
    """The pair of a kline frame naming none, as live: the only one subscribing klines."""
    pairs = [pair for pair, rules in config.market.pairs.items() if "kline" in rules.channels]
    return pairs[0] if len(pairs) == 1 else None


@attrs.define(slots=True, eq=False)
class _TimerFire:
    bus: Bus
    clock: VirtualClock
    strategy: str
    name: str

    def __call__(self) -> None:
        self.bus.publish(Timer(self.name, self.strategy, self.clock.now()))


def _source(key: str, paper: PaperSettings) -> str:
    """Where a fill model setting came from, as the report says it."""
    if key == "fill_model":
        return f"the fill_model file {Path(paper.fill_model or '').name}"
    return "the default" if key == "default" else f"backtest.paper.{key}"


def _settings_summary(settings: BacktestSettings, venue: PaperVenue) -> dict[str, Any]:
    paper = settings.paper
    rule, latency = venue.fill_rule, venue.latency
    return {
        "fill_rule": rule.describe(),
        "fill_rule_params": {"rule": rule.rule}
        | (
            {
                "queue_start_share": str(rule.params.queue_start_share),
                "cancels": rule.params.cancels,
            }
            if rule.rule == "queue"
            else {"fill_probability": str(rule.fill_probability)}
        ),
        "fill_rule_from": _source(paper.rule_source(), paper)
        + ("" if paper.fill_probability is None else "; backtest.paper.fill_probability"),
        "latency": latency.describe(),
        "latency_params": _latency_params(latency),
        "latency_from": _source(paper.latency_source(), paper),
        "own_activity": settings.own_activity,
        "price_sources": list(settings.price_sources),
        "prices_csv": Path(settings.prices_csv).name if settings.prices_csv else None,
        "fill_price": paper.fill_price,
        "max_wait_ms": paper.max_wait_ms,
        "latency_ms": paper.latency_ms,
        "slippage": str(paper.slippage),
        "maker_fee": str(paper.maker_fee),
        "taker_fee": str(paper.taker_fee),
    }


def _latency_params(latency: LatencySettings) -> dict[str, Any]:
    """The latency model and its parameters (an empirical model's samples counted)."""
    if latency.model == "constant":
        return {"model": "constant", "ms": latency.ms}
    if latency.model == "lognormal":
        params: dict[str, Any] = {"median_ms": latency.median_ms, "sigma": latency.sigma}
    else:
        params = {"samples": len(latency.samples_ms or ())}
    return {"model": latency.model, **params, "min_ms": latency.min_ms, "max_ms": latency.max_ms}
