"""The daemon pins glibc's malloc thresholds (framework.live.allocator)."""

from __future__ import annotations

import platform
import sys

from framework.live.allocator import pin_malloc_thresholds


def test_the_thresholds_are_pinned_where_malloc_is_glibc() -> None:
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert pin_malloc_thresholds() is glibc
