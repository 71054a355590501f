"""The orders a node's journal holds, for recordings that do not keep what was sent.

Recordings made before batchCreate lines kept their request (and any recording whose
answers were lost) do not say which orders were sent. The journal does: each intent's
pair, side, quantity, price, kind, the venue's orderId and when it was created. Read
read-only (the file of a running node is never written), intents sent to the venue only
(``sent`` marked, an orderId known); what the log holds but was not yet folded into the
intents table is not read (a stopped node folds it at close). The answer's time is not in
the journal: these orders add nothing to the send-to-answer latency, and their resting
window starts at their creation.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from framework.live.journal_schema import entry_of
from framework.venue.errors import ConfigError
from framework.venue.models import OrderInput

__all__ = ["MAX_JOURNAL_ORDERS", "journal_orders"]

MAX_JOURNAL_ORDERS: Final = 1_000_000
_SELECT: Final = (
    "SELECT client_order_id, strategy, pair, is_long, quantity, price, is_market, lever,"
    " match_type, position_type, user_id, tag, status, sent, order_id, code, msg, filled,"
    " created_ms, NULL, updated_ms FROM intents WHERE sent = 1 AND order_id IS NOT NULL"
    " ORDER BY created_ms LIMIT ?"
)


def journal_orders(path: str | Path) -> Iterator[tuple[OrderInput, int, int]]:
    """(order as sent, orderId, created_ms) of each intent the journal says was sent."""
    target = Path(path)
    if not target.is_file():
        raise ConfigError(f"journal {target}: no such file")
    try:
        conn = sqlite3.connect(f"{target.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ConfigError(f"journal {target}: cannot open: {exc}") from None
    try:
        rows = conn.execute(_SELECT, (MAX_JOURNAL_ORDERS,)).fetchall()
    except sqlite3.Error as exc:
        raise ConfigError(f"journal {target}: not a perpframe journal ({exc})") from None
    finally:
        conn.close()
    for row in rows:
        entry = entry_of(row)
        intent = entry.intent
        order = OrderInput(
            client_order_id=entry.client_order_id,
            is_long=intent.is_long,
            is_market=intent.is_market,
            lever=intent.lever,
            match_type=intent.match_type,
            pair_name=intent.pair,
            position_type=intent.position_type,
            price=intent.price,
            quantity=intent.quantity,
        )
        assert entry.order_id is not None
        yield order, entry.order_id, entry.created_ms
