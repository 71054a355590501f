"""A node SIGKILLed at the worst moment, restarted on its journal: nothing lost, nothing resent.

Each scenario runs ``tests.faults.crash_child`` (a live Node with a FILE journal) against a
twin of the test's own: life 1 trades one burst of same-size intents under a fault and kills
itself at the kill point; life 2 (faults cleared) recovers from the same journal and runs
until quiet, then stops on SIGTERM. Judged from the journal as life 1 left it, the twin's
ground truth and both lives' JSONL records:

- intents that never left (journal: PENDING, not sent) are sent exactly once, and executed;
- in-doubt intents (journal: sent, no answer) are never sent again (no receipt in life 2);
- no intent reaches the venue twice in calls it may have executed: a receipt answered 2329 or
  503 (before accepting: the venue took nothing) is not a send. The twin's raw
  ``received_orders`` count is reported too: it also counts those refused receipts;
- every fill the twin has for the account reaches the strategy in life 1 or 2, none twice;
- life 2's strategy gets on_start before any recovered OrderUpdate.
"""

from __future__ import annotations

import signal
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import orjson
import pytest

from framework.engine.intents import OrderStatus
from framework.live.journal import Journal
from framework.twin.server import VenueTwin
from tests.faults.harness import (
    QUIET_TIMEOUT_S,
    TERMINAL,
    check_knobs,
    seed_position,
    settle,
    still_twin,
)
from tests.faults.invariants import some
from tests.faults.trader import PAIR
from tests.faults.truth import Truth, twin_matches

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CHILD = [sys.executable, "-m", "tests.faults.crash_child"]


@attrs.frozen
class Scenario:
    """Where life 1 dies (see crash_child), under which fault, with which execution settings."""

    kill: str
    """The kill point (empty: the test kills life 1 itself)."""
    faults: dict[str, Any]
    execution: dict[str, Any]
    burst: int = 60
    params: dict[str, Any] = attrs.Factory(dict)
    """More FaultTrader params (both lives)."""
    polling: dict[str, Any] = attrs.Factory(dict)


SCENARIOS = {
    "batches_in_flight_fills_polled": Scenario(
        "held", {"answer_delay_s": 1.0}, {"max_inflight": 4}
    ),
    "intents_queued_behind_slow_batches": Scenario("queued", {"latency": 0.3}, {"max_inflight": 1}),
    "in_a_2329_backoff": Scenario(
        "backoff", {"busy_rate": 1.0}, {"retry_base_s": 0.3, "retry_max_s": 1.0}
    ),
}


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a child's record (a torn last line is skipped)."""
    if not path.exists():
        return []
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            out.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            continue
    return out


def has_line(path: Path, kind: str) -> Callable[[], bool]:
    """A predicate: the record has a line of this kind."""
    return lambda: any(x["kind"] == kind for x in read_lines(path))


def journal_rows(path: Path) -> dict[str, tuple[OrderStatus, bool]]:
    """(status, sent) of every committed intent of the journal."""
    journal = Journal.open(str(path))
    try:
        rows = {}
        for coid in journal.statuses():
            row = journal.status_of(coid)
            assert row is not None
            rows[coid] = (row[0], row[1])
        return rows
    finally:
        journal.close()


