"""The replay loop: a recording fed through the live decoders, portfolio and bus on virtual time.

Each recorded line is parsed once (``orjson.loads``), a WebSocket frame once more, and the
frame goes through the very path it took live: :meth:`framework.venue.codec.Codec.decode_frame`
then :func:`framework.engine.portfolio.push_router` (the portfolio, then the bus, then the
strategies' hooks). Recorded match-result pages go through the live poller's paging logic
(:class:`framework.engine.matches.MatchCursor`) and the execution engine's ``attribute``.
Virtual time is the record's ``ts`` (never going back); a :class:`Timeline` runs what is due
in between, in time order: strategies' timers, the virtual match polls, price points of the
paper venue, answers and deadlines of the execution engine.

What the recording holds about the recorded node's own trading is superseded by the paper
venue in a backtest (``own_activity: supersede``, the default): its match records (entrustId
of a recorded batchCreate answer), the position pushes of the positions they made, and the
account pushes of the coins it traded are not delivered (they still give prices). All other
pushes and matches reach the strategies as they did live. REST snapshots of positions and
balances describe the recorded account and are not applied (the paper account's own are).

The loop is lean on purpose (it is measured by ``tests/benchmarks/bench_replay.py``): lines
come in batches of a few MB, counters are locals, the clock is one attribute store, a
datetime is only made when someone asks for ``now()``, and the timeline is looked at only
when a record's time reaches its next due item.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl

import attrs
import orjson

from framework.backtest.recording import RecordingReader
from framework.engine.clock import datetime_of_ms
from framework.engine.matches import MatchCursor, MatchRound
from framework.venue.codec import DEFAULT_CODEC, Codec
from framework.venue.errors import DecodeError, FrameworkError
from framework.venue.models import AccountPush, MatchRecord, PositionPush
from framework.venue.requests import (
    BALANCE_PATH,
    BATCH_CREATE_PATH,
    MATCHES_PATH,
    POSITIONS_PATH,
    parse_envelope,
)

__all__ = ["Executor", "Repeating", "ReplayClock", "ReplayStats", "Replayer", "Timeline"]

log = logging.getLogger("framework.replay")

_NEVER: Final = 1 << 62


class ReplayClock:
    """Virtual time (a :class:`framework.engine.clock.Clock`): ``ms`` is set by the replay."""

    __slots__ = ("_dt", "_dt_ms", "ms")

    def __init__(self, start_ms: int = 0) -> None:
        self.ms = start_ms
        self._dt_ms = -1
        self._dt = datetime_of_ms(0)

    def __repr__(self) -> str:
        return f"ReplayClock({self.ms})"

    def now_ms(self) -> int:
        """The virtual time in epoch milliseconds."""
        return self.ms

    def now(self) -> datetime:
        """The virtual time as a UTC datetime, made only when asked (and reused within a ms)."""
        if self._dt_ms != self.ms:
            self._dt_ms = self.ms
            self._dt = datetime_of_ms(self.ms)
        return self._dt


class Timeline:
    """Callbacks due at virtual times, run in time order (then in the order scheduled)."""

    __slots__ = ("_heap", "_seq", "clock", "ran")

    def __init__(self, clock: ReplayClock) -> None:
        self.clock = clock
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self.ran = 0

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, ms: int, callback: Callable[[], None]) -> None:
        """Run callback when virtual time reaches ms (at once, in order, if ms is past)."""
        self._seq += 1
        heapq.heappush(self._heap, (ms, self._seq, callback))

    def every(self, interval_ms: int, callback: Callable[[], None], *, first_ms: int) -> Repeating:
        """Run callback at first_ms and every interval_ms after it, until cancelled."""
        if interval_ms < 1:
            raise ValueError(f"interval must be at least 1 ms, got {interval_ms}")
        repeat = Repeating(self, interval_ms, first_ms, callback)
        self.at(first_ms, repeat)
        return repeat

    @property
    def due_at(self) -> int:
        """When the next callback is due (a huge number when none is)."""
        return self._heap[0][0] if self._heap else _NEVER

    def run_until(self, ms: int, after_each: Callable[[], None] | None = None) -> None:
        """Run every callback due at or before ms, moving the clock to each one's time."""
        heap = self._heap
        clock = self.clock
        while heap and heap[0][0] <= ms:
            at, _, callback = heapq.heappop(heap)
            if at > clock.ms:
                clock.ms = at
            self.ran += 1
            callback()
            if after_each is not None:
                after_each()


