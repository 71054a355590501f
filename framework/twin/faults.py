"""Fault injection and what tests observe of it: faults, counters and the orders received.

Faults: which calls and pushes go wrong, drawn from a seeded random.Random.

Faults come from the ``faults`` section of the settings and can be changed while the twin
runs (:meth:`Faults.configure`, :meth:`Faults.clear`). Every fault actually injected is
counted in :class:`Counters` (with the traffic: plain ints, read them at any time). A share of 0 never draws from the
random source, so enabling one fault does not shift the draws of another run's settings.

==========================  ===================================================================
latency (+ latency_jitter)  seconds added before every REST call is handled, the order-
                            management extension's too (jitter: uniform 0..jitter)
busy_rate                   share of REST calls (any path) answered ``2329`` without executing
                            anything
unavailable_rate            share of REST calls (any path) answered HTTP 503 without executing
                            anything (counted as ``unavailable_answers``)
unavailable_envelope        when true, those 503 answers carry the JSON envelope ``{"error":
                            true, "code": 503, "msg": "Service Unavailable", ...}`` instead of
                            a text body (also counted as ``unavailable_envelopes``)
reset_before_read_rate      share of batchCreate calls whose connection is closed before the
                            body is read: nothing executes, the client sees a reset
                            (``resets_before_read``)
drop_response_rate          share of batchCreate and cancel calls (cancelEntrust,
                            cancelEntrustByCli, batchCancelEntrust, batchCancelWithRes,
                            cancelAll) executed whose connection is then closed without an
                            answer, the ambiguous case (``dropped_responses``)
error_after_accept_rate     share of batchCreate and cancel calls executed (whatever the
                            exchange accepted, refused or cancelled; a cancel refused for its
                            parameters did not execute), then answered with HTTP
                            ``error_after_accept_status`` (default 500, any 400..599) and the
                            envelope ``{"error": true, "code": <status>, "msg": "Internal
                            Server Error", "data": null, "sid": ...}`` (msg: the status's
                            phrase; ``errors_after_accept``)
answer_delay_s (+ jitter)   seconds between executing a batchCreate (orders placed, fills made,
                            pushes published) and sending its answer, so a match poll can see
                            fills of a batch still unanswered (``answer_delay_jitter_s``:
                            uniform 0..jitter; counted as ``delayed_answers``); cancels are
                            answered at once
omit_result_rate            share of the accepted orders of a successful batchCreate left out
                            of its answer's data list; they did execute (``omitted_results``)
match_delay_min_s / _max_s  each new match is listed by selectContractMatchPairList only from a
                            delay drawn uniformly from [min, max] after it happened (the twin's
                            clock); ids keep match order, pushes are not delayed, so a lower id
                            can appear after a higher one (``delayed_matches``)
ws_disconnect_every         seconds between server-side closes of every WebSocket (0: never);
                            :meth:`VenueTwin.disconnect_websockets` closes them on demand
push_duplicate_rate         share of pushes sent twice
push_reorder_rate           share of pushes held back and sent after the next one
stale_account_rate          share of api_account pushes followed by the previous (older logId)
                            one
==========================  ===================================================================

Ground truth for fault tests is kept apart from the faults: :attr:`VenueTwin.received_orders`
(each order of each authenticated batchCreate body the twin read) and :meth:`VenueTwin.executed_orders`
(clientOrderId -> orderId of each order an account had accepted), the newest
``received_orders_limit`` and ``client_id_history_limit`` (100000 each) of them.

:class:`ReceivedOrders` (``VenueTwin.received_orders``) keeps ``(clientOrderId, the order
re-serialized with sorted keys)`` of every order object with a string clientOrderId of each
authenticated batchCreate body, oldest first, and forgets the oldest beyond either bound of
the settings: ``received_orders_limit`` orders or ``received_orders_max_bytes`` bytes (the
canonical order plus its clientOrderId, in UTF-8). An order larger than the byte bound on
its own is not kept. Only bodies that passed authentication are recorded
(:mod:`framework.twin.app`), so an unsigned caller can make the twin keep nothing.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from typing import Any, Literal, overload

import attrs
import orjson

from framework.twin.settings import FaultSettings

__all__ = ["Counters", "Faults", "ReceivedOrders"]


@attrs.define(kw_only=True)
class Counters:
    """Running totals since the twin started; plain ints, read them at any time."""

    rest_calls: int = 0
    batch_calls: int = 0
    orders_accepted: int = 0
    orders_refused: int = 0
    auth_failures: int = 0
    bodies_too_large: int = 0
    headers_too_large: int = 0
    connections_timed_out: int = 0
    ws_connections: int = 0
    subscriptions: int = 0
    subscribe_refusals: int = 0
    pushes_sent: int = 0
    ws_overflows: int = 0
    latency_injected: int = 0
    busy_answers: int = 0
    unavailable_answers: int = 0
    dropped_responses: int = 0
    ws_disconnects: int = 0
    duplicated_pushes: int = 0
    reordered_pushes: int = 0
    stale_account_pushes: int = 0
    unavailable_envelopes: int = 0
    errors_after_accept: int = 0
    resets_before_read: int = 0
    delayed_answers: int = 0
    omitted_results: int = 0
    delayed_matches: int = 0

    def snapshot(self) -> dict[str, int]:
        """A copy of every counter by name."""
        return attrs.asdict(self)


class Faults:
    """Decides and counts injected faults; one instance per twin."""

    def __init__(self, settings: FaultSettings, rng: random.Random, counters: Counters) -> None:
        """Start with a copy of settings; rng is the only source of randomness."""
        self.settings = attrs.evolve(settings)
        self._rng = rng
        self._counters = counters

    def configure(self, **changes: Any) -> None:
        """Change some fault settings now (validated like the config file)."""
        self.settings = attrs.evolve(self.settings, **changes)

    def clear(self) -> None:
        """Turn every fault off."""
        self.settings = FaultSettings()

    def _hit(self, share: float) -> bool:
        return share > 0 and (share >= 1 or self._rng.random() < share)

    def rest_delay(self) -> float:
        """Seconds to wait before answering this REST call (counted when above 0)."""
        s = self.settings
        if s.latency <= 0 and s.latency_jitter <= 0:
            return 0.0
        self._counters.latency_injected += 1
        jitter = self._rng.uniform(0, s.latency_jitter) if s.latency_jitter > 0 else 0.0
        return s.latency + jitter

    def rest_refusal(self) -> Literal["busy", "unavailable"] | None:
        """Whether this REST call is answered 2329 ("busy") or HTTP 503 ("unavailable")."""
        s = self.settings
        if self._hit(s.unavailable_rate):
            self._counters.unavailable_answers += 1
            if s.unavailable_envelope:
                self._counters.unavailable_envelopes += 1
            return "unavailable"
        if self._hit(s.busy_rate):
            self._counters.busy_answers += 1
            return "busy"
        return None

    def reset_before_read(self) -> bool:
        """Whether this batchCreate's connection is closed unread (counted by the caller)."""
        return self._hit(self.settings.reset_before_read_rate)

    def drop_response(self) -> bool:
        """Whether this executed batchCreate or cancel loses its answer (counted by the caller)."""
        return self._hit(self.settings.drop_response_rate)

    def error_after_accept(self) -> int | None:
        """The HTTP status replacing this executed batchCreate's or cancel's answer (counted)."""
        s = self.settings
        if self._hit(s.error_after_accept_rate):
            self._counters.errors_after_accept += 1
            return s.error_after_accept_status
        return None

    def answer_delay(self) -> float:
        """Seconds between executing this batchCreate and answering it (counted when above 0)."""
        s = self.settings
        if s.answer_delay_s <= 0 and s.answer_delay_jitter_s <= 0:
            return 0.0
        self._counters.delayed_answers += 1
        jitter = (
            self._rng.uniform(0, s.answer_delay_jitter_s) if s.answer_delay_jitter_s > 0 else 0.0
        )
        return s.answer_delay_s + jitter

    def omit_result(self) -> bool:
        """Whether this accepted order is left out of its batchCreate answer (counted)."""
        if self._hit(self.settings.omit_result_rate):
            self._counters.omitted_results += 1
            return True
        return False

    def match_delay_ms(self) -> int:
        """Milliseconds before a new match is listed (counted when above 0)."""
        s = self.settings
        low, high = s.match_delay_min_s, s.match_delay_max_s
        if high <= 0:
            return 0
        delay = self._rng.uniform(low, high) if high > low else low
        ms = round(delay * 1000)
        if ms > 0:
            self._counters.delayed_matches += 1
        return ms

    def duplicate_push(self) -> bool:
        """Whether this push is sent twice."""
        if self._hit(self.settings.push_duplicate_rate):
            self._counters.duplicated_pushes += 1
            return True
        return False

    def reorder_push(self) -> bool:
        """Whether this push is held back behind the next one (counted when swapped)."""
        return self._hit(self.settings.push_reorder_rate)

    def stale_account(self) -> bool:
        """Whether the previous api_account frame is sent again after this one."""
        if self._hit(self.settings.stale_account_rate):
            self._counters.stale_account_pushes += 1
            return True
        return False


