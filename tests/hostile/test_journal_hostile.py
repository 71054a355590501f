"""Damaged journals: refused at open in one line naming the path, before anything is traded."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from framework.live.journal import Journal, JournalError

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
