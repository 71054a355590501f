"""The SQLite journal: WAL, commit per batch, cursors, id blocks, and restart recovery."""

from __future__ import annotations

import logging
import sqlite3
from decimal import Decimal
from pathlib import Path

import attrs
import orjson
import pytest

from framework.engine.cancels import CancelAnswer
from framework.engine.client_ids import ClientIdError, ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import Event, OrderUpdate
from framework.engine.execution import ExecutionEngine, ExecutionSettings
from framework.engine.intents import OrderIntent, OrderStatus
from framework.live.journal import CACHE_SIZE, Journal, JournalError
from framework.venue.errors import BusyError, ServerFault
from framework.venue.models import MatchRecord, MatchType, OrderResult, PositionType
from framework.venue.rules import PairRules
from tests.engine.test_cancels import Record

START_MS = 1_700_000_000_000


def intent(i: int = 0, **kw: object) -> OrderIntent:
    """A limit intent whose quantity encodes i (so payloads differ)."""
    return OrderIntent(
        pair="ETH-USD",
        is_long=i % 2 == 0,
        quantity=Decimal("0.1") + Decimal(i) / 1000,
        price=Decimal("2000.5"),
        **kw,  # type: ignore[arg-type]
    )


def engine_on(
    journal: Journal, clock: VirtualClock, events: list[Event], **settings: object
) -> ExecutionEngine:
    """An engine on a journal, as a process (node 'pf') would build it."""
    return ExecutionEngine(
        ExecutionSettings(calls_per_second=1000.0, **settings),  # type: ignore[arg-type]
        rules={"ETH-USD": PairRules()},
        publish=events.append,
        now_ms=clock.now_ms,
        ids=ClientIdGenerator("pf", journal),
        journal=journal,
    )


def test_journal_is_sqlite_in_wal_mode(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "sub" / "journal.db")
    mode = sqlite3.connect(tmp_path / "sub" / "journal.db").execute("PRAGMA journal_mode")
    assert mode.fetchone()[0] == "wal"
    journal.close()


