"""The README stays true: its generated Strategy API, its Quick start, and its commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from framework.cli import COMMANDS
from tests import strategy_api

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_strategy_api_section_matches_the_docstrings() -> None:
    current = strategy_api.section(README)
    assert current is not None, "README.md lost its strategy-api markers"
    assert current == strategy_api.render(), "run: python -m tests.strategy_api"


def test_every_record_a_strategy_member_returns_is_in_the_api_section() -> None:
    current = strategy_api.section(README) or ""
    records = dict((cls.__name__, cls) for _, cls in strategy_api.returned_records())
    assert "OpenOrder" in records  # self.open_orders()
    for name, cls in records.items():
        (row,) = [line for line in current.splitlines() if line.startswith(f"| `{name}` (")]
        for field in [*strategy_api.field_names(cls), *strategy_api.properties(cls)]:
            assert f"`{field}`" in row, (name, field)


def test_the_quick_start_keeps_exactly_two_lines() -> None:
    section = README.split("## Quick start", 1)[1]
    block = re.search(r"```[a-z]*\n(.*?)```", section, re.S)
    assert block is not None
    assert len([line for line in block.group(1).splitlines() if line.strip()]) == 2


def test_the_quick_start_test_command_says_why_a_test_was_skipped(tmp_path: Path) -> None:
    # Line 2 of the Quick start is a plain `python -m pytest`: the project's pytest settings
    # must make it print each skip's reason, not only "1 skipped".
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n\n\ndef test_x():\n    pytest.skip('no chromium here')\n"
    )
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-2000:]
    assert re.search(r"^SKIPPED \[1\] .*no chromium here$", ran.stdout, re.M), ran.stdout


def test_every_command_of_the_entry_point_is_in_the_readme() -> None:
    for name in COMMANDS:
        assert f"`perpframe {name}" in README, name


def test_no_pointer_to_a_file_the_repository_lacks() -> None:
    assert "later release" not in README
    if not (ROOT / "SPEC.md").exists():
        assert "SPEC.md" not in README
        venue_help = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), "venue", "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert venue_help.returncode == 0
        assert "venue twin" in venue_help.stdout and "SPEC.md" not in venue_help.stdout
