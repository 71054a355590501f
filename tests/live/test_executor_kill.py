"""A process SIGKILLed around a batch's journal commit, restarted: nothing lost, nothing sent twice."""

from __future__ import annotations

import signal
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest
from anyio import run_process

from framework.engine.intents import OrderStatus
from framework.live.journal import Journal
from framework.twin.server import VenueTwin
from tests.live.executor_fixtures import twin_settings

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CHILD = [sys.executable, "-m", "tests.live.exec_kill_child"]


async def life(*args: str) -> tuple[int, bytes]:
    """Run one life of the child process; (return code, stdout)."""
    done = await run_process([*CHILD, *args], cwd=ROOT, check=False)
    return done.returncode, done.stdout


def journal_statuses(path: Path) -> dict[str, tuple[OrderStatus, bool]]:
    """(status, sent) of every intent in the journal."""
    journal = Journal.open(path)
    try:
        out = {}
        for coid in journal.statuses():
            row = journal.status_of(coid)
            assert row is not None
            out[coid] = (row[0], row[1])
        return out
    finally:
        journal.close()


def executed(twin: VenueTwin) -> set[str]:
    """The clientOrderIds the twin executed."""
    assert twin.demo_user_id is not None
    return set(twin.exchange.accounts[twin.demo_user_id].client_ids)


async def test_killed_before_a_batch_commit_restart_sends_exactly_the_unsent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.db"
    async with VenueTwin(twin_settings(), port=0) as twin:
        # The 45 rows went durable with batch 1's commit; batch 2 dies before its own.
        code, _ = await life("first", twin.base_url, str(path), "cut", "2", "45")
        assert code == -signal.SIGKILL
        before = journal_statuses(path)
        assert len(before) == 45
        sent_first = {c for c, (st, _) in before.items() if st is OrderStatus.ACCEPTED}
        unsent = {c for c, row in before.items() if row == (OrderStatus.PENDING, False)}
        assert len(sent_first) == 20 and len(unsent) == 25
        assert executed(twin) == sent_first and twin.counters.batch_calls == 1

        code, out = await life("restart", twin.base_url, str(path))
        assert code == 0, out
        counters = orjson.loads(out)
        assert counters["orders_sent"] == 25 and counters["orders_accepted"] == 25
        assert twin.counters.batch_calls == 3  # 1 before the kill, 20 + 5 after
        assert twin.counters.orders_refused == 0  # no id was sent twice
        assert executed(twin) == sent_first | unsent
        after = journal_statuses(path)
        assert Counter(st for st, _ in after.values()) == {OrderStatus.ACCEPTED: 45}


async def test_killed_after_sent_mark_restart_never_resends_that_batch(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    async with VenueTwin(twin_settings(), port=0) as twin:
        code, _ = await life("first", twin.base_url, str(path), "sent", "2", "45")
        assert code == -signal.SIGKILL
        before = journal_statuses(path)
        in_doubt = {c for c, row in before.items() if row == (OrderStatus.PENDING, True)}
        unsent = {c for c, row in before.items() if row == (OrderStatus.PENDING, False)}
        assert len(in_doubt) == 20 and len(unsent) == 5

        code, out = await life("restart", twin.base_url, str(path))
        assert code == 0, out
        assert orjson.loads(out)["orders_sent"] == 5
        assert twin.counters.batch_calls == 2  # batch 2 was marked sent: never resent
        after = journal_statuses(path)
        assert {c for c, (st, _) in after.items() if st is OrderStatus.UNKNOWN} == in_doubt
        assert {c for c in unsent if after[c][0] is OrderStatus.ACCEPTED} == unsent
        assert executed(twin).isdisjoint(in_doubt)
