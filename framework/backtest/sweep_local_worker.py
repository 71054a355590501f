"""Preloaded into each worker of the sweep's embedded LocalCluster: Ctrl-C is the client's.

Ctrl-C in a terminal signals the whole process group, the LocalCluster's worker processes
included; each would die of it with a traceback of its own (two 30-line Dask tracebacks on
two workers) while the client is stopping the sweep. A worker of the embedded cluster ignores
SIGINT instead: the client stops the sweep (finished trials kept) and closes the cluster,
which ends the workers. Only the embedded cluster gets this (see sweep._client): workers of
your own cluster keep their signals.
"""

from __future__ import annotations

import signal
from typing import Any

__all__ = ["dask_setup"]


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run in the worker process as it starts: ignore SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
