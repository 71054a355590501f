"""MatchPoller against the venue twin: first start, backfill, paging, restarts, schedule, overlap."""

from __future__ import annotations

import itertools
from decimal import Decimal
from pathlib import Path

import anyio
import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.live.journal import Journal
from framework.live.poller import CursorStore, MatchPoller, MemoryCursorStore
from framework.live.rest import RestClient
from framework.twin.server import VenueTwin
from framework.venue.models import MatchRecord, MatchType, OrderInput, PositionType
from tests.live.conftest import Eventually

pytestmark = pytest.mark.anyio

PAIR = "ETH-USD"
_ids = itertools.count(1)


async def fills(rest: RestClient, n: int) -> None:
    """n market orders, alternating sides: one match each."""
    for i in range(n):
        order = OrderInput(
            client_order_id=f"p{next(_ids)}",
            is_long=i % 2 == 0,
            is_market=True,
            lever=5,
            match_type=MatchType.GTC,
            pair_name=PAIR,
            position_type=PositionType.ISOLATED,
            quantity=Decimal("1"),
        )
        await rest.batch_create([order])


async def venue_ids(rest: RestClient) -> list[int]:
    page = await rest.matches(PAIR, page_size=100)
    return sorted(m.id for m in page)


def poller_for(
    rest: object,
    store: CursorStore,
    out: list[MatchRecord],
    *,
    page_size: int = 2,
    interval_s: float = 60.0,
    backfill: bool = False,
) -> MatchPoller:
    return MatchPoller(
        rest,  # type: ignore[arg-type]
        pairs=[PAIR],
        interval_s=interval_s,
        page_size=page_size,
        store=store,
        on_match=out.append,
        backfill=backfill,
    )


async def test_first_start_begins_after_the_newest_existing_match(rest: RestClient) -> None:
    await fills(rest, 3)
    out: list[MatchRecord] = []
    store = MemoryCursorStore()
    poller = poller_for(rest, store, out)
    await poller.initialize()
    assert out == []
    assert store.get_match_cursor(PAIR) == max(await venue_ids(rest))
    await fills(rest, 2)
    assert await poller.poll_now() == 2
    assert [m.id for m in out] == (await venue_ids(rest))[-2:]


async def test_backfill_publishes_the_history_oldest_first(rest: RestClient) -> None:
    await fills(rest, 5)
    out: list[MatchRecord] = []
    poller = poller_for(rest, MemoryCursorStore(), out, backfill=True)
    await poller.initialize()  # nothing to set up: backfill starts from nothing
    assert await poller.poll_now(PAIR) == 5
    assert [m.id for m in out] == await venue_ids(rest)


async def test_more_than_a_page_between_polls_is_paged_backward_and_published_in_order(
    rest: RestClient,
) -> None:
    out: list[MatchRecord] = []
    poller = poller_for(rest, MemoryCursorStore(), out, page_size=2)
    await poller.initialize()
    await fills(rest, 7)
    pages_before = poller.stats.pages
    assert await poller.poll_now() == 7
    assert [m.id for m in out] == await venue_ids(rest)
    assert poller.stats.pages - pages_before >= 4  # 2+2+2+1, then the page reaching the cursor


async def test_a_restart_with_the_persisted_cursor_repeats_nothing_and_misses_nothing(
    rest: RestClient,
) -> None:
    store = MemoryCursorStore()
    first: list[MatchRecord] = []
    poller = poller_for(rest, store, first)
    await poller.initialize()
    await fills(rest, 3)
    await poller.poll_now()
    await fills(rest, 4)  # while the node is down
    second: list[MatchRecord] = []
    restarted = poller_for(rest, store, second)
    await restarted.initialize()
    assert await restarted.poll_now() == 4
    ids = [m.id for m in first + second]
    assert ids == await venue_ids(rest) and len(set(ids)) == 7


async def test_the_scheduled_job_polls_every_interval_until_shutdown(
    rest: RestClient, eventually: Eventually
) -> None:
    out: list[MatchRecord] = []
    poller = poller_for(rest, MemoryCursorStore(), out, interval_s=0.05)
    await poller.initialize()
    poller.start()
    scheduler = poller.scheduler
    assert scheduler is not None
    try:
        await fills(rest, 3)
        await eventually(lambda: len(out) == 3)
        assert poller.state == "ok" and poller.stats.polls >= 2
    finally:
        await poller.aclose()
    assert poller.state == "stopped" and poller.scheduler is None
    assert scheduler.get_jobs() == []
    await eventually(lambda: not scheduler.running)  # its own scheduler: shut down too


