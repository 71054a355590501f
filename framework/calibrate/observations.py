"""What a recording shows of the user's own orders: sent, answered, rested, touched, filled.

``perpframe calibrate`` fits its models from these observations, read in one pass over a
recording made by ``perpframe record`` or ``live`` with recording on:

* a batchCreate line (its ``request``: the orders and the ``timestamp`` they were sent at;
  its ``ts``: when the answer came; its body: each accepted order's ``orderId``) makes one
  :class:`OrderSeen` per order;
* a match-list answer gives the matches (deduplicated by id), bound to orders by
  ``entrustId`` (the orderId of the answer): that is the only evidence a fill belongs to an
  order, so a match naming no order of a kept answer is counted apart and used nowhere;
* a cancel's answer (cancelEntrust, batchCancel, cancelEntrustByCli, cancelAll of a pair)
  ends the order's resting window at the answer's ``ts`` (the cancel reached the venue
  before: a touch in between is counted as a trial; at most one answer's latency);
* the market data (api_depth and api_trade frames, depth and trades market lines) gives
  the best bid and ask before each order was sent and the trades that printed at or
  through a resting order's price while it rested (``touches``).

The clocks: the recording's ``ts`` is the node's receipt time, a trade's and a match's
``time`` the venue's. A touch counts for an order when it was printed after the order's
answer came (the order rested by then; a trade printed while the answer travelled is left
out, touched or not) and, for a filled order, at or before its first match. The two clocks are taken as aligned to well within a
trade's spacing; on loopback against the twin they are one clock.

Bounded: at most ``max_orders`` orders are followed (the rest counted), ``MAX_TOUCHES`` touches
kept per order, a short window of book tops per pair (``BOOK_HISTORY``); a line that does not
decode is counted, never raised.
"""

from __future__ import annotations

import bisect
import logging
from collections import deque
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Final
from urllib.parse import parse_qsl

import attrs
import msgspec

from framework.recording import MarketLine, RecordingReader, RestRecord, WsRecord
from framework.venue.codec import decode_batch_answer, decode_match_answer
from framework.venue.errors import FrameworkError
from framework.venue.market import DEFAULT_MARKET_CODEC, Book, Trade
from framework.venue.models import MatchRecord, MatchType, OrderInput
from framework.venue.requests import (
    BATCH_CANCEL_PATH,
    BATCH_CANCEL_WITH_RESULTS_PATH,
    BATCH_CREATE_PATH,
    CANCEL_ALL_PATH,
    CANCEL_BY_CLIENT_ID_PATH,
    CANCEL_PATH,
    MATCHES_PATH,
)

__all__ = ["BOOK_HISTORY", "MAX_TOUCHES", "Observations", "OrderSeen", "Top", "observe"]

log = logging.getLogger("framework.calibrate")

BOOK_HISTORY: Final = 512
"""Book tops kept per pair, newest last: enough to find the one before a send."""
MAX_TOUCHES: Final = 10_000
"""Touches kept per resting order; beyond, the order's trials are cut (counted)."""
_MARKET_EVENTS: Final = ('"api_trade"', '"api_depth"')
_RESTS: Final = frozenset({MatchType.GTC, MatchType.POST_ONLY})


class _Sent(msgspec.Struct, frozen=True):
    orders: list[OrderInput]
    timestamp: str | int


_decode_sent: Final = msgspec.json.Decoder(_Sent, strict=False, float_hook=Decimal).decode


@attrs.frozen(slots=True)
class Top:
    """The best bid and ask of a pair's book at ``ts`` (receipt time)."""

    ts: int
    bid: Decimal | None
    ask: Decimal | None


@attrs.define(slots=True)
class OrderSeen:
    """One order the recording shows sent, and what became of it."""

    client_order_id: str
    order: OrderInput
    sent_ms: int
    answered_ms: int
    """When the answer came; for an order known from the journal only, its creation."""
    order_id: int | None = None
    """The venue's id from the answer; None: not accepted (refused, or answer unreadable)."""
    top: Top | None = None
    """The book before the send (None: no book recorded shortly before it)."""
    matches: list[MatchRecord] = attrs.field(factory=list)
    ended_ms: int | None = None
    """When a cancel's answer named it (receipt time)."""
    touches: list[int] = attrs.field(factory=list)
    """Venue times of trades printed at or through its price, received while it rested."""
    touches_cut: bool = False
    answer_known: bool = True
    """False for an order known from the journal only (no answer time)."""

    @property
    def filled(self) -> Decimal:
        """The quantity its matches sum to."""
        return sum((m.quantity or Decimal(0) for m in self.matches), Decimal(0))

    @property
    def first_match(self) -> MatchRecord | None:
        """Its earliest match (venue time), None when it has none."""
        timed = [m for m in self.matches if m.create_time_stamp is not None]
        return min(timed, key=lambda m: (m.create_time_stamp, m.id)) if timed else None


