"""Parameter sweeps: many backtests at once on a Dask cluster, Optuna choosing the trials.

Why these two: running trials is a distributed-scheduling problem (worker processes, machines
joining and dying, files reaching them, results coming back) that Dask distributed solves
from an embedded ``LocalCluster`` on a laptop to a scheduler serving many machines; choosing
trials (grid, random, TPE) and keeping them in a database a sweep can resume from is what
Optuna does. A hand-written process pool or optimiser would be worse at both.

:func:`run_sweep` keeps as many trials in flight as the cluster has threads (no more: a
worker that dies takes only what it was running with it). Optuna's ask/tell interface picks
each one's parameters, one trial ahead, through :class:`.sweep_queue.TrialQueue` (contiguous
trial numbers, never parameters that already ran), and a Dask future runs it
(:func:`.sweep_trial.run_trial`). As the scheduler reports one finished, the next is
submitted at once (a worker idles only for that round trip); then the finished trial's
result is fetched, its score told to the study (an RDB storage: ``sweep.db``, SQLite, in
the output directory) and its report.json written to ``trials/NNNNN/``. trials.csv, best.yaml and
sweep.html are written from the study when the sweep ends (:mod:`.sweep_report`). A trial
that raises, or whose worker died, is told FAIL with its message and the sweep goes on.
Ctrl-C cancels what is in flight and leaves it RUNNING in sweep.db: ``resume`` runs those
first, under their numbers, then goes on to the requested count; finished trials are never
run again (trials a killed client left RUNNING are treated the same way). The embedded
LocalCluster's workers ignore Ctrl-C (:mod:`.sweep_local_worker`): the client alone stops.

Strategy modules reach the workers through Dask's upload of files (a module as its ``.py``,
a package as a ``.zip``); the recording as :class:`~framework.backtest.sweep_trial.ShipFiles`
(see there). What a user of a real cluster provides: workers with the same Python and
``perpframe[sweep]`` installed, reachable from this machine; with ``workers.recording:
shared``, the recording at the same path on every worker.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import logging
import math
import os
import signal
import site
import sysconfig
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import dask
import optuna
from distributed import Client, Future, LocalCluster, as_completed
from distributed.diagnostics.plugin import UploadFile
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState

from framework.backtest.sweep_config import Choice, MissingKey, SweepConfig
from framework.backtest.sweep_queue import Queued, TrialQueue, counted, trial_params
from framework.backtest.sweep_trial import (
    ShipFiles,
    ShippedFile,
    TrialOutcome,
    TrialTask,
    run_trial,
    shipped,
    warm_up,
)
from framework.output_path import unwritable
from framework.venue.errors import FrameworkError

__all__ = [
    "LOCAL_CLUSTER_CONFIG",
    "STUDY",
    "SweepError",
    "SweepResult",
    "counted",
    "distributions",
    "open_study",
    "run_sweep",
    "trial_dir",
    "trial_params",
]

log = logging.getLogger("framework.sweep")

STUDY = "sweep"
"""The study's name in sweep.db."""

LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}
"""Dask settings of the embedded LocalCluster (see _client); set them on a cluster of yours."""


class SweepError(FrameworkError):
    """A sweep that cannot start or go on (output directory, cluster, a changed sweep file)."""


@attrs.define
class SweepResult:
    """How a sweep ended: the study, the trials run now, and whether it was interrupted."""

    study: optuna.Study
    requested: int
    ran: int
    interrupted: bool
    workers: int
    written: list[Path]
    """trials.csv, best.yaml (once a trial completed) and sweep.html."""
    exhausted: str | None = None
    """Why fewer trials than requested ran: no new parameters were left to try."""
    duplicates: int = 0
    """Proposals of parameters already taken, told PRUNED instead of run (see sweep_queue)."""
    lost: str | None = None
    """Why the sweep stopped early because the cluster had no worker left (None: it did not)."""


def trial_dir(out: Path, number: int) -> Path:
    """Where a trial's report.json goes."""
    return out / "trials" / f"{number:05d}"