@attrs.define(slots=True, eq=False)
class Repeating:
    """A callback the timeline runs every interval_ms; cancel() stops it."""

    timeline: Timeline
    interval_ms: int
    next_ms: int
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        """Run no more."""
        self.cancelled = True

    def __call__(self) -> None:
        """Run the callback and book the next run."""
        if self.cancelled:
            return
        self.next_ms += self.interval_ms
        self.timeline.at(self.next_ms, self)
        self.callback()


@attrs.define
class ReplayStats:
    """What a replay went through (the ``recording`` section of report.json)."""

    lines: int = 0
    ws_frames: int = 0
    pushes_delivered: int = 0
    position_pushes: int = 0
    account_pushes: int = 0
    pushes_superseded: int = 0
    acks: int = 0
    malformed_frames: int = 0
    unknown_events: int = 0
    rest_answers: int = 0
    rest_errors: int = 0
    match_pages: int = 0
    matches_delivered: int = 0
    matches_superseded: int = 0
    snapshots_skipped: int = 0
    recorded_batches: int = 0
    bad_lines: int = 0
    time_went_back: int = 0
    first_ts: int | None = None
    last_ts: int | None = None


class Replayer:
    """Feeds one recording through decode -> portfolio/bus -> strategies on virtual time."""

    def __init__(
        self,
        *,
        clock: ReplayClock,
        timeline: Timeline,
        route: Callable[[PositionPush | AccountPush], None],
        on_match: Callable[[MatchRecord], None],
        codec: Codec = DEFAULT_CODEC,
        own_positions: Iterable[int] = (),
        own_coins: Iterable[str] = (),
        own_matches: Iterable[int] = (),
        executor: Executor | None = None,
    ) -> None:
        self.clock = clock
        self.timeline = timeline
        self._route = route
        self._on_match = on_match
        self._codec = codec
        self.own_positions = frozenset(own_positions)
        self.own_coins = frozenset(own_coins)
        self.own_matches = frozenset(own_matches)
        self._executor = executor if executor is not None else _Idle()
        self.stats = ReplayStats()
        self._decode_match = codec.decoder(MatchRecord)
        self._cursors: dict[str, MatchCursor] = {}
        self._rounds: dict[str, MatchRound] = {}

    def settle(self) -> None:
        """Let the execution engine send what its strategies just asked for."""
        executor = self._executor
        while executor.pending:
            executor.pump()

    def run(
        self, reader: RecordingReader, *, progress: Callable[[int], None] | None = None
    ) -> ReplayStats:
        """Replay every record of reader; progress(bytes read) is called once per batch."""
        stats = self.stats
        loads = orjson.loads
        json_error = orjson.JSONDecodeError
        decode_frame = self._codec.decode_frame
        route = self._route
        clock = self.clock
        timeline = self.timeline
        settle = self.settle
        executor = self._executor
        position_type = PositionPush
        account_type = AccountPush
        own_positions = self.own_positions
        own_coins = self.own_coins
        now = clock.ms
        due = timeline.due_at
        lines = bad = frames = delivered = positions = superseded = acks = malformed = 0
        for batch in reader.line_batches():
            lines += len(batch)
            for line in batch:
                try:
                    record = loads(line)
                    ts = record["ts"]
                    frame = record.get("frame")
                except (json_error, KeyError, TypeError, AttributeError):
                    bad += 1
                    continue
                if type(ts) is not int:
                    if type(ts) is not float:
                        bad += 1
                        continue
                    ts = int(ts)
                if ts > now:
                    if ts >= due:
                        timeline.run_until(ts, settle)
                        due = timeline.due_at
                    clock.ms = now = ts
                elif ts < now:
                    stats.time_went_back += 1
                if frame is not None:
                    frames += 1
                    try:
                        push: Any = decode_frame(loads(frame))
                    except (json_error, DecodeError) as exc:
                        if isinstance(exc, DecodeError) and exc.field == "event":
                            stats.unknown_events += 1
                        else:
                            malformed += 1
                        continue
                    kind = type(push)
                    if kind is position_type:
                        if own_positions and push.position_id in own_positions:
                            superseded += 1
                            continue
                        positions += 1
                    elif kind is account_type:
                        if own_coins and push.symbol in own_coins:
                            superseded += 1
                            continue
                    else:
                        acks += 1
                        continue
                    delivered += 1
                    route(push)
                else:
                    self._rest(record)
                    due = timeline.due_at
                if executor.pending:
                    settle()
                    due = timeline.due_at
            if progress is not None:
                progress(reader.stats.bytes_read)
            due = timeline.due_at
        for pair in list(self._rounds):
            self._finish(pair)
        stats.lines += lines
        stats.bad_lines += bad
        stats.ws_frames += frames
        stats.pushes_delivered += delivered
        stats.position_pushes += positions
        stats.account_pushes += delivered - positions
        stats.pushes_superseded += superseded
        stats.acks += acks
        stats.malformed_frames += malformed
        return stats

    # ---- REST answers

    def _rest(self, record: dict[str, Any]) -> None:
        stats = self.stats
        stats.rest_answers += 1
        path = record.get("path")
        if path == MATCHES_PATH:
            self._match_page(record)
        elif path in (POSITIONS_PATH, BALANCE_PATH):
            stats.snapshots_skipped += 1
        elif path == BATCH_CREATE_PATH:
            stats.recorded_batches += 1
        elif record.get("source") != "rest":
            stats.bad_lines += 1
            stats.rest_answers -= 1

    def _match_page(self, record: dict[str, Any]) -> None:
        stats = self.stats
        body = record.get("body")
        query = record.get("query") or ""
        if type(body) is not str or type(query) is not str:
            stats.rest_errors += 1
            return
        params = dict(parse_qsl(query))
        pair = params.get("pairName", "")
        current = self._rounds.get(pair)
        if current is not None and "matchId" not in params:
            self._finish(pair)
            current = None
        if current is None:
            cursor = self._cursors.get(pair)
            if cursor is None:
                cursor = self._cursors[pair] = MatchCursor()
            current = self._rounds[pair] = cursor.start()
        try:
            page = self._decode_page(body, current)
        except FrameworkError:
            stats.rest_errors += 1  # a refused or malformed poll: live logged it, polled again
            return
        stats.match_pages += 1
        if not current.feed(page):
            self._finish(pair)

    def _decode_page(self, body: str, current: MatchRound) -> list[MatchRecord]:
        """The page's matches; those the round only counts (not newer) carry just their id.

        A poll answers the newest page again and again, so most of its matches were seen
        before: MatchRound reads only the id of a match at or below its floor (or of any
        match while initialising), and a full decode (two date-times each) is saved.
        """
        data = parse_envelope(200, body.encode(), self._codec).data
        if data is None:
            return []
        if type(data) is not list:
            raise DecodeError("MatchRecord", None, "expected an array of matches")
        floor = current.floor
        decode = self._decode_match
        page = []
        for item in data:
            match_id = item.get("id") if type(item) is dict else None
            if type(match_id) is int and (
                current.initialise or (floor is not None and match_id <= floor)
            ):
                page.append(MatchRecord(id=match_id))
            else:
                page.append(decode(item))
        return page

    def _finish(self, pair: str) -> None:
        """Publish what a poll round found (as MatchPoller does) and move the cursor."""
        current = self._rounds.pop(pair)
        cursor = self._cursors[pair]
        own = self.own_matches
        stats = self.stats
        for match in current.new_matches():
            if match.id in own:
                stats.matches_superseded += 1
            else:
                stats.matches_delivered += 1
                self._on_match(match)
            cursor.advance(match.id)
        after = current.cursor_after()
        if after is not None:
            cursor.advance(after)


class Executor(Protocol):
    """What drives the execution engine in a replay (the paper venue's PaperExecutor)."""

    pending: bool
    """True when the engine has asked to be pumped."""

    def pump(self) -> None:
        """Send what is due."""
        ...


class _Idle:
    """No execution engine: nothing is ever pending."""

    pending = False

    def pump(self) -> None:
        """Nothing to send."""
