"""Matches seen before the answer that may name their order: held, then decided.

The match poller runs beside the send, so the venue may have executed a batch (and a poll
found its fills) while its answer is still in flight. Such a match is neither external nor
evidence until every batch in flight when it was seen has been answered. Pure: no I/O, no
clock.
"""

from __future__ import annotations

from collections.abc import Callable

from framework.venue.models import MatchRecord

__all__ = ["EarlyMatches"]


class EarlyMatches:
    """Batches in flight (sent, answer not yet handled) and the matches held meanwhile.

    A match is held when its entrustId names no known order while a batch is in flight; it
    is released, in arrival order, once its order is known (the answer bound the orderId)
    or once every batch that was in flight when it was seen has been answered: a batch sent
    later cannot hold its order (a retried batch was not executed before).
    """

    __slots__ = ("_flight", "_held", "_sends")

    def __init__(self) -> None:
        self._sends = 0  # sends so far: a batch in flight and a held match note the count
        self._flight: dict[int, int] = {}  # batch id -> number of its send
        self._held: list[tuple[int, MatchRecord]] = []  # arrival order

    @property
    def in_flight(self) -> bool:
        """True while some batch has been sent and its answer not yet handled."""
        return bool(self._flight)

    def __len__(self) -> int:
        return len(self._held)

    def sent(self, batch_id: int) -> None:
        """The batch's first byte goes out now."""
        self._sends += 1
        self._flight[batch_id] = self._sends

    def answered(self, batch_id: int) -> None:
        """The batch's answer (or failure) is being handled: it is no longer in flight."""
        self._flight.pop(batch_id, None)

    def hold(self, match: MatchRecord) -> None:
        """Keep a match until the batches in flight now are answered."""
        self._held.append((self._sends, match))

    def release(self, known: Callable[[int], bool]) -> list[MatchRecord]:
        """Remove and return, in arrival order, the held matches that can now be decided.

        Those whose entrustId is ``known`` (an order the engine can name), and those seen
        when every batch still in flight had not left yet.
        """
        held = self._held
        if not held:
            return []
        oldest = min(self._flight.values(), default=None)
        out: list[MatchRecord] = []
        keep: list[tuple[int, MatchRecord]] = []
        for item in held:
            seen_at, match = item
            entrust_id = match.entrust_id
            if (oldest is None or seen_at < oldest) or (
                entrust_id is not None and known(entrust_id)
            ):
                out.append(match)
            else:
                keep.append(item)
        self._held = keep
        return out
