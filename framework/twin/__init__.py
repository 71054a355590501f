"""The venue twin: a local exchange that speaks SPEC.md, for the daemon, the tests and demos.

Start it in-process with :class:`VenueTwin` (an async context manager) or from the command
line with ``python run.py venue``. Settings: :class:`TwinSettings`, :func:`load_settings`.
The TEST-ONLY demo credentials are in :mod:`framework.twin.demo`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from framework.twin.settings import TwinSettings, load_settings

if TYPE_CHECKING:
    from framework.twin.server import VenueTwin

__all__ = ["TwinSettings", "VenueTwin", "load_settings"]


def __getattr__(name: str) -> Any:
    # The server (uvicorn, starlette) is imported only when asked for: the configuration
    # reads framework.twin.settings, and the sans-I/O layers must not pull a web server in.
    if name == "VenueTwin":
        from framework.twin.server import VenueTwin

        return VenueTwin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
