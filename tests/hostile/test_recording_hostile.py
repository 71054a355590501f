"""Broken and hostile recordings: bounded memory, one clear line each, nothing counted twice.

Small generated inputs: a gzip bomb of 1 GB of text in about 1 MB (built by repeating one
deflated segment, so making it costs nothing), misnamed files, garbage lines, time going back,
pairs the config does not trade.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib
from pathlib import Path

import orjson
import pytest

from framework.backtest.cli import backtest_main
from framework.recording import RecordingReader, RecordingWriter
from framework.venue.requests import MATCHES_PATH
from tests.venue.frames import account_frame, position_frame

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """\
venue: {embedded: true}
pairs:
  %(pair)s: {}
strategies:
  - name: pulse
    class: strategies.pulse:Pulse
    params: {pair: %(pair)s, quantity: "0.01", every_s: 3600}
logging: {level: WARNING}
"""

MAX_RSS_MB = 300

# Runs a command and prints its exit code and peak RSS (KiB). A process of its own: a child
# forked from the test process would count the test process's pages as its own until exec.
MEASURE = """
import resource, subprocess, sys
out, err, *command = sys.argv[1:]
with open(out, "wb") as stdout, open(err, "wb") as stderr:
    code = subprocess.call(command, stdout=stdout, stderr=stderr)
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def ws(ts: int, frame: str) -> bytes:
    """One recorded WebSocket line."""
    return orjson.dumps({"ts": ts, "source": "ws", "frame": frame}) + b"\n"


def config(tmp_path: Path, pair: str = "ETH-USD", extra: str = "") -> Path:
    """A backtest config trading pair (a pulse that never fires in these recordings)."""
    path = tmp_path / "bt.yaml"
    path.write_text(CONFIG % {"pair": pair} + extra)
    return path


