"""What an exception raised in a strategy's code is, in one line a trader reads.

``ValueError: oops (at my_bot.py:42)``: the type, the message on one line, and the line of
the user's code it came through last: the innermost frame outside this framework and outside
Python's own library and installed packages (a bad intent passed to ``submit`` names the
strategy's line, not the framework's check); without one, the innermost outside this
framework; else the innermost. Paths are compared as real paths (a symlinked checkout).
"""

from __future__ import annotations

import functools
import os
import sysconfig
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = ["one_line", "raised"]

_FRAMEWORK: Final = os.path.realpath(Path(__file__).parents[1]) + "/"
_LIBRARY: Final = tuple(
    {os.path.realpath(p) + "/" for key in ("stdlib", "platstdlib", "purelib", "platlib")
     if (p := sysconfig.get_paths().get(key))}
)  # fmt: skip


def one_line(exc: BaseException) -> str:
    """The exception's message on one line (its type's name when it has none)."""
    try:
        text = str(exc)
    except Exception:  # a user's exception whose __str__ fails: said, never raised again
        return f"<{type(exc).__name__}: str() failed>"
    return " ".join((text or type(exc).__name__).split())


def raised(exc: BaseException) -> str:
    """``Type: message (at file.py:line)``; see the module docstring for which line."""
    where = _where(exc.__traceback__)
    return f"{type(exc).__name__}: {one_line(exc)}{where}"


@functools.lru_cache(maxsize=1024)
def _kind(filename: str) -> int:
    """0: the user's own code; 1: Python's libraries; 2: this framework (by the real path)."""
    if filename[:1] == "<":
        return 1
    real = os.path.realpath(filename)
    if real.startswith(_FRAMEWORK):
        return 2
    return 1 if real.startswith(_LIBRARY) else 0


def _where(tb: TracebackType | None) -> str:
    innermost = own = outside = None
    while tb is not None:
        innermost = tb
        kind = _kind(tb.tb_frame.f_code.co_filename)
        if kind == 0:
            own = tb
        if kind != 2:
            outside = tb
        tb = tb.tb_next
    found = own or outside or innermost
    if found is None:
        return ""
    return f" (at {Path(found.tb_frame.f_code.co_filename).name}:{found.tb_lineno})"
