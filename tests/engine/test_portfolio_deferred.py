"""Deferred pushes: a portfolio that files frames undecoded reads exactly as eager application."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.engine.portfolio import FilingQueues, Portfolio
from framework.venue.codec import DEFAULT_CODEC
from framework.venue.models import (
    AccountBalance,
    AccountPush,
    ChangeType,
    Direction,
    Position,
    PositionPush,
)
from framework.venue.peek import (
    AccountRoute,
    ChangeTypeText,
    PositionHead,
    PositionRoute,
    peek_push,
)
from tests.engine.portfolio_views import portfolio_state
from tests.venue.frames import account_frame, position_frame

PAIRS = ("ETH-USD", "BTC-USD")
COINS = ("USD", "USDT")


def apply_eagerly(pf: Portfolio, frame: str) -> bool | None:
    """The live path: decode with the codec, then apply (the account push's verdict)."""
    push = DEFAULT_CODEC.decode_frame(orjson.loads(frame))
    if isinstance(push, PositionPush):
        pf.apply_position_push(push)
        return None
    assert isinstance(push, AccountPush)
    return pf.apply_account_push(push)


def pos(
    pair: str, position_id: int | None, quantity: str | None, change: ChangeTypeText
) -> PositionRoute:
    """The routing fields of a position push."""
    return PositionRoute(
        symbol=pair, position_id=position_id, current_quantity=quantity, change_type=change
    )


def acc(coin: str, log_id: int) -> AccountRoute:
    """The routing fields of an account push."""
    return AccountRoute(symbol=coin, log_id=log_id)


def defer(pf: Portfolio, frame: str) -> bool | None:
    """The replay's path when nobody listens: a first look, then file the frame undecoded."""
    head = peek_push(frame)
    if isinstance(head, PositionHead):
        pf.defer_position_push(head.data, frame)
        return None
    return pf.defer_account_push(head.data, frame)


# ---- the property

amounts = st.decimals(
    min_value=Decimal("0.001"), max_value=Decimal(5000), places=3, allow_nan=False
).map(str)
quantities = st.one_of(st.sampled_from(["0", "0.000", "0E-8", None]), amounts)

position_pushes = st.builds(
    position_frame,
    pair=st.sampled_from(PAIRS),
    position_id=st.sampled_from([1, 2, 3, None]),
    quantity=quantities,
    change=st.sampled_from([c.value for c in ChangeType]),
    direction=st.sampled_from([d.value for d in Direction]),
    opening_price=amounts,
    margin=amounts,
).map(lambda f: ("frame", f))

account_pushes = st.builds(
    account_frame,
    log_id=st.integers(1, 8),  # repeats and logIds going back
    available=amounts,
    coin=st.sampled_from(COINS),
    frozen=st.sampled_from(["0", "1.5"]),
).map(lambda f: ("frame", f))

position_snapshots = st.tuples(
    st.just("positions"),
    st.sampled_from(PAIRS),
    st.lists(
        st.tuples(st.sampled_from([1, 2, 4]), st.booleans(), st.sampled_from(["0", "2", "3.5"])),
        max_size=2,
        unique_by=lambda p: p[0],
    ),
    st.sampled_from([None, 0, -1]),  # no mark, the current mark, a mark taken before a push
)

balance_snapshots = st.tuples(
    st.just("balance"),
    st.sampled_from(COINS),
    st.sampled_from(["7", "8.25"]),
    st.sampled_from([None, 0, -1]),
)

reads = st.just(("read",))

steps = st.lists(
    st.one_of(position_pushes, account_pushes, position_snapshots, balance_snapshots, reads),
    max_size=40,
)


def mark_of(current: int, offset: int | None) -> int | None:
    return None if offset is None else current + offset


def queue(pf: Portfolio, frame: str) -> None:
    """The replay's fastest path: append to the filing queues, filed when next asked."""
    head = peek_push(frame)
    queues = pf.filing_queues()
    if isinstance(head, PositionHead):
        queues.position_routes.append(head.data)
        queues.position_frames.append(frame)
    else:
        queues.account_routes.append(head.data)
        queues.account_frames.append(frame)


def run_steps(steps: list[tuple[Any, ...]], *, queued: bool) -> None:
    eager, deferred = Portfolio(), Portfolio()
    for step in steps:
        kind = step[0]
        if kind == "frame":
            verdict = apply_eagerly(eager, step[1])
            if queued:
                queue(deferred, step[1])
            else:
                assert defer(deferred, step[1]) == verdict
        elif kind == "positions":
            _, pair, items, offset = step
            snapshot = [
                Position(id=pid, symbol=pair, is_long=is_long, quantity=Decimal(qty))
                for pid, is_long, qty in items
            ]
            results = [
                pf.apply_positions(pair, snapshot, mark=mark_of(pf.position_mark(pair), offset))
                for pf in (eager, deferred)
            ]
            assert results[0] == results[1]
        elif kind == "balance":
            _, coin, available, offset = step
            snap = AccountBalance(
                symbol=coin, available_amount=Decimal(available), frozen_amount=None
            )
            results = [
                pf.apply_balance(snap, mark=mark_of(pf.account_mark(coin), offset))
                for pf in (eager, deferred)
            ]
            assert results[0] == results[1]
        else:
            assert portfolio_state(deferred) == portfolio_state(eager)
    assert portfolio_state(deferred) == portfolio_state(eager)
    assert deferred.deferred_pushes_malformed == 0
    assert eager.deferred_pushes_malformed == 0


@settings(max_examples=300, deadline=None)
@given(steps=steps)
def test_deferred_pushes_read_exactly_as_eagerly_applied_ones(steps: list[tuple[Any, ...]]) -> None:
    run_steps(steps, queued=False)


@settings(max_examples=300, deadline=None)
@given(steps=steps)
def test_pushes_filed_in_batches_read_exactly_as_eagerly_applied_ones(
    steps: list[tuple[Any, ...]],
) -> None:
    run_steps(steps, queued=True)


def test_queued_pushes_are_filed_before_the_portfolio_is_asked_anything() -> None:
    pf = Portfolio()
    queue(pf, position_frame(position_id=1, quantity="2"))
    queue(pf, position_frame(position_id=1, quantity="0", change="CLOSE"))
    queue(pf, position_frame(position_id=2, quantity="5", direction="SHORT"))
    queue(pf, account_frame(3, "30"))
    queue(pf, account_frame(2, "20"))  # older than 3: stale
    queue(pf, account_frame(3, "31"))  # equal to 3: a repeat
    assert pf.position_mark("ETH-USD") == 3  # every push counts, even those a later one undid
    assert pf.net_quantity("ETH-USD") == Decimal("-5")
    assert pf.available("USD") == Decimal("30")
    assert (pf.stale_account_pushes, pf.duplicate_account_pushes) == (1, 1)
    assert (pf.log_id("USD"), pf.account_mark("USD")) == (3, 1)
    assert pf.filing_queues() == FilingQueues()


# ---- the rules, one at a time


def test_a_kept_frame_is_decoded_only_when_read() -> None:
    pf = Portfolio()
    pf.defer_position_push(pos("ETH-USD", 7, "2", "NEW"), position_frame(quantity="2"))
    assert pf.position_mark("ETH-USD") == 1
    (state_,) = pf.positions("ETH-USD")
    assert (state_.position_id, state_.is_long, state_.quantity) == (7, True, Decimal("2"))
    assert state_.opening_price == Decimal("2000")
    assert pf.pairs() == ("ETH-USD",)


def test_a_zero_quantity_or_a_close_without_one_removes_the_position() -> None:
    pf = Portfolio()
    for pid in (1, 2, 3):
        pf.defer_position_push(pos("ETH-USD", pid, "1", "NEW"), position_frame(position_id=pid))
    pf.defer_position_push(pos("ETH-USD", 1, "0.000", "REDUCE"), position_frame(position_id=1))
    pf.defer_position_push(pos("ETH-USD", 2, None, "LIQUIDATE"), position_frame(position_id=2))
    pf.defer_position_push(pos("ETH-USD", 3, None, "INCREASE"), position_frame(position_id=3))
    assert [p.position_id for p in pf.positions("ETH-USD")] == [3]
    assert pf.deferred_pushes_malformed == 0


def test_a_kept_position_with_a_bad_amount_is_dropped_when_read_and_counted() -> None:
    pf = Portfolio()
    good = position_frame(position_id=1, quantity="1")
    bad = position_frame(position_id=2, quantity="3", opening_price="abc")
    pf.defer_position_push(pos("ETH-USD", 1, "1", "NEW"), good)
    pf.defer_position_push(pos("ETH-USD", 2, "3", "NEW"), bad)
    assert pf.deferred_pushes_malformed == 0  # nothing is decoded until someone reads
    assert [p.position_id for p in pf.positions("ETH-USD")] == [1]
    assert pf.net_quantity("ETH-USD") == Decimal("1")
    assert pf.deferred_pushes_malformed == 1
    assert pf.counters()["deferred_pushes_malformed"] == 1


def test_a_pair_whose_only_kept_position_is_bad_is_not_listed() -> None:
    pf = Portfolio()
    bad = position_frame(pair="BTC-USD", quantity="2", direction="UP")
    pf.defer_position_push(pos("BTC-USD", 7, "2", "NEW"), bad)
    pf.defer_position_push(pos("ETH-USD", 8, "1", "NEW"), position_frame(position_id=8))
    assert pf.pairs() == ("ETH-USD",)
    assert pf.positions("BTC-USD") == ()
    assert pf.net_quantity("BTC-USD") == 0
    assert pf.deferred_pushes_malformed == 1  # dropped once, not counted again on every read


def test_a_kept_frame_of_the_wrong_kind_is_dropped_and_counted() -> None:
    pf = Portfolio()
    pf.defer_position_push(pos("ETH-USD", 7, "1", "NEW"), account_frame(1, "5"))
    pf.defer_account_push(acc("USD", 3), position_frame())
    assert pf.positions("ETH-USD") == ()
    assert pf.balance("USD") is None
    assert pf.deferred_pushes_malformed == 2


def test_a_kept_frame_that_is_not_json_is_dropped_and_counted() -> None:
    pf = Portfolio()
    pf.defer_position_push(pos("ETH-USD", 7, "1", "NEW"), '{"event":"api_position",')
    assert pf.net_quantity("ETH-USD") == 0
    assert pf.deferred_pushes_malformed == 1


def test_a_kept_balance_with_a_bad_amount_reads_as_unknown_and_is_counted() -> None:
    pf = Portfolio()
    assert pf.defer_account_push(acc("USD", 5), account_frame(5, "100"))
    assert pf.available("USD") == Decimal("100")
    assert pf.defer_account_push(acc("USD", 6), account_frame(6, "lots"))
    assert pf.balance("USD") is None
    assert pf.available("USD") is None
    assert pf.deferred_pushes_malformed == 1
    assert pf.log_id("USD") == 6  # the logId was taken when the push was filed
    assert not pf.defer_account_push(acc("USD", 5), account_frame(5, "100"))
    assert pf.stale_account_pushes == 1


def test_deferred_account_pushes_follow_the_log_id_rule() -> None:
    pf = Portfolio()
    assert pf.defer_account_push(acc("USD", 10), account_frame(10, "100"))
    assert not pf.defer_account_push(acc("USD", 9), account_frame(9, "50"))
    assert not pf.defer_account_push(acc("USD", 10), account_frame(10, "60"))
    assert pf.defer_account_push(acc("USDT", 1), account_frame(1, "7", coin="USDT"))
    assert (pf.stale_account_pushes, pf.duplicate_account_pushes) == (1, 1)
    assert pf.available("USD") == Decimal("100")
    assert pf.available("USDT") == Decimal("7")
    assert (pf.account_mark("USD"), pf.account_mark("USDT")) == (1, 1)


def test_a_snapshot_after_deferred_pushes_compares_with_what_they_made() -> None:
    pf = Portfolio()
    pf.defer_position_push(pos("ETH-USD", 7, "2", "NEW"), position_frame(quantity="2"))
    mark = pf.position_mark("ETH-USD")
    same = [Position(id=7, symbol="ETH-USD", is_long=True, quantity=Decimal("2"))]
    assert not pf.apply_positions("ETH-USD", same, mark=mark)  # the kept frame says the same
    (state_,) = pf.positions("ETH-USD")
    assert state_.from_snapshot
    pf.defer_position_push(pos("ETH-USD", 7, "3", "INCREASE"), position_frame(quantity="3"))
    other = [Position(id=7, symbol="ETH-USD", is_long=False, quantity=Decimal("3"))]
    assert pf.apply_positions("ETH-USD", other, mark=pf.position_mark("ETH-USD"))
    assert pf.net_quantity("ETH-USD") == Decimal("-3")


def test_a_snapshot_taken_before_a_deferred_push_is_ignored() -> None:
    pf = Portfolio()
    mark = pf.position_mark("ETH-USD")
    pf.defer_position_push(pos("ETH-USD", 7, "2", "NEW"), position_frame(quantity="2"))
    stale = [Position(id=7, symbol="ETH-USD", is_long=True, quantity=Decimal("1"))]
    assert not pf.apply_positions("ETH-USD", stale, mark=mark)
    assert pf.net_quantity("ETH-USD") == Decimal("2")
    assert pf.counters()["position_snapshots_ignored"] == 1


def test_a_snapshot_replacing_a_bad_kept_frame_reports_a_change() -> None:
    pf = Portfolio()
    bad = position_frame(quantity="2", margin="n/a")
    pf.defer_position_push(pos("ETH-USD", 7, "2", "NEW"), bad)
    fresh = [Position(id=7, symbol="ETH-USD", is_long=True, quantity=Decimal("2"))]
    assert pf.apply_positions("ETH-USD", fresh, mark=pf.position_mark("ETH-USD"))
    assert pf.deferred_pushes_malformed == 1
    assert pf.net_quantity("ETH-USD") == Decimal("2")


def test_a_balance_snapshot_after_a_deferred_push_obeys_the_mark() -> None:
    pf = Portfolio()
    pf.defer_account_push(acc("USD", 4), account_frame(4, "100"))
    snap = AccountBalance(symbol="USD", available_amount=Decimal("100"), frozen_amount=Decimal(0))
    assert not pf.apply_balance(snap)  # no mark: a push was seen
    mark = pf.account_mark("USD")
    assert not pf.apply_balance(snap, mark=mark)  # applied, and the kept frame said the same
    balance = pf.balance("USD")
    assert balance is not None and balance.from_snapshot and balance.log_id == 4
    assert pf.snapshots_ignored == 1
