"""Reading recordings: both encodings, typed records, and the marks a killed writer leaves."""

from __future__ import annotations

import gzip
import random
import zlib
from pathlib import Path

import orjson
import pytest

from framework.backtest.scan import scan
from framework.backtest.synth import SynthSettings, generate
from framework.recording import PIECE_SIZE, RecordingReader, RecordingWriter, RestRecord, WsRecord
from framework.venue.requests import BATCH_CREATE_PATH, MATCHES_PATH

FRAME = '{"event":"api_account","success":true,"symbol":"USD","data":{"logId":1,"symbol":"USD"}}'


def write_sample(path: Path, lines: int = 5) -> None:
    with RecordingWriter(path, append=False) as writer:
        for i in range(lines):
            writer.write_ws(1000 + i, FRAME)
        writer.write_rest(2000, MATCHES_PATH, "pageSize=50&pairName=ETH-USD", b'{"code":200}')


def test_plain_file_gives_typed_records_in_order(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_sample(path)
    records = list(RecordingReader(path).records())
    assert [r.ts for r in records] == [1000, 1001, 1002, 1003, 1004, 2000]
    assert records[0] == WsRecord(1000, FRAME)
    assert records[-1] == RestRecord(
        2000, MATCHES_PATH, "pageSize=50&pairName=ETH-USD", '{"code":200}'
    )


def test_gzip_file_reads_the_same_records(tmp_path: Path) -> None:
    write_sample(tmp_path / "r.jsonl")
    write_sample(tmp_path / "r.jsonl.gz")
    plain = list(RecordingReader(tmp_path / "r.jsonl").records())
    packed = list(RecordingReader(tmp_path / "r.jsonl.gz").records())
    assert packed == plain
    assert gzip.decompress((tmp_path / "r.jsonl.gz").read_bytes()).count(b"\n") == 6


def test_a_cut_last_line_is_counted_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_sample(path)
    with open(path, "ab") as handle:
        handle.write(b'{"ts": 3000, "source": "ws", "fra')
    reader = RecordingReader(path)
    records = list(reader.records())
    assert len(records) == 6
    assert reader.stats.truncated_tail
    assert reader.stats.bad_lines == 0


def test_a_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"ts":1,"source":"ws","frame":"{}"}\n{"ts":2,"source":"ws","frame":"{}"}')
    reader = RecordingReader(path)
    assert [r.ts for r in reader.records()] == [1, 2]
    assert not reader.stats.truncated_tail


def test_garbage_and_blank_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(
        b'{"ts":1,"source":"ws","frame":"{}"}\n\nnot json\n[1,2]\n{"ts":"x","source":"ws"}\n'
        b'{"ts":2,"source":"rest","path":"/p","query":"","body":""}\n'
    )
    reader = RecordingReader(path)
    assert [r.ts for r in reader.records()] == [1, 2]
    assert reader.stats.bad_lines == 3


