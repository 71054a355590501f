"""The ``perpframe`` command and ``python run.py`` as a new user runs them, in subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from framework import cli
from framework.engine.strategy import Strategy
from framework.scaffold import render_strategy

ROOT = Path(__file__).resolve().parents[1]
PERPFRAME = Path(sys.executable).parent / "perpframe"


def run(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 60):
    """Run a command to completion; its CompletedProcess with text output."""
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        args, cwd=cwd, env=environ, capture_output=True, text=True, timeout=timeout, check=False
    )


def perpframe(*args: str, cwd: Path = ROOT, **kw: object) -> subprocess.CompletedProcess[str]:
    """The installed console script (the project is installed editable in tests)."""
    if not PERPFRAME.exists():
        pytest.skip(f"no perpframe script beside {sys.executable}: pip install -e . first")
    return run(str(PERPFRAME), *args, cwd=cwd, **kw)  # type: ignore[arg-type]


def test_version_is_printed_by_both_entry_points() -> None:
    script = perpframe("--version")
    runpy = run(sys.executable, str(ROOT / "run.py"), "--version")
    assert script.returncode == runpy.returncode == 0
    assert script.stdout == runpy.stdout
    assert script.stdout.startswith("perpframe ") and script.stdout.count("\n") == 1


def test_both_entry_points_list_the_same_commands() -> None:
    script, runpy = perpframe("--help"), run(sys.executable, str(ROOT / "run.py"), "--help")
    assert script.returncode == runpy.returncode == 0
    for name in ("live", "check", "new-strategy", "venue", "record", "backtest", "bench"):
        assert f"  {name} " in script.stdout and f"  {name} " in runpy.stdout
    unknown = perpframe("frobnicate")
    assert unknown.returncode == 2 and "unknown command 'frobnicate'" in unknown.stderr


@pytest.mark.parametrize("name", list(cli.COMMANDS))
@pytest.mark.parametrize("prog", ["perpframe", "python run.py"])
def test_every_usage_line_names_the_command_as_it_was_called(
    name: str, prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([name, "--help"], prog=prog)
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {prog} {name} ")


def test_new_strategy_writes_a_skeleton_and_a_config_that_check_passes(tmp_path: Path) -> None:
    made = perpframe("new-strategy", "my_bot", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "my_bot.py" in made.stdout and "my_bot.yaml" in made.stdout
    source = (tmp_path / "my_bot.py").read_text()
    assert "class MyBot(Strategy):" in source
    for hook in ("on_start", "on_position", "on_account", "on_match", "on_order", "on_timer"):
        assert f"def {hook}(" in source
    assert "def on_stop(" in source
    checked = perpframe("check", "-c", "my_bot.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert (
        checked.stdout.startswith("ok: my_bot.yaml") and "my_bot (my_bot:MyBot)" in checked.stdout
    )
    # The config's directory is searched too: check it from elsewhere.
    away = perpframe("check", "-c", str(tmp_path / "my_bot.yaml"), cwd=ROOT / "configs")
    assert away.returncode == 0, away.stderr
    again = perpframe("new-strategy", "my_bot", cwd=tmp_path)
    assert again.returncode == 1
    assert again.stderr == "new-strategy: my_bot.py, my_bot.yaml exist; nothing written\n"


def test_the_skeleton_stubs_every_hook_of_the_base_class() -> None:
    hooks = [n for n in vars(Strategy) if n.startswith("on_")]
    source = render_strategy("x")
    assert hooks and all(f"def {hook}(" in source for hook in hooks)


def test_new_strategy_refuses_a_name_that_is_no_module_name(tmp_path: Path) -> None:
    bad = perpframe("new-strategy", "my-bot", cwd=tmp_path)
    assert bad.returncode == 2 and "Python module name" in bad.stderr
    assert list(tmp_path.iterdir()) == []


def test_bench_without_the_dev_extra_says_what_to_install(tmp_path: Path) -> None:
    # A stand-in package that fails to import as an absent one does.
    fake = tmp_path / "eth_account"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'eth_account'\", name='eth_account')\n"
    )
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    result = perpframe("bench", "signing", env={"PYTHONPATH": path})
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "bench: needs the dev extra (eth_account missing): pip install -e '.[dev]'"
    ]
    assert "Traceback" not in result.stderr


BOOM = '''\
"""A strategy that cannot be built."""
from framework import Strategy


class Boom(Strategy):
    """Raises in __init__."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        raise RuntimeError("boom in __init__")
