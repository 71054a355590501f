"""``run.py live`` in a subprocess: failing strategies, two Ctrl-C, the summary and /metrics."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from framework import Strategy
from tests.live.test_cli import EMBEDDED, live, logged, summary_of, write
from tests.waiting import eventually

BOOM = """\
  - name: boom
    class: tests.live.test_cli_lifecycle:Boom
    params: {pair: ETH-USD}
"""


class Boom(Strategy):
    """Test strategy: raises in on_start."""

    def on_start(self) -> None:
        raise RuntimeError("boom")


AT = f"(at test_cli_lifecycle.py:{Boom.on_start.__code__.co_firstlineno + 1})"
"""Where Boom raises, as the failure's line names it."""


def json_lines(err: list[str]) -> list[dict[str, Any]]:
    """The JSON log lines of stderr, parsed."""
    return [orjson.loads(line) for line in err if line.startswith("{")]


def no_traceback(err: list[str]) -> bool:
    """True when no log line carries a traceback."""
    return not any("Traceback" in line or '"exc"' in line for line in err)


@pytest.mark.anyio
async def test_a_strategy_whose_on_start_raises_is_named_and_not_started(tmp_path: Path) -> None:
    config = write(tmp_path, EMBEDDED.replace("logging:", BOOM + "logging:"))
    async with live(config) as (process, out, err):
        await eventually(logged(err, "building ladder"), timeout=30)
        process.send_signal(signal.SIGINT)
    assert process.returncode == 0, err
    lines = json_lines(err)
    failed = [line for line in lines if line["msg"].startswith("strategy boom:")]
    assert [(f["level"], f["logger"], f["msg"]) for f in failed] == [
        ("ERROR", "framework.kernel", f"strategy boom: on_start raised RuntimeError: boom {AT}")
    ]
    (started,) = [line for line in lines if line["msg"] == "strategies started"]
    assert started["strategies"] == ["ladder"]
    assert no_traceback(err)
    assert not any("attach.<locals>" in line for line in err)
    summary = summary_of(out)
    assert summary["strategies_stopped"] == ["boom"]
    assert summary["reason"] == "SIGINT"


@pytest.mark.anyio
async def test_a_daemon_whose_every_strategy_failed_says_so_and_exits_1(tmp_path: Path) -> None:
    only_boom = EMBEDDED.split("strategies:")[0] + "strategies:\n" + BOOM
    config = write(tmp_path, only_boom + "logging: {json: true}\n")
    async with live(config) as (process, out, err):
        pass  # it stops by itself
    assert process.returncode == 1, err
    assert err[-1] == (
        "live: every strategy has been stopped for failing: boom (on_start raised RuntimeError:"
        f" boom {AT})"
    )
    assert summary_of(out)["reason"] == "every strategy stopped for failing"
    assert no_traceback(err)


@pytest.mark.anyio
async def test_the_daemon_can_be_told_to_keep_running_when_every_strategy_failed(
    tmp_path: Path,
) -> None:
    only_boom = EMBEDDED.split("strategies:")[0] + "strategies:\n" + BOOM
    config = write(tmp_path, only_boom + "node: {exit_when_all_stopped: false}\n")
    async with live(config) as (process, out, err):
        await eventually(lambda: any("stream connected" in line for line in err), timeout=30)
        process.send_signal(signal.SIGTERM)
    assert process.returncode == 0, err
    assert summary_of(out)["reason"] == "SIGTERM"


@pytest.mark.anyio
@pytest.mark.parametrize("second_after", ["signal received", "journal closed"])
async def test_two_ctrl_c_in_quick_succession_end_with_the_summary_and_130(
    tmp_path: Path, second_after: str
) -> None:
    # The second SIGINT follows the first as soon as the daemon has logged the first (a few
    # hundredths of a second), or comes while it closes its journal and venue.
    config = write(tmp_path, EMBEDDED)
    async with live(config) as (process, out, err):
        await eventually(logged(err, "building ladder"), timeout=30)
        process.send_signal(signal.SIGINT)
        await eventually(logged(err, second_after), timeout=30)
        process.send_signal(signal.SIGINT)
    assert process.returncode == 130, err
    assert "interrupted while starting" not in "\n".join(err)
    summary = summary_of(out)
    assert summary["reason"] == "SIGINT"
    skipped = any(line["msg"].startswith("stop cut short by") for line in json_lines(err))
    if second_after == "signal received":  # while stopping: the waiting is skipped
        assert summary["drain_skipped"] is True
        assert logged(err, "second signal (SIGINT): not waiting for the drain")()
        assert skipped
    else:  # the node's watcher says there is nothing left to wait for, or, once it has ended
        # (the venue closes in a few milliseconds), the command's own handler notes it: 130
        # either way, and never a drain skipped
        assert summary["drain_skipped"] is False
        assert not logged(err, "second signal (SIGINT): not waiting for the drain")()
        assert not skipped
    assert no_traceback(err)


@pytest.mark.anyio
async def test_the_summary_has_positions_resting_orders_and_pnl_per_pair(tmp_path: Path) -> None:
    config = write(tmp_path, EMBEDDED)
    async with live(config) as (process, out, err):
        await eventually(logged(err, "building ladder"), timeout=30)
        # Subscribed, and its resync (which reads the probe's position) under way.
        await eventually(logged(err, "stream connected"), timeout=30)
        process.send_signal(signal.SIGINT)
    assert process.returncode == 0, err
    summary = summary_of(out)
    # The probe was a market buy that filled, and counter orders fill now and then.
    assert list(summary["positions"]) == ["ETH-USD"]
    assert summary["resting"]["ETH-USD"] >= 1  # the ladder's limit orders rest on the book
    pnl = summary["pnl"]["ETH-USD"]
    assert set(pnl) == {"realized", "unrealized", "fees", "net"}
    assert float(pnl["fees"]) > 0  # the probe paid a taker fee


@pytest.mark.anyio
async def test_metrics_expose_the_trading_gauges(tmp_path: Path) -> None:
    text = EMBEDDED.replace("logging:", "metrics: {enabled: true, port: 0}\nlogging:")
    config = write(tmp_path, text)
    async with live(config) as (process, out, err):
        await eventually(logged(err, "building ladder"), timeout=30)
        (listening,) = [
            line for line in json_lines(err) if line["msg"] == "metrics endpoint listening"
        ]
        url = listening["url"]
        async with httpx.AsyncClient() as client:

            async def resting() -> bool:
                body = (await client.get(url)).text
                found = re.search(r'^perp_resting_orders\{pair="ETH-USD"\} (\S+)$', body, re.M)
                return found is not None and float(found.group(1)) >= 1

            await eventually(resting, timeout=30)
            body = (await client.get(url)).text
        process.send_signal(signal.SIGINT)
    assert process.returncode == 0, err
    assert summary_of(out)["reason"] == "SIGINT"
    assert re.search(r'^perp_position\{pair="ETH-USD"\} -?[0-9.]+$', body, re.M)
    for expected in (
        'perp_balance{coin="USD",kind="available"}',
        'perp_pnl{kind="fees",pair="ETH-USD"}',
        'perp_pnl{kind="realized",pair="ETH-USD"}',
        "perp_unknown_orders 0.0",
        "perp_strategies_stopped 0.0",
    ):
        assert expected in body, expected
    # Unrealized PnL comes from REST position snapshots: absent while none showed a position.
