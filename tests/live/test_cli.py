"""``run.py check`` and ``run.py live`` as a user runs them: exit codes, output, signals."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
import pytest
from anyio.streams.text import TextReceiveStream

from framework import Strategy
from framework.live.cli import check_main
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from tests.live.conftest import eventually

ROOT = Path(__file__).resolve().parents[2]

EMBEDDED = """\
venue:
  embedded: true
  twin:
    prices: {tick_interval: 0.1, max_step_ticks: 50}
pairs:
  ETH-USD: {}
polling:
  match_interval_s: 0.2
strategies:
  - name: ladder
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD, quantity: "0.01", spacing: "0.5", levels: 2}
logging: {level: INFO, json: true}
"""


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    """A config file in tmp_path."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------- check


def test_check_accepts_a_valid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check_main(["-c", str(write(tmp_path, EMBEDDED))]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: ")
    assert "ladder (strategies.ladder:Ladder)" in out


def test_check_prints_one_line_per_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = EMBEDDED.replace("levels: 2}", "levels: ten}").replace(
        "  ETH-USD: {}", "  ETH-USD: {}\n  x: {}"
    )
    assert check_main(["-c", str(write(tmp_path, bad))]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "pairs.x: pair names look like BASE-QUOTE (e.g. ETH-USD) (line 7)",
        "strategies[0].params.levels: expected int, got 'ten' (line 13)",
    ]


def test_check_names_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check_main(["-c", str(tmp_path / "nope.yaml")]) == 1
    assert "nope.yaml: cannot read" in capsys.readouterr().err


def test_check_without_a_config_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as caught:
        check_main([])
    assert caught.value.code == 2


# --------------------------------------------------------------------------------- live


@asynccontextmanager
async def live(
    config: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[anyio.abc.Process, list[str], list[str]]]:
    """``python run.py live -c config`` with its stdout and stderr lines collected live."""
    out: list[str] = []
    err: list[str] = []
    command = [sys.executable, str(ROOT / "run.py"), "live", "-c", str(config), *args]
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    process = await anyio.open_process(command, cwd=ROOT, env=environ)

    async def collect(stream: Any, into: list[str]) -> None:
        buffer = ""
        async for chunk in TextReceiveStream(stream):
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            into.extend(lines)
        if buffer:
            into.append(buffer)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(collect, process.stdout, out)
            tg.start_soon(collect, process.stderr, err)
            yield process, out, err
            with anyio.fail_after(30):
                await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def logged(err: list[str], message: str) -> Callable[[], bool]:
    """A predicate: some JSON log line has msg == message."""

    def found() -> bool:
        return any(
            line.startswith("{") and orjson.loads(line).get("msg") == message for line in err
        )

    return found


def summary_of(out: list[str]) -> dict[str, Any]:
    """The parsed ``summary {json}`` line, which must be the last line of stdout."""
    assert out and out[-1].startswith("summary "), out
    parsed: dict[str, Any] = orjson.loads(out[-1].removeprefix("summary "))
    return parsed


@pytest.mark.anyio
async def test_live_trades_until_sigint_then_prints_the_summary_and_exits_0(
    tmp_path: Path,
) -> None:
    config = write(tmp_path, EMBEDDED)
    async with live(config) as (process, out, err):
        # The ladder is built once the probe order was accepted and its fill polled; the
        # stream is subscribed by then (the pushes of the ladder's orders reach it).
        await eventually(logged(err, "building ladder"), timeout=30)
        await eventually(logged(err, "stream connected"), timeout=30)
        process.send_signal(signal.SIGINT)
    assert process.returncode == 0, err
    summary = summary_of(out)
    assert summary["orders_accepted"] > 0
    assert summary["matches"] >= 1
    assert summary["pushes"] >= 1
    assert summary["reason"] == "SIGINT"
    assert logged(err, "strategies stopped")()
    assert logged(err, "journal closed")()
    assert not any("Traceback" in line for line in err)


@pytest.mark.anyio
async def test_live_with_an_invalid_config_exits_1_with_its_problems(tmp_path: Path) -> None:
    config = write(tmp_path, EMBEDDED.replace("levels: 2}", "levels: [2]}"))
    async with live(config) as (process, out, err):
        pass
    assert process.returncode == 1
    assert out == []
    assert err == ["strategies[0].params.levels: expected int, got a list (line 12)"]


@pytest.mark.anyio
async def test_live_exits_1_with_one_line_when_the_venue_is_unreachable(tmp_path: Path) -> None:
    text = f"""\
venue:
  base_url: http://127.0.0.1:9
  ws_url: ws://127.0.0.1:9/ws
  api_key: {DEMO_API_KEY}
  api_secret: ${{SECRET}}
pairs: {{ETH-USD: {{}}}}
journal: {{path: {tmp_path / "journal.sqlite"}}}
strategies: [{{name: a, class: "strategies.ladder:Ladder", params: {{pair: ETH-USD}}}}]
"""
    config = write(tmp_path, text)
    async with live(config, env={"SECRET": DEMO_PRIVATE_KEY}) as (process, out, err):
        pass
    assert process.returncode == 1
    assert out == []
    assert err[-1].startswith("live: cannot reach the venue at http://127.0.0.1:9")
    assert not any("Traceback" in line for line in err)


class Leaky(Strategy):
    """Test strategy that tries to leak the API secret through logs and a traceback."""

    def on_start(self) -> None:
        secret = os.environ["LEAK_ME"]
        self.log.info("the secret is %s", secret)
        self.log.warning("bare key %s", secret.removeprefix("0x"), extra={"key": secret})
        raise RuntimeError(f"failing with {secret} inside")


@pytest.mark.anyio
async def test_the_api_secret_never_reaches_logs_or_summary(tmp_path: Path) -> None:
    settings = TwinSettings(prices=PriceSettings(tick_interval=0))
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        text = f"""\
venue:
  base_url: {twin.base_url}
  ws_url: {twin.ws_url}
  api_key: ${{PERP_API_KEY}}
  api_secret: ${{PERP_API_SECRET}}
pairs: {{ETH-USD: {{}}}}
journal: {{path: {tmp_path / "journal.sqlite"}}}
strategies:
  - {{name: leaky, class: "tests.live.test_cli:Leaky", params: {{pair: ETH-USD}}}}
node: {{exit_when_all_stopped: false}}
logging: {{level: DEBUG, json: {{json}}}}
"""
        for json in ("true", "false"):
            env = {
                "PERP_API_KEY": DEMO_API_KEY,
                "PERP_API_SECRET": DEMO_PRIVATE_KEY,
                "LEAK_ME": DEMO_PRIVATE_KEY,
            }
            config = write(tmp_path, text.replace("{json}", json), f"leaky-{json}.yaml")
            async with live(config, env=env) as (process, out, err):
                await eventually(lambda: any("stream connected" in e for e in err), timeout=30)
                process.send_signal(signal.SIGTERM)
            assert process.returncode == 0
            assert summary_of(out)["reason"] == "SIGTERM"
            everything = "\n".join(out + err)
            assert "failing with *** inside" in everything  # the traceback was logged...
            assert "the secret is ***" in everything
            assert DEMO_PRIVATE_KEY.removeprefix("0x") not in everything.lower()  # ...scrubbed


class Closer(Strategy):
    """Test strategy: sends one market order from on_stop, while stopping."""

    def on_stop(self) -> None:
        from decimal import Decimal

        from framework import OrderIntent

        self.submit(OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal("0.01")))


