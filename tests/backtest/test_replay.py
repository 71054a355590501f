"""The replay loop: virtual time, timers between records, the live decode/portfolio/bus path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from framework.backtest.replay import Replayer
from framework.backtest.timeline import PRICES, SAMPLES, Timeline
from framework.engine.bus import Bus
from framework.engine.clock import VirtualClock
from framework.engine.events import MatchFilled
from framework.engine.portfolio import Portfolio, push_routes
from framework.recording import RecordingReader, RecordingWriter
from framework.twin import wire
from framework.venue.models import AccountPush, MatchRecord, PositionPush
from framework.venue.requests import BALANCE_PATH, MATCHES_PATH
from tests.venue.frames import account_frame, position_frame


def match(match_id: int, entrust_id: int = 7) -> dict[str, Any]:
    return {
        "id": match_id,
        "entrustId": entrust_id,
        "contractPositionId": 1,
        "symbol": "ETH-USD",
        "averagePrice": "2000",
        "quantity": "0.01",
        "createTime": "2024-01-01 00:00:00",
        "createTimeStamp": 1_000,
        "isLong": True,
    }


def page(*ids: int) -> str:
    return orjson.dumps(wire.envelope(200, "SUCCESS", [match(i) for i in ids], 1)).decode()


class Harness:
    """A Replayer wired like a backtest: portfolio, bus, and what reached subscribers."""

    def __init__(self, **options: Any) -> None:
        self.clock = VirtualClock(0)
        self.timeline = Timeline(self.clock)
        self.bus = Bus()
        self.portfolio = Portfolio()
        self.seen: list[tuple[int, object]] = []
        for kind in (PositionPush, AccountPush, MatchFilled):
            self.bus.subscribe(kind, lambda e: self.seen.append((self.clock.ms, e)))
        self.replayer = Replayer(
            clock=self.clock,
            timeline=self.timeline,
            routes=push_routes(self.portfolio, self.bus.publish),
            on_match=lambda m: self.bus.publish(MatchFilled(m, None, True)),
            **options,
        )

    def run(self, path: Path) -> None:
        self.replayer.run(RecordingReader(path))


def test_pushes_reach_the_portfolio_and_bus_at_their_record_time(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(100, position_frame(1, "0.5"))
        w.write_ws(250, account_frame(10, "99"))
    h = Harness()
    h.run(path)
    assert [(t, type(e).__name__) for t, e in h.seen] == [
        (100, "PositionPush"),
        (250, "AccountPush"),
    ]
    assert str(h.portfolio.net_quantity("ETH-USD")) == "0.5"
    assert str(h.portfolio.available("USD")) == "99"
    assert h.replayer.stats.pushes_delivered == 2


def test_timers_fire_between_records_in_time_order(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        for ts in (100, 400, 900):
            w.write_ws(ts, account_frame(ts, "1"))
    h = Harness()
    fired: list[int] = []
    h.timeline.every(300, lambda: fired.append(h.clock.ms), first_ms=300)
    h.bus.subscribe(AccountPush, lambda e: fired.append(-h.clock.ms))
    h.run(path)
    assert fired == [-100, 300, -400, 600, 900, -900]


def test_time_never_goes_back(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(500, account_frame(1, "1"))
        w.write_ws(400, account_frame(2, "2"))
    h = Harness()
    h.run(path)
    assert [t for t, _ in h.seen] == [500, 500]
    assert h.replayer.stats.time_went_back == 1


def test_stale_account_pushes_are_dropped_by_the_portfolio_as_live(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(1, account_frame(5, "10"))
        w.write_ws(2, account_frame(4, "9"))  # an older logId: never shown
        w.write_ws(3, position_frame(1, "1"))
    h = Harness()
    h.run(path)
    assert [type(e).__name__ for _, e in h.seen] == ["AccountPush", "PositionPush"]
    assert h.portfolio.stale_account_pushes == 1
    assert str(h.portfolio.available("USD")) == "10"


def test_bad_frames_and_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(1, "not json")
        w.write_ws(2, '{"event":"api_position","data":{"symbol":"ETH-USD"}}')
        w.write_ws(3, '{"event":"ticker"}')
        w.write_ws(4, '{"event":"api_account_res","success":true,"symbol":"USD"}')
        w.write_line(b'{"nonsense": true}\n')
        w.write_ws(5, account_frame(1, "1"))
    h = Harness()
    h.run(path)
    stats = h.replayer.stats
    assert (stats.malformed_frames, stats.unknown_events, stats.acks, stats.bad_lines) == (
        2,
        1,
        1,
        1,
    )
    assert len(h.seen) == 1


def test_own_positions_and_coins_are_superseded(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_ws(1, position_frame(1, "1"))
        w.write_ws(2, position_frame(2, "3"))
        w.write_ws(3, account_frame(1, "5"))
    h = Harness(own_positions={1}, own_coins={"USD"})
    h.run(path)
    assert [type(e).__name__ for _, e in h.seen] == ["PositionPush"]
    assert h.replayer.stats.pushes_superseded == 2
    assert str(h.portfolio.net_quantity("ETH-USD")) == "3"


def test_match_pages_are_paged_as_the_live_poller_does(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_rest(1, MATCHES_PATH, "pageSize=2&pairName=ETH-USD", page(3, 2))  # first start
        w.write_rest(2, MATCHES_PATH, "pageSize=2&pairName=ETH-USD", page(7, 6))
        w.write_rest(3, MATCHES_PATH, "matchId=6&pageSize=2&pairName=ETH-USD", page(5, 4))
        w.write_rest(4, MATCHES_PATH, "matchId=4&pageSize=2&pairName=ETH-USD", page(3, 2))
        w.write_rest(5, MATCHES_PATH, "pageSize=2&pairName=ETH-USD", page(8, 7))
        w.write_rest(6, BALANCE_PATH, "symbol=USD", "{}")
    h = Harness(own_matches={5})
    h.run(path)
    delivered = [e.match.id for _, e in h.seen if isinstance(e, MatchFilled)]
    assert delivered == [4, 6, 7, 8]
    stats = h.replayer.stats
    assert (stats.matches_superseded, stats.match_pages, stats.snapshots_skipped) == (1, 5, 1)


def test_matches_below_the_cursor_are_not_decoded_again(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, append=False) as w:
        w.write_rest(1, MATCHES_PATH, "pageSize=2&pairName=ETH-USD", page())
        w.write_rest(2, MATCHES_PATH, "pageSize=2&pairName=ETH-USD", page(2, 1))
        w.write_rest(3, MATCHES_PATH, "pageSize=2&pairName=ETH-USD", page(3, 2))
    h = Harness()
    h.run(path)
    matches = [e.match for _, e in h.seen if isinstance(e, MatchFilled)]
    assert [m.id for m in matches] == [1, 2, 3]
    assert all(isinstance(m, MatchRecord) and m.average_price is not None for m in matches)


def test_a_refused_poll_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    refused = orjson.dumps(wire.envelope(2001, "Illegal parameter:pairName", None, 1)).decode()
    with RecordingWriter(path, append=False) as w:
        w.write_rest(1, MATCHES_PATH, "pageSize=2&pairName=XX-USD", refused)
    h = Harness()
    h.run(path)
    assert h.replayer.stats.rest_errors == 1


def test_clock_makes_a_datetime_only_when_asked_and_reuses_it() -> None:
    clock = VirtualClock(1_700_000_000_000)
    first = clock.now()
    assert clock.now() is first
    assert first.isoformat() == "2023-11-14T22:13:20+00:00"
    clock.ms += 1
    assert clock.now() is not first and clock.now_ms() == 1_700_000_000_001


def test_timeline_runs_in_time_then_schedule_order_and_cancels() -> None:
    clock = VirtualClock(0)
    timeline = Timeline(clock)
    ran: list[str] = []
    timeline.at(20, lambda: ran.append("b"))
    timeline.at(10, lambda: ran.append("a"))
    timeline.at(20, lambda: ran.append("c"))
    repeat = timeline.every(15, lambda: ran.append(f"r{clock.ms}"), first_ms=15)
    timeline.run_until(30)
    repeat.cancel()
    timeline.run_until(100)
    assert ran == ["a", "r15", "b", "c", "r30"]
    assert clock.ms == 45


def test_callbacks_of_a_ms_run_by_rank_then_in_booking_order() -> None:
    clock = VirtualClock(0)
    timeline = Timeline(clock)
    ran: list[str] = []
    timeline.at(10, lambda: ran.append("normal"))
    timeline.at(10, lambda: ran.append("sample"), rank=SAMPLES)
    timeline.at(10, lambda: ran.append("price 1"), rank=PRICES)
    timeline.at(5, lambda: ran.append("before"))
    timeline.at(10, lambda: ran.append("price 2"), rank=PRICES)
    timeline.at(11, lambda: ran.append("after"), rank=PRICES)
    timeline.run_until(20)
    assert ran == ["before", "price 1", "price 2", "sample", "normal", "after"]


def test_a_paused_repeating_callback_resumes_at_its_next_time_after_now() -> None:
    clock = VirtualClock(0)
    timeline = Timeline(clock)
    ran: list[int] = []
    repeat = timeline.every(10, lambda: ran.append(clock.ms), first_ms=0, rank=SAMPLES)
    timeline.run_until(20)
    repeat.pause()
    timeline.run_until(55)  # the run booked at 30 is skipped and books none
    clock.ms = 55  # as the replay does: a record's time
    repeat.resume()  # at 55: the next of 0, 10, 20, ... after it is 60
    repeat.resume()  # twice: still one run booked
    timeline.run_until(80)
    assert ran == [0, 10, 20, 60, 70, 80]


def test_a_match_listed_late_is_delivered_by_the_replay_as_the_live_window_did(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.jsonl"
    q = "pageSize=5&pairName=ETH-USD"
    with RecordingWriter(path, append=False) as w:
        w.write_rest(1, MATCHES_PATH, q, page(3))  # first start: after match 3
        w.write_rest(2, MATCHES_PATH, q, page(6, 4, 3))  # 5 matched, not listed yet
        w.write_rest(3, MATCHES_PATH, q, page(6, 5, 4, 3))  # 5 listed late, below 6
    delivered = {}
    for window in (0, 60_000):
        h = Harness(reread_age_ms=window)
        h.run(path)
        delivered[window] = [(t, e.match.id) for t, e in h.seen if isinstance(e, MatchFilled)]
    assert delivered[60_000] == [(2, 4), (2, 6), (3, 5)]  # as the live poller's window did
    assert delivered[0] == [(2, 4), (2, 6)]  # without a window, 5 would be lost


def test_a_recording_without_repeated_pages_replays_as_the_full_one(tmp_path: Path) -> None:
    from framework.live.recorder import Recorder

    q = "pageSize=2&pairName=ETH-USD"
    answers = [  # (ts, query, ids): polls every 10 ms, a page of two, one round paging
        (10, q, (3, 2)), (20, q, (3, 2)), (30, q, (5, 4)), (30, "matchId=4&" + q, (3, 2)),
        (40, q, (5, 4)), (50, q, (5, 4)), (60, q, (7, 6)), (60, "matchId=6&" + q, (5, 4)),
        (70, q, (7, 6)),
    ]  # fmt: skip
    delivered = []
    for dedupe in (False, True):
        path = tmp_path / f"r{dedupe}.jsonl"
        now = [0]
        recorder = Recorder(path, now_ms=lambda n=now: n[0], dedupe=dedupe)
        for sid, (ts, query, ids) in enumerate(answers):
            now[0] = ts
            body = orjson.dumps(wire.envelope(200, "SUCCESS", [match(i) for i in ids], sid))
            recorder.on_rest(MATCHES_PATH, query, body)
        recorder.close()
        h = Harness()
        h.run(path)
        delivered.append([(t, e.match.id) for t, e in h.seen if isinstance(e, MatchFilled)])
        if dedupe:
            assert recorder.skipped == 4
    assert delivered[0] == delivered[1] == [(30, 4), (30, 5), (60, 6), (60, 7)]
