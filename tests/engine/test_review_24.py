"""Review of issue 24 (order truth for resting orders): each test shows one defect found.

Pure engine tests on a virtual clock (tests.engine.test_resting_truth's style), and journal
tests over a real SQLite file (tests.live.test_journal_done's). Each FAILS at the commit under
review (5b7aaf2); the docstring says what the engine does and what it should.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

import attrs

from framework.engine.cancels import CancelAnswer
from framework.engine.clock import VirtualClock
from framework.engine.events import Event, OrderUpdate
from framework.engine.execution import ExecutionEngine
from framework.engine.intents import OrderStatus
from framework.engine.reconcile import DONE_MEMORY
from framework.engine.risk import RiskSettings
from framework.live.journal import Journal
from framework.venue.errors import ServerFault
from framework.venue.models import MatchRecord
from tests.engine.test_cancels import Record, updates
from tests.engine.test_risk import engine_with, order
from tests.live.test_journal import START_MS, accepted_as, engine_on, in_doubt, restarted

WINDOW_MS = 60_000  # ExecutionSettings.unknown_window_s's default
LOST_MEMORY_MS = 3_600_000  # ExecutionSettings.lost_memory_s's default


@attrs.frozen
class Listed:
    """An open-order list record with what listed_intent reads (pair, side, size, price)."""

    client_order_id: str | None
    entrust_id: int | None
    filled_quantity: Decimal | None
    state: str
    pair_name: str = "ETH-USD"
    is_long: bool = True
    quantity: Decimal = Decimal("0.1")
    price: Decimal | None = Decimal("2000")


def match(match_id: int, order_id: int, quantity: str = "0.1", price: str = "2000") -> MatchRecord:
    """A long ETH-USD match of order_id."""
    return MatchRecord(
        id=match_id, entrust_id=order_id, symbol="ETH-USD", is_long=True,
        quantity=Decimal(quantity), average_price=Decimal(price),
    )  # fmt: skip


def unknown(engine: ExecutionEngine, quantity: str = "0.1") -> str:
    """Submit one long GTC limit at 2000 of quantity and answer HTTP 500: UNKNOWN."""
    coid = engine.submit("s", order(quantity=Decimal(quantity)))
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    return coid


def told(events: list[Event], coid: str) -> list[OrderStatus]:
    """Every status told of one intent, in order."""
    return [s for c, s in updates(events) if c == coid]


# -- a fill bound to the wrong order ----------------------------------------------------------


def test_a_partial_fill_of_a_larger_order_in_doubt_is_not_bound_to_a_smaller_one() -> None:
    """Binding by looks counts only in-doubt intents of the match's exact quantity. X (0.1,
    UNKNOWN, resting) fills 0.05; Y (0.05, UNKNOWN) is then "the only intent in doubt that
    could own it" and is told FILLED with X's orderId. The listing later names X with that
    same orderId: two intents hold order 700, Y's FILLED is false. Any in-doubt intent of the
    pair and side whose quantity is at least the match's (price within its limit) may own it.
    """
    engine, events, _clock = engine_with(RiskSettings(max_open_quantity=Decimal(10)))
    x = unknown(engine, "0.1")
    y = unknown(engine, "0.05")
    found = engine.attribute(match(1, 700, "0.05"))  # X's partial fill
    assert found is not None
    assert OrderStatus.FILLED not in told(events, y), "Y told FILLED with X's order 700"
    engine.check_open_orders("ETH-USD", [Record(x, 700, Decimal("0.05"), "open")])
    assert [o.order_id for o in engine.open_orders()] == [700]


# -- a settled doubt group whose member rests ---------------------------------------------


def test_an_ambiguous_order_that_rests_is_found_by_the_list_and_its_fill_is_its_own() -> None:
    """A group settled by its window (1 of 2 filled) may leave its other member resting. The
    list names it by clientOrderId, but check() adopts only UNKNOWN and LOST intents: it is in
    no open_orders(), cancel() says 9020, the kill switch skips it, and its fill reaches
    on_match as external (strategy None). The issue asks open_orders() to equal the venue's
    resting set after quiet; a listed AMBIGUOUS intent should be tracked like a LOST one."""
    engine, _events, clock = engine_with()
    _a, b = unknown(engine), unknown(engine)
    engine.attribute(match(1, 700))  # counted for {a, b}
    clock.advance(WINDOW_MS)
    engine.tick()  # AMBIGUOUS, 1 of 2 filled: b rests in fact
    engine.check_open_orders("ETH-USD", [Record(b, 701, Decimal(0), "open")], clock.now_ms())
    fill = engine.attribute(match(2, 701, "0.04"))
    assert fill is not None
    assert (fill.external, fill.match.client_order_id) == (False, b), "b's own fill is external"
    assert [o.client_order_id for o in engine.open_orders()] == [b]


# -- a wrong order state told to a strategy -----------------------------------------------


def test_a_members_cancel_answered_after_its_group_settled_tells_canceled_once() -> None:
    """A cancel by clientOrderId of an UNKNOWN member is in flight when its group is settled
    by count (AMBIGUOUS). The answer (200, order 800) is the venue naming that order: it
    rested and is cancelled now. README: an AMBIGUOUS intent the venue names later is told
    what the venue says (ACCEPTED when a list finds it resting, CANCELED by a cancel's
    answer); the review found it told with no such promise (it said AMBIGUOUS was final)."""
    engine, events, clock = engine_with()
    a, _b = unknown(engine), unknown(engine)
    engine.attribute(match(1, 700))  # counted for {a, b}
    assert engine.cancel("s", a)
    batch = engine.next_cancels()  # by a's clientOrderId, in flight
    assert batch is not None and batch.by_client_id
    clock.advance(WINDOW_MS)
    engine.tick()  # the group's window ends: AMBIGUOUS
    assert told(events, a)[-1] is OrderStatus.AMBIGUOUS
    engine.on_cancel_answers(batch, {a: CancelAnswer(200, order_id=800)})
    assert told(events, a) == [OrderStatus.UNKNOWN, OrderStatus.AMBIGUOUS, OrderStatus.CANCELED]
    assert engine.status(a) is None  # ended: no longer tracked nor adoptable
    late = engine.attribute(match(2, 800, "0.02"))  # its fill listed after the cancel
    assert late is not None and late.match.client_order_id == a


def test_a_group_never_says_more_of_its_members_filled_than_it_has() -> None:
    """A member leaves a counted group by its cancel's answer (CANCELED, order 800: the
    counted order 700 was not its). The group {a} keeps its claim and is complete, but only
    found_open re-checks completeness: nothing settles it, so the next same-looking match is
    claimed too and the group is settled "2 of 1 filled" (group_filled 2, group (a,)). Re-check
    completeness wherever a member leaves (canceled, settle_filled), as found_open does."""
    engine, events, _clock = engine_with()
    a, b = unknown(engine), unknown(engine)
    engine.attribute(match(1, 700))  # counted for {a, b}
    assert engine.cancel("s", b)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {b: CancelAnswer(200, order_id=800)})
    engine.attribute(match(2, 701))  # same looks
    settled = [e for e in events if isinstance(e, OrderUpdate) and e.client_order_id == a
               and e.status is OrderStatus.AMBIGUOUS]  # fmt: skip
    for e in settled:
        assert e.group_filled is not None and e.group_filled <= len(e.group), (
            f"{e.group_filled} of {len(e.group)} filled"
        )


# -- orphans: orders of an earlier journal ------------------------------------------------


def test_orders_of_another_node_whose_name_starts_with_this_ones_are_external() -> None:
    """adopt() takes any listed clientOrderId that starts with the node name as this node's
    (coid.startswith(node)). Node "r" adopts node "rx"'s generated id and another program's
    own id "rebalance-7" as orphans: the kill switch (and cancel_on_stop) then cancels them.
    The README promises such orders are external and never touched. Match the generated form
    exactly ({node}{5-char journal tag}-{hex}) instead of the bare prefix."""
    engine, _events, _clock = engine_with()  # node "r"
    other_node = "rxq1w2e-1f"  # node "rx", journal tag "q1w2e", sequence 0x1f
    other_program = "rebalance-7"
    counts = engine.adopt(
        "ETH-USD",
        [
            Listed(other_node, 901, Decimal(0), "open"),
            Listed(other_program, 902, Decimal(0), "open"),
        ],
    )
    assert (counts["orphans"], counts["external"]) == (0, 2)
    engine.kill_switch = True
    assert engine.next_cancels() is None, "the kill switch cancels another node's orders"


def test_a_lost_order_the_journal_still_knows_is_adopted_as_its_strategys(tmp_path: Path) -> None:
    """A LOST order older than lost_memory_s is not revived at restart; the start-up list names
    it, so adopt() takes it for an orphan of an earlier journal: strategy "" (the journal says
    "s"), and Journal.add's INSERT OR IGNORE drops the orphan row together with its ACCEPTED
    update (same log row): the journal keeps LOST while the engine tracks an open order, and
    every later restart adopts it again. Look the clientOrderId up in the journal first (it
    knows the intent's strategy), or write the adoption as an update of the existing row."""
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = in_doubt(path, clock)
    journal, engine = restarted(path, clock, [])
    clock.advance(WINDOW_MS)
    engine.tick()  # LOST
    journal.close()
    clock.advance(LOST_MEMORY_MS + 1)  # the last life's LOST order is not revived now
    events: list[Event] = []
    journal, engine = restarted(path, clock, events)
    engine.adopt("ETH-USD", [Listed(coid, 777, Decimal(0), "open", quantity=Decimal("0.1"),
                                    price=Decimal("2000.5"))])  # fmt: skip
    engine.recover()
    assert [o.client_order_id for o in engine.open_orders()] == [coid]
    journal.close()
    status = Journal.open(path).status_of(coid)
    assert status is not None and status[0] is OrderStatus.ACCEPTED, (
        f"journal says {status}, the engine tracks it ACCEPTED as order 777"
    )
    assert [o.strategy for o in engine.open_orders()] == ["s"]


# -- the journal's matched sums across a restart ------------------------------------------


def journal_filled(path: Path, client_order_id: str) -> str:
    """The filled column of an intent, as the intents table holds it (the log folded)."""
    Journal.open(path).close()
    with sqlite3.connect(path) as conn:
        (filled,) = conn.execute(
            "SELECT filled FROM intents WHERE client_order_id = ?", (client_order_id,)
        ).fetchone()
    return str(filled)


def test_a_fill_a_cancels_answer_counted_is_not_counted_twice_after_a_restart(
    tmp_path: Path,
) -> None:
    """SUMS_ENDED keeps a CANCELED intent's matched sum only while its rowid is within
    DONE_MEMORY of the file's newest intent row (any status, any owner), but load_done reads
    back the owner's newest DONE_MEMORY FILLED and CANCELED ones. After 16,384 refused intents
    (here: another process sharing the file), the sum is gone but the Done is reloaded with
    matched = filled, reported = 0: the late match the answer counted already (0.04 of 0.1)
    is added on top, 0.08. Select the sums to keep as load_done selects (owner, status)."""
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = accepted_as(path, clock, 555)  # 0.1
    journal, engine = restarted(path, clock, [])
    engine.recover()
    engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {555: CancelAnswer(200, filled=Decimal("0.04"))})
    journal.close()
    other = Journal.open(path)  # another process on the file: refused intents of its own
    intent = order()
    for i in range(DONE_MEMORY):
        other.add(f"q{i:x}", "q", "t", intent, OrderStatus.REJECTED, START_MS, 9001, "kill")
    other.close()
    journal, engine = restarted(path, clock, [])
    engine.recover()
    late = engine.attribute(MatchRecord(id=7, entrust_id=555, symbol="ETH-USD", is_long=True,
                                        quantity=Decimal("0.04")))  # fmt: skip
    assert late is not None and late.match.client_order_id == coid
    journal.close()
    assert journal_filled(path, coid) == "0.04"


