"""A cancel call and its answer: the framework's cancel codes, the call, the per-order answer.

What the engine's :class:`~framework.engine.cancels.Canceller` hands a driver to send
(:class:`CancelBatch`: orderIds of ACCEPTED orders, or one order by clientOrderId) and what
the driver gives back per order (:class:`CancelAnswer`, keyed by :func:`answer_key`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Final

import attrs

from framework.engine.reconcile import LiveOrder

__all__ = [
    "CANCEL_CODES",
    "NOTHING_TO_CANCEL",
    "NOT_OWNER",
    "NO_ANSWER",
    "NO_CANCELS",
    "CancelAnswer",
    "CancelBatch",
    "answer_key",
]

NOTHING_TO_CANCEL: Final = 9020
NOT_OWNER: Final = 9021
NO_CANCELS: Final = 9022
NO_ANSWER: Final = 9023

CANCEL_CODES: Final[dict[int, str]] = {
    NOTHING_TO_CANCEL: "Nothing to cancel: {0}",
    NOT_OWNER: "Order {0} belongs to strategy {1}",
    NO_CANCELS: "The venue does not offer cancels ({0})",
    NO_ANSWER: "The venue's answer did not say, and the order cannot be queried ({0}): it stays"
    " {1}",
}
"""The framework's own cancel refusal codes and their message templates."""


@attrs.frozen(slots=True)
class CancelAnswer:
    """The venue's answer to the cancel of one order: code 200 means cancelled."""

    code: int
    msg: str = ""
    filled: Decimal | None = None
    """The order's filled quantity, when the answer tells it."""
    order_id: int | None = None
    """The order's id, when the answer names it (a cancel by clientOrderId)."""


@attrs.define(slots=True, eq=False)
class CancelBatch:
    """One cancel call: ids of ACCEPTED orders, or one order in doubt by clientOrderId."""

    id: int
    entries: list[LiveOrder]
    by_client_id: bool = False
    attempt: int = 0

    @property
    def order_ids(self) -> list[int]:
        """The orderIds to cancel (a by-client-id batch has none)."""
        return [e.order_id for e in self.entries if e.order_id is not None]

    @property
    def client_order_ids(self) -> list[str]:
        """The clientOrderIds of the batch, in order."""
        return [e.client_order_id for e in self.entries]


def answer_key(batch: CancelBatch, entry: LiveOrder) -> int | str:
    """How the answers of batch name entry: its orderId, or its clientOrderId (by client id)."""
    order_id = entry.order_id
    return entry.client_order_id if batch.by_client_id or order_id is None else order_id
