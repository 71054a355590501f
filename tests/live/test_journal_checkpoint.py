"""The journal's WAL checkpoints run on a thread of their own, not inside a commit on the loop."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from framework.live.journal import Journal
from framework.live.journal_checkpoint import BACKSTOP_PAGES, CHECKPOINT_EVERY
from tests.waiting import until


def test_a_file_journal_leaves_sqlites_checkpoint_as_a_backstop_only(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "journal.db")
    try:
        (pages,) = journal._conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        assert pages == BACKSTOP_PAGES
        assert journal.checkpointer is not None
    finally:
        journal.close()


def test_the_thread_copies_the_wal_into_the_file_every_so_many_commits(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    journal = Journal.open(path)
    assert journal.checkpointer is not None
    size = path.stat().st_size
    for match_id in range(1, CHECKPOINT_EVERY):
        journal.mark_match_seen("ETH-USD", match_id)
    assert journal.checkpointer.checkpoints == 0  # not asked yet: no thread, nothing copied
    assert path.stat().st_size == size
    journal.mark_match_seen("ETH-USD", CHECKPOINT_EVERY)
    until(lambda: journal.checkpointer.checkpoints >= 1, what="a checkpoint by the thread")
    assert path.stat().st_size > size  # the pages written since the open are in the file now
    journal.close()
    # The thread's connection was closed first: the journal's was the last, and removed the WAL.
    assert not Path(f"{path}-wal").exists()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM seen_matches").fetchone()[0] > 0


def test_journals_without_a_file_have_no_checkpointer() -> None:
    for name in (":memory:", ""):
        journal = Journal.open(name)
        assert journal.checkpointer is None
        journal.close()