# -- LOST orders as possible owners -------------------------------------------------------


def gone_lost(engine: ExecutionEngine, clock: VirtualClock) -> str:
    """An UNKNOWN intent (0.1 long at 2000, GTC) whose window passes with no evidence: LOST."""
    coid = unknown(engine)
    clock.advance(WINDOW_MS)
    engine.tick()
    assert engine.status(coid) is OrderStatus.LOST
    return coid


def test_a_group_of_lost_orders_is_not_settled_by_its_first_fill() -> None:
    """Two LOST GTC orders (possible owners for lost_memory_s) rest; the price runs through
    both. The first fill is counted for the group; the group is due at once (its window runs
    from its newest member's doubt, which began more than a window ago), so the next tick
    settles it "1 of 2 filled" and the second order's fill, seconds later, is external. A
    LOST order stops being a possible owner long before lost_memory_s, and the strategy is
    told one fill of two. Run a claimed group's window from its newest claim as well."""
    engine, _events, clock = engine_with()
    a = gone_lost(engine, clock)
    b = gone_lost(engine, clock)
    first = engine.attribute(match(1, 700))
    assert first is not None and set(first.candidates) == {a, b}
    clock.advance(1_000)
    engine.tick()
    second = engine.attribute(match(2, 701))
    assert second is not None and not second.external, "b's fill, 1 s later, is external"


