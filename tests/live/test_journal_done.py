"""Ended orders across a restart: late fills find their order, LOST ones may still be adopted,
and the journal's filled is what the engine knows in every terminal state."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

from framework.engine.cancels import CancelAnswer
from framework.engine.clock import VirtualClock
from framework.engine.events import Event, OrderUpdate
from framework.engine.intents import OrderStatus
from framework.live.journal import Journal
from framework.venue.models import MatchRecord
from tests.engine.test_cancels import Record
from tests.live.test_journal import START_MS, accepted_as, engine_on, in_doubt, restarted


def journal_filled(path: Path, client_order_id: str) -> tuple[str, str]:
    """(status, filled) of an intent as the journal's intents table holds it."""
    Journal.open(path).close()  # fold the log
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT status, filled FROM intents WHERE client_order_id = ?", (client_order_id,)
        ).fetchone()
    return row[0], row[1]


def match(match_id: int, order_id: int, quantity: str) -> MatchRecord:
    """A match record of order_id (0.1 long at 2000.5 orders: see tests.live.test_journal)."""
    return MatchRecord(
        id=match_id, entrust_id=order_id, symbol="ETH-USD", is_long=True,
        quantity=Decimal(quantity), average_price=Decimal("2000"),
    )  # fmt: skip


def test_a_late_match_of_an_order_cancelled_before_a_kill_names_it_after_the_restart(
    tmp_path: Path,
) -> None:
    # Measured: filled 0.02 of 0.05 before a cancel answered 200 without a filled quantity;
    # killed; after the restart its match reached on_match with client_order_id None.
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = accepted_as(path, clock, 555)
    journal, engine = restarted(path, clock, [])
    engine.recover()
    engine.cancel("s", coid)
    batch = engine.next_cancels()
    assert batch is not None
    engine.on_cancel_answers(batch, {555: CancelAnswer(200)})
    engine.flush()
    journal._conn.close()  # killed: nothing more is written (no close, no fold)
    events: list[Event] = []
    engine = engine_on(Journal.open(path), clock, events)
    engine.recover()
    late = engine.attribute(match(7, 555, "0.02"))
    assert late is not None and not late.external
    assert (late.match.client_order_id, late.strategy) == (coid, "s")
    engine.flush()
    assert journal_filled(path, coid) == ("CANCELED", "0.02")
    assert [e for e in events if isinstance(e, OrderUpdate)] == []  # CANCELED stays as told


def test_a_late_match_of_a_filled_order_is_no_evidence_for_an_intent_in_doubt_after_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = accepted_as(path, clock, 555)  # 0.1 long at 2000.5
    journal, engine = restarted(path, clock, [])
    engine.recover()
    engine.attribute(match(1, 555, "0.1"))  # FILLED
    journal.close()
    doubtful = in_doubt(path, clock)  # a same-looking intent, its answer lost
    events: list[Event] = []
    engine = engine_on(Journal.open(path), clock, events)
    engine.recover()
    late = engine.attribute(match(2, 555, "0.1"))  # listed late (a re-read): 555's, coid's
    assert late is not None and late.match.client_order_id == coid
    assert engine.status(doubtful) is OrderStatus.UNKNOWN


def test_an_order_filled_by_a_query_at_restart_has_its_quantity_as_filled_in_the_journal(
    tmp_path: Path,
) -> None:
    # Measured: filled stayed 0 for orders FILLED by a query at restart.
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = accepted_as(path, clock, 555)
    journal, engine = restarted(path, clock, [])
    assert engine.apply_order_record(Record(coid, 555, None, "filled")) == "filled"
    engine.recover()
    journal.close()
    assert journal_filled(path, coid) == ("FILLED", "0.1")


def test_a_lost_order_of_the_last_life_is_adopted_by_the_start_up_list(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    clock = VirtualClock(START_MS)
    coid = in_doubt(path, clock)
    journal, engine = restarted(path, clock, [])
    clock.advance(60_000)
    engine.tick()  # LOST
    journal.close()
    events: list[Event] = []
    journal, engine = restarted(path, clock, events)
    assert engine.adopt("ETH-USD", [Record(coid, 777, Decimal(0), "open")])["adopted"] == 1
    engine.recover()
    assert [(o.client_order_id, o.order_id) for o in engine.open_orders()] == [(coid, 777)]
    assert [e.status for e in events if isinstance(e, OrderUpdate)] == [OrderStatus.ACCEPTED]
    journal.close()
