"""``perpframe incident export``: what a replay of a live session needs, in one bundle.

Why these parts: a replay restores nothing by guessing. It needs the frames the node heard
(the recording, cut at T2, from its start: the warm-up, see below), what the node journaled
(its intents with their answers, the kept matches, the cursors and the id tag, so the replay
draws the same clientOrderIds), the config (secrets removed), the strategies' source (the
code that ran, not whatever is installed when the replay runs), and the versions, models and
seeds that make the replay exact.

Warm-up: a strategy's state at T1 is whatever it made of everything it heard since its start;
no journal holds it. The bundle therefore carries the recording from the session's start
(the recording's first line) to T2, and the replay runs all of it but compares only
``[T1, T2]``. The journal's state at T1 (intents open then) is kept in the slice, and the
replay checks its own open orders at T1 against it.

No secret goes in: the ``venue:`` section (keys, secrets, private keys, URLs) is dropped from
the config text, and every secret value the config reader found is replaced by ``***`` in
every part; the recording holds none (the recorder's rule) and the journal none.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, distributions, version
from pathlib import Path
from typing import Any

import msgspec
import orjson

from framework.backtest.runner import load_backtest_config
from framework.cli import add_strategy_dirs
from framework.config import load_live_config, split_section
from framework.incident.bundle import MAX_MEMBER_BYTES, sha256, write_bundle
from framework.live.journal import Journal
from framework.recording import RecordingReader
from framework.venue.errors import FrameworkError
from framework.yaml_read import read_config_text

__all__ = ["ExportError", "export_bundle", "parse_time"]

_ENCODE = msgspec.json.Encoder()


class ExportError(FrameworkError):
    """What an export cannot do: one line."""


def parse_time(raw: str) -> int:
    """Epoch milliseconds from a number of ms or an ISO-8601 time (UTC unless it says)."""
    text = raw.strip()
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ExportError(f"time {raw!r}: expected epoch ms or ISO-8601") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _scrub(data: bytes, secrets: Iterable[str]) -> bytes:
    for secret in secrets:
        if secret:
            data = data.replace(secret.encode(), b"***")
    return data


def _secrets(config_path: str | Path) -> set[str]:
    """Every secret value the live reading of the config finds (none when it cannot)."""
    try:
        return {s for s in load_live_config(config_path).secrets() if len(s) >= 4}
    except (FrameworkError, OSError):
        return set()


def _recording_slice(path: Path, to_ms: int) -> tuple[bytes, int, int, int]:
    """(lines up to to_ms as JSONL, how many, first ts, last ts) of a recording."""
    reader = RecordingReader(path)
    out: list[bytes] = []
    first = last = 0
    for batch in reader.record_batches():
        for line in batch:
            ts = int(line.ts)
            if ts > to_ms:
                continue
            if not out:
                first = ts
            last = max(last, ts)
            out.append(_ENCODE.encode(line))
    if not out:
        raise ExportError(f"recording {path}: no line up to {to_ms}: nothing to export")
    return b"\n".join(out) + b"\n", len(out), first, last


def _journal_slice(path: str, node: str, first_ms: int, t1: int, t2: int) -> dict[str, Any]:
    """The node's intents made in [first_ms, t2], its id tag, cursors and kept matches."""
    Journal.open(path).close()  # folds the log: every commit is in the intents table
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        tag = conn.execute("SELECT value FROM meta WHERE key = 'id_tag'").fetchone()
        intents = [
            dict(row)
            for row in conn.execute(
                "SELECT * FROM intents WHERE owner = ? AND created_ms >= ? AND created_ms <= ?"
                " ORDER BY rowid",
                (node, first_ms, t2),
            )
        ]
        cursors = {r[0]: r[1] for r in conn.execute("SELECT pair, match_id FROM match_cursors")}
        log_ids = {r[0]: r[1] for r in conn.execute("SELECT coin, log_id FROM log_ids")}
        kept = [
            {"match_id": r[0], "kind": r[2], "record": bytes(r[3]).decode("utf-8", "replace")}
            for r in conn.execute(
                "SELECT match_id, owner, delivered, record FROM kept_matches WHERE owner = ?",
                (node,),
            )
        ]
    except sqlite3.Error as exc:
        raise ExportError(f"journal {path}: cannot be read ({exc})") from None
    finally:
        conn.close()
    open_at_t1 = [
        i["client_order_id"]
        for i in intents
        if i["created_ms"] < t1
        and (i["status"] in ("PENDING", "UNKNOWN", "ACCEPTED") or i["updated_ms"] >= t1)
    ]
    return {
        "node": node,
        "id_tag": None if tag is None else str(tag[0]),
        "intents": intents,
        "open_at_t1": open_at_t1,
        "match_cursors": cursors,
        "log_ids": log_ids,
        "kept_matches": kept,
        "note": "cursors and kept matches are the journal's as of the export",
    }