async def test_jobs_join_a_scheduler_passed_in_and_leave_it_running(
    rest: RestClient, eventually: Eventually
) -> None:
    scheduler = AsyncIOScheduler()
    scheduler.start()
    out: list[MatchRecord] = []
    poller = poller_for(rest, MemoryCursorStore(), out, interval_s=0.05)
    await poller.initialize()
    poller.start(scheduler)
    await fills(rest, 2)
    await eventually(lambda: len(out) == 2)
    assert scheduler.get_job(f"match-poll:{PAIR}") is not None
    poller.shutdown()
    assert scheduler.get_job(f"match-poll:{PAIR}") is None and scheduler.running
    scheduler.shutdown(wait=False)


class CountingRest:
    """Delegates to a real RestClient and records how many match calls overlap per pair."""

    def __init__(self, rest: RestClient) -> None:
        self.rest = rest
        self.active = 0
        self.max_active = 0
        self.calls = 0

    async def matches(
        self,
        pair: str,
        match_id: int | None = None,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> list[MatchRecord]:
        self.active += 1
        self.calls += 1
        self.max_active = max(self.max_active, self.active)
        try:
            return await self.rest.matches(pair, match_id, page_no, page_size)
        finally:
            self.active -= 1


async def test_two_polls_of_one_pair_never_overlap_and_publish_each_match_once(
    twin: VenueTwin, rest: RestClient, eventually: Eventually
) -> None:
    counting = CountingRest(rest)
    out: list[MatchRecord] = []
    poller = poller_for(counting, MemoryCursorStore(), out, interval_s=0.01, page_size=1)
    await poller.initialize()
    twin.faults.configure(latency=0.01)
    poller.start()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(fills, rest, 6)
            for _ in range(6):
                tg.start_soon(poller.poll_now)
                await anyio.lowlevel.checkpoint()
        await poller.poll_now()
    finally:
        await poller.aclose()
    assert counting.max_active == 1
    assert counting.calls > 6
    assert [m.id for m in out] == await venue_ids(rest)
    assert len(out) == 6


async def test_a_failing_scheduled_poll_is_counted_and_the_next_one_catches_up(
    twin: VenueTwin, rest: RestClient, eventually: Eventually
) -> None:
    out: list[MatchRecord] = []
    states: list[str] = []
    poller = MatchPoller(
        rest,
        pairs=[PAIR],
        interval_s=0.03,
        page_size=5,
        store=MemoryCursorStore(),
        on_match=out.append,
        on_state=lambda state, detail: states.append(state),
    )
    await poller.initialize()
    await fills(rest, 2)
    twin.faults.configure(busy_rate=1.0)
    poller.start()
    try:
        await eventually(lambda: poller.stats.errors >= 2)
        assert poller.state == "error" and "2329" in poller.last_error
        twin.faults.clear()
        await eventually(lambda: len(out) == 2)
        await eventually(lambda: poller.state == "ok")
    finally:
        await poller.aclose()
    assert [m.id for m in out] == await venue_ids(rest)
    assert "error" in states and states[-1] == "stopped"


async def test_polling_an_unknown_pair_is_refused(rest: RestClient) -> None:
    poller = poller_for(rest, MemoryCursorStore(), [])
    with pytest.raises(ValueError, match="not polled"):
        await poller.poll_now("DOGE-USD")


async def test_cursors_persisted_in_the_journal_survive_a_restart(
    rest: RestClient, tmp_path: Path
) -> None:
    path = tmp_path / "journal.sqlite"
    journal = Journal.open(path)
    first: list[MatchRecord] = []
    poller = poller_for(rest, journal, first)
    await poller.initialize()
    await fills(rest, 3)
    await poller.poll_now()
    journal.close()
    await fills(rest, 2)
    reopened = Journal.open(path)
    try:
        second: list[MatchRecord] = []
        restarted = poller_for(rest, reopened, second)
        await restarted.initialize()
        assert await restarted.poll_now() == 2
        assert reopened.get_match_cursor(PAIR) == second[-1].id
    finally:
        reopened.close()
    assert [m.id for m in first + second] == await venue_ids(rest)


async def test_a_failing_on_match_is_counted_and_does_not_wedge_the_pair(rest: RestClient) -> None:
    out: list[MatchRecord] = []

    def on_match(match: MatchRecord) -> None:
        if not failed:
            failed.add(match.id)
            raise RuntimeError("strategy bookkeeping failed")
        out.append(match)

    failed: set[int] = set()
    store = MemoryCursorStore()
    poller = MatchPoller(
        rest, pairs=[PAIR], interval_s=60, page_size=5, store=store, on_match=on_match
    )
    await poller.initialize()
    await fills(rest, 3)
    assert await poller.poll_now() == 3
    ids = (await venue_ids(rest))[-3:]
    assert [m.id for m in out] == ids[1:] and failed == {ids[0]}
    assert poller.stats.callback_errors == 1
    assert store.get_match_cursor(PAIR) == ids[-1]
    await fills(rest, 1)
    assert await poller.poll_now() == 1
