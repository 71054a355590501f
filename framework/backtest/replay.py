"""The replay loop: a recording fed through the live decoders, portfolio and bus on virtual time.

Recorded lines come from the reader as typed records, a piece of the file per call. A
WebSocket frame goes through the very path it took live: the venue codec decodes it
(:func:`framework.venue.codec.decode_frame`, straight from its text) and the push goes to
the route of its type (``routes``, the kernel's intake: for the venue's two pushes the
portfolio, then the bus, then the strategies' hooks), listened to or not; a push of a type a
plug-in registered goes to its route as well. A configured event source's records
(:meth:`~framework.engine.strategy.Source.timed`) are fed on the same virtual time.

Market data goes the same way (issue 27): a WebSocket market frame (api_trade, api_depth,
api_kline) is decoded by :class:`~framework.venue.market.MarketCodec` and a ``market`` line
(a public answer the live feed fed: mark or index price, depth, trades, klines) by its REST
decoders; each record goes to the route of its type (the kernel's: the read model
``self.market``, then the hooks on_trade, on_book, on_bar, on_mark), in recorded order with
the private pushes, as live. The market types are declared (``declare``, Kernel.feeds) at
the first market record, so a recording without market data declares none. A market frame
or answer that does not decode is counted (``market_errors``), never delivered.

Recorded match-result pages are decoded as the live poller decodes them and go through its
paging logic (:class:`framework.engine.matches.MatchCursor`); a new match goes to the
execution engine's ``attribute`` by way of ``on_match``. On the way, the replay notes every
price the recording shows (:class:`PriceFinder`, the scan's rules).

Virtual time is the record's ``ts``; a :class:`~framework.backtest.timeline.Timeline` runs
what is due in between, in time order: strategies' timers, the virtual match polls, price
points of the paper venue, report samples, answers and deadlines of the execution engine.
Records are replayed in file order and time never goes back: a record older than the time
reached is replayed at that time (counted in ``time_went_back``, the first one's line kept).
Lines that are not records are the reader's: counted there, never replayed.

What the recording holds about the recorded node's own trading is superseded by the paper
venue in a backtest (``own_activity: supersede``, the default): its match records (entrustId
of a recorded batchCreate answer), the position pushes of the positions they made, and the
account pushes of the coins it traded are not delivered (they still give prices). All other
pushes and matches reach the strategies as they did live. REST snapshots of positions and
balances describe the recorded account and are not applied (the paper account's own are).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl

import attrs

from framework.backtest.scan import PriceFinder
from framework.backtest.timeline import Timeline
from framework.engine.clock import VirtualClock
from framework.engine.matches import MatchCursor, MatchRound
from framework.engine.strategy import Source
from framework.engine.venue import Executor
from framework.recording import LineRecord, MarketLine, RecordingReader
from framework.venue.codec import decode_frame, decode_match_answer
from framework.venue.errors import ConfigError, DecodeError, FrameworkError
from framework.venue.market import (
    DEFAULT_MARKET_CODEC,
    DEPTH,
    KLINE,
    TRADE,
    Bar,
    Book,
    IndexPrice,
    MarketCodec,
    MarketRecord,
    MarkPrice,
    Trade,
)
from framework.venue.models import AccountPush, ChangeType, MatchRecord, PositionPush, SubscribeAck
from framework.venue.requests import (
    BALANCE_PATH,
    BATCH_CREATE_PATH,
    MATCHES_PATH,
    POSITIONS_PATH,
)

__all__ = ["MarketTap", "ReplayStats", "Replayer"]

log = logging.getLogger("framework.replay")

_NEW = ChangeType.NEW
_OTHER: Final = object()  # a frame left to the push decoder
_MARKET_TYPES: Final = (Trade, Book, Bar, MarkPrice, IndexPrice)
_MARKET_HEADS: Final = tuple(f'{{"event":"{event}"' for event in (TRADE, DEPTH, KLINE))
"""How the venue's market frames begin; one that begins otherwise is found after the
private decoder calls its event unknown (slower, as correct)."""


class MarketTap(Protocol):
    """What hears each market record right after the strategies: the paper venue, reading
    the market from the replay's read model (the route's) while it is idle."""

    def on_market(self, record: MarketRecord) -> None:
        """Hear one record."""

    @property
    def idle(self) -> bool:
        """True when no record can fill (no order rests, no position is open): the tap then
        reads the market from the replay's read model when it needs it, and hears none."""


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
    market_frames: int = 0
    """WebSocket market frames (api_trade, api_depth, api_kline) decoded."""
    market_answers: int = 0
    """Market lines (public answers the live feed fed) decoded."""
    market_records: int = 0
    """Trades, books, bars, mark and index prices delivered from them."""
    market_errors: int = 0
    """Market frames and answers that did not decode (counted, not delivered)."""

    def report(self) -> dict[str, int | None]:
        """The counters for report.json; the market ones only when the recording had some."""
        out = attrs.asdict(self)
        if not (self.market_frames or self.market_answers or self.market_errors):
            for name in ("market_frames", "market_answers", "market_records", "market_errors"):
                del out[name]
        return out