@attrs.define
class Observations:
    """Every order followed, and the counts of what could not be used."""

    orders: dict[str, OrderSeen] = attrs.field(factory=dict)
    lines: int = 0
    undecodable: int = 0
    """Lines of a kind read here (batchCreate, matches, market) that did not decode."""
    orders_over_limit: int = 0
    unbound_matches: int = 0
    """Matches naming no order of a kept batchCreate answer (another process's, or older)."""
    first_ms: int | None = None
    last_ms: int | None = None


class _Reader:
    """One pass over a recording, building Observations."""

    def __init__(self, max_orders: int) -> None:
        self.out = Observations()
        self.max_orders = max_orders
        self.by_order_id: dict[int, OrderSeen] = {}
        self.resting: dict[str, list[OrderSeen]] = {}
        self.tops: dict[str, deque[Top]] = {}
        self.match_ids: set[int] = set()
        self.pending: deque[OrderSeen] = deque()

    def line(self, record: WsRecord | RestRecord | MarketLine) -> None:
        out = self.out
        out.lines += 1
        ts = int(record.ts)
        if out.first_ms is None:
            out.first_ms = ts
        out.last_ms = ts
        if self.pending:
            self._admit(ts)
        if isinstance(record, WsRecord):
            if record.frame.startswith('{"event"') or any(
                e in record.frame for e in _MARKET_EVENTS
            ):
                self._market_frame(ts, record.frame)
        elif isinstance(record, MarketLine):
            self._market_line(ts, record)
        else:
            self._rest(ts, record)

    # ---- market data

    def _market_frame(self, ts: int, frame: str) -> None:
        try:
            records = DEFAULT_MARKET_CODEC.frame(frame)
        except FrameworkError as exc:
            if not getattr(exc, "unknown_event", False):
                self.out.undecodable += 1
            return
        if isinstance(records, tuple):
            for r in records:
                self._market_record(ts, r)

    def _market_line(self, ts: int, line: MarketLine) -> None:
        codec, body = DEFAULT_MARKET_CODEC, line.body.encode()
        try:
            if line.kind == "depth":
                self._market_record(ts, codec.depth(200, body, line.pair))
            elif line.kind == "trades":
                for t in codec.trades(200, body, line.pair):
                    self._market_record(ts, t)
        except FrameworkError:
            self.out.undecodable += 1

    def _market_record(self, ts: int, record: object) -> None:
        if isinstance(record, Book):
            tops = self.tops.get(record.pair)
            if tops is None:
                tops = self.tops[record.pair] = deque(maxlen=BOOK_HISTORY)
            tops.append(Top(ts, record.best_bid, record.best_ask))
        elif isinstance(record, Trade):
            printed = record.time if record.time is not None else ts
            for seen in self.resting.get(record.pair, ()):
                # Printed after the answer came (venue time): the order rested by then.
                if seen.answered_ms > printed or seen.ended_ms is not None:
                    continue
                price = seen.order.price
                assert price is not None
                crossed = record.price <= price if seen.order.is_long else record.price >= price
                if crossed:
                    if len(seen.touches) >= MAX_TOUCHES:
                        seen.touches_cut = True
                    else:
                        seen.touches.append(printed)

    def top_before(self, pair: str, ms: int) -> Top | None:
        tops = self.tops.get(pair)
        if not tops:
            return None
        times = [t.ts for t in tops]
        i = bisect.bisect_right(times, ms)
        return tops[i - 1] if i else None

    # ---- REST answers

    def _rest(self, ts: int, record: RestRecord) -> None:
        path = record.path
        if path == BATCH_CREATE_PATH:
            self._batch(ts, record)
        elif path == MATCHES_PATH:
            self._matches(record)
        elif path in _CANCEL_PATHS:
            self._cancel(ts, path, record.query)

    def add_known(self, order: OrderInput, order_id: int, created_ms: int) -> None:
        """An order the journal says was sent (the recording may not say it)."""
        if order.client_order_id in self.out.orders:
            return
        if len(self.out.orders) >= self.max_orders:
            self.out.orders_over_limit += 1
            return
        seen = OrderSeen(
            order.client_order_id,
            order,
            created_ms,
            created_ms,
            order_id=order_id,
            answer_known=False,
        )
        self.pending.append(seen)

    def _admit(self, ts: int) -> None:
        """Journal orders created by ts join the followed ones (with the book before them)."""
        pending = self.pending
        while pending and pending[0].sent_ms <= ts:
            seen = pending.popleft()
            if seen.client_order_id in self.out.orders:
                continue
            seen.top = self.top_before(seen.order.pair_name, seen.sent_ms)
            self._follow(seen)

    def _follow(self, seen: OrderSeen) -> None:
        order = seen.order
        self.out.orders[order.client_order_id] = seen
        if seen.order_id is not None:
            self.by_order_id[seen.order_id] = seen
            if order.price is not None and order.match_type in _RESTS:
                self.resting.setdefault(order.pair_name, []).append(seen)

    def _batch(self, ts: int, record: RestRecord) -> None:
        if record.request is None:
            return  # an older recording: the orders sent are not in it
        try:
            sent = _decode_sent(record.request)
            results = decode_batch_answer(record.body)
        except (msgspec.MsgspecError, FrameworkError):
            self.out.undecodable += 1
            return
        try:
            sent_ms = int(sent.timestamp)
        except ValueError:
            self.out.undecodable += 1
            return
        ids = {r.client_order_id: r.order_id for r in results or ()}
        for order in sent.orders:
            if len(self.out.orders) >= self.max_orders:
                self.out.orders_over_limit += 1
                continue
            known = self.out.orders.get(order.client_order_id)
            if known is not None:  # from the journal: the recording's figures are better
                self._stop_resting(known)
                self.by_order_id.pop(known.order_id or -1, None)
            seen = OrderSeen(
                order.client_order_id,
                order,
                sent_ms,
                ts,
                order_id=ids.get(order.client_order_id),
                top=self.top_before(order.pair_name, sent_ms),
            )
            self._follow(seen)

    def _matches(self, record: RestRecord) -> None:
        try:
            matches = decode_match_answer(record.body)
        except FrameworkError:
            self.out.undecodable += 1
            return
        for match in matches or ():
            if match.id in self.match_ids:
                continue
            self.match_ids.add(match.id)
            seen = self.by_order_id.get(match.entrust_id) if match.entrust_id else None
            if seen is None:
                self.out.unbound_matches += 1
                continue
            seen.matches.append(match)
            if seen.filled >= seen.order.quantity:
                self._stop_resting(seen)

    def _cancel(self, ts: int, path: str, query: str) -> None:
        params = dict(parse_qsl(query))
        ended: Iterable[OrderSeen]
        if path == CANCEL_ALL_PATH:
            pair, side = params.get("pairName"), params.get("isLong")
            ended = [
                s
                for p, rest in self.resting.items()
                if pair in (None, p)
                for s in rest
                if side is None or s.order.is_long == (side == "true")
            ]
        elif path == CANCEL_BY_CLIENT_ID_PATH:
            one = self.out.orders.get(params.get("clientOrderId", ""))
            ended = [one] if one is not None else []
        else:
            raw = params.get("entrustId") or params.get("entrustIds") or ""
            ids = [int(i) for i in raw.split(",") if i.strip().isdigit()]
            ended = [self.by_order_id[i] for i in ids if i in self.by_order_id]
        for seen in list(ended):
            if seen.ended_ms is None and seen.answered_ms <= ts:
                seen.ended_ms = ts
                self._stop_resting(seen)

    def _stop_resting(self, seen: OrderSeen) -> None:
        rest = self.resting.get(seen.order.pair_name)
        if rest is not None and seen in rest:
            rest.remove(seen)


_CANCEL_PATHS: Final = frozenset(
    {
        CANCEL_PATH,
        CANCEL_BY_CLIENT_ID_PATH,
        BATCH_CANCEL_PATH,
        BATCH_CANCEL_WITH_RESULTS_PATH,
        CANCEL_ALL_PATH,
    }
)


def observe(
    path: str | Path,
    *,
    max_orders: int = 1_000_000,
    journal: Iterable[tuple[OrderInput, int, int]] = (),
) -> Observations:
    """Read a recording once and return what it shows of its own orders.

    journal: (order, orderId, created_ms) of orders a journal says were sent, oldest first
    (:func:`framework.calibrate.journal_orders.journal_orders`); the recording's own
    batchCreate lines take precedence for the orders they name.
    """
    reader = _Reader(max_orders)
    for order, order_id, created_ms in journal:
        reader.add_known(order, order_id, created_ms)
    for record in RecordingReader(path).records():
        reader.line(record)
    return reader.out
