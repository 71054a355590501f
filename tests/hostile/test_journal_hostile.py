"""Damaged journals: refused at open in one line naming the path, before anything is traded."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from framework.engine.open_orders import NO_OWNER
from framework.live.journal import Journal, JournalError
from framework.live.node import Node
from tests.live.test_adoption import (
    book,
    gtc,
    hand,
    node_config,
    outsider,
    record,
    still_twin,
)
from tests.node_running import running
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """\
venue:
  embedded: true
journal:
  path: {path}
pairs:
  ETH-USD: {{}}
strategies:
  - name: pulse
    class: strategies.pulse:Pulse
    params: {{pair: ETH-USD, quantity: "0.01", every_s: 0.2, hold: 1}}
"""


def healthy(path: Path) -> bytes:
    """A journal of a few hundred KB (so damage can land mid-file); its bytes."""
    journal = Journal.open(path)
    for i in range(3000):
        journal.mark_match_seen("ETH-USD", i)
    journal.close()
    return path.read_bytes()


def garbage_mid(data: bytes) -> bytes:
    """4 KB of garbage in the middle of the file."""
    mid = len(data) // 2
    return data[:mid] + bytes((i * 37 + 11) % 256 for i in range(4096)) + data[mid + 4096 :]


DAMAGES: dict[str, Callable[[bytes], bytes]] = {
    "garbage in the middle": garbage_mid,
    "truncated": lambda data: data[: len(data) // 3],
    "garbage header": lambda data: b"\xff" * 100 + data[100:],
    "a text file": lambda _data: b"not a journal\n" * 100,
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_journal_is_refused_at_open_in_one_line(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "j.db"
    path.write_bytes(DAMAGES[damage](healthy(path)))
    with pytest.raises(JournalError) as raised:
        Journal.open(path)
    text = str(raised.value)
    assert "\n" not in text and str(path) in text and "damaged" in text


def test_a_directory_at_the_journal_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "j.db").mkdir()
    with pytest.raises(JournalError, match="cannot be opened"):
        Journal.open(tmp_path / "j.db")


def test_the_daemon_refuses_a_journal_damaged_mid_file_before_trading(tmp_path: Path) -> None:
    # Measured: the daemon opened it, traded for 6 s, then failed at stop with no summary.
    path = tmp_path / "j.db"
    path.write_bytes(garbage_mid(healthy(path)))
    config = tmp_path / "bot.yaml"
    config.write_text(CONFIG.format(path=path))
    done = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "live", "-c", str(config), "--duration", "20"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "Traceback" not in out and "summary" not in out
    (last,) = [line for line in out.splitlines() if "damaged" in line][-1:]
    assert str(path) in last and "nothing was traded" in last
    assert "strategies started" not in out and "position" not in out  # refused before trading


@pytest.mark.anyio
async def test_a_new_journal_adopts_the_orders_this_node_left_resting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Measured: with a 0-byte journal the node's resting orders were only "external" in a
    # warning, never managed (a kill switch left them on the book).
    twin = still_twin()
    async with twin:
        first = Node(node_config(twin, tmp_path / "a.db"))
        async with running(first):
            h = hand(first)
            cids = [h.limit(price) for price in ("1990", "1989", "1988")]
            await eventually(lambda: set(book(twin)) == set(cids))
        async with outsider(twin) as rest:
            await rest.batch_create([gtc("by-hand", "1900")])
        (tmp_path / "b.db").write_bytes(b"")  # a new, empty journal
        caplog.set_level(logging.WARNING, logger="framework.node")
        second = Node(node_config(twin, tmp_path / "b.db"))
        async with running(second):
            assert second.engine is not None
            adopted = second.engine.open_orders()
            assert sorted(o.client_order_id for o in adopted) == sorted(cids)
            assert {o.strategy for o in adopted} == {NO_OWNER}
            assert hand(second).open_orders() == []  # no strategy owns them
            assert any("3 resting orders carry this node's client ids" in r.getMessage()
                       for r in caplog.records)  # fmt: skip
            second.engine.kill_switch = True
            await eventually(lambda: set(book(twin)) == {"by-hand"})
        assert all(record(twin, c).status == "CANCELED" for c in cids)
