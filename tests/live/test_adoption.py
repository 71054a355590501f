"""A restart on the same journal adopts the orders left resting, judged by the twin's book.

The twin lives in the test (it outlives every node run on it). The node lists each pair's
open orders at start (pages of 50) and reconciles them with its journal before on_start:
its own are adopted, those the venue no longer lists are queried, the others are external
and never touched. The Ladder, SIGKILLed and restarted, must not lay a second grid.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
import pytest

from framework import OrderIntent, OrderStatus
from framework.config import Config, ExecutionSettings
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.execution import ExecutionEngine
from framework.live.journal import Journal
from framework.live.node import Node
from framework.live.rest import RestClient
from framework.sim.history import OrderRecord
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from framework.venue.errors import ServerFault
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.signing import make_signer
from strategies.ladder import Ladder
from tests.engine.test_cancels import Record, updates
from tests.engine.test_execution import match
from tests.engine.test_risk import RULES, START_MS, order
from tests.live.test_cancels import Hand, venue_config
from tests.node_running import running
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CHILD = [sys.executable, "-m", "tests.live.adoption_child"]
ETH = "ETH-USD"
PAGE = 50  # the node lists open orders in pages of 50


def still_twin() -> VenueTwin:
    """A twin on 127.0.0.1 with still prices (marks move only when the test moves them)."""
    return VenueTwin(TwinSettings(prices=PriceSettings(tick_interval=0)), host="127.0.0.1", port=0)


def book(twin: VenueTwin) -> dict[str, OrderRecord]:
    """The demo account's OPEN order records at the twin, by client order id."""
    assert twin.demo_user_id is not None
    orders = twin.exchange.accounts[twin.demo_user_id].orders
    return {r.client_order_id: r for r in orders.open_orders(ETH)}


def record(twin: VenueTwin, cid: str) -> OrderRecord:
    """The twin's record of cid (open or completed)."""
    assert twin.demo_user_id is not None
    found = twin.exchange.accounts[twin.demo_user_id].orders.by_client_id(cid)
    assert found is not None, cid
    return found


def gtc(cid: str, price: str, *, long: bool = True) -> OrderInput:
    """A GTC limit order of 0.01 ETH-USD, as someone other than the node places it."""
    return OrderInput(
        client_order_id=cid,
        is_long=long,
        is_market=False,
        lever=1,
        match_type=MatchType.GTC,
        pair_name=ETH,
        position_type=PositionType.ISOLATED,
        price=Decimal(price),
        quantity=Decimal("0.01"),
    )


@asynccontextmanager
async def outsider(twin: VenueTwin) -> AsyncIterator[RestClient]:
    """A RestClient on the node's own account (the demo key), as a person at a terminal."""
    async with RestClient(twin.base_url, DEMO_API_KEY, make_signer(2, DEMO_PRIVATE_KEY)) as rest:
        yield rest


def node_config(twin: VenueTwin, journal: Path) -> Config:
    """A Hand strategy on ETH-USD at twin, with a file journal (node pg)."""
    return venue_config(twin, journal, node="pg")


def hand(node: Node) -> Hand:
    """The node's Hand."""
    strategy = node.strategies[0]
    assert isinstance(strategy, Hand)
    return strategy


def adoption_counts(caplog: pytest.LogCaptureFixture) -> list[dict[str, int]]:
    """The counts of every 'open orders of ETH-USD' line the node logged."""
    keys = ("adopted", "open", "external", "missing")
    return [
        {k: getattr(r, k) for k in keys}
        for r in caplog.records
        if r.getMessage() == f"open orders of {ETH}"
    ]


# -- more than one page, in-process --------------------------------------------------------


