"""Portfolio: the logId rule, snapshots that never override newer pushes, position tracking."""

from __future__ import annotations

from decimal import Decimal

from framework.engine.events import Event
from framework.engine.portfolio import Portfolio, push_router
from framework.venue.models import (
    AccountBalance,
    AccountPush,
    ChangeType,
    Direction,
    Position,
    PositionPush,
)


def account(log_id: int, available: str, coin: str = "USD") -> AccountPush:
    return AccountPush(
        available_amount=Decimal(available),
        frozen_amount=Decimal("0"),
        log_id=log_id,
        operate_amount=Decimal("1"),
        symbol=coin,
    )


def position(
    qty: str, change: ChangeType = ChangeType.INCREASE, pid: int = 7, pair: str = "ETH-USD"
) -> PositionPush:
    return PositionPush(
        change_type=change,
        current_quantity=Decimal(qty),
        direction=Direction.SHORT,
        operate_quantity=Decimal("1"),
        position_id=pid,
        symbol=pair,
    )


def test_an_account_push_with_a_lower_log_id_is_dropped_and_counted() -> None:
    pf = Portfolio()
    assert pf.apply_account_push(account(10, "100"))
    assert not pf.apply_account_push(account(9, "50"))
    assert pf.available("USD") == Decimal("100")
    assert pf.stale_account_pushes == 1
    assert pf.log_id("USD") == 10


def test_a_repeated_log_id_is_dropped_as_a_duplicate_not_as_stale() -> None:
    pf = Portfolio()
    pf.apply_account_push(account(10, "100"))
    assert not pf.apply_account_push(account(10, "100"))
    assert pf.duplicate_account_pushes == 1
    assert pf.stale_account_pushes == 0


def test_log_ids_are_versioned_per_coin() -> None:
    pf = Portfolio()
    pf.apply_account_push(account(10, "100", "USD"))
    assert pf.apply_account_push(account(3, "7", "USDT"))
    assert pf.available("USDT") == Decimal("7")


def test_seeded_log_ids_keep_dropping_pushes_older_than_an_earlier_run_saw() -> None:
    pf = Portfolio()
    pf.seed_log_ids({"USD": 50})
    assert not pf.apply_account_push(account(49, "1"))
    assert pf.apply_account_push(account(51, "2"))


def test_a_snapshot_fetched_while_a_push_arrived_does_not_override_the_push() -> None:
    pf = Portfolio()
    pf.apply_account_push(account(10, "100"))
    mark = pf.account_mark("USD")
    pf.apply_account_push(account(11, "90"))  # arrives while the REST call is in flight
    snap = AccountBalance(symbol="USD", available_amount=Decimal("100"), frozen_amount=None)
    assert not pf.apply_balance(snap, mark=mark)
    assert pf.available("USD") == Decimal("90")
    assert pf.snapshots_ignored == 1


def test_a_snapshot_newer_than_every_push_is_applied_and_keeps_the_log_id() -> None:
    pf = Portfolio()
    pf.apply_account_push(account(10, "100"))
    mark = pf.account_mark("USD")
    snap = AccountBalance(symbol="USD", available_amount=Decimal("80"), frozen_amount=None)
    assert pf.apply_balance(snap, mark=mark)
    balance = pf.balance("USD")
    assert balance is not None and balance.from_snapshot and balance.log_id == 10
    assert not pf.apply_account_push(account(9, "1"))


def test_a_snapshot_without_a_mark_never_overrides_a_pushed_balance() -> None:
    pf = Portfolio()
    snap = AccountBalance(symbol="USD", available_amount=Decimal("5"), frozen_amount=None)
    assert pf.apply_balance(snap)
    pf.apply_account_push(account(1, "6"))
    assert not pf.apply_balance(snap)
    assert pf.available("USD") == Decimal("6")


def test_position_pushes_track_the_current_quantity_and_a_close_removes_it() -> None:
    pf = Portfolio()
    pf.apply_position_push(position("2", ChangeType.NEW))
    pf.apply_position_push(position("3"))
    assert pf.net_quantity("ETH-USD") == Decimal("-3")
    pf.apply_position_push(position("0", ChangeType.CLOSE))
    assert pf.positions("ETH-USD") == ()
    assert pf.net_quantity("ETH-USD") == 0


def test_a_position_snapshot_replaces_the_pair_and_reports_a_change() -> None:
    pf = Portfolio()
    pf.apply_position_push(position("2", ChangeType.NEW))
    snap = [Position(id=8, symbol="ETH-USD", is_long=True, quantity=Decimal("4"))]
    assert pf.apply_positions("ETH-USD", snap)
    assert pf.net_quantity("ETH-USD") == Decimal("4")
    assert not pf.apply_positions("ETH-USD", snap)
    assert pf.pairs() == ("ETH-USD",)


def test_push_router_publishes_only_pushes_that_were_not_dropped() -> None:
    pf = Portfolio()
    out: list[Event] = []
    route = push_router(pf, out.append)
    route(account(5, "1"))
    route(account(4, "2"))
    route(position("1", ChangeType.NEW))
    assert out == [account(5, "1"), position("1", ChangeType.NEW)]


def test_a_position_snapshot_fetched_while_a_push_arrived_does_not_override_the_push() -> None:
    pf = Portfolio()
    mark = pf.position_mark("ETH-USD")
    pf.apply_position_push(position("3", ChangeType.NEW))  # arrives while REST is answering
    stale = [Position(id=7, symbol="ETH-USD", is_long=False, quantity=Decimal("1"))]
    assert not pf.apply_positions("ETH-USD", stale, mark=mark)
    assert pf.net_quantity("ETH-USD") == Decimal("-3")
    assert pf.counters()["position_snapshots_ignored"] == 1


def test_a_position_snapshot_with_an_unchanged_mark_is_applied() -> None:
    pf = Portfolio()
    pf.apply_position_push(position("3", ChangeType.NEW))
    mark = pf.position_mark("ETH-USD")
    fresh = [Position(id=7, symbol="ETH-USD", is_long=False, quantity=Decimal("5"))]
    assert pf.apply_positions("ETH-USD", fresh, mark=mark)
    assert pf.net_quantity("ETH-USD") == Decimal("-5")
    assert pf.position_mark("BTC-USD") == 0