def backtest(
    tmp_path: Path, recording: Path, capsys: pytest.CaptureFixture[str], *extra: str, **kw: str
) -> tuple[int, str, str]:
    """Run `backtest` in process: (exit code, stdout, stderr)."""
    code = backtest_main(
        [
            "-c",
            str(config(tmp_path, **kw)),
            "--recording",
            str(recording),
            "--report",
            str(tmp_path / "report"),
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


def report(tmp_path: Path) -> dict[str, object]:
    """The recording section of the report just written."""
    section: dict[str, object] = orjson.loads((tmp_path / "report" / "report.json").read_bytes())[
        "recording"
    ]
    return section


def gzip_of(parts: list[tuple[bytes, int]]) -> bytes:
    """One gzip member whose text is each data repeated n times, each data deflated once.

    A segment ending in a full flush refers to nothing before it: the same bytes decode the
    same wherever they stand, so a gigabyte of text costs one deflate of each data.
    """
    body, crc, size = [], 0, 0
    for data, times in parts:
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        body.append((packer.compress(data) + packer.flush(zlib.Z_FULL_FLUSH)) * times)
        for _ in range(times):
            crc = zlib.crc32(data, crc)
        size += len(data) * times
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    last_block = b"\x03\x00"  # an empty final block
    return header + b"".join(body) + last_block + struct.pack("<II", crc, size & 0xFFFFFFFF)


def test_a_gzip_bomb_replays_in_bounded_memory_and_its_garbage_is_counted(
    tmp_path: Path,
) -> None:
    # 1.0 GB of text in ~1 MB: a record, 512 garbage lines of 1 MB, one line of 512 MB (over
    # the reader's MAX_LINE: never held whole), a record. The reader inflated all of it at once.
    first = ws(1_000, position_frame(pair="ETH-USD"))
    garbage = b"x" * ((1 << 20) - 1) + b"\n"
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(
        gzip_of(
            [
                (first, 1),
                (garbage, 512),
                (b"y" * (1 << 20), 512),
                (b"\n" + ws(1_000, account_frame(1, "5")), 1),
            ]
        )
    )
    assert bomb.stat().st_size < 2 << 20
    out, err = tmp_path / "out", tmp_path / "err"
    command = [sys.executable, "run.py", "backtest", "-c", str(config(tmp_path))]
    command += ["--recording", str(bomb), "--report", str(tmp_path / "report")]
    measured = subprocess.run(
        [sys.executable, "-c", MEASURE, str(out), str(err), *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    code, peak_kib = map(int, measured.stdout.split())
    errors = err.read_text()
    assert code == 0, errors
    peak_mb = peak_kib / 1024
    assert peak_mb < MAX_RSS_MB, f"{peak_mb:.0f} MB of RSS for {bomb.stat().st_size} bytes"
    assert "messages replayed: 2 " in out.read_text()
    assert (
        f"backtest: warning: recording {bomb}: 513 line(s) that are not records skipped, not"
        " replayed (the first: line 2)"
    ) in errors
    assert report(tmp_path)["bad_lines"] == 513


def test_gzip_content_named_jsonl_is_read_as_gzip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packed = tmp_path / "r.jsonl.gz"
    with RecordingWriter(packed, append=False) as writer:
        for i in range(5):
            writer.write_ws(1_000 + i, position_frame(i + 1, pair="ETH-USD"))
    misnamed = packed.rename(tmp_path / "r.jsonl")
    code, out, err = backtest(tmp_path, misnamed, capsys)
    assert code == 0, err
    assert "messages replayed: 5 " in out
    assert "warning" not in err and "cut short" not in err


def test_plain_text_named_gz_is_read_as_plain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    misnamed = tmp_path / "r.jsonl.gz"
    misnamed.write_bytes(b"".join(ws(1_000 + i, position_frame(i + 1)) for i in range(4)))
    code, out, err = backtest(tmp_path, misnamed, capsys)
    assert code == 0, err
    assert "messages replayed: 4 " in out
    assert "warning" not in err


def test_appending_to_plain_text_named_gz_keeps_it_plain(tmp_path: Path) -> None:
    misnamed = tmp_path / "r.jsonl.gz"
    misnamed.write_bytes(ws(1, "{}"))
    with RecordingWriter(misnamed, append=True) as writer:
        writer.write_ws(2, "{}")
    assert misnamed.read_bytes() == ws(1, "{}") + ws(2, "{}")
    reader = RecordingReader(misnamed)
    assert [r.ts for r in reader.records()] == [1, 2]
    assert reader.stats.bad_lines == 0


GARBAGE = [
    b"not json",
    b"[1, 2]",
    b'{"ts": "soon", "source": "ws", "frame": "{}"}',
    b'{"ts": 1500, "source": "ws"}',  # no frame
    b'{"ts": 1500, "source": "fax", "frame": "{}"}',
    b'{"ts": 1500, "source": "rest", "path": "/p"}',  # no body
]


def write_with_garbage(path: Path) -> int:
    """Records at lines 1, 2, 4, 6, ...; garbage from line 3 (blank lines count as lines)."""
    records = [ws(1_000, position_frame(1)), ws(1_001, position_frame(2))]
    lines = list(records)
    for i, bad in enumerate(GARBAGE):
        record = ws(1_002 + i, account_frame(i + 1, "1"))
        lines += [bad + b"\n", b"\n" if i == 2 else record]
        records += [] if i == 2 else [record]
    data = b"".join(lines)
    if path.name.endswith(".gz"):
        data = zlib.compress(data, wbits=31)
    path.write_bytes(data)
    return len(records)


@pytest.mark.parametrize("name", ["g.jsonl", "g.jsonl.gz"])
def test_garbage_lines_are_skipped_counted_and_never_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = tmp_path / name
    records = write_with_garbage(path)
    code, out, err = backtest(tmp_path, path, capsys)
    assert code == 0, err
    assert f"messages replayed: {records} " in out
    assert report(tmp_path)["lines"] == records
    assert report(tmp_path)["bad_lines"] == len(GARBAGE)
    warning = (
        f"backtest: warning: recording {path}: {len(GARBAGE)} line(s) that are not records"
        " skipped, not replayed (the first: line 3); backtest.strict or --strict refuses them"
    )
    assert [line for line in err.splitlines() if "not records" in line] == [warning]


@pytest.mark.parametrize("how", ["flag", "config"])
def test_strict_makes_the_first_garbage_line_fatal_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    path = tmp_path / "g.jsonl"
    write_with_garbage(path)
    if how == "flag":
        code, _, err = backtest(tmp_path, path, capsys, "--strict")
    else:
        code, _, err = backtest(tmp_path, path, capsys, extra="backtest: {strict: true}\n")
    assert code == 1
    [line] = err.splitlines()
    assert line.startswith(f"backtest: recording {path}: line 3 is not a record (JSON is malformed")
    assert not (tmp_path / "report" / "report.json").exists()


@pytest.mark.parametrize("chunk_size", [4096, 1 << 22])
@pytest.mark.parametrize("name", ["n.jsonl", "n.jsonl.gz"])
def test_line_numbers_are_the_files_across_chunks_and_pieces(
    tmp_path: Path, name: str, chunk_size: int
) -> None:
    # 3000 records of ~100 bytes, blank lines every 7th, garbage at two places: the numbers
    # named are the file's, wherever chunks (inflated) and pieces (128 KB) are cut.
    lines: list[bytes] = []
    bad_at, record_at = [], {}
    for i in range(3000):
        if i % 7 == 3:
            lines.append(b"\n")
        if i in (1234, 2500):
            lines.append(b"garbage\n")
            bad_at.append(len(lines))
        lines.append(ws(i, "x" * (i % 150)))
        record_at[i] = len(lines)
    data = b"".join(lines)
    path = tmp_path / name
    path.write_bytes(zlib.compress(data, wbits=31) if name.endswith(".gz") else data)
    reader = RecordingReader(path, chunk_size=chunk_size)
    found = {}
    for batch in reader.record_batches():
        for index, record in enumerate(batch):
            if record.ts % 389 == 0:
                found[record.ts] = reader.line_of(index)
    assert found == {ts: line for ts, line in record_at.items() if ts % 389 == 0}
    assert (reader.stats.bad_lines, reader.stats.first_bad_line) == (2, bad_at[0])
    strict = RecordingReader(path, chunk_size=chunk_size, strict=True)
    with pytest.raises(Exception, match=f"line {bad_at[0]} is not a record"):
        list(strict.records())


def test_time_going_back_is_one_warning_with_count_and_first_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "back.jsonl"
    stamps = [1_000, 2_000, 1_500, 3_000, 2_500, 2_600, 4_000]
    path.write_bytes(b"".join(ws(ts, position_frame(i + 1)) for i, ts in enumerate(stamps)))
    code, _, err = backtest(tmp_path, path, capsys)
    assert code == 0, err
    assert report(tmp_path)["time_went_back"] == 3
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == [
        f"backtest: warning: recording {path}: time goes back 3 time(s) (the first: line 3);"
        " such records are replayed in file order, at the latest time reached before them"
    ]


def test_a_recording_of_other_pairs_is_one_warning_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.jsonl"
    with RecordingWriter(path, append=False) as writer:
        writer.write_ws(1_000, position_frame(1, pair="ETH-USD"))
        writer.write_rest(1_100, MATCHES_PATH, "pageSize=10&pairName=BTC-USD", '{"code":200}')
        writer.write_ws(1_200, account_frame(1, "1"))
    code, _, err = backtest(tmp_path, path, capsys, pair="SOL-USD")
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == [
        f"backtest: warning: recording {path}: none of the config's pairs (SOL-USD) is in it"
        " (it shows: BTC-USD, ETH-USD): they get no recorded price or match"
    ]
    # The same recording and a config trading one of its pairs: no warning.
    code, _, err = backtest(tmp_path, path, capsys, pair="BTC-USD")
    assert code == 0 and "warning" not in err, err
