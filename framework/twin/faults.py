"""Fault injection: which calls and pushes go wrong, drawn from a seeded random.Random.

Faults come from the ``faults`` section of the settings and can be changed while the twin
runs (:meth:`Faults.configure`, :meth:`Faults.clear`). Every fault actually injected is
counted in :class:`~framework.twin.counters.Counters`. A share of 0 never draws from the
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
"""

from __future__ import annotations

import random
from typing import Any, Literal

import attrs

from framework.twin.counters import Counters
from framework.twin.settings import FaultSettings

__all__ = ["Faults"]


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