async def test_a_restart_adopts_more_open_orders_than_one_page_and_settles_the_missing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    journal = tmp_path / "journal.sqlite"
    async with still_twin() as twin:
        first = Node(node_config(twin, journal))
        async with running(first):
            h = hand(first)
            assert h.open_at_start == []
            intents = [
                OrderIntent(pair=ETH, is_long=True, quantity=Decimal("0.01"), price=Decimal(p))
                for p in range(1990, 1930, -1)
            ]
            cids = h.submit_many(intents)  # 1990 down to 1931
            await eventually(lambda: all(h.last(c) is OrderStatus.ACCEPTED for c in cids))
        assert set(book(twin)) == set(cids)
        # While the node is down: one order is cancelled by hand, one fills, one is added.
        async with outsider(twin) as rest:
            await rest.cancel_order(record(twin, cids[30]).order_id)
            twin.set_mark(ETH, "1989.5")  # fills the bid at 1990, cids[0]
            await rest.batch_create([gtc("by-hand", "1900")])
            listed = await rest.all_open_orders(ETH, page_size=PAGE)
        assert len(listed) == 59 > PAGE  # two pages, each order once
        assert len({r.entrust_id for r in listed}) == 59
        assert record(twin, cids[0]).status == "FILLED"

        caplog.clear()
        second = Node(node_config(twin, journal))
        async with running(second):
            h2 = hand(second)
            # At on_start: the journal's resting orders, confirmed or being asked about.
            assert {o.client_order_id for o in h2.open_at_start} == set(cids)
            assert adoption_counts(caplog) == [
                {"adopted": 0, "open": 58, "external": 1, "missing": 2}
            ]
            assert second.engine is not None and second.engine.cancels.external == 1
            await eventually(lambda: h2.last(cids[30]) is OrderStatus.CANCELED)
            await eventually(lambda: h2.last(cids[0]) is OrderStatus.FILLED)
            open_now = {o.client_order_id for o in h2.open_orders()}
            assert open_now == set(book(twin)) - {"by-hand"}
            assert len(open_now) == 58
            # The fill made while the node was down reaches the strategy, linked to its order.
            await eventually(lambda: [m.client_order_id for m in h2.matches] == [cids[0]])
            received = [c for c, _ in twin.received_orders if c in cids]
            assert sorted(received) == sorted(cids)  # each sent once, none again at restart
        assert record(twin, "by-hand").status == "OPEN"  # external: never touched
        assert len(book(twin)) == 59


def ladder_config(twin: VenueTwin, journal: Path, levels: int) -> Config:
    """The Ladder around 2000 (spacing 1, levels a side) at twin, with a file journal."""
    ladder = f"""\
  - name: ladder
    class: strategies.ladder:Ladder
    params: {{pair: ETH-USD, quantity: "0.01", spacing: "1", levels: {levels},
              reference_price: "2000"}}
"""
    return venue_config(twin, journal, node="lg", strategies=ladder)


def test_a_match_a_doubt_group_counted_before_a_restart_is_the_adopted_orders_then(
    tmp_path: Path,
) -> None:
    # Run 1: x and y look alike and are in doubt; the match of order 700 is counted for
    # their group. Restart: the venue's list names x (order 700) resting, so x is adopted;
    # the kept match, decided again by recovery, is x's now: it fills x (its record's 0 is
    # only the least that has filled) and is not counted for y as well.
    path = str(tmp_path / "journal.sqlite")

    def engine(journal: Journal, events: list[Any]) -> ExecutionEngine:
        return ExecutionEngine(
            ExecutionSettings(calls_per_second=1000.0),
            rules={"ETH-USD": RULES},
            publish=events.append,
            now_ms=VirtualClock(START_MS).now_ms,
            ids=ClientIdGenerator("n", journal),
            journal=journal,
        )

    journal = Journal.open(path)
    first = engine(journal, [])
    x, y = first.submit("s", order()), first.submit("s", order())
    batch = first.next_batch()
    assert batch is not None
    first.begin_send(batch)
    first.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    counted = first.attribute(match(1, 700, "0.1"))
    assert counted is not None and counted.candidates == (x, y)
    first.flush()
    journal.close()

    journal = Journal.open(path)
    events: list[Any] = []
    second = engine(journal, events)
    second.restore()
    assert second.adopt("ETH-USD", [Record(x, 700, Decimal(0), "open")])["adopted"] == 1
    second.recover()
    assert (x, OrderStatus.FILLED) in updates(events)
    assert second.status(y) is OrderStatus.UNKNOWN  # still in doubt: no fill counted for it
    assert [u for u in updates(events) if u[1] is OrderStatus.AMBIGUOUS] == []
    journal.close()


