"""The daemon's allocator settings: glibc malloc's thresholds pinned at 128 KiB.

glibc raises its mmap threshold (up to 32 MB) each time a large block it had mapped is
freed; from then on large blocks are carved from the heap, and the holes they leave are kept
instead of being returned: a long-running daemon's RSS creeps up by a few MB per hour with
no Python object growing (measured by ``tests/benchmarks/bench_soak.py``: glibc's free
bytes 2.9 -> 4.0 MB over ten minutes, 1.5 MB/10 min of RSS; with the thresholds pinned,
0.2). Pinning both thresholds with ``mallopt`` ends the raising. The environment variables
``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` would do the same but are read only
at process start, which a ``perpframe live`` cannot arrange for itself.

Only the daemon's entry (``perpframe live``) calls it: a program that embeds
:class:`~framework.live.node.Node` keeps its own allocator settings. Elsewhere than glibc
(macOS, musl) it does nothing. Written here: no package offers this one call.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Final

__all__ = ["pin_malloc_thresholds"]

THRESHOLD: Final = 128 * 1024
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3


def pin_malloc_thresholds(threshold: int = THRESHOLD) -> bool:
    """Pin glibc's mmap and trim thresholds; True when done (False: not glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(
        mallopt(_M_TRIM_THRESHOLD, threshold)
    )
