"""``perpframe incident replay``: a bundle's session replayed through the same kernel.

Why its own wiring rather than a backtest: a backtest asks what a strategy *would* have done
against a paper account; an incident replay asks whether the strategies do again what they
did. So the edges differ from a backtest's: every recorded push and match page is delivered
as live heard it (own fills included), the venue answers from the live journal
(:class:`~framework.incident.venue.JournalVenue`: nothing is ever sent, no network config is
read), client ids are drawn from the live node's id space, and the strategies are built from
the source carried in the bundle, never from what is installed. The rest is the kernel, the
Replayer and the Executor of a backtest, unchanged.

The replay runs from the session's first recorded line (the warm-up) to T2 and counts the
window ``[T1, T2]``; each recorded line is one event, numbered from 1. A hook may stop at
event N (``--break-at N``: pdb, with the state in ``state``).
"""

from __future__ import annotations

import contextlib
import random
import re
import sys
import tempfile
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from framework.backtest.replay import Replayer
from framework.backtest.timeline import PRICES, Repeating, Timeline
from framework.config import Config, parse_config, split_section
from framework.engine.bus import Bus
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import Timer
from framework.engine.intents import OrderIntent
from framework.engine.kernel import Kernel, StrategyFactory
from framework.engine.strategy import Strategy
from framework.engine.venue import Executor
from framework.incident.bundle import BundleError, read_bundle
from framework.incident.venue import JournalVenue, LiveIds
from framework.recording import LINE_ERRORS, LineRecord, RecordingReader, decode_line
from framework.venue.codec import push_types
from framework.venue.errors import FrameworkError
from framework.venue.requests import (
    BATCH_CANCEL_PATH,
    BATCH_CANCEL_WITH_RESULTS_PATH,
    BATCH_CREATE_PATH,
    CANCEL_ALL_PATH,
    CANCEL_BY_CLIENT_ID_PATH,
    CANCEL_PATH,
)

__all__ = ["Made", "ReplayOutcome", "ReplayState", "describe", "live_start", "replay_bundle"]


@attrs.frozen
class Made:
    """One intent the replay's strategies made: after which event, when, and what."""

    event: int
    ms: int
    strategy: str
    client_order_id: str
    intent: OrderIntent
    rank: int
    """Its number among its strategy's intents, from 1."""
    fire: tuple[str, str, int] | None = None
    """The timer tick it was made in: (strategy, timer name, nominal ms), else None."""


@attrs.define
class ReplayState:
    """What --break-at hands the debugger: the kernel and what the replay did so far."""

    event: int
    """The number of the event just replayed (from 1)."""
    record: LineRecord
    """That event's recorded line."""
    kernel: Kernel
    """The kernel: its portfolio, market view, bus and execution engine."""
    strategies: list[Strategy]
    """The strategies, built from the bundled source."""
    made: list[Made]
    """The intents made up to this event (a copy)."""
    venue: JournalVenue
    """The replay's venue: what was sent to it so far (``sent``)."""


@attrs.define
class ReplayOutcome:
    """A finished replay: the bundle's manifest and live slice, and what the replay did."""

    manifest: dict[str, Any]
    journal: dict[str, Any]
    """The bundle's journal slice (journal.json)."""
    events: int
    """Events replayed (recorded lines, warm-up included)."""
    window_events: int
    """Of them, those in [T1, T2]."""
    made: list[Made]
    sent: list[tuple[int, str, tuple[str, ...]]]
    """The calls the venue got: (virtual ms, create/cancel/cancel_all, clientOrderIds)."""
    open_at_t1: list[str] | None
    """The replay's open orders when T1 came (None: the session ended before)."""
    recording: bytes
    stopped_at: int | None = None
    """The event --break-at stopped at."""


