"""One sweep trial, where a Dask worker (or the serial benchmark) runs it: a plain backtest.

A trial is :func:`framework.backtest.cli.run_backtest` -- what ``run.py backtest`` runs --
with the trial's parameters set over the strategies' params, and its report.json bytes are
those ``run.py backtest`` writes for the same config.

How the files reach the workers: the client reads the recording (and a ``prices_csv``) once
and registers a :class:`ShipFiles` worker plugin holding their bytes; each worker, including
one that joins later, writes them once to its local directory, under their content digest
and their own name (report.json names the recording's file), and every trial on that worker
reads that local copy. With ``workers.recording: shared`` nothing is shipped: the path must
be readable on every worker (shared storage mounted alike).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

import attrs
import orjson
from distributed.diagnostics.plugin import WorkerPlugin

from framework.backtest.cli import run_backtest
from framework.backtest.runner import BacktestSettings
from framework.config import Config
from framework.engine.raised import raised

__all__ = [
    "ShipFiles",
    "ShippedFile",
    "TrialOutcome",
    "TrialTask",
    "report_bytes",
    "run_trial",
    "shipped",
    "warm_up",
]

_SHIPPED_DIR = "perpframe-files"


def report_bytes(results: Any) -> bytes:
    """report.json's bytes, exactly as :func:`framework.backtest.report.write_report` writes."""
    # write_report does this dump inline, then renders report.html (~5 MB, plotly inlined),
    # which a trial does not need; the sweep tests compare trial reports with those of
    # `run.py backtest` byte for byte, so the two cannot drift apart unnoticed.
    return orjson.dumps(results, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


@attrs.frozen
class ShippedFile:
    """A file the client shipped to every worker, found there by digest and name."""

    digest: str
    name: str

    def local_path(self, root: str | Path | None = None) -> Path:
        """Where it is on this worker (root: the worker's local directory)."""
        if root is None:
            from distributed import get_worker

            root = get_worker().local_directory
        return Path(root) / _SHIPPED_DIR / self.digest / self.name


def shipped(path: str | Path) -> tuple[ShippedFile, bytes]:
    """A file's reference for the workers and its bytes (read once, by the client)."""
    data = Path(path).read_bytes()
    return ShippedFile(hashlib.sha256(data).hexdigest()[:24], Path(path).name), data


class ShipFiles(WorkerPlugin):
    """Worker plugin: writes the shipped files to each worker's local directory once."""

    def __init__(self, files: list[tuple[ShippedFile, bytes]]) -> None:
        self.files = files
        self.name = "perpframe-files-" + "-".join(ref.digest for ref, _ in files)

    def setup(self, worker: Any) -> None:
        """Write every file not there yet (atomically: a trial never sees half of one)."""
        for ref, data in self.files:
            target = ref.local_path(worker.local_directory)
            if target.is_file() and target.stat().st_size == len(data):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.{os.getpid()}.part")
            partial.write_bytes(data)
            partial.replace(target)

    def teardown(self, worker: Any) -> None:
        """Nothing to release (the files go with the worker's directory)."""


@attrs.frozen
class TrialTask:
    """Everything a trial needs: the config with its parameters set, settings, recording."""

    number: int
    config: Config
    settings: BacktestSettings
    recording: str | ShippedFile
    prices_csv: ShippedFile | None = None


@attrs.frozen
class TrialOutcome:
    """What a trial sends back: report.json's bytes or the error, and where time went."""

    number: int
    report: bytes | None
    error: str | None
    backtest_s: float
    """Backtest.run() alone (what a single backtest costs)."""
    trial_s: float
    """The whole trial on the worker: finding files, the backtest, the report's bytes."""
    worker: str
    began_at: float = 0.0
    """Epoch seconds when the worker began the trial (gaps between trials show idle time)."""


def _where() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


def run_trial(task: TrialTask) -> TrialOutcome:
    """Run one trial; an exception becomes a failed outcome with its message, never a raise."""
    began = time.perf_counter()
    began_at = time.time()
    backtest_s = 0.0
    try:
        recording = (
            task.recording.local_path()
            if isinstance(task.recording, ShippedFile)
            else Path(task.recording)
        )
        settings = task.settings
        if task.prices_csv is not None:
            settings = attrs.evolve(settings, prices_csv=str(task.prices_csv.local_path()))
        started = time.perf_counter()
        quiet = logging.root.manager.disable
        # A sweep runs hundreds of backtests: their warnings would bury the progress bar (a
        # trial that fails keeps its message). report.json does not depend on logging.
        logging.disable(logging.WARNING)
        try:
            result = run_backtest(task.config, settings, recording)
        finally:
            logging.disable(quiet)
        backtest_s = time.perf_counter() - started
        report, error = report_bytes(result.results), None
    except Exception as exc:
        report, error = None, raised(exc)
    return TrialOutcome(
        number=task.number,
        report=report,
        error=error,
        backtest_s=backtest_s,
        trial_s=time.perf_counter() - began,
        worker=_where(),
        began_at=began_at,
    )


def warm_up() -> None:
    """Import what a trial needs, once per worker (the first trial's time is a backtest's)."""
    import framework.backtest.replay
    import framework.engine.kernel
    import framework.venue.codec  # noqa: F401
