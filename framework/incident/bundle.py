"""The incident bundle: a tar.gz of named parts and a manifest holding each part's SHA-256.

Why a manifest: a replay that names a divergence is only worth something if it replays what
was exported. Every part is hashed at export; a bundle whose parts do not match (edited,
cut, or a part added or missing) is refused in one line, before anything runs. Reading is
bounded: at most :data:`MAX_MEMBERS` members, each a regular file of at most
:data:`MAX_MEMBER_BYTES`, :data:`MAX_TOTAL_BYTES` in all, named by a relative path without
``..``; nothing is extracted to disk by tarfile (the parts are read into memory), so a path
traversal or a link cannot write outside.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from framework.venue.errors import FrameworkError

__all__ = [
    "FORMAT",
    "MANIFEST",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_TOTAL_BYTES",
    "BundleError",
    "read_bundle",
    "sha256",
    "write_bundle",
]

FORMAT: Final = 1
"""The bundle format version the manifest states."""
MANIFEST: Final = "manifest.json"
"""The manifest's member name."""
MAX_MEMBERS: Final = 256
"""Members a bundle may hold."""
MAX_MEMBER_BYTES: Final = 1 << 30
"""Bytes of one part (the recording is the big one)."""
MAX_TOTAL_BYTES: Final = 2 << 30
"""Bytes of all parts together."""

_NAME: Final = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")


class BundleError(FrameworkError):
    """A bundle that cannot be read or does not match its manifest: one line."""


def sha256(data: bytes) -> str:
    """The hex SHA-256 of data."""
    return hashlib.sha256(data).hexdigest()


def _check_name(bundle: str, name: str) -> None:
    parts = name.split("/")
    if not _NAME.fullmatch(name) or any(p in ("", ".", "..") for p in parts):
        raise BundleError(f"bundle {bundle}: member {name[:80]!r} has an unsafe path: refused")


def write_bundle(out: str | Path, parts: Mapping[str, bytes], info: Mapping[str, Any]) -> str:
    """Write parts and a manifest (info, plus each part's sha256 and size) to out; returns
    the manifest's own hash."""
    for name in parts:
        _check_name(str(out), name)
    manifest = {
        **info,
        "format": FORMAT,
        "parts": {
            name: {"sha256": sha256(data), "bytes": len(data)}
            for name, data in sorted(parts.items())
        },
    }
    encoded = orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    path = Path(out)
    tmp = path.with_name(path.name + ".part")
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        for name, data in [(MANIFEST, encoded), *sorted(parts.items())]:
            member = tarfile.TarInfo(name)
            member.size = len(data)
            member.mode = 0o644
            tar.addfile(member, io.BytesIO(data))
    tmp.replace(path)
    return sha256(encoded)


def read_bundle(path: str | Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest, parts) of a bundle, every part checked against the manifest; BundleError
    (one line) when the bundle is unreadable, unsafe, over its bounds or does not match."""
    bundle = str(path)
    parts: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(bundle, "r:gz") as tar:
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise BundleError(f"bundle {bundle}: more than {MAX_MEMBERS} members: refused")
                _check_name(bundle, member.name)
                if not member.isfile():
                    raise BundleError(
                        f"bundle {bundle}: member {member.name!r} is not a regular file: refused"
                    )
                if member.size > MAX_MEMBER_BYTES or total + member.size > MAX_TOTAL_BYTES:
                    raise BundleError(f"bundle {bundle}: member {member.name!r} too large: refused")
                if member.name in parts:
                    raise BundleError(f"bundle {bundle}: member {member.name!r} twice: refused")
                handle = tar.extractfile(member)
                data = b"" if handle is None else handle.read(member.size + 1)
                if len(data) != member.size:
                    raise BundleError(f"bundle {bundle}: member {member.name!r} is cut short")
                total += member.size
                parts[member.name] = data
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise BundleError(f"bundle {bundle}: not a readable tar.gz ({exc})") from None
    raw = parts.pop(MANIFEST, None)
    if raw is None:
        raise BundleError(f"bundle {bundle}: no {MANIFEST}: refused")
    try:
        manifest = orjson.loads(raw)
        listed = manifest["parts"]
        if manifest.get("format") != FORMAT or not isinstance(listed, dict):
            raise ValueError("unknown format")
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"bundle {bundle}: {MANIFEST} unreadable ({exc}): refused") from None
    for name in sorted(set(listed) | set(parts)):
        entry = listed.get(name)
        found = parts.get(name)
        if entry is None:
            raise BundleError(f"bundle {bundle}: part {name} is not in the manifest: refused")
        if found is None:
            raise BundleError(f"bundle {bundle}: part {name} is missing: refused")
        if not isinstance(entry, dict) or entry.get("sha256") != sha256(found):
            raise BundleError(
                f"bundle {bundle}: part {name} does not match its manifest hash: refused"
            )
    return manifest, parts
