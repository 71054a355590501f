"""How much history an account keeps: its order records, clientOrderIds and matches, bounded.

The twin's choice (the venue's documentation is silent): per account, the newest
``match_history_limit`` matches per pair (older ones are no longer listed, see
:mod:`framework.twin.match_list`), the newest ``client_id_history_limit`` entries of
``order_ids``, every open order and the newest ``order_history_limit`` completed order
records (:mod:`framework.twin.order_index`); each 100000 by default. A clientOrderId is
refused as already used (``2001 Illegal parameter:clientOrderId``) while the twin still
remembers an order that carried it, in ``order_ids`` or in the order records (an open order
is always remembered); once both have forgotten it, the id is accepted again.

:class:`~framework.twin.exchange.Exchange` trims after each operation, never inside an
atomic batch, so a refused batch still rolls back exactly (:mod:`framework.twin.savepoint`);
each trim costs O(1) amortized per order or match.
"""

from __future__ import annotations

from framework.twin.match_history import MatchHistory
from framework.twin.state import Account

__all__ = ["trim_account", "trim_matches"]


def trim_account(account: Account, client_id_history_limit: int) -> None:
    """Bound what the account keeps per order and match (never inside an atomic batch)."""
    account.orders.trim()
    order_ids = account.order_ids
    while len(order_ids) > client_id_history_limit:
        order_ids.popitem(last=False)
    for history in account.matches.values():
        trim_matches(account, history)


def trim_matches(account: Account, history: MatchHistory) -> None:
    """Forget the matches beyond the history's limit, and their held-back listing times."""
    forgotten = history.trim()
    held = account.listed_from_ms
    if held:
        for match in forgotten:
            held.pop(match.id, None)