def describe(record: LineRecord) -> str:
    """One short line naming a recorded event."""
    if record.frame is not None:
        return f"ws {record.frame[:100]}"
    if record.kind is not None:
        return f"market {record.kind} {getattr(record, 'pair', '')}"
    return f"rest {record.path} {record.query or ''}".rstrip()


def _bundled_modules(sources: Mapping[str, bytes]) -> dict[str, types.ModuleType]:
    """Each bundled strategy module, run from its bundled source (not registered yet)."""
    modules: dict[str, types.ModuleType] = {}
    for module_name, source in sources.items():
        module = types.ModuleType(module_name)
        module.__file__ = f"<bundle>/{module_name.replace('.', '/')}.py"
        with _registered({module_name: module}):  # what the module does while it runs
            try:
                code = compile(source, module.__file__, "exec")
                exec(code, module.__dict__)  # the bundle's strategy, as live ran it
            except Exception as exc:
                what = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:200]
                raise FrameworkError(
                    f"bundle: strategy module {module_name} does not run ({what})"
                ) from None
        modules[module_name] = module
    return modules


@contextlib.contextmanager
def _registered(modules: Mapping[str, types.ModuleType]) -> Iterator[None]:
    """The bundled modules in sys.modules under their names while the block runs (type
    hints, pickling, logging name them), whatever was there put back after."""
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _bundled_classes(
    modules: Mapping[str, types.ModuleType], specs: Sequence[Any]
) -> list[StrategyFactory]:
    """The config's strategies, built from the bundle's source of their modules."""
    factories: list[StrategyFactory] = []
    for spec in specs:
        module_name, _, class_name = spec.class_.partition(":")
        module = modules.get(module_name)
        if module is None:
            raise FrameworkError(f"bundle: no source for strategy module {module_name!r}")
        cls = getattr(module, class_name, None)
        if not (isinstance(cls, type) and issubclass(cls, Strategy)):
            raise FrameworkError(f"bundle: {spec.class_} is not a Strategy in its bundled source")
        factories.append(_factory(cls, spec))
    return factories


def _factory(cls: type[Strategy], spec: Any) -> StrategyFactory:
    def make(context: Any) -> Strategy:
        return cls(spec.name, context, spec.params, pairs=spec.pairs)

    make.__name__ = spec.name
    return make


class _EventReader(RecordingReader):
    """The recording one record at a time, a hook after each (the replay's event count), and
    the strategies' start before the event numbered ``start_at``."""

    def __init__(
        self,
        path: Path,
        after: Callable[[int, LineRecord], None],
        start_at: int,
        start: Callable[[], None],
    ) -> None:
        super().__init__(path)
        self._after = after
        self._start_at = start_at
        self._start = start
        self.count = 0

    def record_batches(self) -> Iterator[list[LineRecord]]:
        for batch in super().record_batches():
            for record in batch:
                if self.count + 1 == self._start_at:
                    self._start()
                yield [record]
                self.count += 1
                self._after(self.count, record)


_EVENT: Final = re.compile(r'"event"\s*:\s*"(api_[a-z]+)')
_MARKET_EVENTS: Final = frozenset({"api_trade", "api_depth", "api_kline"})
_ORDER_PATHS: Final = frozenset(
    {
        BATCH_CREATE_PATH,
        CANCEL_PATH,
        CANCEL_BY_CLIENT_ID_PATH,
        BATCH_CANCEL_PATH,
        BATCH_CANCEL_WITH_RESULTS_PATH,
        CANCEL_ALL_PATH,
    }
)


def live_start(recording: bytes) -> int:
    """The number of the first event heard after the live strategies started: the first
    private WebSocket frame (the node opens its private stream right after the start, and
    starts after its first REST reads and, with a ``market:`` section, once the market
    feed is subscribed and polled once) or answer to an order call, whichever comes first.
    1 when there is none (start first, as a backtest)."""
    for number, line in enumerate(recording.splitlines(), start=1):
        try:
            record = decode_line(line)
        except LINE_ERRORS:
            continue
        frame = record.frame
        if frame is not None:
            found = _EVENT.search(frame[:200])
            if found is None or found.group(1) not in _MARKET_EVENTS:
                return number
        elif record.path in _ORDER_PATHS:  # an order's answer: the strategies had started
            return number
    return 1