@attrs.define
class Crash:
    """One scenario's files, twin and truth, and what each life left."""

    name: str
    scenario: Scenario
    tmp: Path
    twin: VenueTwin
    truth: Truth
    baseline: set[int] = attrs.Factory(set)
    calls_life1: int = 0
    received_life1: int = 0
    rows: dict[str, tuple[OrderStatus, bool]] = attrs.Factory(dict)
    quiet: bool = False

    def log(self, life: int) -> Path:
        """The JSONL record of a life."""
        return self.tmp / f"life{life}.jsonl"

    def err(self, life: int) -> Path:
        """The stderr (and stdout) of a life."""
        return self.tmp / f"life{life}.err"

    def tail(self, life: int) -> str:
        """The end of a life's stderr, for messages."""
        path = self.err(life)
        return path.read_text(errors="replace")[-1500:] if path.exists() else ""

    def command(self, mode: str, life: int) -> list[str]:
        """The child's command line for a life."""
        settings = {
            "execution": self.scenario.execution,
            "burst": self.scenario.burst,
            "go": str(self.tmp / "go"),
            "kill": self.scenario.kill,
            "params": self.scenario.params,
            "polling": self.scenario.polling,
        }
        args = [mode, self.twin.base_url, self.twin.ws_url, str(self.tmp / "journal.sqlite")]
        return [*CHILD, *args, str(self.log(life)), orjson.dumps(settings).decode()]

    def lines(self, kind: str) -> list[dict[str, Any]]:
        """Lines of a kind from both lives, in order."""
        return [x for life in (1, 2) for x in read_lines(self.log(life)) if x["kind"] == kind]

    def submitted(self) -> list[str]:
        """The intents life 1 submitted."""
        return [x["coid"] for x in self.lines("submit")]

    def listed(self) -> set[int]:
        """The fills the twin has for the account since the seed."""
        return {m.id for m in twin_matches(self.twin, PAIR)} - self.baseline

    def is_quiet(self) -> bool:
        """Every intent terminal (across both lives) and every fill delivered."""
        final = {x["coid"]: x["status"] for x in self.lines("order")}
        delivered = {x["id"] for x in self.lines("match")}
        return all(final.get(c) in TERMINAL for c in self.submitted()) and self.listed() <= (
            delivered
        )


async def first_life(crash: Crash) -> None:
    """Life 1: start, then the fault, then the burst; the child kills itself."""
    with crash.err(1).open("wb") as err:
        child = await anyio.open_process(
            crash.command("first", 1), cwd=ROOT, stdout=err, stderr=err
        )
        async with child:
            started = await settle(has_line(crash.log(1), "start"), 15)
            assert started, f"life 1 never started:\n{crash.tail(1)}"
            crash.twin.faults.configure(**crash.scenario.faults)
            (crash.tmp / "go").touch()
            with anyio.move_on_after(20):
                await child.wait()
            if child.returncode is None:
                child.kill()
                await child.wait()
    assert child.returncode == -signal.SIGKILL, (
        f"life 1 was not killed at {crash.scenario.kill!r} (exit {child.returncode}):\n"
        f"{crash.tail(1)}"
    )


async def second_life(crash: Crash, quiet: Callable[[], bool] | None = None) -> None:
    """Life 2: the same journal, no faults, no new intents; until quiet (by default
    :meth:`Crash.is_quiet`), then SIGTERM."""
    with crash.err(2).open("wb") as err:
        child = await anyio.open_process(
            crash.command("restart", 2), cwd=ROOT, stdout=err, stderr=err
        )
        async with child:
            restarted = await settle(has_line(crash.log(2), "start"), 15)
            assert restarted, f"life 2 never started:\n{crash.tail(2)}"
            crash.quiet = await settle(quiet or crash.is_quiet, QUIET_TIMEOUT_S)
            # A SIGTERM before the node's signal watcher runs would end it ungracefully.
            ticked = await settle(has_line(crash.log(2), "tick"), 10)
            assert ticked, f"life 2 never ticked:\n{crash.tail(2)}"
            child.send_signal(signal.SIGTERM)
            with anyio.move_on_after(20):
                await child.wait()
            if child.returncode is None:
                child.kill()
                await child.wait()
    assert child.returncode == 0, f"life 2 exit {child.returncode}:\n{crash.tail(2)}"