def distributions(sweep: SweepConfig) -> dict[str, BaseDistribution]:
    """Optuna's distribution for each ``strategy.param`` (a grid samples listed values)."""
    out: dict[str, BaseDistribution] = {}
    for key, space in sweep.spaces.items():
        if isinstance(space, Choice) or sweep.file.sampler.kind == "grid":
            out[key] = CategoricalDistribution(space.grid())
        elif space.integer:
            out[key] = IntDistribution(
                int(space.low), int(space.high), step=int(space.step or 1), log=space.log
            )
        else:
            out[key] = FloatDistribution(space.low, space.high, step=space.step, log=space.log)
    return out


def _sampler(sweep: SweepConfig, already: int) -> optuna.samplers.BaseSampler:
    settings = sweep.file.sampler
    # A resumed sampler is seeded apart, or a random one would draw the same trials again.
    seed = None if settings.seed is None else settings.seed + already
    if settings.kind in ("grid", "random"):
        # A grid is every combination enqueued when the study is created (see open_study):
        # queued trials persist in sweep.db, and Optuna's GridSampler stops the study, which
        # the ask-and-tell loop cannot have.
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=settings.startup_trials)


def _signature(sweep: SweepConfig) -> dict[str, Any]:
    """What must not change between a sweep and its resumption."""
    return {
        "spaces": {key: repr(space) for key, space in sweep.spaces.items()},
        "objective": sweep.objective.label,
        "direction": sweep.objective.direction,
        "sampler": sweep.file.sampler.kind,
    }


def _check_out(out: Path, *, resume: bool) -> Path:
    """out/sweep.db, or SweepError: out unwritable, a sweep.db and no resume, or none to resume."""
    problem = unwritable(out, directory=True)
    if problem is not None:
        raise SweepError(f"cannot write to {out}: {problem}")
    db = out / "sweep.db"
    if db.exists() and not resume:
        raise SweepError(f"{db} exists: pass --resume to continue that sweep, or another --out")
    if resume and not db.exists():
        raise SweepError(f"{db}: no sweep to resume")
    return db


def open_study(sweep: SweepConfig, out: Path, *, resume: bool) -> optuna.Study:
    """The study in out/sweep.db: new (refused if there is one) or resumed (refused if none)."""
    db = _check_out(out, resume=resume)
    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = _storage(db)
    if resume:
        try:
            study = optuna.load_study(study_name=STUDY, storage=storage)
        except KeyError:
            raise SweepError(f"{db}: holds no sweep") from None
        if study.user_attrs.get("signature") != _signature(sweep):
            raise SweepError(
                f"{db}: the sweep file's params, objective or sampler changed since this sweep "
                "began; start a new one with another --out"
            )
        study.sampler = _sampler(sweep, len(study.get_trials(deepcopy=False)))
        return study
    study = optuna.create_study(
        study_name=STUDY,
        storage=storage,
        direction=optuna.study.StudyDirection[sweep.objective.direction.upper()],
        sampler=_sampler(sweep, 0),
    )
    study.set_user_attr("signature", _signature(sweep))
    study.set_user_attr("objective", sweep.objective.label)
    if sweep.file.sampler.kind == "grid":
        keys = list(sweep.spaces)
        for values in itertools.product(*(sweep.spaces[k].grid() for k in keys)):
            study.enqueue_trial(dict(zip(keys, values, strict=True)))
    return study


