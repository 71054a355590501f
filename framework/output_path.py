"""Whether a command can write where it was told to: checked before the work, one clear line.

``record --out``, ``backtest --report``, ``sweep --out``, ``new-strategy --dir`` and a live
config's ``recording.path`` are checked before anything runs, so a path that cannot be
written is one line naming it and why (``/tmp/f is a file, not a directory``), never a
traceback after a long run. Written here because the standard library only reports the
failed attempt itself (``[Errno 17] File exists: '/tmp/f'``), naming neither the path asked
for nor what is wrong with it; nothing is created by the check.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["unwritable"]


def _ancestor(path: Path) -> Path:
    """The nearest existing directory entry at or above path (the current directory at worst)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path.cwd()


def unwritable(path: str | Path, *, directory: bool) -> str | None:
    """Why path cannot be written (a directory to make or fill, else a file), or None if it can."""
    target = Path(path)
    try:
        found = _ancestor(target)
        if found == target:
            if directory and not target.is_dir():
                return f"{target} is a file, not a directory"
            if not directory and target.is_dir():
                return f"{target} is a directory"
            mode = os.W_OK | os.X_OK if directory else os.W_OK
            if not os.access(target, mode):
                return f"{target}: permission denied"
            return None
        if not found.is_dir():
            return f"{found} is a file, not a directory"
        if not os.access(found, os.W_OK | os.X_OK):
            return f"cannot create anything in {found}: permission denied"
    except OSError as exc:
        return f"{exc.filename or target}: {exc.strerror or exc}"
    return None
