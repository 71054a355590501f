"""Done-when of issue 30, against the twin over real sockets on 127.0.0.1.

A strategy runs live with recording on; a 60 s window is exported and replayed ("replay
matched"); one line of the strategy's source changed in the bundle makes the replay name
the first divergent intent; no secret is in the bundle; a replay opens no socket.
"""

from __future__ import annotations

import gzip
import io
import socket
import tarfile
from pathlib import Path
from typing import Any

import orjson
import pytest

from framework.cli import main
from framework.incident.bundle import read_bundle, write_bundle
from framework.incident.compare import compare, live_ticks
from framework.incident.replay import ReplayState, replay_bundle
from framework.twin.demo import DEMO_PRIVATE_KEY
from tests.incident.session import SECRET, live_session

pytestmark = pytest.mark.anyio

OPEN_LINE = 'pair=s.pair, is_long=self.long, quantity=s.quantity, lever=s.lever, tag="open"'


@pytest.fixture
async def bundle(tmp_path: Path) -> tuple[Path, int]:
    """A live session's bundle: the window [first + 0.5 s, first + 60.5 s]."""
    config, first = await live_session(tmp_path)
    out = tmp_path / "bundle.tar.gz"
    args = ["incident", "export", "-c", str(config), "--from", str(first + 500)]
    assert main([*args, "--to", str(first + 60_500), "--out", str(out)]) == 0
    return out, first


def every_byte(path: Path) -> bytes:
    """The archive's bytes, decompressed, and every member's."""
    raw = gzip.decompress(path.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        members = [tar.extractfile(m).read() for m in tar if m.isfile()]  # type: ignore[union-attr]
    return path.read_bytes() + raw + b"".join(members)


async def test_a_live_window_replays_matched_then_a_changed_line_diverges(
    bundle: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _first = bundle
    capsys.readouterr()
    assert main(["incident", "replay", str(path)]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("replay matched: ")
    events, intents = (int(w) for w in out.removeprefix("replay matched: ").split()[::2][:2])
    assert events > 0 and intents >= 4

    # One line of the strategy's source, changed in the bundle (the manifest re-hashed):
    # the replay runs the bundled source, not the installed one.
    manifest, parts = read_bundle(path)
    name = manifest["strategies"]["strategies.pulse"]["part"]
    source = parts[name].decode()
    assert OPEN_LINE in source
    parts[name] = source.replace(OPEN_LINE, OPEN_LINE.replace("s.quantity", "s.quantity * 2"))
    parts[name] = parts[name].encode() if isinstance(parts[name], str) else parts[name]
    info = {k: v for k, v in manifest.items() if k not in ("parts", "format")}
    edited = tmp_path / "edited.tar.gz"
    write_bundle(edited, parts, info)
    assert main(["incident", "replay", str(edited)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("replay diverged at event ") and lines[0].endswith(
        ": intent 1 of pulse"
    )
    assert lines[1].strip().startswith("live:") and " buy 0.002 market" in lines[1]
    assert lines[2].strip().startswith("replay:") and " buy 0.004 market" in lines[2]
    assert lines[1].split()[1] == lines[2].split()[1]  # the same clientOrderId
    assert lines[3].startswith("the 20 events before it")
    assert 1 <= len(lines[4:]) <= 20


async def test_no_secret_is_in_the_bundle(bundle: tuple[Path, int]) -> None:
    path, _ = bundle
    data = every_byte(path)
    assert SECRET == DEMO_PRIVATE_KEY
    for secret in (SECRET, SECRET.removeprefix("0x")):
        assert secret.encode() not in data
    _manifest, parts = read_bundle(path)
    assert "venue" not in parts["config.yaml"].decode()


async def test_a_bundle_that_does_not_match_its_manifest_is_refused_in_one_line(
    bundle: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = bundle
    _manifest, _parts = read_bundle(path)
    raw = gzip.decompress(path.read_bytes())
    tampered = tmp_path / "tampered.tar.gz"
    with (
        tarfile.open(fileobj=io.BytesIO(raw)) as src,
        tarfile.open(tampered, "w:gz") as dst,
    ):
        for member in src:
            data = src.extractfile(member).read()  # type: ignore[union-attr]
            if member.name.startswith("strategies/"):
                data = data.replace(b"quantity=s.quantity,", b"quantity=s.quantity*2,")
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    capsys.readouterr()
    assert main(["incident", "replay", str(tampered)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "does not match its manifest hash: refused" in captured.err


async def test_break_at_stops_at_event_n_with_the_state(bundle: tuple[Path, int]) -> None:
    path, _ = bundle
    seen: list[ReplayState] = []
    outcome = replay_bundle(path, break_at=40, on_break=seen.append)
    (state,) = seen
    assert state.event == 40 and outcome.stopped_at == 40
    assert state.kernel.strategies and state.strategies[0].name == "pulse"
    assert all(m.event <= 40 for m in state.made)  # what was made up to there, then
    assert compare(outcome).divergence is None


async def test_a_replay_opens_no_socket(
    bundle: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = bundle
    _manifest, parts = read_bundle(path)
    assert "base_url" not in parts["config.yaml"].decode()  # no network config at all
    opened: list[Any] = []

    def refuse(self: socket.socket, *args: Any, **kwargs: Any) -> None:
        opened.append(args)
        raise AssertionError("a replay opened a socket")

    monkeypatch.setattr(socket.socket, "__init__", refuse)
    outcome = replay_bundle(path)
    assert opened == []
    assert compare(outcome).divergence is None
    assert orjson.loads(parts["models.json"])["latency_ms"] == 0


async def test_a_tick_live_acted_on_late_is_replayed_when_live_acted(
    bundle: tuple[Path, int],
) -> None:
    path, _ = bundle
    outcome = replay_bundle(path)
    ticked = [m for m in outcome.made if m.fire is not None]
    assert ticked and all(m.ms == m.fire[2] for m in ticked)  # type: ignore[index]
    first = ticked[0]
    # Live made that intent 7 ms after the tick's nominal time: the replay runs it then.
    for entry in outcome.journal["intents"]:
        if entry["strategy"] == first.strategy:
            entry["created_ms"] = first.ms + 7
            break
    delays = live_ticks(outcome, first.event)
    assert delays == {first.fire: first.ms + 7}
    again = replay_bundle(path, delays=delays)
    (moved,) = [m for m in again.made if m.fire == first.fire]
    assert moved.ms == first.ms + 7 and moved.rank == first.rank
