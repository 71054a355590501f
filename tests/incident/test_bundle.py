"""The bundle's reading is bounded and refuses what is unsafe, each in one line."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from framework.cli import main
from framework.incident import bundle as bundle_module
from framework.incident.bundle import BundleError, read_bundle, write_bundle
from framework.incident.export import ExportError, parse_time


def tar_with(path: Path, members: list[tarfile.TarInfo], data: bytes = b"x") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for member in members:
            if member.isfile():
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
            else:
                tar.addfile(member)
    return path


def refused(path: Path) -> str:
    with pytest.raises(BundleError) as caught:
        read_bundle(path)
    text = str(caught.value)
    assert "\n" not in text
    return text


def test_a_bundle_round_trips_with_its_hashes(tmp_path: Path) -> None:
    out = tmp_path / "b.tar.gz"
    write_bundle(out, {"a.json": b"{}", "strategies/s/x.py": b"pass\n"}, {"window": {}})
    manifest, parts = read_bundle(out)
    assert parts == {"a.json": b"{}", "strategies/s/x.py": b"pass\n"}
    assert manifest["parts"]["a.json"]["bytes"] == 2


def test_a_path_traversal_is_refused(tmp_path: Path) -> None:
    for name in ("../evil.py", "/etc/evil", "a/../../evil", "a//b"):
        text = refused(tar_with(tmp_path / "t.tar.gz", [tarfile.TarInfo(name)]))
        assert "unsafe path: refused" in text


def test_links_and_directories_are_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    assert "not a regular file" in refused(tar_with(tmp_path / "l.tar.gz", [link]))
    folder = tarfile.TarInfo("dir")
    folder.type = tarfile.DIRTYPE
    assert "not a regular file" in refused(tar_with(tmp_path / "d.tar.gz", [folder]))


def test_member_counts_and_sizes_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle_module, "MAX_MEMBERS", 3)
    many = [tarfile.TarInfo(f"m{i}") for i in range(4)]
    assert "more than 3 members" in refused(tar_with(tmp_path / "m.tar.gz", many))
    monkeypatch.setattr(bundle_module, "MAX_MEMBER_BYTES", 10)
    big = tar_with(tmp_path / "b.tar.gz", [tarfile.TarInfo("big")], b"y" * 11)
    assert "too large" in refused(big)


def test_a_part_missing_or_added_or_no_manifest_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "b.tar.gz"
    write_bundle(out, {"a.json": b"{}"}, {})
    with tarfile.open(out) as raw:
        members = [(m, raw.extractfile(m).read()) for m in raw]  # type: ignore[union-attr]
    extra = tmp_path / "extra.tar.gz"
    with tarfile.open(extra, "w:gz") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data))
        added = tarfile.TarInfo("b.json")
        added.size = 2
        tar.addfile(added, io.BytesIO(b"{}"))
    assert "b.json is not in the manifest" in refused(extra)
    missing = tmp_path / "missing.tar.gz"
    with tarfile.open(missing, "w:gz") as tar:
        for member, data in members:
            if member.name != "a.json":
                tar.addfile(member, io.BytesIO(data))
    assert "a.json is missing" in refused(missing)
    bare = tar_with(tmp_path / "bare.tar.gz", [tarfile.TarInfo("a.json")])
    assert "no manifest.json" in refused(bare)
    not_tar = tmp_path / "n.tar.gz"
    not_tar.write_bytes(b"hello")
    assert "not a readable tar.gz" in refused(not_tar)


def test_times_are_epoch_ms_or_iso() -> None:
    assert parse_time("1700000000123") == 1700000000123
    assert parse_time("2023-11-14T22:13:20Z") == 1700000000000
    assert parse_time("2023-11-14T22:13:20") == 1700000000000
    with pytest.raises(ExportError):
        parse_time("yesterday")


def test_export_problems_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "pairs: {ETH-USD: {}}\n"
        "strategies: [{name: a, class: 'strategies.ladder:Ladder', params: {pair: ETH-USD}}]\n"
    )
    base = ["incident", "export", "-c", str(config), "--out", str(tmp_path / "b.tar.gz")]
    cases = {
        ("--from", "2000", "--to", "1000"): "must be after --from",
        ("--from", "1000", "--to", "2000"): "no recording.path",
        ("--from", "soon", "--to", "2000"): "expected epoch ms or ISO-8601",
    }
    for args, expected in cases.items():
        assert main([*base, *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, err
    missing = [*base, "--from", "1", "--to", "2", "--recording", str(tmp_path / "none.jsonl")]
    assert main([*missing, "--journal", str(tmp_path / "j.sqlite")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["incident", "replay", str(tmp_path / "none.tar.gz")]) == 2
    assert "not a readable tar.gz" in capsys.readouterr().err


def test_a_crafted_bundle_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.tar.gz"
    config = b"pairs: {ETH-USD: {}}\nstrategies: [{name: a, class: 'bad.mod:A'}]\n"
    source = b"from strategies.pulse import Pulse as A\n"
    parts = {"config.yaml": config, "strategies/bad/mod.py": source}
    info = {"strategies": {"bad.mod": {"part": "strategies/bad/mod.py"}}}
    write_bundle(out, parts, info)  # no window, no journal
    assert main(["incident", "replay", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a bundle this replay reads" in err
    parts["strategies/bad/mod.py"] = b"def broken(:\n"
    write_bundle(out, parts, info)
    assert main(["incident", "replay", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "strategy module bad.mod does not run (SyntaxError" in err