# -- late fills of cancelled orders -------------------------------------------------------


def test_a_cancel_by_client_id_answered_without_an_order_id_promises_nothing_it_cannot_keep() -> (
    None
):
    """A LOST (or UNKNOWN) order cancelled by clientOrderId; the venue answers 200 with no
    order record (parse_cancel returns None for data null/true: CancelAnswer(200)). The update
    says "0 of 0.1 known to have filled (... a fill listed later comes as a match of this
    order)", but with no orderId nothing is remembered: its fill listed late reaches on_match
    as external. Query the order by clientOrderId, keep the intent a possible owner by looks
    for a window, or do not make the promise."""
    engine, events, clock = engine_with()
    a = gone_lost(engine, clock)
    assert engine.cancel("s", a)
    batch = engine.next_cancels()
    assert batch is not None and batch.by_client_id
    engine.on_cancel_answers(batch, {a: CancelAnswer(200)})
    last = [e for e in events if isinstance(e, OrderUpdate)][-1]
    assert last.status is OrderStatus.CANCELED
    assert "comes as a match of this order" not in (last.msg or ""), "a promise it cannot keep"
    assert "cannot be told apart" in (last.msg or "")


# -- a restart that misremembers ------------------------------------------------------------


def test_an_order_retired_before_a_restart_is_not_counted_as_unfilled_after_it(
    tmp_path: Path,
) -> None:
    """An IOC answered ACCEPTED, unfilled, on a venue without queryOrder is retired after a
    window (Ledger.retire: no longer tracked). Its journal row stays ACCEPTED, so every later
    restart loads it again as an open buy: max_position (67bdc59) counts its 0.1 as unfilled
    and refuses a buy the last life admitted; and load_open grows with every such order the
    journal ever held. Journal what retire decided (a final status, or a 'retired' mark that
    load_open skips) and keep the late-match link through load_done."""
    from framework.engine.risk import MAX_POSITION
    from framework.venue.models import MatchType, OrderResult

    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    risk = RiskSettings(max_position=Decimal("0.15"))
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [], risk=risk)
    coid = engine.submit("s", order(match_type=MatchType.IOC))
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_results(batch, [OrderResult(client_order_id=coid, order_id=555)])
    engine.cancels.turn_off_queries("HTTP 404")
    clock.advance(WINDOW_MS)
    engine.tick()  # retired: its fate was sealed when the venue answered
    assert engine.status(coid) is None
    journal.close()
    events: list[Event] = []
    journal = Journal.open(path)
    engine = engine_on(journal, clock, events, risk=risk)
    engine.recover()
    assert engine.status(coid) is None, "the retired IOC is tracked again"
    late = engine.attribute(MatchRecord(id=3, entrust_id=555, symbol="ETH-USD", is_long=True,
                                        quantity=Decimal("0.04")))  # fmt: skip
    assert late is not None and late.match.client_order_id == coid  # still linked
    probe = engine.submit("s", order())
    refused = [e.code for e in events if isinstance(e, OrderUpdate)
               and e.client_order_id == probe and e.status is OrderStatus.REJECTED]  # fmt: skip
    assert refused != [MAX_POSITION], "the retired IOC counts as an unfilled buy again"
    journal.close()