def _strategy_sources(config_path: str | Path, classes: Iterable[str]) -> dict[str, bytes]:
    """module name -> its source file's bytes, found as the node finds strategy modules."""
    add_strategy_dirs(config_path)
    found: dict[str, bytes] = {}
    for spec in classes:
        module = spec.partition(":")[0]
        if module in found:
            continue
        try:
            located = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            located = None
        if located is None or not located.origin or not located.origin.endswith(".py"):
            raise ExportError(f"strategy module {module!r}: no Python source found to bundle")
        found[module] = Path(located.origin).read_bytes()
    return found


def _versions() -> dict[str, Any]:
    try:
        framework = version("perpframe")
    except PackageNotFoundError:
        framework = "unknown"
    packages = {
        str(d.metadata["Name"]).lower(): d.version for d in distributions() if d.metadata["Name"]
    }
    return {
        "framework": framework,
        "python": sys.version.split()[0],
        "packages": dict(sorted(packages.items())),
    }


def export_bundle(
    config_path: str | Path,
    from_ms: int,
    to_ms: int,
    out: str | Path,
    *,
    recording: str | Path | None = None,
    journal: str | Path | None = None,
) -> dict[str, Any]:
    """Write the bundle of [from_ms, to_ms] to out; returns what the manifest says."""
    if to_ms <= from_ms:
        raise ExportError(f"--to ({to_ms}) must be after --from ({from_ms})")
    config, settings = load_backtest_config(config_path)
    rec = recording or config.recording.path
    if rec is None:
        raise ExportError(
            "the config has no recording.path (and no --recording): nothing to export"
        )
    jpath = journal or config.journal.path
    if jpath is None:
        raise ExportError(
            "the config has no journal.path (and no --journal): no intents to compare"
        )
    if not Path(rec).is_file():
        raise ExportError(f"recording {rec}: no such file")
    if not Path(jpath).is_file():
        raise ExportError(f"journal {jpath}: no such file")
    secrets = _secrets(config_path) | set(config.secret_values)
    text = read_config_text(config_path)
    text = split_section(text, "venue")[0]  # keys, secrets, URLs: never in a bundle
    lines, count, first, last = _recording_slice(Path(rec), to_ms)
    if len(lines) > MAX_MEMBER_BYTES:
        raise ExportError(
            f"recording {rec}: {len(lines)} bytes from the session's start to --to, over a"
            f" bundle part's {MAX_MEMBER_BYTES}: record sessions shorter (a new file per run)"
        )
    if last < from_ms:
        raise ExportError(f"recording {rec}: it ends ({last}) before --from ({from_ms})")
    node = config.node.name
    journal_part = _journal_slice(str(jpath), node, first, from_ms, to_ms)
    sources = _strategy_sources(config_path, [s.class_ for s in config.strategies])
    parts: dict[str, bytes] = {
        "config.yaml": text.encode(),
        "recording.jsonl": lines,
        "journal.json": orjson.dumps(journal_part, option=orjson.OPT_INDENT_2),
        "versions.json": orjson.dumps(_versions(), option=orjson.OPT_INDENT_2),
    }
    strategy_parts: dict[str, dict[str, str]] = {}
    for module, source in sources.items():
        name = "strategies/" + module.replace(".", "/") + ".py"
        parts[name] = source
        strategy_parts[module] = {"part": name, "sha256": sha256(source)}
    models = {
        "replay_venue": "answers from the live journal (orderIds, refusals); nothing is sent",
        "fills": "the recorded pushes and match pages, delivered as live heard them",
        "latency_ms": 0,
        "id_seed": "the journal's id tag and the session's first sequence number",
        "backtest_seed": settings.seed,
        "paper": {
            "fill_price": settings.paper.fill_price,
            "latency_ms": settings.paper.latency_ms,
            "slippage": str(settings.paper.slippage),
        },
    }
    parts["models.json"] = orjson.dumps(models, option=orjson.OPT_INDENT_2)
    parts = {name: _scrub(data, secrets) for name, data in parts.items()}
    info = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "window": {"from_ms": from_ms, "to_ms": to_ms},
        "session": {"first_ms": first, "last_ms": last, "lines": count},
        "node": node,
        "strategies": strategy_parts,
        "intents": len(journal_part["intents"]),
    }
    write_bundle(out, parts, info)
    return info