def _first_seq(intents: Sequence[Mapping[str, Any]], prefix: str) -> int:
    for intent in intents:
        coid = str(intent["client_order_id"])
        if coid.startswith(prefix):
            try:
                return int(coid[len(prefix) :], 16)
            except ValueError:
                continue
    return 0


def replay_bundle(
    bundle: str | Path,
    *,
    break_at: int | None = None,
    on_break: Callable[[ReplayState], None] | None = None,
    delays: Mapping[tuple[str, str, int], int] | None = None,
) -> ReplayOutcome:
    """Replay a bundle (refused in one line when it does not match its manifest).

    delays: timer ticks, by (strategy, name, nominal ms), to run at a later ms instead (when
    the live node acted on them: :func:`framework.incident.compare.replay_and_compare`).
    """
    manifest, parts = read_bundle(bundle)
    try:
        text = split_section(parts["config.yaml"].decode(), "backtest")[0]
        config = parse_config(
            text, source=f"{bundle}:config.yaml", resolve_strategies=False, venue_used=False
        )
        sources = {
            module: parts[entry["part"]] for module, entry in manifest.get("strategies", {}).items()
        }
        modules = _bundled_modules(sources)
        with _registered(modules):
            return _replay(bundle, manifest, parts, config, modules, break_at, on_break, delays)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a crafted bundle
        what = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:200]
        raise BundleError(f"bundle {bundle}: not a bundle this replay reads ({what})") from None