@pytest.mark.anyio
async def test_a_second_sigint_cuts_the_drain_short(tmp_path: Path) -> None:
    settings = TwinSettings(prices=PriceSettings(tick_interval=0))
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        text = f"""\
venue:
  base_url: {twin.base_url}
  ws_url: {twin.ws_url}
  api_key: {DEMO_API_KEY}
  api_secret: ${{SECRET}}
  timeout_s: 600
pairs: {{ETH-USD: {{}}}}
journal: {{path: {tmp_path / "journal.sqlite"}}}
execution: {{drain_timeout_s: 600}}
strategies: [{{name: closer, class: "tests.live.test_cli:Closer", params: {{pair: ETH-USD}}}}]
logging: {{json: true}}
"""
        config = write(tmp_path, text)
        async with live(config, env={"SECRET": DEMO_PRIVATE_KEY}) as (process, out, err):
            await eventually(logged(err, "stream connected"), timeout=30)
            twin.faults.configure(latency=600.0)  # the order sent from on_stop never returns
            process.send_signal(signal.SIGINT)
            await eventually(logged(err, "strategies stopped"), timeout=30)
            process.send_signal(signal.SIGINT)  # without it the drain would wait 600 s
        assert process.returncode == 130
        summary = summary_of(out)
        assert summary["orders_sent"] == 1
        assert summary["orders_unknown"] == 1  # cut while in flight: it may have executed
        assert summary["drain_skipped"] is True
        assert logged(err, "second signal (SIGINT): not waiting for the drain")()
        assert logged(
            err,
            "stop cut short by a second signal: skipped waiting for the answers and the last "
            "match poll; 1 order(s) left UNKNOWN by it, 0 queued intent(s) refused (9013)",
        )()