class ReceivedOrders:
    """(clientOrderId, canonical order bytes), oldest first, bounded in count and bytes."""

    def __init__(self, *, limit: int, max_bytes: int) -> None:
        """Keep at most limit orders and max_bytes bytes of them."""
        self._items: deque[tuple[str, bytes]] = deque()
        self._sizes: deque[int] = deque()
        self.limit = limit
        self.max_bytes = max_bytes
        self.nbytes = 0
        """Bytes kept now (canonical orders plus clientOrderIds)."""

    def record(self, payload: Any) -> None:
        """Keep every order of a parsed batchCreate body that has a string clientOrderId."""
        orders = payload.get("orders") if type(payload) is dict else None
        if type(orders) is not list:
            return
        for item in orders:
            if type(item) is dict:
                client_id = item.get("clientOrderId")
                if type(client_id) is str:
                    # A copy: orjson's bytes keep the whole buffer it wrote them in (about
                    # 4 KB whatever their length), and these are kept for a long time.
                    canonical = bytes(memoryview(orjson.dumps(item, option=orjson.OPT_SORT_KEYS)))
                    self.append(client_id, canonical)

    def append(self, client_id: str, canonical: bytes) -> None:
        """Keep one order, then forget the oldest beyond the bounds."""
        size = len(canonical) + len(client_id.encode("utf-8", "surrogatepass"))
        self._items.append((client_id, canonical))
        self._sizes.append(size)
        self.nbytes += size
        while self._items and (len(self._items) > self.limit or self.nbytes > self.max_bytes):
            self._items.popleft()
            self.nbytes -= self._sizes.popleft()

    def clear(self) -> None:
        """Forget everything."""
        self._items.clear()
        self._sizes.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        """How many orders are kept."""
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        """The kept orders, oldest first."""
        return iter(self._items)

    @overload
    def __getitem__(self, index: int) -> tuple[str, bytes]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, bytes]]: ...
    def __getitem__(self, index: int | slice) -> tuple[str, bytes] | list[tuple[str, bytes]]:
        """One kept order by position (0: the oldest), or a list of a slice of them."""
        if isinstance(index, slice):
            return list(self._items)[index]
        return self._items[index]

    def __repr__(self) -> str:
        """Counts only: the orders may be large."""
        return f"ReceivedOrders({len(self)} orders, {self.nbytes} bytes)"
