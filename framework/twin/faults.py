"""Fault injection: which calls and pushes go wrong, drawn from a seeded random.Random.

Faults come from the ``faults`` section of the settings and can be changed while the twin
runs (:meth:`Faults.configure`, :meth:`Faults.clear`). Every fault actually injected is
counted in :class:`~framework.twin.counters.Counters`. A share of 0 never draws from the
random source, so enabling one fault does not shift the draws of another run's settings.

=====================  ========================================================================
latency (+ jitter)     seconds added before every REST answer (jitter: uniform 0..jitter)
busy_rate              share of REST calls answered ``2329`` without executing anything
unavailable_rate       share of REST calls answered HTTP 503 without executing anything
drop_response_rate     share of batchCreate calls executed whose connection is then closed
                       without an answer (the ambiguous case)
ws_disconnect_every    seconds between server-side closes of every WebSocket (0: never);
                       :meth:`VenueTwin.disconnect_websockets` closes them on demand
push_duplicate_rate    share of pushes sent twice
push_reorder_rate      share of pushes held back and sent after the next one
stale_account_rate     share of api_account pushes followed by the previous (older logId) one
=====================  ========================================================================
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
            return "unavailable"
        if self._hit(s.busy_rate):
            self._counters.busy_answers += 1
            return "busy"
        return None

    def drop_response(self) -> bool:
        """Whether this executed batchCreate loses its answer (counted by the caller)."""
        return self._hit(self.settings.drop_response_rate)

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