def _replay(
    bundle: str | Path,
    manifest: dict[str, Any],
    parts: dict[str, bytes],
    config: Config,
    modules: Mapping[str, types.ModuleType],
    break_at: int | None,
    on_break: Callable[[ReplayState], None] | None,
    delays: Mapping[tuple[str, str, int], int] | None,
) -> ReplayOutcome:
    journal = orjson.loads(parts["journal.json"])
    factories = _bundled_classes(modules, config.strategies)
    window = manifest["window"]
    t1, t2 = int(window["from_ms"]), int(window["to_ms"])
    start = int(manifest["session"]["first_ms"])
    intents = journal["intents"]
    node = str(journal["node"])
    tag = journal.get("id_tag") or "x"
    prefix = f"{node}{tag}-"

    clock = VirtualClock(start)
    timeline = Timeline(clock)
    kernel = Kernel(config, clock)
    venue = JournalVenue(intents, now_ms=clock.now_ms)
    ids = ClientIdGenerator(node, LiveIds(tag, _first_seq(intents, prefix)))
    executor = Executor(
        partial(kernel.build_engine, ids=ids, random=random.Random(1).random),
        venue,
        schedule=timeline.at,
    )
    engine = executor.engine
    made: list[Made] = []
    events = [0]

    live_of: dict[str, list[Mapping[str, Any]]] = {}
    for entry in intents:
        live_of.setdefault(str(entry["strategy"]), []).append(entry)
    ranks: dict[str, int] = {}

    firing: list[tuple[str, str, int] | None] = [None]  # the timer tick running, if any

    def submit(strategy: str, intent: OrderIntent) -> str:
        coid = engine.submit(strategy, intent)
        rank = ranks[strategy] = ranks.get(strategy, 0) + 1
        made.append(Made(events[0], clock.ms, strategy, coid, intent, rank, firing[0]))
        theirs = live_of.get(strategy, [])
        if rank <= len(theirs):
            venue.link(coid, theirs[rank - 1])
        return coid

    timers: dict[tuple[str, str], Repeating] = {}

    def schedule(strategy: str, name: str, every_s: float) -> None:
        interval = max(1, round(every_s * 1000))
        old = timers.pop((strategy, name), None)
        if old is not None:
            old.cancel()
        timers[(strategy, name)] = timeline.every(
            interval,
            _TimerFire(kernel.bus, clock, strategy, name, timeline, delays or {}, firing),
            first_ms=clock.ms + interval,
        )

    strategies = kernel.load_strategies(schedule=schedule, submit=submit, factories=factories)
    kernel.feeds("recording", push_types())
    kernel.load_sources(config.sources)
    replayer = Replayer(
        clock=clock,
        timeline=timeline,
        routes=kernel.routes,
        on_match=kernel.on_match,
        sources=kernel.sources,
        executor=executor,
        reread_ids=config.polling.reread_ids,
        reread_age_ms=int(config.polling.reread_age_s * 1000),
        declare=partial(kernel.feeds, "recording"),
    )
    window_events = [0]
    open_at_t1: list[list[str]] = []
    stopped: list[int] = []

    def at_t1() -> None:  # first in T1's ms: what was open before it
        open_at_t1.append(sorted(o.client_order_id for o in engine.open_orders()))

    timeline.at(t1, at_t1, rank=PRICES)

    def after(index: int, record: LineRecord) -> None:
        events[0] = index
        ts = int(record.ts)
        if t1 <= ts <= t2:
            window_events[0] += 1
        if break_at is not None and index == break_at and not stopped:
            stopped.append(index)
            state = ReplayState(index, record, kernel, strategies, list(made), venue)
            (on_break or _debug)(state)

    with tempfile.TemporaryDirectory(prefix="incident-") as tmp:
        path = Path(tmp) / "recording.jsonl"
        path.write_bytes(parts["recording.jsonl"])

        def begin() -> None:  # as live: the first REST reads and the market heard first
            timeline.run_until(clock.ms, replayer.settle)
            for _ in kernel.starting():
                pass
            replayer.settle()

        reader = _EventReader(path, after, live_start(parts["recording.jsonl"]), begin)
        replayer.run(reader)
        # Timers run on to T2, or to the session's last line when it ended before (the
        # live node stopped then: what its timers would have done after is no event).
        end = min(t2, int(manifest["session"]["last_ms"]))
        timeline.run_until(max(clock.ms, end), replayer.settle)
        replayer.settle()
    return ReplayOutcome(
        manifest=manifest,
        journal=journal,
        events=events[0],
        window_events=window_events[0],
        made=made,
        sent=venue.sent,
        open_at_t1=open_at_t1[0] if open_at_t1 else None,
        recording=parts["recording.jsonl"],
        stopped_at=stopped[0] if stopped else None,
    )


def _debug(state: ReplayState) -> None:
    """--break-at's default: pdb, with the replay's state as ``state``."""
    import pdb

    print(
        f"incident replay: stopped after event {state.event} ({describe(state.record)});"
        " the replay's state is `state` (kernel, strategies, made, venue); `c` goes on",
        file=sys.stderr,
    )
    pdb.Pdb().set_trace()


@attrs.define(slots=True, eq=False)
class _TimerFire:
    """A timer's tick: at its nominal time, or when live acted on it (``delays``)."""

    bus: Bus
    clock: VirtualClock
    strategy: str
    name: str
    timeline: Timeline
    delays: Mapping[tuple[str, str, int], int]
    firing: list[tuple[str, str, int] | None]

    def __call__(self) -> None:
        key = (self.strategy, self.name, self.clock.ms)
        late = self.delays.get(key)
        if late is not None and late > self.clock.ms:
            self.timeline.at(late, partial(self.tick, key))
        else:
            self.tick(key)

    def tick(self, key: tuple[str, str, int]) -> None:
        """Publish the tick; what the strategy submits in it is noted as the tick's."""
        self.firing[0] = key
        try:
            self.bus.publish(Timer(self.name, self.strategy, self.clock.now()))
        finally:
            self.firing[0] = None