def test_writes_are_buffered_until_commit(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = Journal.open(path)
    journal.add("a-1", "pf", "s", intent(client_order_id="a-1"), OrderStatus.PENDING, START_MS)
    reader = Journal.open(path)
    assert reader.status_of("a-1") is None
    assert journal.contains("a-1")  # a chosen id is known from the add, before the commit
    journal.commit()
    assert reader.status_of("a-1") == (OrderStatus.PENDING, False, None)
    journal.mark_sent(["a-1"], True)
    journal.update([(OrderStatus.ACCEPTED, 77, None, None, START_MS + 1, "a-1")])
    journal.commit()
    assert reader.status_of("a-1") == (OrderStatus.ACCEPTED, True, 77)
    assert journal.commits == 2


def test_load_open_round_trips_intents_in_order(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j.db")
    market = OrderIntent(
        pair="BTC-USD",
        is_long=False,
        quantity=Decimal("1.2500"),
        match_type=MatchType.IOC,
        position_type=PositionType.CROSS,
        lever=7,
        client_order_id="mine-1",
        tag="hedge",
    )
    journal.add("x-2", "pf", "s", intent(2), OrderStatus.PENDING, START_MS)
    journal.add("mine-1", "pf", "t", market, OrderStatus.PENDING, START_MS)
    journal.add("x-3", "pf", "s", intent(3), OrderStatus.REJECTED, START_MS, 2301, "too small")
    journal.add("x-4", "other", "s", intent(4), OrderStatus.PENDING, START_MS)
    journal.commit()
    loaded = journal.load_open("pf")
    assert [e.client_order_id for e in loaded] == ["x-2", "mine-1"]
    assert loaded[0].intent == intent(2)
    assert loaded[1].intent == market and loaded[1].strategy == "t"
    assert str(loaded[1].intent.quantity) == "1.2500"


def test_cursors_and_log_ids_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = Journal.open(path)
    assert journal.get_match_cursor("ETH-USD") is None and journal.get_log_id("USD") is None
    journal.set_match_cursor("ETH-USD", 41)
    journal.set_match_cursor("ETH-USD", 42)
    journal.set_log_id("USD", 9001)
    journal.close()
    again = Journal.open(path)
    assert (again.get_match_cursor("ETH-USD"), again.get_log_id("USD")) == (42, 9001)
    assert again.get_match_cursor("BTC-USD") is None


def test_memory_journal_works() -> None:
    journal = Journal.open(":memory:")
    journal.set_log_id("USD", 3)
    assert journal.get_log_id("USD") == 3
    assert journal.reserve_ids(10) == 0 and journal.reserve_ids(10) == 10


def test_two_processes_sharing_a_journal_get_disjoint_id_blocks(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    a, b = Journal.open(path), Journal.open(path)
    assert a.id_tag() == b.id_tag()
    gen_a, gen_b = (
        ClientIdGenerator("pf", a, block_size=5),
        ClientIdGenerator("pf", b, block_size=5),
    )
    ids = [g.next() for _ in range(23) for g in (gen_a, gen_b)]
    assert len(set(ids)) == len(ids)
    fresh = Journal.open(tmp_path / "new.db")
    assert fresh.id_tag() != a.id_tag()  # a re-created journal cannot reuse old ids


def test_restart_sends_unsent_intents_and_marks_sent_ones_unknown(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    journal = Journal.open(path)
    events: list[Event] = []
    engine = engine_on(journal, clock, events, linger_ms=5)
    ids = [engine.submit("s", intent(i)) for i in range(25)]
    first = engine.next_batch()
    assert first is not None and len(first.orders) == 20
    engine.begin_send(first)  # sent mark committed; then the process dies
    clock.advance(5)
    unsent = engine.next_batch()  # its PENDING rows are committed here ...
    assert unsent is not None  # ... and the process dies before begin_send
    journal._conn.close()  # no orderly close: nothing more is written

    clock.advance(1000)
    again = Journal.open(path)
    after: list[Event] = []
    engine2 = engine_on(again, clock, after)
    assert engine2.recover() == 5
    unknown = [u.client_order_id for u in after if isinstance(u, OrderUpdate)]
    assert unknown == ids[:20]
    assert all(u.status is OrderStatus.UNKNOWN for u in after if isinstance(u, OrderUpdate))
    batch = engine2.next_batch()
    assert batch is not None and batch.orders == unsent.orders  # same ids, same payloads
    engine2.begin_send(batch)
    assert engine2.next_batch() is None
    assert engine2.counters()["orders_sent"] == 5


def test_unknown_intents_are_never_resent_after_restart(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [], unknown_window_s=10)
    coid = engine.submit("s", intent())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_results(batch, [])  # missing -> UNKNOWN
    journal.close()
    again = Journal.open(path)
    events: list[Event] = []
    engine2 = engine_on(again, clock, events, unknown_window_s=10)
    assert engine2.recover() == 0
    assert engine2.next_batch() is None and engine2.status(coid) is OrderStatus.UNKNOWN
    clock.advance(10_000)
    assert engine2.tick() == 1
    engine2.flush()
    assert again.status_of(coid) == (OrderStatus.LOST, True, None)


def test_busy_refusal_makes_intents_resendable_after_restart(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [])
    coid = engine.submit("s", intent())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, BusyError(2329, "The server is updating, please wait a moment..."))
    engine.flush()
    journal._conn.close()
    engine2 = engine_on(Journal.open(path), clock, [])
    assert engine2.recover() == 1
    resent = engine2.next_batch()
    assert resent is not None and resent.client_order_ids == [coid]


def accepted_as(path: Path, clock: VirtualClock, order_id: int) -> str:
    """A first life: one intent answered ACCEPTED as order_id, then the journal closed."""
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [])
    coid = engine.submit("s", intent(0))
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_results(batch, [OrderResult(client_order_id=coid, order_id=order_id)])
    journal.close()
    return coid


def test_accepted_orders_still_link_their_fills_after_restart(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = accepted_as(path, clock, 555)
    events: list[Event] = []
    engine2 = engine_on(Journal.open(path), clock, events)
    engine2.recover()
    filled = engine2.attribute(MatchRecord(id=1, entrust_id=555, quantity=Decimal("0.1")))
    assert (filled.strategy, filled.match.client_order_id) == ("s", coid)
    assert [e.status for e in events if isinstance(e, OrderUpdate)] == [OrderStatus.FILLED]


def test_pending_older_than_max_age_is_rejected_not_sent_at_restart(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [], linger_ms=1000)
    coid = engine.submit("s", intent())
    engine.flush()
    journal._conn.close()
    clock.advance(120_000)
    events: list[Event] = []
    engine2 = engine_on(Journal.open(path), clock, events, pending_max_age_s=60)
    assert engine2.recover() == 0
    (update,) = events
    assert isinstance(update, OrderUpdate)
    assert (update.client_order_id, update.status, update.code) == (
        coid,
        OrderStatus.REJECTED,
        9012,
    )


def test_user_id_reuse_is_caught_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    journal = Journal.open(path)
    engine_on(journal, clock, []).submit("s", intent(client_order_id="keep-1"))
    journal.close()
    engine2 = engine_on(Journal.open(path), clock, [])
    with pytest.raises(ValueError, match="already used"):
        engine2.submit("s", intent(client_order_id="keep-1"))


def test_log_is_folded_in_bounded_chunks_and_loses_nothing(tmp_path: Path) -> None:
    from framework.live.journal import COMPACT_AFTER, COMPACT_CHUNK

    journal = Journal.open(tmp_path / "j.db")
    for i in range(COMPACT_AFTER):
        coid = f"x-{i}"
        journal.add(coid, "pf", "s", intent(i), OrderStatus.PENDING, START_MS)
        journal.commit()
        journal.update([(OrderStatus.ACCEPTED, i, None, None, START_MS, coid)])
    journal.commit()
    assert journal.log_rows == COMPACT_AFTER + 1
    journal.compact_if_due()
    assert journal.log_rows == COMPACT_AFTER + 1 - COMPACT_CHUNK
    statuses = journal.statuses()  # a read folds the rest
    assert len(statuses) == COMPACT_AFTER
    assert set(statuses.values()) == {OrderStatus.ACCEPTED}
    assert journal.status_of("x-7") == (OrderStatus.ACCEPTED, False, 7)


def test_the_match_window_survives_reopening_and_forgets_what_falls_below_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.db"
    journal = Journal.open(path)
    for match_id in (40, 41, 43):
        journal.mark_match_seen("ETH-USD", match_id)
    journal.close()
    again = Journal.open(path)
    assert again.load_match_window("ETH-USD") == (43, None, {40, 41, 43})
    again.save_match_window("ETH-USD", 43, 40)
    assert again.load_match_window("ETH-USD") == (43, 40, {41, 43})
    again.save_match_window("ETH-USD", 5, 5)  # a fresh venue: the window starts over lower
    assert again.load_match_window("ETH-USD") == (5, 5, set())
    assert again.load_match_window("BTC-USD") == (None, None, set())


def test_a_match_held_for_an_answer_survives_a_kill_and_is_published_at_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    first: list[Event] = []
    engine = engine_on(Journal.open(path), clock, first)
    coid = engine.submit("s", intent())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    fill = MatchRecord(
        id=7, entrust_id=99, symbol="ETH-USD", is_long=True, quantity=intent().quantity
    )
    assert engine.attribute(fill) is None  # held: the answer may name its order
    journal = engine._journal
    assert journal is not None
    journal.mark_match_seen("ETH-USD", fill.id)  # the poller's commit: the held match with it
    # killed here: the answer never came, the poller will never list match 7 as new again
    events: list[Event] = []
    restarted = engine_on(Journal.open(path), clock, events)
    restarted.recover()
    (update,) = [e for e in events if isinstance(e, OrderUpdate)][-1:]
    assert (update.client_order_id, update.status) == (coid, OrderStatus.FILLED)
    assert update.order_id == 99
    (published,) = [e for e in events if not isinstance(e, OrderUpdate)]
    assert published.match.client_order_id == coid  # type: ignore[union-attr]
    restarted.flush()
    assert Journal.open(path).load_matches("pf") == []  # decided: no longer kept


def test_a_busy_answer_is_committed_at_once_so_a_kill_in_the_backoff_resends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    engine = engine_on(Journal.open(path), clock, [])
    coid = engine.submit("s", intent())
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    assert Journal.open(path).status_of(coid) == (OrderStatus.PENDING, True, None)
    engine.on_failure(batch, BusyError(2329, "busy"))
    # killed in the backoff: another reader already sees the intent as never sent
    assert Journal.open(path).status_of(coid) == (OrderStatus.PENDING, False, None)


def test_chosen_ids_of_an_earlier_life_are_refused_from_memory(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    first = Journal.open(path)
    events: list[Event] = []
    engine_on(first, VirtualClock(START_MS), events).submit("s", intent(client_order_id="mine-1"))
    first.commit()
    first.close()
    again = Journal.open(path)
    engine = engine_on(again, VirtualClock(START_MS), events)
    again._conn.close()  # no SQL may run for the check: the ids were loaded at open
    with pytest.raises(ClientIdError, match="already used"):
        engine._check_user_id("mine-1")
    engine._check_user_id("mine-2")
    assert not again.contains("pfk3x9a-0")  # generated ids are not looked up


def test_the_journal_keeps_a_small_page_cache(tmp_path: Path) -> None:
    journal = Journal.open(str(tmp_path / "j.sqlite"))
    try:
        assert journal._conn.execute("PRAGMA cache_size").fetchone()[0] == CACHE_SIZE == -256
    finally:
        journal.close()


def lost(engine: ExecutionEngine, quantity: str) -> str:
    """Submit a 0.x long at 2000.5 and answer HTTP 500: UNKNOWN."""
    coid = engine.submit("s", attrs.evolve(intent(0), quantity=Decimal(quantity)))
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    return coid


def in_doubt(path: Path, clock: VirtualClock, quantity: str = "0.1") -> str:
    """A first life: one intent whose answer is lost (UNKNOWN), then the journal closed."""
    journal = Journal.open(path)
    coid = lost(engine_on(journal, clock, []), quantity)
    journal.close()
    return coid


def restarted(
    path: Path, clock: VirtualClock, events: list[Event]
) -> tuple[Journal, ExecutionEngine]:
    """The next life: the journal opened again and the engine restored (not yet recovered)."""
    journal = Journal.open(path)
    engine = engine_on(journal, clock, events)
    engine.restore()
    return journal, engine


def unknown_then_adopted(path: Path, clock: VirtualClock, filled: str) -> str:
    """Run 1: one 0.1 intent whose answer is lost (UNKNOWN). Run 2: the venue's list names it
    resting as order 700 with filled as its record's fill. Returns its client order id."""
    coid = in_doubt(path, clock)
    journal, engine = restarted(path, clock, [])
    assert engine.adopt("ETH-USD", [Record(coid, 700, Decimal(filled), "open")])["adopted"] == 1
    engine.recover()
    journal.close()
    return coid


def test_what_a_record_said_had_filled_stays_a_floor_after_a_restart(tmp_path: Path) -> None:
    # Run 3 restarts once more; the fill the record counted is listed only now. Restored as
    # the matches' sum, the record's 0.06 took that match on top of it: FILLED at 0.12.
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = unknown_then_adopted(path, clock, "0.06")
    events: list[Event] = []
    engine = engine_on(Journal.open(path), clock, events)
    engine.recover()
    engine.attribute(MatchRecord(id=1, entrust_id=700, symbol="ETH-USD", quantity=Decimal("0.06")))
    assert engine.status(coid) is OrderStatus.ACCEPTED
    assert [o.filled for o in engine.open_orders()] == [Decimal("0.06")]
    engine.attribute(MatchRecord(id=2, entrust_id=700, symbol="ETH-USD", quantity=Decimal("0.04")))
    assert [e.status for e in events if isinstance(e, OrderUpdate)][-1] is OrderStatus.FILLED


def test_a_match_within_the_records_word_is_kept_for_the_next_restart(tmp_path: Path) -> None:
    # Run 3 links the fill the record counted (what has filled stays 0.06) and is killed;
    # run 4 gets the last 0.04. Had run 3 not kept its matches' sum, run 4 knew none of
    # them: 0.04 matched, still 0.06 filled, and the order never FILLED.
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = unknown_then_adopted(path, clock, "0.06")
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [])
    engine.recover()
    engine.attribute(MatchRecord(id=1, entrust_id=700, symbol="ETH-USD", quantity=Decimal("0.06")))
    engine.flush()
    journal.close()
    events: list[Event] = []
    engine = engine_on(Journal.open(path), clock, events)
    engine.recover()
    assert [o.filled for o in engine.open_orders()] == [Decimal("0.06")]
    engine.attribute(MatchRecord(id=2, entrust_id=700, symbol="ETH-USD", quantity=Decimal("0.04")))
    assert [(e.client_order_id, e.status) for e in events if isinstance(e, OrderUpdate)] == [
        (coid, OrderStatus.FILLED)
    ]


def test_a_version_1_journal_is_brought_up_to_version_2_and_loses_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = accepted_as(path, clock, 555)
    # As version 1 left it: no matched_sums table, and a log row of (filled, id) unfolded.
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE matched_sums")
    conn.execute("UPDATE meta SET value = 1 WHERE key = 'schema_version'")
    conn.execute("INSERT INTO log (filled) VALUES (?)", (orjson.dumps([["0.04", coid]]),))
    conn.commit()
    conn.close()
    journal = Journal.open(path)
    (entry,) = journal.load_open("pf")
    assert (entry.client_order_id, entry.filled, entry.matched) == (coid, Decimal("0.04"), None)
    journal.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (2,)
    assert conn.execute("SELECT count(*) FROM matched_sums").fetchone() == (0,)
    conn.close()
    events: list[Event] = []
    engine = engine_on(Journal.open(path), clock, events)
    engine.recover()
    engine.attribute(MatchRecord(id=1, entrust_id=555, symbol="ETH-USD", quantity=Decimal("0.06")))
    assert [e.status for e in events if isinstance(e, OrderUpdate)] == [OrderStatus.FILLED]


def version_1_fold(path: Path) -> None:
    """Fold the log as a version 1 process sharing the file does (it knows only these)."""
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT marks, updates, filled FROM log ORDER BY id").fetchall()
    for marks, changes, filled in rows:
        for flag, coid in orjson.loads(marks or b"[]"):
            conn.execute("UPDATE intents SET sent = ? WHERE client_order_id = ?", (flag, coid))
        for status, order_id, code, msg, updated, coid in orjson.loads(changes or b"[]"):
            conn.execute(
                "UPDATE intents SET status = ?, order_id = coalesce(?, order_id), code = ?,"
                " msg = ?, updated_ms = ? WHERE client_order_id = ?",
                (status, order_id, code, msg, updated, coid),
            )
        for amount, coid in orjson.loads(filled or b"[]"):
            conn.execute("UPDATE intents SET filled = ? WHERE client_order_id = ?", (amount, coid))
    conn.execute("DELETE FROM log")
    conn.commit()
    conn.close()


def test_a_version_1_process_folding_the_log_loses_no_matches_sum(tmp_path: Path) -> None:
    # Run 2 adopts the order (its record: 0.06 filled) and is killed; a version 1 process on
    # the same file (another node) folds the log meanwhile. The matches' sum is not in the
    # log, so run 3 still knows the record's 0.06 as a floor: its match adds nothing.
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = in_doubt(path, clock)
    journal, engine = restarted(path, clock, [])
    assert engine.adopt("ETH-USD", [Record(coid, 700, Decimal("0.06"), "open")])["adopted"] == 1
    engine.recover()
    journal.commit()
    journal._conn.close()  # killed: its log row is not folded by it
    version_1_fold(path)
    events: list[Event] = []
    engine = engine_on(Journal.open(path), clock, events)
    engine.recover()
    engine.attribute(MatchRecord(id=1, entrust_id=700, symbol="ETH-USD", quantity=Decimal("0.06")))
    assert engine.status(coid) is OrderStatus.ACCEPTED
    assert [o.filled for o in engine.open_orders()] == [Decimal("0.06")]


def test_a_match_found_external_is_no_evidence_for_a_later_intent_after_a_restart(
    tmp_path: Path,
) -> None:
    # Run 1: A (0.1) is in doubt; order 900 fills 0.05 (a part of A's, perhaps: bound to
    # none, kept, A's record may name 900). Then B (0.05, same pair and side) is in doubt
    # too. Run 2: the list names neither. The match counts for no intent by its looks.
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [])
    lost(engine, "0.1")
    found = engine.attribute(
        MatchRecord(id=1, entrust_id=900, symbol="ETH-USD", is_long=True, quantity=Decimal("0.05"))
    )
    assert found is not None and found.match.client_order_id is None
    clock.advance(1000)
    b = lost(engine, "0.05")
    engine.flush()
    journal.close()
    events: list[Event] = []
    journal, engine = restarted(path, clock, events)
    engine.adopt("ETH-USD", [])
    engine.recover()
    assert engine.status(b) is OrderStatus.UNKNOWN
    assert [
        e for e in events if isinstance(e, OrderUpdate) and e.status is not OrderStatus.UNKNOWN
    ] == []
    assert [m.id for m, _ in journal.load_matches("pf")] == [1]  # kept while they are in doubt
    journal.close()


def test_matches_kept_for_a_doubt_go_from_the_journal_when_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [], unknown_window_s=5.0, lost_memory_s=30.0)
    lost(engine, "0.1")
    engine.attribute(MatchRecord(id=1, entrust_id=700, symbol="ETH-USD", quantity=Decimal("0.05")))
    engine.flush()
    assert [m.id for m, _ in journal.load_matches("pf")] == [1]
    clock.advance(10_000)
    engine.tick()  # LOST: it may still rest, and a list may name order 700 as its
    engine.flush()
    assert [m.id for m, _ in journal.load_matches("pf")] == [1]
    clock.advance(30_000)
    engine.tick()  # lost_memory_s later: nothing is in doubt any more
    engine.flush()
    assert journal.load_matches("pf") == []
    journal.close()


def test_a_journal_of_a_newer_version_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    Journal.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = 3 WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(JournalError, match="schema version 3, expected 2"):
        Journal.open(path)


def test_a_fill_found_external_before_a_restart_is_the_adopted_orders_after_it(
    tmp_path: Path,
) -> None:
    # Run 1: the intent is in doubt and its order 700 fills 0.06: external then (no answer
    # named 700). Run 2: the list names it resting with 0.06 filled; its last 0.04 fills it.
    # Had the 0.06 been forgotten at the kill, 0.04 matched stayed under the record's 0.06
    # and the order never FILLED.
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [])
    coid = lost(engine, "0.1")
    found = engine.attribute(
        MatchRecord(id=1, entrust_id=700, symbol="ETH-USD", quantity=Decimal("0.06"))
    )
    assert found is not None and found.external
    engine.flush()
    journal.close()
    events: list[Event] = []
    journal, engine = restarted(path, clock, events)
    engine.adopt("ETH-USD", [Record(coid, 700, Decimal("0.06"), "open")])
    engine.recover()
    assert [o.filled for o in engine.open_orders()] == [Decimal("0.06")]
    engine.attribute(MatchRecord(id=2, entrust_id=700, symbol="ETH-USD", quantity=Decimal("0.04")))
    assert [(e.client_order_id, e.status) for e in events if isinstance(e, OrderUpdate)][-1] == (
        coid,
        OrderStatus.FILLED,
    )
    assert journal.load_matches("pf") == []  # counted: no longer kept
    journal.close()


