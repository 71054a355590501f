"""MatchCursor: any arrival pattern yields each match exactly once, oldest first."""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.engine.matches import MatchCursor, run_round
from framework.venue.models import MatchRecord


class FakeVenue:
    """Match history of one pair, served newest first with matchId as a strict bound."""

    def __init__(self, page_size: int, cap: int, seed: int) -> None:
        self.ids: list[int] = []
        self.next_id = 1
        self.page_size = page_size
        self.cap = cap  # the venue may serve fewer records than the page size asked for
        self.rng = random.Random(seed)
        self.requests: list[int | None] = []
        self.arrive_during_paging: list[int] = []

    def arrive(self, n: int, gap: int = 1) -> None:
        for _ in range(n):
            self.ids.append(self.next_id)
            self.next_id += gap

    def fetch(self, bound: int | None) -> Sequence[MatchRecord]:
        self.requests.append(bound)
        if self.arrive_during_paging:
            self.arrive(self.arrive_during_paging.pop())
        older = [i for i in self.ids if bound is None or i < bound]
        page = sorted(older, reverse=True)[: min(self.page_size, self.cap)]
        self.rng.shuffle(page)  # never rely on the order inside a page
        return [MatchRecord(id=i, symbol="ETH-USD") for i in page]


actions = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.integers(0, 12)),
        st.tuples(st.just("poll"), st.lists(st.integers(0, 4), max_size=3)),
        st.tuples(st.just("restart"), st.just([])),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(
    history=st.integers(0, 15),
    page_size=st.integers(1, 6),
    cap=st.integers(1, 6),
    backfill=st.booleans(),
    steps=actions,
    seed=st.integers(0, 2**16),
)
def test_every_match_is_published_exactly_once_oldest_first_across_restarts(
    history: int,
    page_size: int,
    cap: int,
    backfill: bool,
    steps: list[tuple[str, object]],
    seed: int,
) -> None:
    venue = FakeVenue(page_size, cap, seed)
    venue.arrive(history)
    stored: int | None = None  # what a journal persisted
    cursor = MatchCursor(stored, backfill=backfill)
    published: list[int] = []
    start_cursor: int | None = None
    for kind, arg in [*steps, ("poll", [])]:
        if kind == "arrive":
            assert isinstance(arg, int)
            venue.arrive(arg, gap=1 + arg % 3)
        elif kind == "restart":
            cursor = MatchCursor(stored, backfill=backfill)
        else:
            assert isinstance(arg, list)
            venue.arrive_during_paging = list(arg)
            new = run_round(cursor, venue.fetch)
            if start_cursor is None:
                start_cursor = 0 if backfill else cursor.last_id
            published.extend(m.id for m in new)
            stored = cursor.last_id
    # A final poll with nothing arriving meanwhile catches up completely.
    venue.arrive_during_paging = []
    published.extend(m.id for m in run_round(cursor, venue.fetch))
    assert start_cursor is not None
    assert published == sorted(set(published)), "each match once, oldest first"
    assert published == [i for i in venue.ids if i > start_cursor]


def test_first_start_sets_the_cursor_at_the_newest_match_without_publishing() -> None:
    venue = FakeVenue(page_size=2, cap=2, seed=0)
    venue.arrive(5)
    cursor = MatchCursor()
    assert run_round(cursor, venue.fetch) == []
    assert cursor.last_id == 5
    assert venue.requests == [None]


def test_first_start_on_an_empty_history_starts_at_zero() -> None:
    venue = FakeVenue(page_size=2, cap=2, seed=0)
    cursor = MatchCursor()
    assert run_round(cursor, venue.fetch) == []
    assert cursor.last_id == 0
    venue.arrive(3)
    assert [m.id for m in run_round(cursor, venue.fetch)] == [1, 2, 3]


def test_backfill_publishes_the_whole_history_oldest_first() -> None:
    venue = FakeVenue(page_size=2, cap=2, seed=1)
    venue.arrive(5)
    cursor = MatchCursor(backfill=True)
    assert [m.id for m in run_round(cursor, venue.fetch)] == [1, 2, 3, 4, 5]
    assert cursor.last_id == 5


def test_more_than_a_page_between_polls_pages_backward_with_match_id() -> None:
    venue = FakeVenue(page_size=3, cap=3, seed=2)
    venue.arrive(2)
    cursor = MatchCursor(last_id=2)
    venue.arrive(7)  # ids 3..9
    assert [m.id for m in run_round(cursor, venue.fetch)] == [3, 4, 5, 6, 7, 8, 9]
    assert venue.requests == [None, 7, 4]


def test_records_at_or_above_the_requested_bound_are_ignored() -> None:
    cursor = MatchCursor(last_id=1)
    pages = {
        None: [MatchRecord(id=4), MatchRecord(id=3)],
        3: [MatchRecord(id=3), MatchRecord(id=9), MatchRecord(id=2), MatchRecord(id=1)],
    }
    rnd = cursor.start()
    while rnd.feed(pages[rnd.request_id]):
        pass
    assert [m.id for m in rnd.new_matches()] == [2, 3, 4]
    assert rnd.ignored == 2
    assert rnd.cursor_after() == 4


