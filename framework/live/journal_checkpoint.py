"""Checkpoints of the journal's WAL on a thread of their own, so no commit on the loop waits
for a disk flush.

In WAL mode with ``synchronous=NORMAL`` a commit only appends to the WAL, no flush; the
flushes come with the checkpoint that copies the WAL into the database file. SQLite runs it
inside the commit that takes the WAL past ``wal_autocheckpoint`` pages (1000 by default),
often the commit made right before a batch is sent. Measured on this machine class (ext4, a
VM's disk), committing 3000 one-intent batches in a loop: SQLite checkpointed every ~490
commits, each of those commits taking 3 to 11.5 ms against a p50 of 0.01 ms; in
bench_tick_to_trade one was a 4.3 ms push -> batchCreate, the daemon's slowest but one. Run
on this thread instead (PASSIVE, on a connection of its own: it never blocks a writer, and
sqlite3 lets go of the GIL while it runs), the same 3000 commits took at most 0.16 to
0.36 ms (three runs).

The journal's connection keeps SQLite's own checkpoint as a backstop at
:data:`BACKSTOP_PAGES`: the WAL restarts from its beginning only when a write starts with
every frame copied, so under writes closer together than a checkpoint takes it would grow;
the backstop then copies the last frames on the writer's thread, once per ~40 MB of WAL.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import Final

__all__ = ["BACKSTOP_PAGES", "CACHE_SIZE", "CHECKPOINT_EVERY", "Checkpointer"]

log = logging.getLogger("framework.journal")

CHECKPOINT_EVERY: Final = 256
"""Commits after which the checkpointer thread is asked for a checkpoint (~512 WAL pages)."""
BACKSTOP_PAGES: Final = 10_000
"""PRAGMA wal_autocheckpoint of the journal's connection: SQLite's checkpoint, on the writer's
thread, only past this many WAL pages (4 KiB each)."""
CACHE_SIZE: Final = -64
"""PRAGMA cache_size of the thread's connection: 64 KiB, a bound (a checkpoint copies WAL
frames to the file, not through the cache: the connection holds ~110 KB, whatever this is)."""


class Checkpointer:
    """A daemon thread with its own connection to path, checkpointing (PASSIVE) when asked."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.checkpoints = 0
        self.failures = 0
        self._due = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"Checkpointer({self.path!r}, checkpoints={self.checkpoints})"

    def request(self) -> None:
        """Ask for a checkpoint soon (the thread starts on the first request)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="journal-checkpoint", daemon=True
            )
            self._thread.start()
        self._due.set()

    def stop(self) -> None:
        """End the thread and close its connection (before the journal's own is closed)."""
        self._stopping = True
        self._due.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            log.warning("journal %s: no checkpoint thread (%s)", self.path, exc)
            return
        try:
            conn.execute(f"PRAGMA cache_size={CACHE_SIZE}")
            while True:
                self._due.wait()
                self._due.clear()
                if self._stopping:
                    return
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:  # the backstop still bounds the WAL
                    self.failures += 1
                    if self.failures == 1 or self.failures % 100 == 0:
                        log.warning(
                            "journal %s: checkpoint failed (#%d): %s", self.path, self.failures, exc
                        )
                else:
                    self.checkpoints += 1
        finally:
            conn.close()