# -- the price filter -------------------------------------------------------------------------


def test_the_only_in_doubt_order_whose_limit_allows_a_match_is_resolved_by_it() -> None:
    """README: an intent in doubt that is "the only intent in doubt that could own a match
    (same pair, side and quantity; its price within the limit)" is FILLED by it. The price
    is only checked group-wide (DoubtGroup.admits: any member): A (limit 2000) and B (limit
    1990) form one group, and a fill at 1995, which only A can own, is counted for both,
    and the group later tells B it may have filled. Filter the group's members by price
    before counting them (a unique one resolves; the candidates are those it admits)."""
    engine, events, _clock = engine_with()
    a = unknown(engine)  # long, at most 2000
    b = engine.submit("s", order(price=Decimal("1990")))  # long, at most 1990
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_failure(batch, ServerFault("HTTP 500", http_status=500))
    found = engine.attribute(match(1, 700, price="1995"))
    assert found is not None
    assert b not in found.candidates, "b (at most 1990) counted for a fill at 1995"
    assert told(events, a)[-1] is OrderStatus.FILLED


def test_a_list_naming_every_member_of_a_counted_group_adopts_them_all() -> None:
    """A and B (same looks, UNKNOWN); a match of order 700 is counted for their group. One
    list names A (701) and B (702), both resting, nothing filled. found_open(A) settles the
    group at once, "every member left is accounted for": B AMBIGUOUS, 1 of 1 filled. The
    same list's record of B is then skipped (B is no longer UNKNOWN): B rests unfilled, is
    told it filled, and is in no open_orders(). Take every record of a list before judging a
    group complete (and a claim may be an external order's: the list just proved it)."""
    engine, events, _clock = engine_with()
    a, b = unknown(engine), unknown(engine)
    engine.attribute(match(1, 700))  # counted for {a, b}
    engine.check_open_orders(
        "ETH-USD", [Record(a, 701, Decimal(0), "open"), Record(b, 702, Decimal(0), "open")]
    )
    assert told(events, b)[-1] is OrderStatus.ACCEPTED, f"b told {told(events, b)}"
    assert [o.client_order_id for o in engine.open_orders()] == [a, b]


