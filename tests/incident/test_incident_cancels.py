"""Cancels and the state at --from, against the twin on 127.0.0.1; and the demo's config
(two strategies, market data on) replaying matched."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from framework.config import load_live_config
from framework.incident.bundle import read_bundle, write_bundle
from framework.incident.compare import compare, render
from framework.incident.export import export_bundle
from framework.incident.replay import replay_bundle
from framework.live.node import Node
from framework.recording import RecordingReader
from tests.incident.session import live_session

pytestmark = pytest.mark.anyio

CANCEL_LINE = "self.cancel(self.bid)"
ROOT = Path(__file__).resolve().parents[2]


async def test_cancels_replay_matched_and_a_missing_cancel_shows_at_from(tmp_path: Path) -> None:
    config, first = await live_session(tmp_path, orders=14, cls="tests.incident.requoter:Requoter")
    out = tmp_path / "bundle.tar.gz"
    export_bundle(config, first + 1500, first + 61_500, out)
    outcome = replay_bundle(out)
    verdict = compare(outcome)
    assert verdict.divergence is None, render(verdict, outcome)
    cancels = [coids for _, kind, coids in outcome.sent if kind == "cancel"]
    assert len(cancels) >= 2
    assert outcome.journal["open_at_t1"]  # a bid rested at --from, live and replayed

    # The bundled strategy no longer cancels: the same intents, but more bids open at --from.
    manifest, parts = read_bundle(out)
    name = manifest["strategies"]["tests.incident.requoter"]["part"]
    assert CANCEL_LINE.encode() in parts[name]
    parts[name] = parts[name].replace(CANCEL_LINE.encode(), b"pass")
    info = {k: v for k, v in manifest.items() if k not in ("parts", "format")}
    edited = tmp_path / "edited.tar.gz"
    write_bundle(edited, parts, info)
    outcome = replay_bundle(edited)
    verdict = compare(outcome)
    assert verdict.divergence is not None
    assert verdict.divergence.what == "open orders at --from"
    assert render(verdict, outcome).startswith("replay diverged at event ")


async def test_the_demo_config_replays_matched(tmp_path: Path) -> None:
    text = (ROOT / "configs" / "demo.yaml").read_text().replace("level: INFO", "level: ERROR")
    text += f"\njournal: {{path: {tmp_path / 'journal.sqlite'}}}\n"
    text += f"recording: {{path: {tmp_path / 'demo.jsonl'}}}\n"
    config = tmp_path / "demo.yaml"
    config.write_text(text)
    node = Node(load_live_config(config))
    await node.run(duration=3)
    logging.getLogger().setLevel(logging.WARNING)
    records = list(RecordingReader(tmp_path / "demo.jsonl").records())
    out = tmp_path / "demo.tar.gz"
    info = export_bundle(config, records[0].ts, records[-1].ts, out)
    assert info["intents"] >= 2
    assert set(info["strategies"]) == {"strategies.ladder", "strategies.pulse"}
    outcome = replay_bundle(out)
    verdict = compare(outcome)
    assert verdict.divergence is None, render(verdict, outcome)
    assert verdict.intents == info["intents"] and verdict.events == len(records)
