"""Replay with nobody listening to pushes: filed undecoded, read back as the live path made them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework.backtest.recording import RecordingReader
from framework.backtest.replay import Replayer, ReplayStats
from framework.backtest.timeline import Timeline
from framework.engine.clock import VirtualClock
from framework.engine.bus import Bus
from framework.engine.events import AccountChanged, PositionChanged
from framework.engine.portfolio import Portfolio, push_router
from framework.live.recorder import RecordingWriter
from tests.engine.portfolio_views import portfolio_state
from tests.venue.frames import account_frame, position_frame

PAIRS = ("ETH-USD", "BTC-USD")
COINS = ("USD", "USDT")
COMPARED = (
    "lines",
    "ws_frames",
    "pushes_delivered",
    "position_pushes",
    "account_pushes",
    "pushes_superseded",
    "acks",
    "malformed_frames",
    "unknown_events",
    "bad_lines",
)


class Harness:
    """A Replayer wired like a backtest; listening: the bus has push subscribers from the start."""

    def __init__(self, *, listening: bool, **options: Any) -> None:
        self.clock = VirtualClock(0)
        self.timeline = Timeline(self.clock)
        self.bus = Bus()
        self.portfolio = Portfolio()
        self.seen: list[tuple[int, object]] = []
        # One handler object, so that unsubscribe finds it (a bound method is new each time).
        self.record = lambda event: self.seen.append((self.clock.ms, event))
        if listening:
            for kind in (PositionChanged, AccountChanged):
                self.bus.subscribe(kind, self.record)
        self.replayer = Replayer(
            clock=self.clock,
            timeline=self.timeline,
            route=push_router(self.portfolio, self.bus.publish),
            on_match=lambda m: None,
            portfolio=self.portfolio,
            listeners=self.bus.handler_map(),
            **options,
        )

    def run(self, path: Path) -> ReplayStats:
        return self.replayer.run(RecordingReader(path))


def stats_view(stats: ReplayStats) -> dict[str, int]:
    return {name: getattr(stats, name) for name in COMPARED}


def write_recording(path: Path) -> None:
    with RecordingWriter(path, append=False) as w:
        w.write_ws(1, position_frame(1, "0.5"))
        w.write_ws(2, position_frame(2, "2", pair="BTC-USD", direction="SHORT"))
        w.write_ws(3, position_frame(1, "1.5", "INCREASE"))
        w.write_ws(4, account_frame(10, "100"))
        w.write_ws(5, account_frame(9, "90"))  # an older logId: dropped
        w.write_ws(6, account_frame(10, "100"))  # a repeat: dropped
        w.write_ws(7, account_frame(3, "7", coin="USDT"))
        w.write_ws(8, '{"event":"api_position_res","success":true,"symbol":"ETH-USD"}')
        w.write_ws(9, '{"event":"api_account_res","success":true,"symbol":"USD"}')
        w.write_ws(10, '{"event":"ticker","data":{"symbol":"ETH-USD"}}')  # unknown event
        w.write_ws(11, "not json")
        w.write_ws(12, '{"event":"api_position","data":{"symbol":"ETH-USD"}}')  # no changeType
        w.write_line(b'{"nonsense": true}\n')  # a line that is not a record
        w.write_ws(13, position_frame(3, "4", pair="ETH-USD"))
        w.write_ws(14, position_frame(3, "0", "REDUCE"))
        w.write_ws(15, position_frame(2, None, "LIQUIDATE", pair="BTC-USD"))
        w.write_ws(16, position_frame(4, "0.25", pair="BTC-USD"))
        w.write_ws(17, account_frame(11, "95"))
        w.write_ws(18, account_frame(4, "8", coin="USDT"))


def test_a_deferred_replay_ends_where_an_eager_one_does(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_recording(path)
    eager, deferred = Harness(listening=True), Harness(listening=False)
    eager_stats, deferred_stats = eager.run(path), deferred.run(path)
    assert stats_view(deferred_stats) == stats_view(eager_stats)
    assert stats_view(eager_stats) == {
        "lines": 19,
        "ws_frames": 18,
        "pushes_delivered": 13,
        "position_pushes": 7,
        "account_pushes": 6,  # dropped ones too: the portfolio drops them, not the replay
        "pushes_superseded": 0,
        "acks": 2,
        "malformed_frames": 2,
        "unknown_events": 1,
        "bad_lines": 1,
    }
    assert portfolio_state(deferred.portfolio) == portfolio_state(eager.portfolio)
    assert str(deferred.portfolio.net_quantity("ETH-USD")) == "1.5"
    assert str(deferred.portfolio.net_quantity("BTC-USD")) == "0.25"
    assert str(deferred.portfolio.available("USD")) == "95"
    assert deferred.portfolio.counters()["stale_account_pushes"] == 1
    assert deferred.portfolio.counters()["duplicate_account_pushes"] == 1
    assert deferred.portfolio.deferred_pushes_malformed == 0
    assert len(eager.seen) == 11  # every position push, the account pushes not dropped
    assert deferred.seen == []
    assert deferred.bus.published == 0  # nothing was published: nobody would have heard it


def test_own_positions_and_coins_are_superseded_the_same_either_way(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_recording(path)
    own = {"own_positions": {1, 4}, "own_coins": {"USDT"}}
    eager, deferred = Harness(listening=True, **own), Harness(listening=False, **own)
    eager_stats, deferred_stats = eager.run(path), deferred.run(path)
    assert stats_view(deferred_stats) == stats_view(eager_stats)
    assert (eager_stats.pushes_superseded, eager_stats.pushes_delivered) == (5, 8)
    assert portfolio_state(deferred.portfolio) == portfolio_state(eager.portfolio)
    assert deferred.portfolio.positions("ETH-USD") == ()  # position 1 was the node's own
    assert deferred.portfolio.pairs() == ()
    assert deferred.portfolio.balance("USDT") is None
    assert deferred.portfolio.log_id("USDT") is None


def test_a_frame_a_peek_passes_but_the_codec_refuses_is_found_when_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.jsonl"
    bad_price = position_frame(5, "1").replace('"openingPrice":"2000"', '"openingPrice":"abc"')
    with RecordingWriter(path, append=False) as w:
        w.write_ws(1, position_frame(6, "2"))
        w.write_ws(2, bad_price)
    h = Harness(listening=False)
    stats = h.run(path)
    assert (stats.position_pushes, stats.malformed_frames) == (2, 0)  # filed by its first look
    assert h.portfolio.deferred_pushes_malformed == 0
    assert [p.position_id for p in h.portfolio.positions("ETH-USD")] == [6]
    assert h.portfolio.deferred_pushes_malformed == 1


def test_without_listeners_every_push_is_decoded_and_routed(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(1, position_frame(1, "1"))
        w.write_ws(2, account_frame(1, "5"))
    portfolio = Portfolio()
    routed: list[object] = []

    def route(push: Any) -> None:
        routed.append(push)
        push_router(portfolio, lambda e: None)(push)

    clock = VirtualClock(0)
    replayer = Replayer(
        clock=clock,
        timeline=Timeline(clock),
        route=route,
        on_match=lambda m: None,
        portfolio=portfolio,
    )
    stats = replayer.run(RecordingReader(path))
    assert [type(p).__name__ for p in routed] == ["PositionPush", "AccountPush"]
    assert (stats.position_pushes, stats.account_pushes) == (1, 1)
    assert str(portfolio.net_quantity("ETH-USD")) == "1"


def test_a_subscriber_added_after_construction_gets_its_pushes_delivered(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(100, position_frame(1, "0.5"))
        w.write_ws(200, account_frame(10, "99"))
        w.write_ws(300, position_frame(1, "0.75", "INCREASE"))
    h = Harness(listening=False)
    h.bus.subscribe(PositionChanged, h.record)  # after the Replayer was built
    stats = h.run(path)
    assert [(t, type(e).__name__) for t, e in h.seen] == [
        (100, "PositionChanged"),
        (300, "PositionChanged"),
    ]
    assert h.bus.published == 2  # the account push was filed, not published
    assert str(h.portfolio.available("USD")) == "99"
    assert str(h.portfolio.net_quantity("ETH-USD")) == "0.75"
    assert (stats.position_pushes, stats.account_pushes, stats.pushes_delivered) == (1 + 1, 1, 3)


def test_a_subscriber_removed_after_construction_lets_its_kind_be_filed(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(100, account_frame(1, "1"))
        w.write_ws(200, account_frame(3, "3"))
        w.write_ws(300, account_frame(2, "9"))  # older than 3: dropped
        w.write_ws(400, position_frame(1, "2"))
    h = Harness(listening=True)
    h.bus.unsubscribe(AccountChanged, h.record)  # after the Replayer was built
    stats = h.run(path)
    assert [type(e).__name__ for _, e in h.seen] == ["PositionChanged"]
    assert h.bus.published == 1  # the account pushes were filed, not published
    assert str(h.portfolio.available("USD")) == "3"
    assert (h.portfolio.log_id("USD"), h.portfolio.stale_account_pushes) == (3, 1)
    assert (stats.account_pushes, stats.position_pushes, stats.pushes_delivered) == (3, 1, 4)


def test_a_subscriber_added_by_a_timer_gets_the_pushes_after_it(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        for ts, log_id in ((100, 1), (200, 2), (400, 3), (500, 4)):
            w.write_ws(ts, account_frame(log_id, str(log_id)))
    clock = VirtualClock(0)
    timeline = Timeline(clock)
    bus = Bus()
    portfolio = Portfolio()
    seen: list[int] = []

    def hook(event: AccountChanged) -> None:
        seen.append(event.push.log_id)

    timeline.at(300, lambda: bus.subscribe(AccountChanged, hook))
    replayer = Replayer(
        clock=clock,
        timeline=timeline,
        route=push_router(portfolio, bus.publish),
        on_match=lambda m: None,
        portfolio=portfolio,
        listeners=bus.handler_map(),
    )
    replayer.run(RecordingReader(path))
    assert seen == [3, 4]
    assert portfolio.log_id("USD") == 4
