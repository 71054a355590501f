"""What the twin counts: traffic, refusals and every injected fault, readable by tests."""

from __future__ import annotations

import attrs

__all__ = ["Counters"]


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
