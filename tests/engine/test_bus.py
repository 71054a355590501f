"""Bus: in-order dispatch, FIFO re-entrant publishes, failure isolation and owner stopping."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from framework.engine.bus import Bus
from framework.engine.events import ConnectionChanged, Started, Timer

AT = datetime(2024, 1, 1, tzinfo=UTC)


def test_handlers_called_in_subscription_order_for_each_event_in_publish_order() -> None:
    bus = Bus()
    seen: list[tuple[str, str]] = []
    bus.subscribe(Timer, lambda e: seen.append(("a", e.name)))
    bus.subscribe(Timer, lambda e: seen.append(("b", e.name)))
    for name in ("t1", "t2", "t3"):
        bus.publish(Timer(name, "s", AT))
    assert seen == [("a", "t1"), ("b", "t1"), ("a", "t2"), ("b", "t2"), ("a", "t3"), ("b", "t3")]


def test_dispatch_is_by_exact_type_and_unsubscribed_types_are_ignored() -> None:
    bus = Bus()
    seen: list[object] = []
    bus.subscribe(Started, seen.append)
    bus.publish(ConnectionChanged("stream", "lost"))
    bus.publish(Started(AT))
    assert seen == [Started(AT)]
    assert bus.published == 2


def test_publish_from_a_handler_is_queued_until_every_handler_saw_the_current_event() -> None:
    bus = Bus()
    seen: list[str] = []

    def first(e: Timer) -> None:
        seen.append(f"first:{e.name}")
        if e.name == "outer":
            bus.publish(Timer("inner1", "s", AT))
            bus.publish(Timer("inner2", "s", AT))

    bus.subscribe(Timer, first)
    bus.subscribe(Timer, lambda e: seen.append(f"second:{e.name}"))
    bus.publish(Timer("outer", "s", AT))
    assert seen == [
        "first:outer",
        "second:outer",
        "first:inner1",
        "second:inner1",
        "first:inner2",
        "second:inner2",
    ]


def test_a_failing_handler_is_one_line_its_traceback_at_debug_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = Bus()
    seen: list[str] = []

    def boom(e: Timer) -> None:
        raise ZeroDivisionError("kaput")

    bus.subscribe(Timer, boom, owner="bad")
    bus.subscribe(Timer, lambda e: seen.append(e.name), owner="good")
    with caplog.at_level(logging.ERROR, logger="framework.bus"):
        bus.publish(Timer("t", "s", AT))
    assert seen == ["t"]
    assert bus.handler_errors == 1
    assert bus.failures("bad") == 1
    record = next(r for r in caplog.records if "bad" in r.getMessage())
    line = boom.__code__.co_firstlineno + 1
    assert f"boom raised ZeroDivisionError: kaput (at test_bus.py:{line})" in record.getMessage()
    assert record.exc_info is None  # no traceback for a trader at INFO
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="framework.bus"):
        bus.publish(Timer("t", "s", AT))
    record = next(r for r in caplog.records if "bad" in r.getMessage())
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError


def test_an_owner_failing_more_than_max_failures_times_is_stopped_and_gets_nothing_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = Bus(max_failures=2)
    calls: list[str] = []
    stopped: list[str] = []

    def flaky(e: Timer) -> None:
        calls.append(e.name)
        raise RuntimeError("always")

    bus.subscribe(Timer, flaky, owner="flaky")
    bus.subscribe(Started, lambda e: calls.append("started"), owner="flaky")
    bus.on_owner_stopped(lambda owner, exc: stopped.append(owner))
    with caplog.at_level(logging.CRITICAL, logger="framework.bus"):
        for i in range(6):
            bus.publish(Timer(f"t{i}", "flaky", AT))
        bus.publish(Started(AT))
    assert calls == ["t0", "t1", "t2"]
    assert stopped == ["flaky"]
    assert bus.is_stopped("flaky")
    assert "failed 3 times" in bus.stopped["flaky"]
    assert any("STRATEGY STOPPED: flaky" in r.getMessage() for r in caplog.records)
    assert bus.subscribers(Timer) == 0


def test_handlers_without_owner_are_never_stopped() -> None:
    bus = Bus(max_failures=0)
    calls: list[int] = []

    def infra(e: Timer) -> None:
        calls.append(1)
        raise ValueError("infra")

    bus.subscribe(Timer, infra)
    for _ in range(3):
        bus.publish(Timer("t", "s", AT))
    assert calls == [1, 1, 1]
    assert bus.stopped == {}


def test_a_failure_inside_a_reentrant_publish_keeps_the_queue_order() -> None:
    bus = Bus()
    seen: list[str] = []

    def relay(e: Timer) -> None:
        if e.name == "a":
            bus.publish(Timer("b", "s", AT))
            raise RuntimeError("after queueing")
        seen.append(e.name)

    bus.subscribe(Timer, relay, owner="relay")
    bus.subscribe(Timer, lambda e: seen.append("tail:" + e.name))
    bus.publish(Timer("a", "s", AT))
    bus.publish(Timer("c", "s", AT))
    assert seen == ["tail:a", "b", "tail:b", "c", "tail:c"]


def test_unsubscribe_removes_only_that_handler() -> None:
    bus = Bus()
    seen: list[str] = []

    def a(e: Timer) -> None:
        seen.append("a")

    def b(e: Timer) -> None:
        seen.append("b")

    bus.subscribe(Timer, a)
    bus.subscribe(Timer, b)
    bus.unsubscribe(Timer, a)
    bus.publish(Timer("t", "s", AT))
    assert seen == ["b"]


def test_a_bound_method_is_unsubscribed_by_the_same_expression() -> None:
    class Hooks:
        def __init__(self) -> None:
            self.seen = 0

        def on_timer(self, event: Timer) -> None:
            self.seen += 1

    hooks = Hooks()
    bus = Bus()
    bus.subscribe(Timer, hooks.on_timer)
    bus.unsubscribe(Timer, hooks.on_timer)  # a new bound-method object, equal to the first
    bus.publish(Timer("t", "s", AT))
    assert (hooks.seen, bus.subscribers(Timer)) == (0, 0)


class BrokenText(Exception):
    """A user's exception whose __str__ fails."""

    def __str__(self) -> str:
        return f"code {self.code}"  # type: ignore[attr-defined]  # never set


def test_an_exception_whose_text_fails_is_still_isolated_and_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = Bus(max_failures=0)
    seen: list[str] = []

    def bad(e: Timer) -> None:
        raise BrokenText

    bus.subscribe(Timer, bad, owner="bad")
    bus.subscribe(Timer, lambda e: seen.append(e.name), owner="good")
    with caplog.at_level(logging.ERROR, logger="framework.bus"):
        bus.publish(Timer("t", "s", AT))
    assert seen == ["t"]
    assert bus.is_stopped("bad")
    told = [r.getMessage() for r in caplog.records]
    assert any("bad raised BrokenText: <BrokenText: str() failed>" in m for m in told), told
