"""The journal: one SQLite file in WAL mode holding intents, id blocks and stream cursors.

It implements :class:`framework.engine.journaling.JournalProtocol` for the execution engine
and the cursor store of the match poller and the portfolio (the match cursor per pair and
the newest account logId per coin). Intent writes are buffered in memory and written by
:meth:`Journal.commit`, which the engine calls once per batch, before any byte of the batch is
sent. A commit appends ONE row to the ``log`` table (the buffered writes as compact JSON), so
its cost hardly grows with the number of intents; the log is folded into the ``intents`` table
(one row per intent, the state recovery and tools read) when the journal is opened, closed,
read, or when the executor is idle and the log has grown. Cursor writes commit at once.

Matches the engine keeps (held until an answer names their order, counted for a group of
same-looking in-doubt intents, or found external while intents were in doubt) are rows of
``kept_matches``, written in the same commit as the intent writes, so a fill the venue
listed survives a kill; so is the sum of an intent's matches when a venue record said more
had filled (``matched_sums``, until the intent ends). The ids strategies chose are
loaded into memory once at open, so checking a new one for reuse costs no SQL. The match
poller's window (newest id delivered, the window's floor, ids delivered above it) is
``match_cursors``, ``match_windows`` and ``seen_matches``; :meth:`Journal.mark_match_seen`
commits the buffered writes and the delivered id in one transaction.

Durability: ``synchronous=NORMAL`` (the default) survives a killed process, which is what
the engine's never-send-twice rule relies on; ``FULL`` also survives a power cut, at the
cost of a disk flush per commit. The flushes of WAL checkpoints are made on a thread of
their own (:mod:`framework.live.journal_checkpoint`), not inside a commit on the loop.
Several processes may share one journal: id blocks are reserved in a single atomic
statement, and each process reloads only its own intents (the ``owner``, its client-id node
name) at restart.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from collections.abc import Iterable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Final, Literal

import orjson

from framework.engine.client_ids import base36
from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.journaling import JournalEntry, KeptAs, StatusRow
from framework.engine.reconcile import DONE_MEMORY
from framework.live.journal_checkpoint import BACKSTOP_PAGES, CHECKPOINT_EVERY, Checkpointer
from framework.live.journal_schema import (
    CODE_AT,
    DONE_CUTOFF,
    FILLED,
    FILLED_AT,
    INSERT,
    LOAD,
    LOAD_DONE,
    LOAD_LOST,
    LOAD_ONE,
    MARK,
    MSG_AT,
    ORDER_ID_AT,
    PRUNE_SUMS,
    SCHEMA,
    SCHEMA_VERSION,
    SEEN,
    SENT_AT,
    STATUS_AT,
    SUM,
    SUM_OWNERS,
    SUMS_ENDED,
    UPDATE,
    UPDATED_AT,
    entry_of,
    upgrade_from_1,
    version_of,
)
from framework.venue.codec import decode as decode_record
from framework.venue.codec import encode as encode_record
from framework.venue.errors import FrameworkError
from framework.venue.models import MatchRecord

__all__ = ["Journal", "JournalError"]

log = logging.getLogger("framework.journal")

COMPACT_AFTER: Final = 256
"""Log rows (commits) after which an idle executor starts folding the log."""
COMPACT_CHUNK: Final = 32
"""Log rows folded per idle moment, so one fold never stalls the event loop for long."""
CACHE_SIZE: Final = -256
"""PRAGMA cache_size of the journal connection: 256 KiB (SQLite's default, -2000, is ~2 MB)."""


class JournalError(FrameworkError):
    """The journal cannot be used (damaged, unreadable, another version); one line."""


def _damaged(name: str, what: str) -> str:
    """The one line that says a journal file cannot be trusted, and what to do."""
    if "readonly" in what or "unable to open" in what:
        return f"journal {name}: cannot be written ({what}); nothing was traded"
    return (
        f"journal {name}: damaged ({what}); nothing was traded. Keep it for inspection, move it"
        " aside and start with a new journal, or restore a copy"
    )


def _prepare(conn: sqlite3.Connection, name: str, synchronous: str) -> None:
    """Check the file (SQLite's quick_check), set the connection up, bring the schema up to
    date; a damaged file raises sqlite3.DatabaseError before anything is written."""
    problems = [row[0] for row in conn.execute("PRAGMA quick_check(3)")]
    if problems != ["ok"]:
        raise sqlite3.DatabaseError("; ".join(" ".join(str(p).split()) for p in problems))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA busy_timeout=10000")
    # The page cache (per connection, not stored in the file): SQLite's default of 2 MB
    # fills as the file grows, for minutes on a busy daemon. The writes touch the newest
    # pages of each table and index, which 256 KiB holds; the OS caches the rest.
    conn.execute(f"PRAGMA cache_size={CACHE_SIZE}")
    conn.executescript(SCHEMA)
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
    )
    version = version_of(conn)
    if version == 1:
        version = upgrade_from_1(conn)
    if version != SCHEMA_VERSION:
        raise JournalError(
            f"journal {name}: schema version {version!r}, expected {SCHEMA_VERSION} (written by"
            " another version of perpframe)"
        )