def _storage(db: Path) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage on SQLite in WAL mode (no fsync per commit; a kill loses nothing)."""
    from sqlalchemy import event

    storage = optuna.storages.RDBStorage(f"sqlite:///{db.resolve()}")

    def pragmas(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    event.listen(storage.engine, "connect", pragmas)
    storage.engine.dispose()  # the connection made while creating tables goes
    return storage


def _installed(origin: Path) -> bool:
    """Whether a module file lies in an installation directory (site-packages)."""
    roots = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()}
    resolved = origin.resolve()
    return any(resolved.is_relative_to(Path(root).resolve()) for root in roots if root)


def _ship_modules(client: Client, sweep: SweepConfig, scratch: Path) -> list[str]:
    """Upload each strategy's top-level module or package to the workers; the plugins' names.

    Modules found in the working directory, beside the config or in an editable install
    are uploaded; those of a package installed in site-packages are not (install it on
    the workers).
    """
    tops: list[str] = []
    for strategy in sweep.config.strategies:
        top = strategy.class_.partition(":")[0].split(".")[0]
        if top not in tops and top != "framework":
            tops.append(top)
    names = []
    for top in tops:
        spec = importlib.util.find_spec(top)
        if spec is None or spec.origin in (None, "built-in", "frozen"):
            continue  # the config check has already said whether it can be imported
        if _installed(Path(spec.origin)):
            continue  # an installed distribution: the workers install it as they do perpframe
        if spec.submodule_search_locations:
            root = Path(next(iter(spec.submodule_search_locations)))
            path = scratch / f"{top}.zip"
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
                for source in sorted(root.rglob("*.py")):
                    archive.write(source, Path(top) / source.relative_to(root))
        else:
            path = Path(spec.origin)
        # Workers only: the scheduler need not be able to import strategies.
        name = f"perpframe-{path.name}"
        client.register_plugin(UploadFile(str(path), load=True), name=name)
        names.append(name)
    return names


def _files(
    client: Client, sweep: SweepConfig, recording: Path
) -> tuple[str | ShippedFile, ShippedFile | None, list[str]]:
    """The recording (and prices CSV) as trials find them (shipped, or a shared path); plugins."""
    if sweep.file.workers.recording == "shared":
        return str(recording.resolve()), None, []
    files = [shipped(recording)]
    if sweep.settings.prices_csv:
        files.append(shipped(sweep.settings.prices_csv))
    plugin = ShipFiles(files)
    client.register_plugin(plugin)
    return files[0][0], files[1][0] if len(files) > 1 else None, [plugin.name]


def _unregister(client: Client, names: list[str]) -> None:
    """Drop the sweep's worker plugins: a long-lived scheduler need not keep the files."""
    for name in names:
        with contextlib.suppress(Exception):  # the cluster may be going away already
            client.unregister_worker_plugin(name)