def test_a_match_counted_for_a_group_that_emptied_is_not_counted_for_another_at_restart(
    tmp_path: Path,
) -> None:
    """A and B (same looks) in doubt; a match is counted for their group (a COUNTED row in
    kept_matches). B's cancel by clientOrderId answers 200 as order 800, A is then listed
    as 701: the group empties (Ledger._undoubt drops it and its claims in memory) but the
    kept row stays, since only ambiguous() drops kept rows. C, same looks, is UNKNOWN at the
    kill. At restart recover_match finds no group for the row's order, takes C's (group_for)
    and settles C AMBIGUOUS "1 of 1 filled" on a fill that was not C's. Drop the kept rows of
    the claims a group forgets when it empties."""
    from tests.live.test_journal import lost

    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    journal = Journal.open(path)
    engine = engine_on(journal, clock, [])
    a, b = lost(engine, "0.1"), lost(engine, "0.1")
    counted = engine.attribute(match(1, 700))
    assert counted is not None and set(counted.candidates) == {a, b}
    assert engine.cancel("s", b)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {b: CancelAnswer(200, order_id=800)})
    engine.check_open_orders("ETH-USD", [Record(a, 701, Decimal(0), "open")])
    assert engine.status(a) is OrderStatus.ACCEPTED
    c = lost(engine, "0.1")
    engine.flush()
    journal.close()
    events: list[Event] = []
    journal, engine = restarted(path, clock, events)
    engine.recover()
    assert told(events, c) == [], "C settled on a match of its predecessors' emptied group"
    assert engine.status(c) is OrderStatus.UNKNOWN
    journal.close()