def judge(crash: Crash) -> tuple[list[str], dict[str, Any]]:
    """The broken promises of a crash and restart, and its figures."""
    truth, rows = crash.truth, crash.rows
    submitted = crash.submitted()
    never_left = {c for c, (st, sent) in rows.items() if st is OrderStatus.PENDING and not sent}
    in_doubt = {
        c
        for c, (st, sent) in rows.items()
        if (st is OrderStatus.PENDING and sent) or st is OrderStatus.UNKNOWN
    }
    unjournaled = set(submitted) - set(rows)
    sends = truth.effective_sends()
    life2 = Counter(c for call in truth.calls[crash.calls_life1 :] for c in call.received)
    received = Counter(c for c, _ in crash.twin.received_orders)
    executed = truth.executed()
    listed = crash.listed()
    matches = Counter(x["id"] for x in crash.lines("match"))
    not_once = sorted(c for c in never_left if sends[c] != 1 or c not in executed)
    resent = sorted(c for c in in_doubt if life2[c])
    twice = sorted(c for c, k in sends.items() if k > 1)
    missing = sorted(listed - set(matches))
    doubled = sorted(i for i, k in matches.items() if k > 1)
    kinds = [x["kind"] for x in read_lines(crash.log(2)) if x["kind"] in ("start", "order")]
    early = kinds.index("start") if "start" in kinds else len(kinds)
    figures = {
        "scenario": crash.name,
        "intents": len(submitted),
        "never_left": len(never_left),
        "sent_once": sum(1 for c in never_left if sends[c] == 1),
        "in_doubt": len(in_doubt),
        "in_doubt_executed": len(in_doubt & set(executed)),
        "in_doubt_resent": len(resent),
        "unjournaled": len(unjournaled),
        "received_orders_max_per_id": max(received.values(), default=0),
        "received_in_life1": crash.received_life1,
        "fills_listed": len(listed),
        "fills_delivered": len(listed & set(matches)),
        "fills_delivered_twice": len(doubled),
        "updates_before_on_start": early,
        "final": dict(
            Counter(x["status"] for x in crash.lines("order") if x["status"] in TERMINAL)
        ),
        "quiet": crash.quiet,
    }
    problems = []
    if not_once:
        problems.append(
            f"{len(not_once)} of {len(never_left)} intents that never left were not sent (and "
            f"executed) exactly once ({some(f'{c}x{sends[c]}' for c in not_once)})"
        )
    if resent:
        problems.append(
            f"{len(resent)} of {len(in_doubt)} in-doubt intents were sent again ({some(resent)})"
        )
    if twice or truth.duplicates:
        problems.append(
            f"{len(twice)} intents reached the venue twice in calls it may have executed "
            f"({some(f'{c}x{sends[c]}' for c in twice)}); {len(truth.duplicates)} refused by "
            "the venue as already used"
        )
    if missing:
        problems.append(
            f"{len(missing)} of {len(listed)} fills the venue has never reached the strategy "
            f"({some(missing)})"
        )
    if doubled:
        problems.append(f"{len(doubled)} fills reached the strategy twice ({some(doubled)})")
    if early:
        problems.append(f"life 2: {early} OrderUpdates reached the strategy before on_start")
    if unjournaled:
        problems.append(f"{len(unjournaled)} submitted intents were not in the journal at the kill")
    return problems, figures


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_killed_and_restarted_nothing_lost_nothing_resent(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    check_knobs(scenario.faults)
    twin = still_twin()
    crash = Crash(name, scenario, tmp_path, twin, Truth.attach(twin))
    with anyio.fail_after(60):
        async with twin:
            await seed_position(twin)
            crash.baseline = {m.id for m in twin_matches(twin, PAIR)}
            await first_life(crash)
            twin.faults.clear()
            crash.calls_life1 = len(crash.truth.calls)
            crash.received_life1 = len(twin.received_orders)
            crash.rows = journal_rows(tmp_path / "journal.sqlite")
            await second_life(crash)
    problems, figures = judge(crash)
    shown = orjson.dumps(figures).decode()
    print("crash figures", shown)
    assert not problems, (
        f"{name}: {len(problems)} problems\n  " + "\n  ".join(problems) + f"\n  figures: {shown}"
    )
