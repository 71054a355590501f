"""An output path a command cannot write is one line naming it and why, before any work.

The paths are made unwritable in a way that holds for root too (tests run as root in
containers): a regular file where a directory must be, or a directory where a file must be.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from framework.backtest.cli import backtest_main
from framework.live.cli import record_main
from framework.output_path import unwritable
from framework.scaffold import main as new_strategy_main

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "backtest.yaml"


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    """A regular file, in the way of anything meant to go under it."""
    path = tmp_path / "file"
    path.write_text("x")
    return path


def test_the_reason_names_what_is_in_the_way(tmp_path: Path, a_file: Path) -> None:
    assert unwritable(a_file / "deep" / "x.jsonl", directory=False) == (
        f"{a_file} is a file, not a directory"
    )
    assert unwritable(a_file, directory=True) == f"{a_file} is a file, not a directory"
    assert unwritable(tmp_path, directory=False) == f"{tmp_path} is a directory"
    assert unwritable(tmp_path / "new" / "dir", directory=True) is None  # made when written
    assert not (tmp_path / "new").exists()  # the check creates nothing


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_record_out_that_cannot_be_written(
    a_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = a_file / "x.jsonl"
    assert record_main(["-c", str(CONFIG), "--out", str(out)]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"record: cannot write the recording to {out}: {a_file} is a file, not a directory"
    )
    assert record_main(["-c", str(CONFIG), "--out", str(tmp_path), "--append"]) == 1
    assert one_line(capsys.readouterr().err).endswith(f"{tmp_path} is a directory")


def test_backtest_report_that_cannot_be_written(
    a_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert backtest_main(["-c", str(CONFIG), "--report", str(a_file)]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"backtest: cannot write the report to {a_file}: {a_file} is a file, not a directory"
    )


def test_new_strategy_dir_that_cannot_be_written(
    a_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert new_strategy_main(["bot", "--dir", str(a_file / "sub")]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"new-strategy: cannot write to {a_file / 'sub'}: {a_file} is a file, not a directory"
    )


def test_sweep_out_that_cannot_be_written(
    a_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("distributed")
    from framework.backtest.sweep_cli import sweep_main

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"backtest: {CONFIG}\nobjective: {{metric: pnl.USD.net_pnl}}\n"
        "params: {ladder: {levels: [2, 3]}}\n"
    )
    assert sweep_main(["-c", str(sweep), "--out", str(a_file)]) == 1  # before any cluster
    assert one_line(capsys.readouterr().err) == (
        f"sweep: cannot write to {a_file}: {a_file} is a file, not a directory"
    )


def test_live_with_a_recording_path_that_cannot_be_written(a_file: Path, tmp_path: Path) -> None:
    config = tmp_path / "live.yaml"
    config.write_text(
        "venue: {embedded: true}\npairs: {ETH-USD: {}}\n"
        f"recording: {{path: {a_file / 'x.jsonl'}}}\n"
        "strategies:\n  - {name: l, class: strategies.ladder:Ladder, params: {pair: ETH-USD}}\n"
        "logging: {level: WARNING}\n"
    )
    ran = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "live", "-c", str(config), "--duration", "30"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 1
    assert one_line(ran.stderr) == (
        f"live: cannot write the recording to {a_file / 'x.jsonl'}: "
        f"{a_file} is a file, not a directory"
    )