def test_a_gzip_stream_without_trailer_reads_up_to_its_last_flush(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.gz"
    writer = RecordingWriter(path, append=False)
    for i in range(100):
        writer.write_ws(i, FRAME)
    # A killed process: the file holds what was sync-flushed, never the gzip trailer.
    writer._file.close()
    reader = RecordingReader(path)
    assert [r.ts for r in reader.records()] == list(range(100))


def test_a_member_appended_after_a_cut_member_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl.gz"
    first = RecordingWriter(path, append=False)
    for i in range(50):
        first.write_ws(i, FRAME)
    first._file.close()  # killed: no trailer
    with RecordingWriter(path, append=True) as second:
        for i in range(50, 80):
            second.write_ws(i, FRAME)
    reader = RecordingReader(path, chunk_size=1 << 16)
    assert [r.ts for r in reader.records()] == list(range(80))
    assert reader.stats.cut_members == 1


def test_whole_members_appended_by_later_runs_are_concatenated(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl.gz"
    for run in range(3):
        with RecordingWriter(path, append=True) as writer:
            writer.write_ws(run, FRAME)
    assert [r.ts for r in RecordingReader(path).records()] == [0, 1, 2]


def test_a_plain_file_cut_mid_line_is_closed_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"ts":1,"source":"ws","frame":"{}"}\n{"ts":2,"sou')
    with RecordingWriter(path, append=True) as writer:
        writer.write_ws(3, "{}")
    reader = RecordingReader(path)
    assert [r.ts for r in reader.records()] == [1, 3]
    assert reader.stats.bad_lines == 1


def test_corrupt_gzip_data_ends_the_read_without_raising(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl.gz"
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    good = packer.compress(b'{"ts":1,"source":"ws","frame":"{}"}\n') + packer.flush(
        zlib.Z_SYNC_FLUSH
    )
    path.write_bytes(good + b"\xff" * 64)
    reader = RecordingReader(path)
    assert [r.ts for r in reader.records()] == [1]
    assert reader.stats.cut_members == 1


def test_scan_finds_own_orders_their_fills_and_prices(tmp_path: Path) -> None:
    path = tmp_path / "own.jsonl"
    stats = generate(path, SynthSettings(pushes=400, own_orders=True, seed=3))
    index = scan(path)
    assert index.first_ts == stats.first_ts and index.last_ts == stats.last_ts
    assert len(index.own_order_ids) == stats.orders
    assert index.own_match_ids and index.own_position_ids
    assert index.own_pairs <= {"ETH-USD", "BTC-USD"}
    assert [p.ts for p in index.prices] == sorted(p.ts for p in index.prices)
    assert {p.source for p in index.prices} == {"matches"}


def test_scan_without_batch_answers_finds_no_own_activity(tmp_path: Path) -> None:
    path = tmp_path / "ext.jsonl.gz"
    generate(path, SynthSettings(pushes=200, seed=4))
    index = scan(path)
    assert not index.has_own_orders
    assert not index.own_position_ids and not index.own_match_ids
    assert index.prices


def test_a_quick_scan_finds_the_own_orders_a_full_one_finds(tmp_path: Path) -> None:
    path = tmp_path / "own.jsonl"
    stats = generate(path, SynthSettings(pushes=400, own_orders=True, seed=3))
    slashes = tmp_path / "slashes.jsonl"  # "/" in every frame: the hops run out early
    slashes.write_bytes(path.read_bytes().replace(b'\\"USD\\"', b'\\"U/S/D\\"'))
    for recording in (path, slashes):
        quick, full = scan(recording, prices=False), scan(recording)
        assert quick.own_order_ids == full.own_order_ids
        assert len(quick.own_order_ids) == stats.orders > 5


@pytest.mark.parametrize("name", ["own.jsonl", "own.jsonl.gz"])
def test_a_scan_through_the_replays_reader_leaves_its_pass_whole(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    generate(path, SynthSettings(pushes=300, own_orders=True, seed=3))
    alone = scan(path, prices=False)
    reader = RecordingReader(path)
    mapping = reader.mapping()
    assert scan(reader, prices=False) == alone
    assert (mapping is None) == name.endswith(".gz")
    assert reader.mapping() is mapping  # the scan's mapping is the pass's
    assert reader.stats.bytes_read == 0  # the scan's reading is not the pass's
    records = list(reader.records())
    assert records == list(RecordingReader(path).records())
    assert reader.stats.bytes_read == path.stat().st_size


def test_scan_falls_back_to_position_prices_without_matches(tmp_path: Path) -> None:
    source = tmp_path / "all.jsonl"
    generate(source, SynthSettings(pushes=200, seed=5))
    pushes_only = tmp_path / "pushes.jsonl"
    kept = [
        line
        for line in source.read_bytes().splitlines(keepends=True)
        if MATCHES_PATH.encode() not in line and BATCH_CREATE_PATH.encode() not in line
    ]
    pushes_only.write_bytes(b"".join(kept))
    index = scan(pushes_only)
    assert index.prices
    assert {p.source for p in index.prices} == {"positions"}
    assert not scan(pushes_only, positions="never").prices


def test_records_round_trip_arbitrary_text(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl.gz"
    frame = orjson.dumps({"event": "x", "msg": 'quote " back\\slash \n newline é'}).decode()
    with RecordingWriter(path, append=False) as writer:
        writer.write_ws(5, frame)
        writer.write_rest(6, "/p", "a=1", "body \u2603".encode())
    records = list(RecordingReader(path).records())
    assert records == [WsRecord(5, frame), RestRecord(6, "/p", "a=1", "body \u2603")]


def test_pieces_keep_every_line_and_count_a_bad_one(tmp_path: Path) -> None:
    # Lines over several pieces, one longer than a piece, and a bad line mid-piece: every
    # record comes out once and in order; the bad line is counted, its neighbours are kept.
    path = tmp_path / "r.jsonl"
    long_frame = "x" * (PIECE_SIZE + 1000)
    with open(path, "wb") as out:
        for ts in range(3000):
            frame = long_frame if ts == 1500 else f"frame {ts}"
            out.write(orjson.dumps({"ts": ts, "source": "ws", "frame": frame}) + b"\n")
            if ts == 2000:
                out.write(b'{"ts": "late", "source": "ws", "frame": "f"}\n')
    reader = RecordingReader(path)
    records = list(reader.records())
    assert [r.ts for r in records] == list(range(3000))
    assert records[1500] == WsRecord(1500, long_frame)
    assert reader.stats.bad_lines == 1
    assert reader.stats.lines == 3001


@pytest.mark.parametrize("chunk_size", [1, 7, 4096, 1 << 16, 1 << 22])
def test_any_chunk_size_gives_every_line_once(tmp_path: Path, chunk_size: int) -> None:
    rnd = random.Random(chunk_size)
    sizes = [rnd.choice([0, 5, 100, 3000, 70_000, PIECE_SIZE + 7]) for _ in range(40)]
    lines = [orjson.dumps({"ts": i, "source": "ws", "frame": "x" * n}) for i, n in enumerate(sizes)]
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n".join(lines))  # the last line unterminated but whole
    records = list(RecordingReader(path, chunk_size=chunk_size).records())
    assert [(r.ts, len(r.frame)) for r in records] == list(enumerate(sizes))  # type: ignore[union-attr]