class Journal:
    """SQLite journal of intents and cursors; open with :meth:`Journal.open`."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn = conn
        self.path = path
        self._adds: list[tuple[Any, ...]] = []
        self._marks: list[tuple[int, str]] = []
        self._updates: list[StatusRow] = []
        self._filled: list[tuple[str, str]] = []
        # Written to matched_sums (not the log): a version 1 process sharing the file folds
        # the log, and would drop what it does not know.
        self._matched: dict[str, str] = {}
        # match id -> kept row, or None to forget it; the last write of an id wins
        self._kept: dict[int, tuple[int, str, int, bytes] | None] = {}
        self._user_ids: set[str] = set()  # ids strategies chose: in the file at open, or added
        self._tag: str | None = None
        self.commits = 0
        self.log_rows = 0  # log rows appended since the last fold
        self.checkpointer: Checkpointer | None = None  # a file in WAL mode: off the loop

    @classmethod
    def open(
        cls, path: str | Path, *, synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    ) -> Journal:
        """Open (creating if needed) the journal at path; ":memory:" gives a private one."""
        name = str(path)
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous: expected NORMAL or FULL, got {synchronous!r}")
        try:
            if name != ":memory:":
                Path(name).parent.mkdir(parents=True, exist_ok=True)
            # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
            conn = sqlite3.connect(name, isolation_level=None, timeout=10.0)
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(f"journal {name}: cannot be opened ({exc})") from None
        try:
            _prepare(conn, name, synchronous)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise JournalError(_damaged(name, str(exc))) from None
        except BaseException:
            conn.close()
            raise
        journal = cls(conn, name)
        journal.compact()
        journal.prune_sums()
        if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            conn.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
            journal.checkpointer = Checkpointer(name)
        # Strategy-chosen ids are checked for reuse in memory (no SQL per submit): those of
        # every process sharing the file, as of now, plus every one this process adds.
        journal._user_ids.update(
            coid for (coid,) in conn.execute("SELECT client_order_id FROM intents WHERE user_id")
        )
        return journal

    def __repr__(self) -> str:
        return f"Journal({self.path!r})"

    def close(self) -> None:
        """Commit what is buffered, fold the log and close the file."""
        if self._conn is None:
            return
        try:
            self.compact()
        finally:
            if self.checkpointer is not None:
                self.checkpointer.stop()
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    # -- id blocks (IdSource) -------------------------------------------------------------

    def id_tag(self) -> str:
        """The journal's random id tag, drawn when the journal was created."""
        if self._tag is None:
            fresh = base36(secrets.randbits(25)).rjust(5, "0")
            self._conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('id_tag', ?)", (fresh,)
            )
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'id_tag'").fetchone()
            self._tag = str(row[0])
        return self._tag

    def reserve_ids(self, count: int) -> int:
        """Reserve count sequence numbers in one atomic statement; returns the first."""
        conn = self._conn
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('id_seq', 0)")
        # fetchall() steps the statement to its end, so its transaction ends here.
        (row,) = conn.execute(
            "UPDATE meta SET value = value + ? WHERE key = 'id_seq' RETURNING value", (count,)
        ).fetchall()
        return int(row[0]) - count

    # -- intents (JournalProtocol) --------------------------------------------------------

    def add(
        self,
        client_order_id: str,
        owner: str,
        strategy: str,
        intent: OrderIntent,
        status: OrderStatus,
        created_ms: int,
        code: int | None = None,
        msg: str | None = None,
    ) -> None:
        """Buffer a new intent row."""
        price = intent.price
        self._adds.append(
            (
                client_order_id,
                owner,
                strategy,
                intent.pair,
                intent.is_long,
                str(intent.quantity),
                None if price is None else str(price),
                intent.is_market,
                intent.lever,
                intent.match_type,
                intent.position_type,
                intent.client_order_id is not None,
                intent.tag,
                status,
                code,
                msg,
                created_ms,
                created_ms,
            )
        )
        if intent.client_order_id is not None:
            self._user_ids.add(client_order_id)

    def prune_sums(self) -> None:
        """Forget the matches' sums of CANCELED intents no late match can name any more (older
        than each owner's newest DONE_MEMORY ended orders); done at open."""
        conn = self._conn
        for (owner,) in conn.execute(SUM_OWNERS).fetchall():
            row = conn.execute(DONE_CUTOFF, (owner, DONE_MEMORY - 1)).fetchone()
            if row is not None:
                conn.execute(PRUNE_SUMS, (owner, row[0]))

    def mark_sent(self, client_order_ids: Iterable[str], sent: bool) -> None:
        """Buffer the sent mark of rows."""
        flag = 1 if sent else 0
        self._marks.extend((flag, coid) for coid in client_order_ids)

    def update(self, rows: Sequence[StatusRow]) -> None:
        """Buffer status changes."""
        self._updates.extend(rows)

    def set_filled(
        self, client_order_id: str, filled: Decimal, matched: Decimal | None = None
    ) -> None:
        """Buffer what has filled of an intent, and its matches' sum when that is less."""
        self._filled.append((str(filled), client_order_id))
        if matched is not None:
            self._matched[client_order_id] = str(matched)

    def keep_match(self, owner: str, match: MatchRecord, kind: KeptAs) -> None:
        """Buffer a match the engine keeps, and why (its kind)."""
        record = orjson.dumps(encode_record(match))
        self._kept[match.id] = (match.id, owner, int(kind), record)

    def drop_match(self, match_id: int) -> None:
        """Buffer the end of keeping a match."""
        self._kept[match_id] = None

    def load_matches(self, owner: str) -> list[tuple[MatchRecord, KeptAs]]:
        """The owner's kept matches and why each was kept, in id order."""
        self.commit()
        return [
            (decode_record(MatchRecord, orjson.loads(record)), KeptAs(delivered))
            for record, delivered in self._conn.execute(
                "SELECT record, delivered FROM kept_matches WHERE owner = ? ORDER BY match_id",
                (owner,),
            )
        ]

    def commit(self) -> None:
        """Make every buffered change durable: one log row, one transaction."""
        if self._kept or self._matched:
            self._transaction(())
        elif self._log_row():  # one statement in autocommit mode is one transaction
            self._committed()

    def _committed(self) -> None:
        self.commits += 1
        if self.checkpointer is not None and self.commits % CHECKPOINT_EVERY == 0:
            self.checkpointer.request()

    def _log_row(self) -> bool:
        """Write the buffered intent changes as one log row (no transaction of its own)."""
        if not (self._adds or self._marks or self._updates or self._filled):
            return False
        row = (
            orjson.dumps(self._adds) if self._adds else None,
            orjson.dumps(self._marks) if self._marks else None,
            orjson.dumps(self._updates) if self._updates else None,
            orjson.dumps(self._filled) if self._filled else None,
        )
        self._conn.execute(
            "INSERT INTO log (adds, marks, updates, filled) VALUES (?, ?, ?, ?)", row
        )
        self.log_rows += 1
        self._adds.clear()
        self._marks.clear()
        self._updates.clear()
        self._filled.clear()
        return True

    def _transaction(self, statements: Iterable[tuple[str, tuple[Any, ...]]]) -> None:
        """Commit what is buffered and statements in one transaction."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._log_row()
            if self._matched:
                conn.executemany(SUM, self._matched.items())
            for match_id, row in self._kept.items():
                if row is None:
                    conn.execute("DELETE FROM kept_matches WHERE match_id = ?", (match_id,))
                else:
                    conn.execute(
                        "INSERT OR REPLACE INTO kept_matches (match_id, owner, delivered, record)"
                        " VALUES (?, ?, ?, ?)",
                        row,
                    )
            for sql, params in statements:
                conn.execute(sql, params)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._kept.clear()
        self._matched.clear()
        self._committed()

    def compact(self, limit: int | None = None) -> int:
        """Fold the log (of every process sharing the file) into the intents table.

        With a limit, only the oldest ``limit`` log rows are folded. Returns how many were.
        """
        self.commit()
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = conn.execute(
                "SELECT id, adds, marks, updates, filled FROM log ORDER BY id LIMIT ?",
                (-1 if limit is None else limit,),
            ).fetchall()
            # Coalesce: an intent added in this chunk is inserted once, in its last state;
            # changes to intents folded earlier are applied in log order.
            fresh: dict[str, list[Any]] = {}
            older: list[tuple[str, Sequence[Any]]] = []
            for _id, adds, marks, updates, filled in rows:
                if adds is not None:
                    for add in orjson.loads(adds):
                        add.extend((0, None, "0"))
                        fresh.setdefault(add[0], add)
                if marks is not None:
                    for flag, coid in orjson.loads(marks):
                        if (row := fresh.get(coid)) is not None:
                            row[SENT_AT] = flag
                        else:
                            older.append((MARK, (flag, coid)))
                if updates is not None:
                    for update in orjson.loads(updates):
                        if (row := fresh.get(update[5])) is not None:
                            row[STATUS_AT], row[CODE_AT], row[MSG_AT] = (
                                update[0],
                                update[2],
                                update[3],
                            )
                            row[UPDATED_AT] = update[4]
                            if update[1] is not None:
                                row[ORDER_ID_AT] = update[1]
                        else:
                            older.append((UPDATE, update))
                if filled is not None:
                    for amount, coid in orjson.loads(filled):
                        if (row := fresh.get(coid)) is not None:
                            row[FILLED_AT] = amount
                        else:
                            older.append((FILLED, (amount, coid)))
            conn.executemany(INSERT, fresh.values())
            for sql, params in older:
                conn.execute(sql, params)
            if rows:
                conn.execute("DELETE FROM log WHERE id <= ?", (rows[-1][0],))
                conn.execute(SUMS_ENDED)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self.log_rows = 0 if limit is None else max(0, self.log_rows - len(rows))
        if limit is None and rows:
            where = self.path or "(a temporary file)"
            log.info("journal %s: folded %d log rows into the intents table", where, len(rows))
        return len(rows)

    def compact_if_due(self) -> None:
        """Fold a chunk of the log when it has grown (the executor calls this when idle)."""
        if self.log_rows >= COMPACT_AFTER:
            self.compact(COMPACT_CHUNK)

    def contains(self, client_order_id: str) -> bool:
        """True if a strategy-chosen id is in the journal (as of open, or added since).

        In memory: the ids were loaded once at open. Generated ids are unique by
        construction (reserved blocks) and not looked up; a chosen id another process adds
        to a shared file after this one opened it is not seen.
        """
        return client_order_id in self._user_ids

    def load_open(self, owner: str) -> list[JournalEntry]:
        """The owner's PENDING, UNKNOWN and ACCEPTED intents in the order they were added."""
        self.compact()
        return [entry_of(row) for row in self._conn.execute(LOAD, (owner,))]

    def load_lost(self, owner: str, since_ms: int, limit: int) -> list[JournalEntry]:
        """The owner's newest ``limit`` LOST intents that became so at since_ms or later,
        oldest first."""
        self.compact()
        rows = self._conn.execute(LOAD_LOST, (owner, since_ms, limit)).fetchall()
        return [entry_of(row) for row in reversed(rows)]

    def load_intent(self, owner: str, client_order_id: str) -> JournalEntry | None:
        """The owner's intent of that client order id, whatever its status, else None."""
        self.compact()
        row = self._conn.execute(LOAD_ONE, (owner, client_order_id)).fetchone()
        return None if row is None else entry_of(row)

    def retire(self, client_order_id: str) -> None:
        """Buffer that an ACCEPTED order is no longer tracked (restart does not load it; a
        late match still finds it through load_done)."""
        self._marks.append((2, client_order_id))

    def load_done(self, owner: str, limit: int) -> list[JournalEntry]:
        """The owner's newest ``limit`` FILLED and CANCELED intents with an orderId, newest
        first (what a late match may still name)."""
        self.compact()
        return [entry_of(row) for row in self._conn.execute(LOAD_DONE, (owner, limit))]

    def status_of(self, client_order_id: str) -> tuple[OrderStatus, bool, int | None] | None:
        """(status, sent, order_id) of a committed intent, or None (for tools and tests)."""
        self.compact()
        row = self._conn.execute(
            "SELECT status, sent, order_id FROM intents WHERE client_order_id = ?",
            (client_order_id,),
        ).fetchone()
        if row is None:
            return None
        return OrderStatus(row[0]), bool(row[1]), row[2]

    def statuses(self) -> dict[str, OrderStatus]:
        """Every committed intent's status by client order id (for tools and tests)."""
        self.compact()
        return {
            coid: OrderStatus(status)
            for coid, status in self._conn.execute(
                "SELECT client_order_id, status FROM intents ORDER BY rowid"
            )
        }

    # -- cursors ------------------------------------------------------------------------

    def get_match_cursor(self, pair: str) -> int | None:
        """The newest match id already delivered for a pair, or None."""
        row = self._conn.execute(
            "SELECT match_id FROM match_cursors WHERE pair = ?", (pair,)
        ).fetchone()
        return None if row is None else int(row[0])

    def load_match_window(self, pair: str) -> tuple[int | None, int | None, set[int]]:
        """(newest id delivered, window floor, ids delivered above the floor) of a pair."""
        conn = self._conn
        row = conn.execute("SELECT floor FROM match_windows WHERE pair = ?", (pair,)).fetchone()
        seen = {i for (i,) in conn.execute(SEEN, (pair,))}
        return self.get_match_cursor(pair), None if row is None else row[0], seen

    def mark_match_seen(self, pair: str, match_id: int) -> None:
        """Commit what is buffered and that match_id of pair was delivered, in one transaction."""
        self._transaction(
            (
                ("INSERT OR IGNORE INTO seen_matches (pair, match_id) VALUES (?, ?)",
                 (pair, match_id)),
                ("INSERT INTO match_cursors (pair, match_id) VALUES (?, ?) ON CONFLICT (pair)"
                 " DO UPDATE SET match_id = max(match_id, excluded.match_id)", (pair, match_id)),
            )
        )  # fmt: skip

    def save_match_window(self, pair: str, high: int, floor: int | None) -> None:
        """Persist a pair's newest id and window floor; forget delivered ids outside them."""
        low = high if floor is None else floor
        self._transaction(
            (
                ("INSERT INTO match_cursors (pair, match_id) VALUES (?, ?) ON CONFLICT (pair)"
                 " DO UPDATE SET match_id = excluded.match_id", (pair, high)),
                ("INSERT INTO match_windows (pair, floor) VALUES (?, ?) ON CONFLICT (pair)"
                 " DO UPDATE SET floor = excluded.floor", (pair, floor)),
                ("DELETE FROM seen_matches WHERE pair = ? AND (match_id <= ? OR match_id > ?)",
                 (pair, low, high)),
            )
        )  # fmt: skip

    def set_match_cursor(self, pair: str, match_id: int) -> None:
        """Store the newest delivered match id of a pair, with no window (committed at once)."""
        self.save_match_window(pair, match_id, None)

    def get_log_id(self, coin: str) -> int | None:
        """The newest account logId seen for a coin, or None."""
        row = self._conn.execute("SELECT log_id FROM log_ids WHERE coin = ?", (coin,)).fetchone()
        return None if row is None else int(row[0])

    def set_log_id(self, coin: str, log_id: int) -> None:
        """Store the newest account logId of a coin (committed at once)."""
        self.commit()
        self._conn.execute(
            "INSERT INTO log_ids (coin, log_id) VALUES (?, ?)"
            " ON CONFLICT (coin) DO UPDATE SET log_id = excluded.log_id",
            (coin, log_id),
        )
