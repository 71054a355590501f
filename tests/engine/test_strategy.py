"""Strategies: loading by 'module:Class', the dispatch rule, delegation to the context."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from framework.engine.bus import Bus
from framework.engine.clock import VirtualClock
from framework.engine.events import (
    MatchFilled,
    OrderUpdate,
    Started,
    Stopping,
    Timer,
)
from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.portfolio import Portfolio
from framework.engine.strategy import (
    BasicContext,
    Strategy,
    StrategyLoadError,
    attach,
    load_strategy,
)
from framework.venue.models import AccountPush, ChangeType, MatchRecord, PositionPush

AT = datetime(2024, 1, 1, tzinfo=UTC)


class Recorder(Strategy):
    """Records every hook call."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.calls: list[tuple[str, object]] = []

    def on_start(self) -> None:
        self.calls.append(("start", None))

    def on_position(self, push: PositionPush) -> None:
        self.calls.append(("position", push.symbol))

    def on_account(self, push: AccountPush) -> None:
        self.calls.append(("account", push.log_id))

    def on_match(self, match: MatchRecord) -> None:
        self.calls.append(("match", (match.id, match.client_order_id)))

    def on_order(self, update: OrderUpdate) -> None:
        self.calls.append(("order", update.client_order_id))

    def on_timer(self, name: str) -> None:
        self.calls.append(("timer", name))

    def on_stop(self) -> None:
        self.calls.append(("stop", None))


class NotAStrategy:
    """A class that is not a Strategy."""


def not_a_class() -> None:
    """A function, not a class."""


def make_context(
    submitted: list[tuple[str, OrderIntent]] | None = None,
    scheduled: list[tuple[str, str, float]] | None = None,
) -> BasicContext:
    sink = submitted if submitted is not None else []

    def submit(strategy: str, intent: OrderIntent) -> str:
        sink.append((strategy, intent))
        return f"c{len(sink)}"

    def schedule(strategy: str, name: str, every_s: float) -> None:
        if scheduled is not None:
            scheduled.append((strategy, name, every_s))

    return BasicContext(Portfolio(), VirtualClock(1_700_000_000_000), submit, schedule)


def pos(pair: str) -> PositionPush:
    return PositionPush(change_type=ChangeType.NEW, current_quantity=Decimal(1), symbol=pair)


def match(mid: int, pair: str = "ETH-USD", coid: str | None = None) -> MatchRecord:
    return MatchRecord(id=mid, entrust_id=99, symbol=pair, client_order_id=coid)


def test_load_strategy_returns_the_named_subclass() -> None:
    assert load_strategy("tests.engine.test_strategy:Recorder") is Recorder


def test_load_strategy_reports_a_missing_module() -> None:
    with pytest.raises(StrategyLoadError, match=r"module 'no_such_pkg\.mod' not found"):
        load_strategy("no_such_pkg.mod:Thing")


def test_load_strategy_reports_a_missing_class_and_lists_what_is_there() -> None:
    with pytest.raises(StrategyLoadError, match=r"has no 'Nope'.*Recorder"):
        load_strategy("tests.engine.test_strategy:Nope")


def test_load_strategy_refuses_a_class_that_is_not_a_strategy() -> None:
    with pytest.raises(StrategyLoadError, match="class NotAStrategy is not a subclass"):
        load_strategy("tests.engine.test_strategy:NotAStrategy")


def test_load_strategy_refuses_something_that_is_not_a_class() -> None:
    with pytest.raises(StrategyLoadError, match="function is not a subclass"):
        load_strategy("tests.engine.test_strategy:not_a_class")


def test_load_strategy_refuses_a_spec_without_a_colon() -> None:
    with pytest.raises(StrategyLoadError, match="expected the form 'module:ClassName'"):
        load_strategy("tests.engine.test_strategy.Recorder")


def test_load_strategy_reports_an_import_failing_inside_the_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_strategy_mod.py").write_text("import not_installed_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(StrategyLoadError, match=r"failed to import.*not_installed_dependency_xyz"):
        load_strategy("broken_strategy_mod:Whatever")


def test_order_updates_and_timers_reach_only_the_named_strategy() -> None:
    bus = Bus()
    ctx = make_context()
    a, b = Recorder("a", ctx), Recorder("b", ctx)
    attach(bus, a)
    attach(bus, b)
    bus.publish(OrderUpdate("c1", OrderStatus.ACCEPTED, "b"))
    bus.publish(Timer("tick", "a", AT))
    assert a.calls == [("timer", "tick")]
    assert b.calls == [("order", "c1")]


