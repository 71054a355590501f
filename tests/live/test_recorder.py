"""The recorder: what it writes from the live hooks, what it never writes, and kill safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from framework.engine.clock import VirtualClock
from framework.live.cli import record_main
from framework.live.recorder import Recorder
from framework.live.rest import RestClient
from framework.live.stream import StreamClient
from framework.live.wallclock import WallClock
from framework.recording import RecordingReader, RecordingWriter, RestRecord, WsRecord
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.requests import BALANCE_PATH, BATCH_CREATE_PATH
from framework.venue.signing import Signer
from tests.live.conftest import Eventually
from tests.waiting import until

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
from framework.recording import RecordingWriter
writer = RecordingWriter(sys.argv[1], append=False)
frame = '{"event":"api_account","success":true,"symbol":"USD","data":{"logId":1}}'
i = 0
while True:
    writer.write_ws(i, frame)
    i += 1
"""


@pytest.mark.parametrize("name", ["killed.jsonl", "killed.jsonl.gz"])
def test_a_killed_recorder_leaves_a_file_readable_to_its_last_line(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        until(lambda: path.exists() and path.stat().st_size > 20_000)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    reader = RecordingReader(path)
    stamps = [r.ts for r in reader.records()]
    assert len(stamps) > 100
    assert stamps == list(range(len(stamps)))
    assert reader.stats.bad_lines == 0


def test_recorder_writes_stream_frames_and_rest_answers_as_they_arrive(tmp_path: Path) -> None:
    clock = VirtualClock(1_000)
    recorder = Recorder(tmp_path / "r.jsonl", now_ms=clock.now_ms)
    recorder.on_ws('{"event":"api_account","data":{}}')
    clock.advance(5)
    recorder.on_rest(BALANCE_PATH, "symbol=USD", b'{"code":200,"data":{}}')
    recorder.close()
    records = list(RecordingReader(tmp_path / "r.jsonl").records())
    assert records == [
        WsRecord(1_000, '{"event":"api_account","data":{}}'),
        RestRecord(1_005, BALANCE_PATH, "symbol=USD", '{"code":200,"data":{}}'),
    ]


def test_secret_values_and_echoed_credentials_are_never_written(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl.gz"
    recorder = Recorder(path, now_ms=lambda: 1, redact=["topsecret"])
    recorder.redact(DEMO_API_KEY)
    ack = orjson.dumps(
        {
            "event": "api_account_res",
            "success": True,
            "apiKey": DEMO_API_KEY,
            "signature": "0xabc",
            "symbol": "USD",
        }
    ).decode()
    recorder.on_ws(ack)
    recorder.on_rest("/p", "pairName=ETH-USD", b'{"msg":"key topsecret here"}')
    recorder.close()
    text = RecordingReader(path).chunks().__next__()
    assert b"topsecret" not in text and DEMO_API_KEY.encode() not in text
    assert b"0xabc" not in text and b"signature" not in text
    frame = orjson.loads(next(RecordingReader(path).records()).frame)  # type: ignore[union-attr]
    assert frame == {"event": "api_account_res", "success": True, "symbol": "USD"}


def test_a_write_failure_stops_recording_but_never_raises(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "r.jsonl", now_ms=lambda: 1)
    recorder.writer._file.close()  # the disk is gone
    recorder.on_ws("{}")
    recorder.on_rest("/p", "", b"{}")
    assert recorder.failed and recorder.errors == 1


def test_an_existing_file_is_not_replaced_without_append(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"ts":1,"source":"ws","frame":"{}"}\n')
    with pytest.raises(FileExistsError):
        RecordingWriter(path, append=False)


@pytest.mark.anyio
async def test_live_hooks_record_what_the_twin_sends(
    twin: VenueTwin, demo_signer: Signer, tmp_path: Path, eventually: Eventually
) -> None:
    import anyio

    path = tmp_path / "live.jsonl.gz"
    recorder = Recorder(
        path, now_ms=lambda: time.time_ns() // 1_000_000, redact=[DEMO_API_KEY, DEMO_PRIVATE_KEY]
    )
    pushes: list[object] = []
    async with RestClient(
        twin.base_url, DEMO_API_KEY, demo_signer, observer=recorder.on_rest
    ) as rest:
        stream = StreamClient(
            twin.ws_url,
            rest.builder,
            pairs=["ETH-USD"],
            coins=["USD"],
            on_frame=pushes.append,
            on_raw=recorder.on_ws,
            clock=WallClock(),
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream.run)
            await eventually(lambda: stream.state == "connected")
            order = OrderInput(
                client_order_id="rec1",
                is_long=True,
                is_market=True,
                lever=5,
                match_type=MatchType.IOC,
                pair_name="ETH-USD",
                position_type=PositionType.ISOLATED,
                price=None,
                quantity=Decimal("0.01"),
            )
            await rest.batch_create([order])
            await eventually(lambda: len(pushes) >= 2)
            tg.cancel_scope.cancel()
    recorder.close()
    records = list(RecordingReader(path).records())
    frames = [r for r in records if isinstance(r, WsRecord)]
    answers = [r for r in records if isinstance(r, RestRecord)]
    assert any('"api_position"' in f.frame for f in frames)
    assert any('"api_account_res"' in f.frame for f in frames)
    assert [a.path for a in answers] == [BATCH_CREATE_PATH]
    assert '"orderId"' in answers[0].body
    raw = b"".join(RecordingReader(path).chunks())
    assert DEMO_API_KEY.encode() not in raw and DEMO_PRIVATE_KEY.encode() not in raw
    assert b"timestamp=" not in raw  # queries are written without their timestamp
    # The batchCreate line keeps the body sent: the orders and when they left.
    sent = orjson.loads(answers[0].request or "null")
    assert [o["clientOrderId"] for o in sent["orders"]] == ["rec1"]
    assert int(sent["timestamp"]) <= answers[0].ts


CONFIG = """\
venue:
  embedded: true
  twin:
    prices: {tick_interval: 0.1, max_step_ticks: 40}
pairs:
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
polling:
  match_interval_s: 0.2
strategies:
  - name: pulse
    class: strategies.pulse:Pulse
    params: {pair: BTC-USD, quantity: "0.001", every_s: 0.2, hold: 2}
logging: {level: WARNING}
"""


def test_record_command_writes_a_replayable_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG)
    out = tmp_path / "rec.jsonl.gz"
    assert record_main(["-c", str(config), "--out", str(out), "--duration", "1.5"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("summary ")
    reader = RecordingReader(out)
    records = list(reader.records())
    paths = {r.path for r in records if isinstance(r, RestRecord)}
    assert BATCH_CREATE_PATH in paths and BALANCE_PATH in paths
    assert any(isinstance(r, WsRecord) and "api_position" in r.frame for r in records)
    assert [r.ts for r in records] == sorted(r.ts for r in records)
    raw = b"".join(RecordingReader(out).chunks())
    assert DEMO_API_KEY.encode() not in raw and DEMO_PRIVATE_KEY.encode() not in raw
    assert record_main(["-c", str(config), "--out", str(out), "--duration", "0.5"]) == 1
    assert "exists" in capsys.readouterr().err


def test_a_match_page_like_the_last_one_of_its_query_is_not_written_again(tmp_path: Path) -> None:
    from framework.live.recorder import Recorder
    from framework.venue.requests import MATCHES_PATH

    newest = "pageSize=50&pairName=ETH-USD"
    paging = "matchId=9&pageSize=50&pairName=ETH-USD"
    same = '{"error":false,"code":200,"msg":"SUCCESS","data":[{"id":9}],"sid":"%d"}'
    recorder = Recorder(tmp_path / "r.jsonl", now_ms=lambda: 1)
    for sid in range(1, 6):  # five polls, nothing new: only the first is kept (sid aside)
        recorder.on_rest(MATCHES_PATH, newest, (same % sid).encode())
    recorder.on_rest(MATCHES_PATH, paging, (same % 6).encode())  # paging: always written
    recorder.on_rest(MATCHES_PATH, paging, (same % 7).encode())
    changed = '{"error":false,"code":200,"msg":"SUCCESS","data":[{"id":10},{"id":9}],"sid":"8"}'
    recorder.on_rest(MATCHES_PATH, newest, changed.encode())
    recorder.on_rest(MATCHES_PATH, newest, (same % 9).encode())  # differs from the last: kept
    recorder.close()
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert len(lines) == 5 and recorder.skipped == 4
    assert recorder.skipped_bytes == sum(len((same % sid).encode()) for sid in range(2, 6))