def test_a_match_seen_between_restore_and_recover_is_remembered_once(tmp_path: Path) -> None:
    # A match handled after restore() is kept; recover() reads it back among the kept rows.
    # Remembered twice, it counted twice when A's cancel answer named its order: 0.10 of 0.1.
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    a = in_doubt(path, clock)
    events: list[Event] = []
    journal, engine = restarted(path, clock, events)
    engine.adopt("ETH-USD", [])  # A is not listed: still in doubt
    engine.attribute(MatchRecord(id=1, entrust_id=700, symbol="ETH-USD", quantity=Decimal("0.05")))
    engine.flush()
    engine.recover()
    engine.cancel("s", a)
    cancels = engine.next_cancels()
    assert cancels is not None
    engine.on_cancel_answers(cancels, {a: CancelAnswer(200, order_id=700)})
    (last,) = [e for e in events if isinstance(e, OrderUpdate) and e.client_order_id == a][-1:]
    assert last.status is OrderStatus.CANCELED
    assert "0.05 of 0.1 known to have filled" in (last.msg or "")
    journal.close()


def test_a_temporary_journal_is_named_as_one_in_its_log(caplog: pytest.LogCaptureFixture) -> None:
    journal = Journal.open("")  # the embedded twin's default: SQLite's temporary file
    journal.add("x-1", "pf", "s", intent(1), OrderStatus.PENDING, START_MS)
    journal.commit()
    with caplog.at_level(logging.INFO, logger="framework.journal"):
        assert journal.compact() == 1
    assert [r.getMessage() for r in caplog.records] == [
        "journal (a temporary file): folded 1 log rows into the intents table"
    ]