def test_a_match_keeps_its_client_order_id_only_for_the_owning_strategy() -> None:
    bus = Bus()
    ctx = make_context()
    owner, other = Recorder("owner", ctx), Recorder("other", ctx)
    attach(bus, owner)
    attach(bus, other)
    bus.publish(MatchFilled(match(5, coid="c9"), strategy="owner"))
    assert owner.calls == [("match", (5, "c9"))]
    assert other.calls == [("match", (5, None))]


def test_pushes_and_matches_reach_only_strategies_trading_the_pair() -> None:
    bus = Bus()
    ctx = make_context()
    eth = Recorder("eth", ctx, {"pair": "ETH-USD"})
    btc = Recorder("btc", ctx, pairs=["BTC-USD"])
    everything = Recorder("all", ctx)
    for s in (eth, btc, everything):
        attach(bus, s)
    bus.publish(pos("ETH-USD"))
    bus.publish(MatchFilled(match(1, "BTC-USD")))
    bus.publish(AccountPush(log_id=3, symbol="USD"))
    assert eth.calls == [("position", "ETH-USD"), ("account", 3)]
    assert btc.calls == [("match", (1, None)), ("account", 3)]
    assert everything.calls == [("position", "ETH-USD"), ("match", (1, None)), ("account", 3)]


def test_the_owner_hears_of_its_fill_even_on_a_pair_it_does_not_list() -> None:
    bus = Bus()
    s = Recorder("s", make_context(), pairs=["ETH-USD"])
    attach(bus, s)
    bus.publish(MatchFilled(match(3, "BTC-USD", coid="x"), strategy="s"))
    assert s.calls == [("match", (3, "x"))]


def test_started_and_stopping_call_on_start_and_on_stop() -> None:
    bus = Bus()
    s = Recorder("s", make_context())
    attach(bus, s)
    bus.publish(Started(AT))
    bus.publish(Stopping(AT, "done"))
    assert s.calls == [("start", None), ("stop", None)]


def test_hooks_that_are_not_overridden_are_not_subscribed() -> None:
    class OnlyTimer(Strategy):
        def on_timer(self, name: str) -> None:
            pass

    bus = Bus()
    attach(bus, OnlyTimer("t", make_context()))
    assert list(bus.event_types()) == [Timer]


def test_submit_and_submit_many_delegate_to_the_context_with_the_strategy_name() -> None:
    submitted: list[tuple[str, OrderIntent]] = []
    s = Strategy("mm", make_context(submitted))
    i1 = OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal("1"), price=Decimal("10"))
    i2 = OrderIntent(pair="ETH-USD", is_long=False, quantity=Decimal("2"))
    assert s.submit(i1) == "c1"
    assert s.submit_many([i1, i2]) == ["c2", "c3"]
    assert [name for name, _ in submitted] == ["mm", "mm", "mm"]
    assert submitted[2][1] is i2


def test_params_portfolio_now_log_and_schedule_come_from_the_runtime() -> None:
    scheduled: list[tuple[str, str, float]] = []
    ctx = make_context(scheduled=scheduled)
    s = Strategy("grid", ctx, {"levels": 3})
    s.schedule("rebalance", 2.5)
    assert s.params == {"levels": 3}
    assert s.portfolio is ctx.portfolio
    assert s.now() == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert s.log.name == "strategy.grid"
    assert scheduled == [("grid", "rebalance", 2.5)]
    with pytest.raises(ValueError, match="every_s must be positive"):
        s.schedule("bad", 0)


def test_a_failing_strategy_is_isolated_then_stopped_while_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Crashing(Strategy):
        def on_position(self, push: PositionPush) -> None:
            raise KeyError("bug in strategy")

    bus = Bus(max_failures=1)
    ctx = make_context()
    bad, good = Crashing("bad", ctx), Recorder("good", ctx)
    attach(bus, bad)
    attach(bus, good)
    with caplog.at_level(logging.ERROR):
        for _ in range(4):
            bus.publish(pos("ETH-USD"))
    assert good.calls == [("position", "ETH-USD")] * 4
    assert bus.failures("bad") == 2
    assert bad.stopped and not good.stopped
    # the log names the strategy and the hook, never attach.<locals>.<lambda>
    assert any("on_position raised KeyError" in r.getMessage() for r in caplog.records)
    assert not any("<locals>" in r.getMessage() for r in caplog.records)
