"""The ledger's memory of done orders: bounded, newest first, in generations."""

from __future__ import annotations

from framework.engine.reconcile import DONE_CHUNK, Ledger


def test_the_newest_done_memory_ids_are_remembered_and_no_more_than_a_generation_beyond() -> None:
    ledger = Ledger(done_memory=2500)
    for order_id in range(10_000):
        ledger._remember(order_id, (f"c{order_id}", "s", ()))
    assert all(ledger.knows(i) for i in range(10_000 - 2500, 10_000))
    assert ledger.recently_done(9_999) == ("c9999", "s", ())
    kept = [i for i in range(10_000) if ledger.knows(i)]
    assert 2500 <= len(kept) <= 2500 + 2 * DONE_CHUNK  # whole generations of DONE_CHUNK
    assert kept == list(range(10_000 - len(kept), 10_000))  # the oldest go first