class Replayer:
    """Feeds one recording through decode -> portfolio/bus -> strategies on virtual time."""

    def __init__(
        self,
        *,
        clock: VirtualClock,
        timeline: Timeline,
        routes: Mapping[type[Any], Callable[[Any], None]],
        on_match: Callable[[MatchRecord], None],
        sources: Iterable[Source] = (),
        own_positions: Iterable[int] = (),
        own_coins: Iterable[str] = (),
        own_matches: Iterable[int] = (),
        executor: Executor | None = None,
        reread_ids: int = 0,
        reread_age_ms: int = 0,
        market: MarketCodec = DEFAULT_MARKET_CODEC,
        declare: Callable[[Iterable[type[Any]]], None] | None = None,
        on_market: Callable[[MarketRecord], None] | None = None,
        tap: MarketTap | None = None,
        frame_pair: str | None = None,
    ) -> None:
        self.clock = clock
        self._market = market
        self._frame_pair = frame_pair
        """The pair of a market frame naming none (a kline names only contractPairId), as
        the live stream gives it: the only pair subscribing klines (None: refused)."""
        self._declare = declare
        self._market_routes: dict[type[Any], Callable[[Any], None]] | None = None
        self._market_pairs: set[str] = set()
        if on_market is not None and tap is not None:
            raise ValueError("Replayer: give on_market or tap (whose on_market it is), not both")
        self.on_market = on_market if tap is None else tap.on_market
        """Called with every market record right after it is delivered (the paper venue's
        view of the recorded market: the fills a trade makes are heard after the trade, as
        the venue publishes a tick's trade before the fills it causes)."""
        self._tap = tap
        # tap: on_market is its; it reads the read model the market routes feed whenever it
        # is idle (PaperVenue.read_market). While it is idle, it hears no record (measured:
        # the call per record was a tenth of a market replay); whether it is changes only
        # when an order is sent or something on the timeline ran: it is asked then (_idle).
        self._defer = False
        # The live poller's window (config polling.reread_*): its rounds are replayed as
        # they ran, page for page, so a match listed late is delivered when live did.
        self._reread = (reread_ids, reread_age_ms)
        self.timeline = timeline
        self._routes = routes
        self._sources = tuple(sources)
        self._on_match = on_match
        self.own_positions = frozenset(own_positions)
        self.own_coins = frozenset(own_coins)
        self.own_matches = frozenset(own_matches)
        self._executor = executor
        self.stats = ReplayStats()
        self._cursors: dict[str, MatchCursor] = {}
        self._rounds: dict[str, MatchRound[Any]] = {}
        self._queries: dict[str, tuple[str, int | None]] = {}
        self.prices = PriceFinder()
        """The prices the recording shows, found on the way (by the scan's rules)."""
        self.finished = False
        """True once run() has gone through the whole recording."""
        self.first_back_line: int | None = None
        """The line number of the first record older than the time reached before it."""
        self._reader: RecordingReader | None = None
        self._batches: Iterator[list[LineRecord]] | None = None
        self._left: tuple[list[LineRecord], int] | None = None  # a batch the lead split
        self._led = 0
        self._bad_before = 0

    def settle(self) -> None:
        """Let the execution engine send what its strategies just asked for."""
        executor = self._executor
        while executor is not None and executor.pending:
            executor.pump()

    def _idle(self) -> bool:
        """Whether the tap hears no record now (it is idle), kept in _defer."""
        tap = self._tap  # no market record yet: nothing to leave out (and none to ask)
        self._defer = defer = tap is not None and self._market_routes is not None and tap.idle
        return defer

    def _open(self, reader: RecordingReader) -> Iterator[list[LineRecord]]:
        """The reader's batches, opened once (by lead or run)."""
        if self._batches is None:
            self._reader = reader
            self._bad_before = reader.stats.bad_lines
            self._batches = reader.record_batches()
        return self._batches

    def lead(self, reader: RecordingReader, before_start: Callable[[LineRecord], bool]) -> None:
        """Replay the leading records that came before the recorded node's start (before_start:
        :class:`~framework.backtest.start_gate.StartGate`); run() goes on from the next one."""
        for batch in self._open(reader):
            n = 0
            for record in batch:
                if not before_start(record):
                    break
                n += 1
            self._led += n
            if n:
                self._replay_batch(batch, stop=n)
            if n < len(batch):
                self._left = (batch, n)
                return

    def run(
        self, reader: RecordingReader, *, progress: Callable[[int], None] | None = None
    ) -> ReplayStats:
        """Replay every record of reader (after lead's, if it ran); progress(bytes read) is
        called once per batch."""
        stats = self.stats
        batches = self._open(reader)
        for source in self._sources:  # records on virtual time, until the recording ends
            self._pace(iter(source.timed(self.clock.ms)))
        lines = self._led
        if self._left is not None:
            batch, start = self._left
            self._left = None
            lines += len(batch) - start
            self._replay_batch(batch, start=start)
        for batch in batches:
            lines += len(batch)
            self._replay_batch(batch)
            if progress is not None:
                progress(reader.stats.bytes_read)
        for pair in list(self._rounds):
            self._finish(pair)
        self.finished = True
        stats.lines += lines  # lines that are not records are the reader's: not replayed
        stats.bad_lines += reader.stats.bad_lines - self._bad_before
        return stats

    def pairs(self, wanted: Collection[str] = ()) -> set[str]:
        """The pairs the recording showed so far: polled, matched, in market data or opened.

        With wanted, those polled or matched when one of them is among wanted (the opened
        ones, a longer list, are not looked through then).
        """
        found = {pair for pair in self._cursors if pair}
        found.update(self.prices.by_pair)
        found.update(self._market_pairs)
        if not found.intersection(wanted):
            found.update({pair for _, pair, _ in self.prices.new_positions})
        return found

    def _replay_batch(
        self, batch: list[LineRecord], start: int = 0, stop: int | None = None
    ) -> None:
        """Replay one batch of records (those from start to stop), in order."""
        stats = self.stats
        clock = self.clock
        timeline = self.timeline
        settle = self.settle
        executor = self._executor
        routes = self._routes
        route_position, route_account = routes[PositionPush], routes[AccountPush]
        decode = decode_frame
        new = _NEW
        own_positions = self.own_positions
        own_coins = self.own_coins
        new_positions = self.prices.new_positions.append
        now = clock.ms
        market_heads = _MARKET_HEADS
        market_decode, frame_pair = self._market.record, self._frame_pair
        market_routes, market_pairs, tap = self._market_routes, self._market_pairs, self.on_market
        defer = self._idle()
        frames = accounts = positions = superseded = others = market_frames = 0
        for record in batch if start == 0 and stop is None else batch[start:stop]:
            ts = record.ts
            if type(ts) is not int:
                ts = int(ts)
            if ts > now:
                if ts >= timeline.due:  # read per record: a hook may have booked a timer
                    timeline.run_until(ts, settle)
                    defer = self._idle()
                clock.ms = now = ts
            elif ts < now:
                self._went_back(batch, record)
            frame = record.frame
            if frame is None:
                self._rest(record, ts)
            else:
                frames += 1
                push: Any = _OTHER
                if frame.startswith(market_heads):
                    # A market frame, inlined (a replay hears hundreds of thousands a second):
                    # the usual frame of one record straight to its route, then to the tap.
                    try:
                        market: Any = market_decode(frame, frame_pair)
                    except DecodeError as exc:
                        push = self._market_refused(exc)
                    else:
                        push = None
                        route = None if market_routes is None else market_routes.get(type(market))
                        if route is not None:  # one record (a tuple or an ack has none)
                            if len(market_pairs) < 4096:
                                market_pairs.add(market.pair)
                            route(market)
                            if tap is not None and not defer:  # after: the fills it makes
                                tap(market)  # follow the trade
                            market_frames += 1
                        else:
                            self._market_records(market)
                            market_routes = self._market_routes
                            defer = self._idle()  # routes declared at the first record
                if push is _OTHER:
                    try:
                        push = decode(frame)
                    except DecodeError as exc:
                        if not self._undecoded(exc, frame):
                            continue
                        push = None
                if push is None:  # a market frame: delivered
                    pass
                elif type(push) is PositionPush:
                    if push.change_type is new:
                        new_positions((ts, push.symbol, push.opening_price))
                    if own_positions and push.position_id in own_positions:
                        superseded += 1
                        continue
                    positions += 1
                    route_position(push)
                elif type(push) is AccountPush:
                    if own_coins and push.symbol in own_coins:
                        superseded += 1
                        continue
                    accounts += 1
                    route_account(push)
                elif type(push) is SubscribeAck:
                    stats.acks += 1
                    continue
                else:  # a registered push type: to its route, as the stream hands it over
                    others += 1
                    self._intake(push)
            if executor is not None and executor.pending:
                settle()
                defer = self._idle()
        stats.ws_frames += frames
        stats.pushes_delivered += positions + accounts + others
        stats.position_pushes += positions
        stats.account_pushes += accounts
        stats.pushes_superseded += superseded
        stats.market_frames += market_frames
        stats.market_records += market_frames

    # ---- market data

    def _market_frame(self, frame: str) -> bool:
        """Deliver a market frame's records (or count it); False when its event is another."""
        try:
            records = self._market.frame(frame, pair=self._frame_pair)
        except DecodeError as exc:
            if exc.unknown_event:
                return False
            self.stats.market_errors += 1
            return True
        self._market_records(records)
        return True

    def _market_records(
        self, records: MarketRecord | tuple[MarketRecord, ...] | SubscribeAck
    ) -> None:
        """A decoded market frame's records delivered (or its acknowledgement counted)."""
        if isinstance(records, _MARKET_TYPES):
            records = (records,)
        if type(records) is tuple:
            self.stats.market_frames += 1
            self._deliver(records)
        else:  # a subscribe acknowledgement
            self.stats.acks += 1

    def _market_answer(self, line: MarketLine) -> None:
        """Deliver the records of a public answer the live market feed fed (a market line)."""
        stats = self.stats
        codec, kind, pair, body = self._market, line.kind, line.pair, line.body.encode()
        records: tuple[MarketRecord, ...]
        try:
            if kind == "mark":
                records = (codec.mark_price(200, body, pair),)
            elif kind == "index":
                records = (codec.index_price(200, body, pair),)
            elif kind == "depth":
                records = (codec.depth(200, body, pair),)
            elif kind == "trades":
                records = codec.trades(200, body, pair)
            elif kind == "kline" and line.period:
                records = codec.klines(200, body, pair, line.period)
            else:
                raise DecodeError("market line", "kind", f"unknown kind {kind!r}")
        except FrameworkError:
            stats.market_errors += 1
            return
        stats.market_answers += 1
        self._deliver(records)

    def _deliver(self, records: tuple[MarketRecord, ...]) -> None:
        """Market records to their routes, in order (declared at the first: Kernel.feeds)."""
        routes = self._market_routes
        if routes is None:
            if self._declare is not None:
                self._declare(_MARKET_TYPES)
            missing = [cls.__name__ for cls in _MARKET_TYPES if cls not in self._routes]
            if missing:
                raise ConfigError(f"replay: no route takes the recording's {missing} records")
            routes = self._market_routes = {cls: self._routes[cls] for cls in _MARKET_TYPES}
        tap, pairs = self.on_market, self._market_pairs
        if self._defer:  # the tap is idle: it reads the market when it needs it
            tap = None
        for record in records:
            if record.pair not in pairs and len(pairs) < 4096:
                pairs.add(record.pair)
            routes[type(record)](record)
            if tap is not None:  # after: the fills it makes follow the trade, as live
                tap(record)
        self.stats.market_records += len(records)

    def _intake(self, record: object) -> None:
        """A record to the route of its type (declared by the runtime: Kernel.feeds); a market
        record then to the tap, as a recorded one."""
        route = self._routes.get(type(record))
        if route is None:
            raise ConfigError(f"replay: no source declared {type(record).__name__} records")
        route(record)
        if self.on_market is not None and type(record) in _MARKET_TYPES and not self._idle():
            self.on_market(record)  # type: ignore[arg-type]

    def _pace(self, records: Iterator[tuple[int, Any]]) -> None:
        """Book a source's next record on the timeline; fed (and the next booked) when due."""
        for ms, record in records:

            def feed() -> None:
                if not self.finished:
                    self._intake(record)  # noqa: B023 (the loop ends here)
                    self._pace(records)

            self.timeline.at(ms, feed)
            return

    # ---- REST answers

    def _rest(self, record: LineRecord, ts: int) -> None:
        if type(record) is MarketLine:
            self._market_answer(record)
            return
        stats = self.stats
        stats.rest_answers += 1
        path = record.path
        if path == MATCHES_PATH:
            self._match_page(record, ts)
        elif path in (POSITIONS_PATH, BALANCE_PATH):
            stats.snapshots_skipped += 1
        elif path == BATCH_CREATE_PATH:
            stats.recorded_batches += 1

    def _market_refused(self, exc: DecodeError) -> Any:
        """A market frame the market codec refused: counted (None), or _OTHER when its event is
        none of the market's (left to the push decoder)."""
        if exc.unknown_event:
            return _OTHER
        self.stats.market_errors += 1
        return None

    def _undecoded(self, exc: DecodeError, frame: str) -> bool:
        """A frame the push decoder refused: True when it is a market frame (delivered), else
        counted (an unknown event or a malformed frame)."""
        if exc.unknown_event and self._market_frame(frame):
            return True
        if exc.unknown_event:
            self.stats.unknown_events += 1
        else:
            self.stats.malformed_frames += 1
        return False

    def _went_back(self, batch: list[LineRecord], record: LineRecord) -> None:
        """Count a record older than the time reached; keep the line number of the first."""
        self.stats.time_went_back += 1
        if self.first_back_line is None and self._reader is not None:
            index = next(i for i, line in enumerate(batch) if line is record)
            self.first_back_line = self._reader.line_of(index)

    def _match_page(self, record: LineRecord, ts: int) -> None:
        stats = self.stats
        body = record.body
        if body is None:  # never: a REST line has a body
            return
        pair, match_id = self._query(record.query or "")
        paging = match_id is not None
        current = self._rounds.get(pair)
        if current is not None and not paging:
            self._finish(pair)
            current = None
        if current is None:
            cursor = self._cursors.get(pair)
            if cursor is None:
                reread_ids, reread_age_ms = self._reread
                cursor = self._cursors[pair] = MatchCursor(
                    reread_ids=reread_ids, reread_age_ms=reread_age_ms
                )
            current = self._rounds[pair] = cursor.start()
            if paging:  # a page of a round this replay thinks done: read as the page it is
                current.request_id = match_id
        try:
            page = decode_match_answer(body)
        except DecodeError:
            page = None
        if page is None:
            stats.rest_errors += 1  # a refused or malformed poll: live logged it, polled again
            return
        self.prices.page(ts, page)
        stats.match_pages += 1
        if not current.feed(page):
            self._finish(pair)

    def _query(self, query: str) -> tuple[str, int | None]:
        """(pairName, matchId or None) of a poll's query; polls repeat a few queries."""
        found = self._queries.get(query)
        if found is None:
            params = dict(parse_qsl(query))
            raw = params.get("matchId")
            found = (params.get("pairName", ""), int(raw) if raw and raw.isdigit() else None)
            if len(self._queries) < 4096:
                self._queries[query] = found
        return found

    def _finish(self, pair: str) -> None:
        """Publish what a poll round found (as MatchPoller does) and move the cursor."""
        rnd = self._rounds.pop(pair)
        if self.own_matches:
            self._cursors[pair].publish(rnd, self._deliver_match)
        else:  # nothing of the recorded node's to hold back: every new match goes on
            published, _ = self._cursors[pair].publish(rnd, self._on_match)
            self.stats.matches_delivered += published

    def _deliver_match(self, match: MatchRecord) -> None:
        """A new match of a round: to the strategies, unless it is the recorded node's own."""
        stats = self.stats
        if match.id in self.own_matches:  # the cursor moves past it all the same
            stats.matches_superseded += 1
            return
        stats.matches_delivered += 1
        self._on_match(match)