'''

BOOM_CONFIG = """\
venue: {embedded: true}
pairs: {ETH-USD: {}}
strategies:
  - {name: fine, class: "strategies.pulse:Pulse", params: {pair: ETH-USD}}
  - {name: kaboom, class: "boom:Boom"}
"""


def test_check_builds_each_strategy_and_names_the_one_that_fails(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text(BOOM)
    (tmp_path / "bot.yaml").write_text(BOOM_CONFIG)
    result = perpframe("check", "-c", "bot.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "strategies[1] (kaboom): RuntimeError: boom in __init__ (at boom.py:10)"
    ]


def test_record_and_backtest_find_strategy_modules_as_check_does(tmp_path: Path) -> None:
    """The one rule: the working directory and the config file's directory are importable."""
    assert perpframe("new-strategy", "flipper2", cwd=tmp_path).returncode == 0
    config = tmp_path / "flipper2.yaml"
    config.write_text(config.read_text().replace("every_s: 5.0", "every_s: 0.5"))
    out = tmp_path / "f.jsonl"
    recorded = perpframe(
        "record", "-c", "flipper2.yaml", "--out", str(out), "--duration", "2", cwd=tmp_path
    )
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    assert recorded.stdout.startswith("summary ")
    # From another directory: found beside the config.
    tested = run(
        sys.executable,
        str(ROOT / "run.py"),
        "backtest",
        "-c",
        str(config),
        "--recording",
        str(out),
        "--report",
        str(tmp_path / "rep"),
        cwd=ROOT / "configs",
    )
    assert tested.returncode == 0, tested.stderr[-2000:]
    assert "not found" not in tested.stderr
    assert "orders: submitted" in tested.stdout
    assert (tmp_path / "rep" / "report.json").is_file()


def test_record_skips_repeated_match_pages_and_the_recording_backtests(tmp_path: Path) -> None:
    assert perpframe("new-strategy", "quiet", cwd=tmp_path).returncode == 0
    config = tmp_path / "quiet.yaml"
    text = config.read_text().replace("match_interval_s: 0.5", "match_interval_s: 0.1")
    config.write_text(text.replace("trade: true", "trade: false"))  # polls that find nothing
    out = tmp_path / "q.jsonl"
    recorded = perpframe(
        "record", "-c", "quiet.yaml", "--out", str(out), "--duration", "2", cwd=tmp_path
    )
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    closed = [line for line in recorded.stderr.splitlines() if "recording closed" in line]
    assert len(closed) == 1, recorded.stderr[-2000:]
    skipped = int(closed[0].split("repeated_pages_skipped=")[1].split()[0])
    assert skipped >= 5  # about 20 polls of one pair, all the same empty page
    assert sum("selectContractMatchPairList" in line for line in out.read_text().splitlines()) < 5
    tested = perpframe(
        "backtest", "-c", "quiet.yaml", "--recording", str(out), "--report", "rep", cwd=tmp_path
    )
    assert tested.returncode == 0, tested.stderr[-2000:]
    assert (tmp_path / "rep" / "report.json").is_file()


def test_ctrl_c_while_a_command_is_imported_is_a_sentence_and_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The moment before a command takes signals over: its module is still being imported.
    (tmp_path / "slow_command.py").write_text("raise KeyboardInterrupt\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.COMMANDS, "slow", ("slow_command", "main", "a slow command"))
    assert cli.main(["slow"]) == 130
    assert capsys.readouterr().err == "slow: interrupted\n"


@pytest.mark.parametrize(
    "command", [("doctor", "-c", "configs/demo.yaml"), ("check", "-c", "configs/demo.yaml")]
)
def test_a_closed_pipe_on_stdout_ends_quietly(command: tuple[str, ...]) -> None:
    """``perpframe doctor | head -1``: the reader gone, no traceback, the SIGPIPE code."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: every write fails
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), *command],
            cwd=ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")
