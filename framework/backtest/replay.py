"""The replay loop: a recording fed through the live decoders, portfolio and bus on virtual time.

Recorded lines come from the reader as typed records, a piece of the file per call. A
WebSocket frame gets a first look (:func:`framework.venue.peek.peek_push`: which push it is
and its routing fields; anything else, an acknowledgement say, goes the long way at once).
When someone listens to that kind of push, the frame goes through the very path it took
live: :meth:`framework.venue.codec.Codec.decode_frame` then
:func:`framework.engine.portfolio.push_router` (the portfolio, then the bus, then the
strategies' hooks). When nobody does, the push joins the portfolio's filing queues
(:class:`~framework.engine.portfolio.FilingQueues`) undecoded, is filed by the same rules,
and the same codec decodes it only if the portfolio is read; there is no event to publish.

Recorded match-result pages go through the live poller's paging logic
(:class:`framework.engine.matches.MatchCursor`), read at a first look
(:func:`framework.venue.peek.peek_match_page`). A new match is decoded and goes to the
execution engine's ``attribute`` unless ``external`` says it was only counted (nobody
listens to matches and the engine could link it to none of its orders). On the way, the
replay notes every price the recording shows (:class:`PriceFinder`, the scan's rules), so a
backtest that never needed prices during the replay has them for its report.

Virtual time is the record's ``ts`` (never going back); a
:class:`~framework.backtest.timeline.Timeline` runs what is due in between, in time order:
strategies' timers, the virtual match polls, price points of the paper venue, report
samples, answers and deadlines of the execution engine.

What the recording holds about the recorded node's own trading is superseded by the paper
venue in a backtest (``own_activity: supersede``, the default): its match records (entrustId
of a recorded batchCreate answer), the position pushes of the positions they made, and the
account pushes of the coins it traded are not delivered (they still give prices). All other
pushes and matches reach the strategies as they did live. REST snapshots of positions and
balances describe the recorded account and are not applied (the paper account's own are).

The loop is lean on purpose (it is measured by ``tests/benchmarks/bench_replay.py``): records
come in batches, counters are locals, the clock is one attribute store, a
datetime is only made when someone asks for ``now()``, and the timeline is looked at only
when a record's time reaches its next due item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import parse_qsl

import attrs
import orjson

from framework.backtest.recording import LineRecord, RecordingReader
from framework.backtest.scan import PriceFinder
from framework.backtest.timeline import Timeline
from framework.engine.clock import VirtualClock
from framework.engine.events import AccountChanged, PositionChanged
from framework.engine.matches import MatchCursor, MatchRound
from framework.engine.portfolio import FilingQueues, Portfolio
from framework.venue.codec import DEFAULT_CODEC, Codec
from framework.venue.errors import DecodeError, FrameworkError
from framework.venue.models import AccountPush, MatchRecord, PositionPush
from framework.venue.peek import (
    PEEK_ERRORS,
    MatchHead,
    PositionRoute,
    peek_match_page,
    peek_opening_price,
    peek_push,
)
from framework.venue.requests import (
    BALANCE_PATH,
    BATCH_CREATE_PATH,
    MATCHES_PATH,
    POSITIONS_PATH,
    parse_envelope,
)

__all__ = ["Executor", "ReplayStats", "Replayer"]

log = logging.getLogger("framework.replay")


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
        clock: VirtualClock,
        timeline: Timeline,
        route: Callable[[PositionPush | AccountPush], None],
        on_match: Callable[[MatchRecord], None],
        codec: Codec = DEFAULT_CODEC,
        own_positions: Iterable[int] = (),
        own_coins: Iterable[str] = (),
        own_matches: Iterable[int] = (),
        executor: Executor | None = None,
        portfolio: Portfolio | None = None,
        listeners: Mapping[type[Any], object] | None = None,
        external: Callable[[list[int | None]], bool] | None = None,
    ) -> None:
        self.clock = clock
        self.timeline = timeline
        self._route = route
        self._on_match = on_match
        self._codec = codec
        self._decode_frame = codec.decode_frame
        self._portfolio = portfolio
        self._listeners = listeners
        self.own_positions = frozenset(own_positions)
        self.own_coins = frozenset(own_coins)
        self.own_matches = frozenset(own_matches)
        self._executor = executor if executor is not None else _Idle()
        self.stats = ReplayStats()
        self._decode_match = codec.decoder(MatchRecord)
        self._cursors: dict[str, MatchCursor] = {}
        self._rounds: dict[str, MatchRound[Any]] = {}
        self._bodies: dict[str, list[str]] = {}
        self._queries: dict[str, tuple[str, bool]] = {}
        self._external = external
        self.prices = PriceFinder()
        """The prices the recording shows, found on the way (by the scan's rules)."""
        self.finished = False
        """True once run() has gone through the whole recording."""
        self._rests = 0

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
        portfolio = self._portfolio if self._listeners is not None else None
        bad_before = reader.stats.bad_lines
        lines = 0
        for batch in reader.record_batches():
            lines += len(batch)
            self._replay_batch(batch)
            if portfolio is not None:
                portfolio.file_due()  # the queues stay short
            if progress is not None:
                progress(reader.stats.bytes_read)
        for pair in list(self._rounds):
            self._finish(pair)
        self.finished = True
        bad = reader.stats.bad_lines - bad_before  # lines that are not records: the reader's
        stats.lines += lines + bad
        stats.bad_lines += bad
        stats.ws_frames += lines - self._rests
        self._rests = 0
        return stats

    def _wanted(self) -> tuple[bool, bool]:
        """Whether position and account pushes go the live way (someone listens, or no portfolio).

        Read again whenever something ran: a callback may subscribe or unsubscribe.
        """
        listeners = self._listeners
        if listeners is None or self._portfolio is None:
            return True, True
        return bool(listeners.get(PositionChanged)), bool(listeners.get(AccountChanged))

    def _replay_batch(self, batch: list[LineRecord]) -> None:
        """Replay one batch of records, in order."""
        stats = self.stats
        peek = peek_push
        peek_errors = PEEK_ERRORS
        clock = self.clock
        timeline = self.timeline
        settle = self.settle
        executor = self._executor
        deliver = self._deliver
        decode = self._decode
        # (Without a portfolio every push goes the live way: the queues are never used.)
        queues = self._portfolio.filing_queues() if self._portfolio is not None else FilingQueues()
        queue_route, queue_frame = queues.position_routes.append, queues.position_frames.append
        queue_balance, queue_account = queues.account_routes.append, queues.account_frames.append
        position_route = PositionRoute
        own_positions = self.own_positions
        own_coins = self.own_coins
        new_positions = self.prices.new_positions.append
        now = clock.ms
        due = timeline.due_at
        rests = accounts = positions = superseded = 0
        wants_positions, wants_accounts = self._wanted()
        for record in batch:
            ts = record.ts
            if type(ts) is not int:
                ts = int(ts)
            if ts > now:
                if ts >= due:
                    timeline.run_until(ts, settle)
                    due = timeline.due_at
                    wants_positions, wants_accounts = self._wanted()
                clock.ms = now = ts
            elif ts < now:
                stats.time_went_back += 1
            frame = record.frame
            if frame is None:
                rests += 1
                self._rest(record, ts)
                due = timeline.due_at
            else:
                try:
                    head = peek(frame)
                except peek_errors:
                    # not a push with its routing fields (an ack?): the live decoder says
                    deliver(decode(frame, ts if record.source == "ws" else None))
                else:
                    data = head.data
                    if type(data) is position_route:
                        if data.change_type == "NEW" and record.source == "ws":
                            new_positions((ts, data.symbol, peek_opening_price(frame)))
                        if own_positions and data.position_id in own_positions:
                            superseded += 1
                            continue
                        if wants_positions:
                            deliver(decode(frame))
                        else:
                            positions += 1
                            queue_route(data)
                            queue_frame(frame)
                            continue  # nothing ran: nothing can be pending
                    else:
                        if own_coins and data.symbol in own_coins:
                            superseded += 1
                            continue
                        if wants_accounts:
                            deliver(decode(frame))
                        else:
                            accounts += 1
                            queue_balance(data)
                            queue_account(frame)
                            continue  # nothing ran: nothing can be pending
            if executor.pending:
                settle()
                due = timeline.due_at
            wants_positions, wants_accounts = self._wanted()
        self._rests += rests
        stats.pushes_delivered += positions + accounts
        stats.position_pushes += positions
        stats.account_pushes += accounts
        stats.pushes_superseded += superseded

    def _decode(self, frame: str, prices_ts: int | None = None) -> Any:
        """The frame decoded by the live codec; None (counted) for an ack or a bad frame.

        prices_ts: the record's time, when the frame's price (if any) is still to be taken.
        """
        stats = self.stats
        try:
            obj = orjson.loads(frame)
            if prices_ts is not None:
                self.prices.frame(prices_ts, obj)
            push = self._decode_frame(obj)
        except (orjson.JSONDecodeError, DecodeError) as exc:
            if isinstance(exc, DecodeError) and exc.field == "event":
                stats.unknown_events += 1
            else:
                stats.malformed_frames += 1
            return None
        if type(push) is not PositionPush and type(push) is not AccountPush:
            stats.acks += 1
            return None
        return push

    def _deliver(self, push: PositionPush | AccountPush | None) -> None:
        """Route a decoded push (the live path), unless it is the recorded node's own."""
        if push is None:
            return
        stats = self.stats
        if type(push) is PositionPush:
            if self.own_positions and push.position_id in self.own_positions:
                stats.pushes_superseded += 1
                return
            stats.position_pushes += 1
        else:
            if self.own_coins and push.symbol in self.own_coins:
                stats.pushes_superseded += 1
                return
            stats.account_pushes += 1
        stats.pushes_delivered += 1
        self._route(push)

    # ---- REST answers

    def _rest(self, record: LineRecord, ts: int) -> None:
        stats = self.stats
        stats.rest_answers += 1
        path = record.path
        if path == MATCHES_PATH:
            self._match_page(record, ts)
        elif path in (POSITIONS_PATH, BALANCE_PATH):
            stats.snapshots_skipped += 1
        elif path == BATCH_CREATE_PATH:
            stats.recorded_batches += 1
        elif record.source != "rest":
            stats.bad_lines += 1
            stats.rest_answers -= 1

    def _match_page(self, record: LineRecord, ts: int) -> None:
        stats = self.stats
        body = record.body
        if body is None:
            stats.rest_errors += 1
            return
        pair, paging = self._query(record.query or "")
        current = self._rounds.get(pair)
        if current is not None and not paging:
            self._finish(pair)
            current = None
        if current is None:
            cursor = self._cursors.get(pair)
            if cursor is None:
                cursor = self._cursors[pair] = MatchCursor()
            current = self._rounds[pair] = cursor.start()
            self._bodies[pair] = []
        page: Sequence[MatchHead | MatchRecord]
        try:
            head = peek_match_page(body)
        except PEEK_ERRORS:
            head = None
        if head is not None and head.code == 200:
            page = head.data or ()
            self._bodies[pair].append(body)
            if record.source == "rest":
                self.prices.page(ts, head)
        else:  # not the shape of a good answer: the live decoder says what it is
            try:
                page = self._decode_page(body, current)
            except FrameworkError:
                stats.rest_errors += 1  # a refused or malformed poll: live logged it, polled again
                return
        stats.match_pages += 1
        if not current.feed(page):
            self._finish(pair)

    def _query(self, query: str) -> tuple[str, bool]:
        """(pairName, whether matchId is given) of a poll's query; polls repeat a few queries."""
        found = self._queries.get(query)
        if found is None:
            params = dict(parse_qsl(query))
            found = (params.get("pairName", ""), "matchId" in params)
            if len(self._queries) < 4096:
                self._queries[query] = found
        return found

    def _decode_page(self, body: str, current: MatchRound[Any]) -> list[MatchRecord]:
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
        """Publish what a poll round found (as MatchPoller does) and move the cursor.

        A new match read at a first look is decoded (from its page, by the live codec) only
        when someone may need it: ``external`` is asked first, with the round's entrustIds,
        and says whether they were only counted (nobody listens to matches and the engine
        could link none of them to its orders). A match that does not decode then is counted
        as a poll error.
        """
        current = self._rounds.pop(pair)
        bodies = self._bodies.pop(pair, [])
        cursor = self._cursors[pair]
        own = self.own_matches
        stats = self.stats
        found = current.new_matches()  # the cursor moves past them all below
        if own:
            kept = [m for m in found if m.id not in own]
            stats.matches_superseded += len(found) - len(kept)
            found = kept
        external = self._external
        if external is not None and found:
            order_ids = [m.entrust_id for m in found if type(m) is MatchHead]
            if len(order_ids) == len(found) and external(order_ids):
                stats.matches_delivered += len(found)
                found = []
        items: dict[int, Any] | None = None
        for head in found:
            match_id = head.id
            if type(head) is MatchHead:
                if items is None:
                    items = _items_by_id(bodies)
                try:
                    match = self._decode_match(items.get(match_id))
                except DecodeError:
                    stats.rest_errors += 1
                    continue
            else:
                match = head
            stats.matches_delivered += 1
            self._on_match(match)
        after = current.cursor_after()
        if after is not None:
            cursor.advance(after)


def _items_by_id(bodies: list[str]) -> dict[int, Any]:
    """The match objects of a round's pages (good answers) by id, parsed by orjson."""
    out: dict[int, Any] = {}
    for body in bodies:
        for item in orjson.loads(body).get("data") or ():
            if type(item) is dict and type(item.get("id")) is int:
                out.setdefault(item["id"], item)
    return out


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
