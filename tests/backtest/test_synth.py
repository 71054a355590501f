"""Synthetic recordings: deterministic, in the recording format, replayable without errors."""

from __future__ import annotations

from pathlib import Path

import orjson

from framework.backtest.synth import SynthSettings, generate, main
from framework.recording import RecordingReader, RestRecord, WsRecord
from framework.venue.codec import decode_frame
from framework.venue.models import AccountPush, PositionPush
from framework.venue.requests import BATCH_CREATE_PATH, MATCHES_PATH, parse_response


def test_the_same_settings_give_the_same_bytes(tmp_path: Path) -> None:
    generate(tmp_path / "a.jsonl", SynthSettings(pushes=500, seed=7))
    generate(tmp_path / "b.jsonl", SynthSettings(pushes=500, seed=7))
    generate(tmp_path / "c.jsonl", SynthSettings(pushes=500, seed=8))
    a = (tmp_path / "a.jsonl").read_bytes()
    assert a == (tmp_path / "b.jsonl").read_bytes()
    assert a != (tmp_path / "c.jsonl").read_bytes()


def test_every_line_is_a_record_the_live_decoders_accept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl.gz"
    stats = generate(path, SynthSettings(pushes=600, seed=2, own_orders=True))
    records = list(RecordingReader(path).records())
    assert len(records) == stats.lines
    assert [r.ts for r in records] == sorted(r.ts for r in records)
    pushes = [decode_frame(orjson.loads(r.frame)) for r in records if isinstance(r, WsRecord)]
    assert sum(isinstance(p, PositionPush | AccountPush) for p in pushes) == stats.pushes >= 600
    answers = [r for r in records if isinstance(r, RestRecord)]
    assert sum(r.path == BATCH_CREATE_PATH for r in answers) == stats.orders
    for answer in answers:
        parse_response(answer.path, 200, answer.body.encode())
    assert any(r.path == MATCHES_PATH and '"averagePrice"' in r.body for r in answers)


def test_the_command_line_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "cli.jsonl"
    assert main(["--pushes", "50", "--out", str(out)]) == 0
    assert out.stat().st_size > 0