async def test_a_restarted_ladder_forgets_what_was_cancelled_or_filled_while_it_was_down(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal.sqlite"
    async with still_twin() as twin:
        first = Node(ladder_config(twin, journal, 3))
        async with running(first):
            await eventually(lambda: len(book(twin)) == 6)
            await eventually(lambda: first.engine is not None and first.engine.idle)
        grid = {cid: (r.is_long, r.price) for cid, r in book(twin).items()}
        by_price = {price: cid for cid, (_, price) in grid.items()}
        async with outsider(twin) as rest:  # while the node is down
            await rest.cancel_order(record(twin, by_price[Decimal(2003)]).order_id)
        twin.set_mark(ETH, "1998.5")  # the bid at 1999 fills
        assert record(twin, by_price[Decimal(1999)]).status == "FILLED"

        second = Node(ladder_config(twin, journal, 3))
        async with running(second):
            ladder = second.strategies[0]
            assert isinstance(ladder, Ladder)
            assert ladder.adopted == 6  # the journal's six, two of them being asked about
            # The fill reaches the ladder (its counter sell at 2000 goes in), the cancel is
            # learnt from the venue's record of the order: the ladder holds what rests.
            await eventually(lambda: ladder.fills == 1)
            await eventually(lambda: second.engine is not None and second.engine.idle)
            await eventually(lambda: set(ladder.resting) == set(book(twin)))
            # The level cancelled while the node was down (2003) is not placed again: the
            # ladder adopts what rests and re-places levels only when it re-centres.
            held = sorted(ladder.resting.values())
            assert held == sorted([(True, Decimal(1998)), (True, Decimal(1997)),
                                   (False, Decimal(2000)), (False, Decimal(2001)),
                                   (False, Decimal(2002))])  # fmt: skip
            assert {o.client_order_id for o in second.engine.open_orders()} == set(book(twin))


# -- the Ladder, SIGKILLed and restarted ----------------------------------------------------


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a child's log."""
    if not path.exists():
        return []
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            out.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            continue  # a torn last line
    return out


def line(path: Path, kind: str) -> Callable[[], dict[str, Any] | None]:
    """A predicate: the first line of kind in the log, or None."""
    return lambda: next((x for x in read_lines(path) if x["kind"] == kind), None)


def accepted_lines(log: Path) -> int:
    """How many ACCEPTED updates a child logged."""
    return sum(1 for x in read_lines(log) if x.get("status") == "ACCEPTED")


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


def committed_accepted(path: Path) -> int:
    """How many intents the journal holds ACCEPTED, committed (read while the node runs)."""
    return sum(1 for status, _ in journal_rows(path).values() if status is OrderStatus.ACCEPTED)


@asynccontextmanager
async def child(
    twin: VenueTwin, tmp: Path, life: int, levels: int
) -> AsyncIterator[tuple[anyio.abc.Process, Path]]:
    """A child node running the Ladder on the journal in tmp; yields it and its log."""
    log = tmp / f"life{life}.jsonl"
    err = tmp / f"life{life}.err"
    args = [twin.base_url, twin.ws_url, str(tmp / "journal.sqlite"), str(log), str(levels)]
    with err.open("wb") as out:
        process = await anyio.open_process([*CHILD, *args], cwd=ROOT, stdout=out, stderr=out)
        async with process:
            try:
                yield process, log
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()


def tail(tmp: Path, life: int) -> str:
    """The end of a life's stderr, for messages."""
    path = tmp / f"life{life}.err"
    return path.read_text(errors="replace")[-2000:] if path.exists() else ""


@pytest.mark.parametrize("answers", ["journaled", "held_at_the_venue"])
async def test_a_ladder_killed_and_restarted_adopts_its_grid_and_leaves_an_outsiders_order(
    tmp_path: Path, answers: str
) -> None:
    levels = 3
    twin = still_twin()
    with anyio.fail_after(60):
        async with twin:
            # Life 1: the ladder lays its 2N orders; SIGKILL once the twin has them all.
            if answers == "held_at_the_venue":  # executed, answers held: the journal has no answer
                twin.faults.configure(answer_delay_s=30.0)
            async with child(twin, tmp_path, 1, levels) as (process, log):
                await eventually(line(log, "start"), timeout=15)
                await eventually(lambda: len(book(twin)) == 2 * levels, timeout=15)
                if answers == "journaled":  # every answer in: the journal has them ACCEPTED
                    await eventually(lambda: accepted_lines(log) == 2 * levels)
                    # The node commits answers when idle, after telling the strategy: kill it
                    # once the commit is in (a kill before it leaves them PENDING, sent).
                    journal = tmp_path / "journal.sqlite"
                    await eventually(lambda: committed_accepted(journal) == 2 * levels)
                process.send_signal(signal.SIGKILL)
                await process.wait()
            assert process.returncode == -signal.SIGKILL, tail(tmp_path, 1)
            twin.faults.clear()
            grid = dict(book(twin))
            rows = journal_rows(tmp_path / "journal.sqlite")
            assert set(rows) == set(grid)
            if answers == "held_at_the_venue":
                assert all(r == (OrderStatus.PENDING, True) for r in rows.values()), rows
            else:
                assert all(r[0] is OrderStatus.ACCEPTED for r in rows.values()), rows
            prices = sorted((r.is_long, r.price) for r in grid.values())
            assert prices == sorted(
                [(True, Decimal(2000 - k)) for k in range(1, levels + 1)]
                + [(False, Decimal(2000 + k)) for k in range(1, levels + 1)]
            )
            # Someone adds an order of their own on the same account, on a grid price.
            async with outsider(twin) as rest:
                await rest.batch_create([gtc("by-hand", "1999")])
            received = len(twin.received_orders)

            # Life 2: the same journal and twin: adopt, place nothing new.
            async with child(twin, tmp_path, 2, levels) as (process, log):
                start = await wait_line(log, "start", tmp_path)
                assert start["adopted"] == 2 * levels, start
                assert start["external"] == 1, start
                assert start["open"] == sorted(grid), start
                idle = await wait_line(log, "idle", tmp_path)
                assert idle["counters"].get("orders_submitted", 0) == 0, idle
                assert idle["counters"].get("cancels_sent", 0) == 0, idle
                assert idle["resting"] == sorted(grid), idle
                assert set(book(twin)) == {*grid, "by-hand"}  # 2N, not 4N, and the outsider's
                assert len(twin.received_orders) == received  # nothing sent again
                process.send_signal(signal.SIGTERM)
                with anyio.fail_after(20):
                    await process.wait()
            assert process.returncode == 0, tail(tmp_path, 2)
            # A graceful stop without cancel_on_stop leaves the grid where it is.
            assert set(book(twin)) == {*grid, "by-hand"}
            assert record(twin, "by-hand").status == "OPEN"
            statuses = [x["status"] for x in read_lines(log) if x["kind"] == "order"]
            if answers == "held_at_the_venue":  # UNKNOWN at restart, then found resting
                assert sorted(statuses) == ["ACCEPTED"] * 6 + ["UNKNOWN"] * 6, statuses
            else:
                assert statuses == [], statuses


async def wait_line(log: Path, kind: str, tmp: Path) -> dict[str, Any]:
    """The first line of kind in a life-2 log, waited for."""
    find = line(log, kind)
    try:
        await eventually(find, timeout=15)
    except AssertionError:
        raise AssertionError(f"life 2 wrote no {kind!r} line:\n{tail(tmp, 2)}") from None
    found = find()
    assert found is not None
    return found
