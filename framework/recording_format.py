"""The recording file as a file: what both its writer (live) and its reader (backtest) must
agree on before a line is read, so neither imports the other: gzip is known by its bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["GZIP_MAGIC", "is_gzip"]

GZIP_MAGIC: Final = b"\x1f\x8b\x08"
"""The first bytes of a gzip member (deflate), whatever the file is named."""


def is_gzip(path: str | Path) -> bool:
    """Whether the file starts with gzip's magic bytes (its name does not matter)."""
    with open(path, "rb") as handle:
        return handle.read(len(GZIP_MAGIC)) == GZIP_MAGIC