@contextmanager
def _client(scheduler: str | None, workers: int | None) -> Iterator[Client]:
    """A client of the scheduler at that address, or of a LocalCluster started for the sweep."""
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="20s")
        except OSError as exc:
            raise SweepError(f"scheduler {scheduler}: cannot connect: {exc}") from None
        with client:
            yield client
        return
    count = workers or os.cpu_count() or 1
    # One thread per worker process: a backtest holds the GIL all the way. A worker holds
    # no trial beyond the one it runs (the default saturation of 1.1 rounds up to two on one
    # thread): Dask counts a death against every trial the worker held. The worker's
    # statistical profiler (a stack sample every 10 ms) and its 20 ms ticks take the GIL
    # from the trial: measured 15-20 % slower backtests with them on.
    # Its workers ignore Ctrl-C, which the terminal sends them too: the client stops the sweep.
    ignore_ctrl_c = {"distributed.worker.preload": ["framework.backtest.sweep_local_worker"]}
    with (
        dask.config.set({**LOCAL_CLUSTER_CONFIG, **ignore_ctrl_c}),
        LocalCluster(
            n_workers=count,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # any free port: 8787 may be taken (None means 8787)
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _capacity(client: Client) -> tuple[int, int]:
    """Trials to keep in flight and the number of workers (re-read: workers come and go)."""
    # One trial per thread, none waiting on a worker: Dask counts a worker's death against
    # every task it holds, so a queued innocent trial would be blamed too.
    threads = client.nthreads()
    return max(1, sum(threads.values())), len(threads)


def run_sweep(
    sweep: SweepConfig,
    out: Path,
    *,
    trials: int | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    resume: bool = False,
    on_trial: Callable[[optuna.trial.FrozenTrial, TrialOutcome | None], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """Run (or resume) the sweep to the requested trial count; see the module docstring.

    on_start(done, requested) is called once the cluster is up, on_trial after each trial is
    recorded (a KeyboardInterrupt from it stops the sweep as Ctrl-C does).
    """
    if sweep.recording is None:
        raise SweepError(
            "no recording: pass --recording PATH, or set recording: or backtest.recording"
        )
    if not sweep.recording.is_file():
        raise SweepError(f"recording {sweep.recording}: no such file")
    requested = sweep.trial_count(trials)
    _check_out(out, resume=resume)  # before the cluster starts; the study once it is up
    dists = distributions(sweep)
    ran = 0
    interrupted = False
    lost: str | None = None
    pending: dict[Future[TrialOutcome], Queued] = {}
    ready: list[Queued] = []  # asked ahead: a worker that finishes is given work at once
    with (
        tempfile.TemporaryDirectory(prefix="perpframe-sweep-") as scratch,
        _client(scheduler, workers) as client,
    ):
        try:
            client.wait_for_workers(1, timeout=60)
        except TimeoutError:
            raise SweepError("no worker joined the cluster within 60 s") from None
        # A sweep.db is made only once trials can run (a cluster that cannot start leaves
        # nothing that would need --resume).
        study = open_study(sweep, out, resume=resume)
        queue = TrialQueue(study, sweep, dists)
        done = sum(counted(t) for t in study.get_trials(deepcopy=False))
        plugins = _ship_modules(client, sweep, Path(scratch))
        recording, prices_csv, shipping = _files(client, sweep, sweep.recording)
        plugins += shipping
        client.run(warm_up)
        capacity, count = _capacity(client)
        if on_start is not None:
            on_start(done, requested)
        futures = as_completed()

        def submit() -> None:
            while done + len(pending) < requested and len(pending) < capacity:
                queued = ready.pop(0) if ready else queue.next()
                if queued is None:
                    return  # nothing left to try (queue.exhausted says why)
                number = queue.number(queued)
                task = TrialTask(
                    number=number,
                    config=sweep.with_params(queued.params),
                    settings=sweep.settings,
                    recording=recording,
                    prices_csv=prices_csv,
                )
                future = client.submit(
                    run_trial, task, key=f"perpframe-trial-{number}-{os.urandom(4).hex()}"
                )
                pending[future] = queued
                futures.add(future)

        stopping = threading.Event()
        gone = _WorkersGone(client, sweep.file.workers.lost_after_s)
        try:
            with _ctrl_c_sets(stopping):
                submit()
                while (future := _next_done(futures, stopping, gone)) is not None:
                    queued = pending.pop(future)
                    done += 1
                    submit()  # first: the worker idles until its next trial arrives
                    outcome = _record(study, sweep, out, _result(future), queued)
                    ran += 1
                    if on_trial is not None:
                        on_trial(study._storage.get_trial(queued.trial._trial_id), outcome)
                    capacity, count = _capacity(client)
                    submit()  # workers may have joined
                    if not ready and done + len(pending) < requested:
                        ahead = queue.next()
                        if ahead is not None:
                            ready.append(ahead)
            interrupted = stopping.is_set()
            if gone.expired() and not interrupted:
                lost = (
                    f"no worker in the cluster for {gone.lost_after_s:g} s"
                    f" ({len(pending)} trials in flight are kept for --resume)"
                )
        except KeyboardInterrupt:
            interrupted = True
        finally:
            # What was in flight or asked ahead stays RUNNING in sweep.db: a resume runs it
            # first, under the same number (see sweep_queue).
            for future in pending:
                future.cancel()
            pending.clear()
            _unregister(client, plugins)
    from framework.backtest.sweep_report import write_outputs

    written = write_outputs(study, sweep, out)  # interrupted or not: every finished trial
    return SweepResult(
        study=study,
        requested=requested,
        ran=ran,
        interrupted=interrupted,
        workers=count,
        written=written,
        exhausted=queue.exhausted,
        duplicates=queue.duplicates,
        lost=lost,
    )


@contextmanager
def _ctrl_c_sets(stopping: threading.Event) -> Iterator[None]:
    """Meanwhile a first Ctrl-C (SIGINT) sets stopping; a second raises KeyboardInterrupt.

    Python's own handler raises KeyboardInterrupt wherever the main thread is, a finalizer
    or weakref callback included (SQLAlchemy's, which Optuna's storage runs often): there it
    is printed as "Exception ignored" and lost, and the sweep goes on. A flag the loop
    checks cannot be lost. Outside the main thread signals are not ours to handle.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(_signum: int, _frame: Any) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _WorkersGone:
    """Whether the cluster has had no worker for lost_after_s (asked at most once a second)."""

    def __init__(self, client: Client, lost_after_s: float) -> None:
        self.client = client
        self.lost_after_s = lost_after_s
        self._asked = 0.0
        self._none_since: float | None = None

    def expired(self) -> bool:
        """True once no worker has been seen for lost_after_s."""
        now = time.monotonic()
        if now - self._asked >= 1.0:
            self._asked = now
            if self.client.nthreads():
                self._none_since = None
            elif self._none_since is None:
                self._none_since = now
        return self._none_since is not None and now - self._none_since >= self.lost_after_s


def _next_done(
    futures: as_completed, stopping: threading.Event, gone: _WorkersGone
) -> Future[TrialOutcome] | None:
    """The next finished trial's future; None when none is left, stopping is set or the
    cluster has had no worker for too long."""
    while not futures.has_ready():
        if stopping.is_set() or futures.is_empty() or gone.expired():
            return None
        with futures.thread_condition:  # notified by as_completed as each future finishes
            futures.thread_condition.wait(timeout=0.1)
    if stopping.is_set():
        return None
    future: Future[TrialOutcome] = futures.next()
    return future


def _result(future: Future[TrialOutcome]) -> TrialOutcome | BaseException:
    """A finished trial's outcome, or why Dask could not run it (e.g. KilledWorker).

    A result lost with its worker after the trial ended is computed again by Dask, and
    waited for here (Future.status alone would say "pending").
    """
    try:
        return future.result()
    except Exception as exc:
        return exc
    finally:
        future.release()


def _record(
    study: optuna.Study,
    sweep: SweepConfig,
    out: Path,
    result: TrialOutcome | BaseException,
    queued: Queued,
) -> TrialOutcome | None:
    """Tell the study how a trial ended; write its report.json when it ran."""
    trial, params = queued.trial, queued.params
    outcome: TrialOutcome | None = None
    error: str | None = None
    if isinstance(result, TrialOutcome):
        outcome = result
        error = outcome.error
    else:
        error = f"{type(result).__name__}: {' '.join(str(result).split())}"
    trial.set_user_attr("params", params)
    if outcome is not None:
        trial.set_user_attr("worker", outcome.worker)
        trial.set_user_attr("backtest_s", round(outcome.backtest_s, 6))
        trial.set_user_attr("trial_s", round(outcome.trial_s, 6))
    value: float | None = None
    if outcome is not None and outcome.report is not None:
        target = trial_dir(out, queued.number if queued.number is not None else trial.number)
        target.mkdir(parents=True, exist_ok=True)
        (target / "report.json").write_bytes(outcome.report)
        import orjson

        try:
            value = sweep.objective.score(orjson.loads(outcome.report))
        except MissingKey as exc:
            # Every trial would fail the same way: the sweep file must change.
            study.tell(trial, state=TrialState.FAIL)
            which = "metric" if exc.dotted == sweep.objective.metric else "divide_by"
            line = sweep.objective_lines.get(which)
            where = f" (line {line})" if line is not None else ""
            raise SweepError(f"{sweep.path}: objective.{which}: {exc}{where}") from None
        except (ValueError, ArithmeticError) as exc:
            error = str(exc)
        else:
            if not math.isfinite(value):
                value, error = None, f"objective is {value}"
    if value is None:
        trial.set_user_attr("error", error or "no result")
        study.tell(trial, state=TrialState.FAIL)
    else:
        study.tell(trial, value)
    return outcome
