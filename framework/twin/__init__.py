"""The venue twin: a local exchange that speaks SPEC.md, for the daemon, the tests and demos.

Start it in-process with :class:`VenueTwin` (an async context manager) or from the command
line with ``python run.py venue``. Settings: :class:`TwinSettings`, :func:`load_settings`.
The TEST-ONLY demo credentials are in :mod:`framework.twin.demo`.
"""

from __future__ import annotations

from framework.twin.server import VenueTwin
from framework.twin.settings import TwinSettings, load_settings

__all__ = ["TwinSettings", "VenueTwin", "load_settings"]
