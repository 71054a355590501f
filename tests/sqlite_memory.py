"""SQLite's own count of the bytes it holds in this process (``sqlite3_memory_used``).

Read through ctypes from the shared library Python's ``_sqlite3`` links (one copy, so one
set of counters): the standard library exposes no memory figure of SQLite. Where the library
cannot be loaded (Python built with SQLite linked in statically), the figure is None. Used by
the memory soak (tests/benchmarks/bench_soak.py) and the journal memory test.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["sqlite_memory_used"]


def _load() -> ctypes.CDLL | None:
    found = ctypes.util.find_library("sqlite3")
    try:
        library = ctypes.CDLL(found) if found else None
    except OSError:
        return None
    if library is not None:
        library.sqlite3_memory_used.restype = ctypes.c_int64
    return library


_SQLITE = _load()


def sqlite_memory_used() -> int | None:
    """Bytes SQLite has allocated and not freed (every connection of the process), or None."""
    return None if _SQLITE is None else int(_SQLITE.sqlite3_memory_used())
