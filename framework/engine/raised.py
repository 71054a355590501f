"""What an exception raised in a strategy's code is, in one line a trader reads.

``ValueError: oops (at my_bot.py:42)``: the type, the message on one line, and the line of
the user's code it came through last: the innermost frame outside this framework and outside
Python's own library and installed packages (a bad intent passed to ``submit`` names the
strategy's line, not the framework's check). Without such a frame, the innermost one.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = ["one_line", "raised"]

_FRAMEWORK: Final = str(Path(__file__).resolve().parents[1]) + "/"
_LIBRARY: Final = tuple(
    {str(Path(p).resolve()) + "/" for key in ("stdlib", "platstdlib", "purelib", "platlib")
     if (p := sysconfig.get_paths().get(key))}
)  # fmt: skip


def one_line(exc: BaseException) -> str:
    """The exception's message on one line (its type's name when it has none)."""
    return " ".join((str(exc) or type(exc).__name__).split())


def raised(exc: BaseException) -> str:
    """``Type: message (at file.py:line)``; see the module docstring for which line."""
    where = _where(exc.__traceback__)
    return f"{type(exc).__name__}: {one_line(exc)}{where}"


def _where(tb: TracebackType | None) -> str:
    innermost = own = None
    while tb is not None:
        innermost = tb
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith(_FRAMEWORK) and not name.startswith(_LIBRARY) and name[:1] != "<":
            own = tb
        tb = tb.tb_next
    found = own or innermost
    if found is None:
        return ""
    return f" (at {Path(found.tb_frame.f_code.co_filename).name}:{found.tb_lineno})"
