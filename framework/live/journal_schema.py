"""The journal's file: its schema, the statements that read and write it, and its upgrades.

What :class:`framework.live.journal.Journal` executes, apart from the class that buffers and
commits: the tables (``intents``, the ``log`` of commits, the match cursors, the kept
matches, the matches' sums), the SQL of every write and load, how a row becomes a
:class:`~framework.engine.journaling.JournalEntry`, and the step from an older version.
"""

from __future__ import annotations

import logging
import sqlite3
from decimal import Decimal
from typing import Any, Final

from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.journaling import JournalEntry
from framework.venue.models import MatchType, PositionType

__all__ = [
    "MODES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "claim_mode",
    "entry_of",
    "mode_problem",
    "read_mode",
    "read_mode_problem",
    "upgrade_from_1",
    "version_of",
]

log = logging.getLogger("framework.journal")

SCHEMA_VERSION: Final = 2
"""2 added ``matched_sums`` and the UNLINKED kind of kept match (a version 1 file is brought
up to it at open). A version 1 process still running on the file is not affected: it never
reads that table nor another owner's kept matches; one started later refuses the file."""
SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS intents (
    client_order_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    strategy TEXT NOT NULL,
    pair TEXT NOT NULL,
    is_long INTEGER NOT NULL,
    quantity TEXT NOT NULL,
    price TEXT,
    is_market INTEGER NOT NULL,
    lever INTEGER NOT NULL,
    match_type INTEGER NOT NULL,
    position_type INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    tag TEXT,
    status TEXT NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,
    order_id INTEGER,
    code INTEGER,
    msg TEXT,
    filled TEXT NOT NULL DEFAULT '0',
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS intents_open ON intents (owner, status)
    WHERE status IN ('PENDING', 'UNKNOWN', 'ACCEPTED');
CREATE INDEX IF NOT EXISTS intents_lost ON intents (owner, updated_ms) WHERE status = 'LOST';
CREATE TABLE IF NOT EXISTS log (
    id INTEGER PRIMARY KEY,
    adds BLOB,
    marks BLOB,
    updates BLOB,
    filled BLOB
);
CREATE TABLE IF NOT EXISTS match_cursors (pair TEXT PRIMARY KEY, match_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS match_windows (pair TEXT PRIMARY KEY, floor INTEGER);
CREATE TABLE IF NOT EXISTS seen_matches (
    pair TEXT NOT NULL, match_id INTEGER NOT NULL, PRIMARY KEY (pair, match_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kept_matches (
    match_id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    delivered INTEGER NOT NULL, -- the KeptAs kind (the name is version 1's)
    record BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS log_ids (coin TEXT PRIMARY KEY, log_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS matched_sums (
    client_order_id TEXT PRIMARY KEY,
    matched TEXT NOT NULL
) WITHOUT ROWID;
"""

INSERT: Final = (
    "INSERT OR IGNORE INTO intents (client_order_id, owner, strategy, pair, is_long, quantity,"
    " price, is_market, lever, match_type, position_type, user_id, tag, status, code, msg,"
    " created_ms, updated_ms, sent, order_id, filled)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Positions in an add row (see Journal.add) of the fields later writes change.
STATUS_AT, CODE_AT, MSG_AT, UPDATED_AT, SENT_AT, ORDER_ID_AT, FILLED_AT = 13, 14, 15, 17, 18, 19, 20
MARK: Final = "UPDATE intents SET sent = ? WHERE client_order_id = ?"
UPDATE: Final = (
    "UPDATE intents SET status = ?, order_id = coalesce(?, order_id), code = ?, msg = ?,"
    " updated_ms = ? WHERE client_order_id = ?"
)
FILLED: Final = "UPDATE intents SET filled = ? WHERE client_order_id = ?"
SUM: Final = "INSERT OR REPLACE INTO matched_sums (client_order_id, matched) VALUES (?, ?)"
# The sums of intents that ended are no longer needed (folded intents only), but for the
# CANCELED ones a late match may still name (PRUNE_SUMS cuts those at open, per owner): it
# counts beyond what a record said had filled of the order, across a restart too.
SUMS_ENDED: Final = (
    "DELETE FROM matched_sums WHERE EXISTS (SELECT 1 FROM intents WHERE"
    " intents.client_order_id = matched_sums.client_order_id AND (status NOT IN"
    " ('PENDING', 'UNKNOWN', 'ACCEPTED', 'CANCELED') OR sent = 2))"
)
DONE: Final = (
    "(status IN ('FILLED', 'CANCELED') OR (status = 'ACCEPTED' AND sent = 2))"
    " AND order_id IS NOT NULL"
)
"""The ended orders a late match may still name: filled, cancelled, or retired (sent = 2)."""
DONE_CUTOFF: Final = (
    f"SELECT rowid FROM intents WHERE owner = ? AND {DONE} ORDER BY rowid DESC LIMIT 1 OFFSET ?"
)
SUM_OWNERS: Final = (
    "SELECT DISTINCT owner FROM intents JOIN matched_sums USING (client_order_id)"
    " WHERE status = 'CANCELED'"
)
PRUNE_SUMS: Final = (
    "DELETE FROM matched_sums WHERE client_order_id IN (SELECT client_order_id FROM intents"
    " WHERE owner = ? AND status = 'CANCELED' AND rowid < ?)"
)
SEEN: Final = "SELECT match_id FROM seen_matches WHERE pair = ?"
COLUMNS: Final = (
    "SELECT client_order_id, strategy, pair, is_long, quantity, price, is_market, lever,"
    " match_type, position_type, user_id, tag, status, sent, order_id, code, msg, filled,"
    " created_ms, matched_sums.matched, updated_ms FROM intents LEFT JOIN matched_sums USING"
    " (client_order_id) WHERE owner = ? AND "
)
LOAD: Final = (
    COLUMNS + "status IN ('PENDING', 'UNKNOWN', 'ACCEPTED') AND sent != 2 ORDER BY intents.rowid"
)
LOAD_LOST: Final = (
    COLUMNS + "status = 'LOST' AND updated_ms >= ? ORDER BY intents.rowid DESC LIMIT ?"
)
LOAD_DONE: Final = COLUMNS + DONE + " ORDER BY intents.rowid DESC LIMIT ?"
LOAD_ONE: Final = COLUMNS + "client_order_id = ?"


def entry_of(row: tuple[Any, ...]) -> JournalEntry:
    """A JournalEntry from a row of COLUMNS."""
    (coid, strategy, pair, is_long, quantity, price, is_market, lever, match_type,
     position_type, user_id, tag, status, sent, order_id, code, msg, filled,
     created_ms, matched, updated_ms) = row  # fmt: skip
    intent = OrderIntent(
        pair=pair,
        is_long=bool(is_long),
        quantity=Decimal(quantity),
        price=None if price is None else Decimal(price),
        is_market=bool(is_market),
        lever=lever,
        match_type=MatchType(match_type),
        position_type=PositionType(position_type),
        client_order_id=coid if user_id else None,
        tag=tag,
    )
    return JournalEntry(
        client_order_id=coid,
        strategy=strategy,
        intent=intent,
        status=OrderStatus(status),
        sent=bool(sent),
        created_ms=created_ms,
        order_id=order_id,
        code=code,
        msg=msg,
        filled=Decimal(filled),
        matched=None if matched is None else Decimal(matched),
        updated_ms=updated_ms,
    )


MODES: Final = ("live", "paper")
"""What a journal's run traded on: the venue (live) or the in-process paper venue (paper)."""
_USED: Final = (
    "SELECT EXISTS (SELECT 1 FROM intents) OR EXISTS (SELECT 1 FROM log)"
    " OR EXISTS (SELECT 1 FROM match_cursors) OR EXISTS (SELECT 1 FROM log_ids)"
    " OR EXISTS (SELECT 1 FROM meta WHERE key = 'id_seq')"
)


def read_mode(conn: sqlite3.Connection) -> tuple[str | None, bool]:
    """The file's mode (meta ``mode``; None when not written yet) and whether a run already
    used it; reads only."""
    used = bool(conn.execute(_USED).fetchone()[0])
    row = conn.execute("SELECT value FROM meta WHERE key = 'mode'").fetchone()
    return (None if row is None else str(row[0])), used


def claim_mode(conn: sqlite3.Connection, mode: str) -> tuple[str, bool]:
    """The file's mode (meta ``mode``, written at its first open) and whether a run already
    used it. A used file from before the mark existed is a live one."""
    written, used = read_mode(conn)
    if written is None:
        first = "live" if used else mode
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('mode', ?)", (first,))
        row = conn.execute("SELECT value FROM meta WHERE key = 'mode'").fetchone()
        written = str(row[0])
    return written, used


def mode_problem(conn: sqlite3.Connection, name: str, mode: str) -> str | None:
    """Mark a new file with mode; why a file cannot be opened in mode (of the other mode, or
    a paper one an earlier run used), else None."""
    return _mode_problem(name, mode, *claim_mode(conn, mode))


def read_mode_problem(conn: sqlite3.Connection, name: str, mode: str) -> str | None:
    """What :func:`mode_problem` would say of the file, read only (for a preflight)."""
    written, used = read_mode(conn)
    return _mode_problem(name, mode, written or ("live" if used else mode), used)


def _mode_problem(name: str, mode: str, written: str, used: bool) -> str | None:
    if written != mode:
        return (
            f"journal {name} is a {written} run's: a {mode} node does not resume it (paper"
            " and real orders never share a journal); use another journal.path"
        )
    if mode == "paper" and used:
        return (
            f"journal {name} holds an earlier paper run: the paper account it traded lived in"
            " memory and is gone; use a new journal.path (or none)"
        )
    return None


def version_of(conn: sqlite3.Connection) -> object:
    """The schema version the file says it has (None when it says none)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return None if row is None else row[0]


def upgrade_from_1(conn: sqlite3.Connection) -> object:
    """Bring a version 1 file to version 2 (one transaction; another process may race).

    Its one new table was made by the schema script (IF NOT EXISTS), which leaves a version 1
    process's view untouched; the version says a file may now hold UNLINKED kept matches.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = version_of(conn)
        if version == 1:
            conn.execute("UPDATE meta SET value = 2 WHERE key = 'schema_version'")
            version = 2
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    log.info("journal: brought up to schema version %s", version)
    return version
