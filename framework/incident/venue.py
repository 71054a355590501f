"""The venue a replay trades on: the live journal's answers, in-process; nothing is sent.

Why not the paper venue: a replay must show the strategies what they saw live. Their fills,
positions and balances are the recorded pushes and match pages (delivered as recorded), and
the answer to each order is the one the live venue gave, as the journal kept it (the orderId
of an accepted order, the code of a refused one). An order live never sent (a divergence)
is refused with :data:`NOT_LIVE`; a cancel succeeds when live cancelled that order. Every
call is noted (:attr:`JournalVenue.sent`), which is how the comparison sees the cancels.
The class holds no socket and no client: a replay needs no network config at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

from framework.engine.cancels import CancelAnswer, CancelBatch
from framework.engine.open_orders import VenueOrder
from framework.venue.errors import ORDER_NOT_FOUND, error_for, order_error_for
from framework.venue.models import AccountBalance, MatchRecord, OrderInput, OrderResult, Position

__all__ = ["NOT_LIVE", "JournalVenue", "LiveIds"]

NOT_LIVE: Final = 9099
"""The refusal code of an order the live node never sent."""
CANCELLED: Final = 200


class LiveIds:
    """The live node's id space: its journal's tag, sequence numbers from the session's first."""

    def __init__(self, tag: str, first: int) -> None:
        self._tag = tag
        self._next = first

    def id_tag(self) -> str:
        """The journal's tag."""
        return self._tag

    def reserve_ids(self, count: int) -> int:
        """The next count numbers (the live node, alone on its journal, drew them so)."""
        first = self._next
        self._next += count
        return first


class JournalVenue:
    """Answers orders and cancels as the live venue did (from the journal); sends nothing."""

    def __init__(self, intents: Sequence[Mapping[str, Any]], *, now_ms: Any) -> None:
        self._live = {str(i["client_order_id"]): i for i in intents}
        self._links: dict[str, Mapping[str, Any]] = {}
        self._now_ms = now_ms
        self.sent: list[tuple[int, str, tuple[str, ...]]] = []
        """(virtual ms, "create" or "cancel", clientOrderIds) of every call, in order."""

    def link(self, client_order_id: str, live: Mapping[str, Any]) -> None:
        """Answer the replay's order client_order_id as live answered the intent live: the
        same strategy's intent of the same rank (live's ids may interleave differently
        between strategies, when their timers fired a few ms apart)."""
        self._links[client_order_id] = live

    def _find(self, client_order_id: str) -> Mapping[str, Any] | None:
        return self._links.get(client_order_id) or self._live.get(client_order_id)

    async def send_batch(self, orders: Sequence[OrderInput]) -> list[OrderResult]:
        """The live answer of each order: accepted with its orderId, else refused."""
        self.sent.append((self._now_ms(), "create", tuple(o.client_order_id for o in orders)))
        accepted: list[OrderResult] = []
        refusal: tuple[int, str] | None = None
        for order in orders:
            live = self._find(order.client_order_id)
            if live is not None and live.get("order_id") is not None:
                accepted.append(
                    OrderResult(
                        client_order_id=order.client_order_id,
                        order_id=int(live["order_id"]),
                        pair_name=order.pair_name,
                    )
                )
            elif refusal is None:
                if live is not None and live.get("code"):
                    refusal = (int(live["code"]), str(live.get("msg") or "refused live"))
                else:
                    refusal = (NOT_LIVE, "the live node never sent this order")
        if not accepted and refusal is not None:
            raise error_for(*refusal)
        return accepted

    async def cancel(self, batch: CancelBatch) -> dict[int | str, CancelAnswer]:
        """200 for each order live cancelled; 2340 (not found) for the others."""
        coids = batch.client_order_ids
        self.sent.append((self._now_ms(), "cancel", tuple(coids)))
        out: dict[int | str, CancelAnswer] = {}
        for entry in batch.entries:
            live = self._find(entry.client_order_id)
            done = live is not None and live.get("status") == "CANCELED"
            key: int | str = (
                entry.client_order_id
                if batch.by_client_id or entry.order_id is None
                else entry.order_id
            )
            out[key] = CancelAnswer(CANCELLED if done else ORDER_NOT_FOUND, "")
        return out

    async def cancel_all(
        self, pair: str | None = None, is_long: bool | None = None
    ) -> tuple[int, ...] | None:
        """Noted; nothing named."""
        self.sent.append((self._now_ms(), "cancel_all", (pair or "*",)))
        return None

    async def all_open_orders(self, pair: str) -> list[VenueOrder]:
        """None known: the recorded pushes tell the strategies what was open."""
        return []

    async def query_order(self, entrust_id: int) -> VenueOrder | None:
        """Unknown here (2340): the recorded matches say what filled."""
        raise order_error_for(ORDER_NOT_FOUND, "not in the replay")

    async def positions(
        self, pair: str, page_no: int | None = None, page_size: int | None = None
    ) -> list[Position]:
        """None: the recorded pushes carry the positions."""
        return []

    async def balance(self, symbol: str) -> AccountBalance:
        """Zero: the recorded pushes carry the balances."""
        zero = Decimal(0)
        return AccountBalance(symbol=symbol, available_amount=zero, frozen_amount=zero)

    async def matches(
        self,
        pair: str,
        match_id: int | None = None,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> list[MatchRecord]:
        """None: the recorded match pages are replayed by the replay itself."""
        return []

    async def warm_up(self) -> None:
        """Nothing to open."""