class LateVenue:
    """Matches listed only some polls after they matched: lower ids may show after higher ones."""

    def __init__(self, page_size: int, seed: int) -> None:
        self.page_size = page_size
        self.rng = random.Random(seed)
        self.matched: list[tuple[int, int, int]] = []  # (id, matched at ms, visible from poll)
        self.poll = 0

    def match(self, n: int, max_delay: int) -> None:
        for _ in range(n):
            mid = len(self.matched) + 1
            self.matched.append((mid, self.poll * 1000, self.poll + self.rng.randint(0, max_delay)))

    def fetch(self, bound: int | None) -> Sequence[MatchRecord]:
        shown = [
            MatchRecord(id=i, create_time_stamp=ms, symbol="ETH-USD")
            for i, ms, visible in self.matched
            if visible <= self.poll and (bound is None or i < bound)
        ]
        shown.sort(key=lambda m: m.id, reverse=True)
        return shown[: self.page_size]


@settings(max_examples=300, deadline=None)
@given(
    page_size=st.integers(1, 6),
    max_delay=st.integers(0, 3),
    by_age=st.booleans(),
    steps=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=20),
    seed=st.integers(0, 2**16),
)
def test_matches_listed_late_and_out_of_id_order_are_delivered_once_within_the_window(
    page_size: int,
    max_delay: int,
    by_age: bool,
    steps: list[tuple[int, bool]],
    seed: int,
) -> None:
    venue = LateVenue(page_size, seed)
    # The window covers the largest delay: by age (polls are 1000 ms apart), or by ids.
    window = (
        {"reread_age_ms": (max_delay + 1) * 1000, "reread_ids": 10**9}
        if by_age
        else {"reread_ids": 6 * (len(steps) + max_delay + 1)}
    )
    stored: tuple[int | None, int | None, set[int]] = (None, None, set())

    def fresh() -> MatchCursor:
        last_id, floor, seen = stored
        return MatchCursor(last_id, backfill=True, floor=floor, seen=set(seen), **window)

    cursor = fresh()
    delivered: list[int] = []
    for arriving, restart in [*steps, *[(0, False)] * (max_delay + 1)]:
        venue.match(arriving, max_delay)
        if restart:
            cursor = fresh()
        delivered.extend(m.id for m in run_round(cursor, venue.fetch))
        stored = (cursor.last_id, cursor.floor, set(cursor.seen))
        venue.poll += 1
    assert sorted(delivered) == [i for i, _, _ in venue.matched], "every match, each once"
    assert len(delivered) == len(set(delivered))


def test_without_a_window_a_match_listed_late_below_the_cursor_is_never_delivered() -> None:
    venue = LateVenue(page_size=10, seed=0)
    venue.matched = [(1, 0, 1), (2, 0, 0)]  # id 1 shows one poll after id 2
    cursor = MatchCursor(backfill=True)
    assert [m.id for m in run_round(cursor, venue.fetch)] == [2]
    venue.poll = 1
    assert run_round(cursor, venue.fetch) == []  # the old behaviour: id 1 is lost
    windowed = MatchCursor(backfill=True, reread_age_ms=5_000)
    venue.poll = 0
    assert [m.id for m in run_round(windowed, venue.fetch)] == [2]
    venue.poll = 1
    rnd = windowed.start()
    while rnd.feed(venue.fetch(rnd.request_id)):
        pass
    assert [m.id for m in rnd.new_matches()] == [1] and rnd.late == 1


def test_the_window_floor_moves_up_and_forgets_what_is_below_it() -> None:
    venue = LateVenue(page_size=3, seed=0)
    venue.matched = [(i, i * 1000, 0) for i in range(1, 11)]
    cursor = MatchCursor(backfill=True, reread_age_ms=2_500)
    assert [m.id for m in run_round(cursor, venue.fetch)] == list(range(1, 11))
    assert run_round(cursor, venue.fetch) == []
    # matches 8, 9, 10 are within 2.5 s of the newest; 7 is the window's floor
    assert cursor.floor == 7 and cursor.seen == {8, 9, 10}


def test_a_venue_whose_newest_match_is_below_the_cursor_starts_over() -> None:
    venue = FakeVenue(page_size=5, cap=5, seed=0)
    venue.arrive(3)
    cursor = MatchCursor(last_id=24, floor=20, seen={21, 22, 23, 24}, reread_age_ms=10_000)
    rnd = cursor.start()
    while rnd.feed(venue.fetch(rnd.request_id)):
        pass
    assert rnd.reset and rnd.new_matches() == []
    cursor.close(rnd)
    assert (cursor.last_id, cursor.floor, cursor.seen) == (3, 3, set())
    venue.arrive(2)
    assert [m.id for m in run_round(cursor, venue.fetch)] == [4, 5]
