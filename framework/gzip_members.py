"""Gzip files made of concatenated members, some perhaps cut short: what a recording is when
its name ends in .gz (each run appends a member; a killed writer leaves a member without its
trailer). Known by their first bytes, never by their name; inflated back a bounded piece at a
time, what a cut member still holds kept, reading going on at the next member's header."""

from __future__ import annotations

import zlib
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final, Protocol

__all__ = ["GZIP_MAGIC", "InflateCounts", "inflate", "is_gzip"]

GZIP_MAGIC: Final = b"\x1f\x8b\x08"
"""The first bytes of a gzip member (deflate), whatever the file is named."""

_SALVAGE_STEP: Final = 4096  # compressed bytes inflated at once after an error (~4 MB out)


def is_gzip(path: str | Path) -> bool:
    """Whether the file starts with gzip's magic bytes (its name does not matter)."""
    with open(path, "rb") as handle:
        return handle.read(len(GZIP_MAGIC)) == GZIP_MAGIC


class InflateCounts(Protocol):
    """Where inflate counts the compressed bytes read and the members found cut short."""

    bytes_read: int
    cut_members: int


def inflate(handle: BinaryIO, limit: int, stats: InflateCounts) -> Iterator[bytes]:
    """The text of every member of handle's gzip stream, at most limit bytes a piece."""
    read = max(limit // 4, 1 << 16)
    inflater = zlib.decompressobj(31)
    data = b""
    while True:
        if not data:
            data = handle.read(read)
            stats.bytes_read += len(data)
            if not data:
                break
        saved = inflater.copy()
        try:
            out = inflater.decompress(data, limit)  # what is left: unconsumed_tail
        except zlib.error:
            # A member cut short (killed writer) followed by the next run's member: keep
            # what the cut member still yields, then start again at the next gzip header.
            good = yield from _salvage(saved, data)
            stats.cut_members += 1
            found = data.find(GZIP_MAGIC, good)
            while found < 0:
                more = handle.read(read)
                if not more:
                    return
                stats.bytes_read += len(more)
                data = data[-2:] + more
                found = data.find(GZIP_MAGIC)
            inflater = zlib.decompressobj(31)
            data = data[found:]
            continue
        if out:
            yield out
        if inflater.eof:  # members are concatenated: a recording appended by a later run
            data = inflater.unused_data
            inflater = zlib.decompressobj(31)
        else:
            data = inflater.unconsumed_tail
    if not inflater.eof:
        tail = inflater.flush()  # all input was taken: what is left is a few bytes
        if tail:
            yield tail


def _salvage(inflater: Any, data: bytes) -> Generator[bytes, None, int]:
    """What data inflates to from inflater's state up to its first error, a bounded piece at
    a time; returns the length of the prefix of data that inflates without error."""
    done = 0
    while done < len(data):
        piece = data[done : done + _SALVAGE_STEP]
        trial = inflater.copy()
        try:
            out = trial.decompress(piece)
        except zlib.error:
            good, out = _longest_valid_prefix(inflater, piece)
            if out:
                yield out
            return done + good
        if out:
            yield out
        inflater = trial
        done += len(piece)
    return done


def _longest_valid_prefix(inflater: Any, data: bytes) -> tuple[int, bytes]:
    """How much of data inflates without error from inflater's state, and its output."""
    low, high = 0, len(data)
    best = b""
    while high - low > 1:
        middle = (low + high) // 2
        trial = inflater.copy()
        try:
            out = trial.decompress(data[:middle])
        except zlib.error:
            high = middle
        else:
            low, best = middle, out
    return low, best
