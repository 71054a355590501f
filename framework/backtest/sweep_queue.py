"""Which trial a sweep runs next, under which number: resumed ones first, no repeats.

**Numbers.** Each trial the sweep runs gets the next number when it is submitted (the user
attribute ``trial``), counting from 0 across resumptions: trials.csv, ``trials/NNNNN/``,
best.yaml and the tables use it. Optuna's own trial numbers are not shown: they also count
the duplicates below.

**Resumption.** A trial in flight when the sweep stopped (Ctrl-C, or a killed client) stays
RUNNING in sweep.db with its number and parameters; ``--resume`` runs those first, under
the same numbers, so the numbers stay contiguous. (Sweeps of earlier versions failed them
as interrupted and queued their parameters again: those are read as before.)

**No repeats.** Optuna's samplers may propose parameters that already ran (a random one on a
small discrete space; TPE once it converges: optuna/optuna#2021). Optuna can tell: the
study holds every trial's parameters. A proposal equal to those of a trial that ran, runs
or is queued (compared as the strategy gets them, after rounding to the step) is told
PRUNED with the user attribute ``duplicate_of`` and never run, and another is asked (TPE
ranks pruned trials below complete ones, so it looks elsewhere). The queue stops asking,
and says why, once every combination of a finite space has been taken, or after
:data:`MAX_DUPLICATES` duplicates in a row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from framework.backtest.sweep_config import Choice, Range, SweepConfig

__all__ = [
    "MAX_DUPLICATES",
    "TRIAL",
    "Queued",
    "TrialQueue",
    "counted",
    "trial_number",
    "trial_params",
]

TRIAL: Final = "trial"
"""The user attribute holding a trial's number in the sweep."""

MAX_DUPLICATES: Final = 100
"""Proposals of parameters already taken, in a row, after which the sweep stops asking."""


def trial_number(trial: FrozenTrial) -> int:
    """The trial's number in the sweep (Optuna's for a sweep of an earlier version)."""
    number = trial.user_attrs.get(TRIAL, trial.number)
    return int(number)


def counted(trial: FrozenTrial) -> bool:
    """A trial that counts towards the requested number: finished, not interrupted."""
    if trial.state == TrialState.COMPLETE:
        return True
    return trial.state == TrialState.FAIL and not trial.user_attrs.get("interrupted")


def trial_params(sweep: SweepConfig, suggested: dict[str, Any]) -> dict[str, Any]:
    """Optuna's numbers as the strategy gets them (ints, floats rounded to the step)."""
    out: dict[str, Any] = {}
    for key, value in suggested.items():
        space = sweep.spaces[key]
        out[key] = space.value(value) if isinstance(space, Range) else value
    return out


def _key(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, repr(value)) for name, value in params.items()))


@attrs.define
class Queued:
    """A trial to run: Optuna's trial, its parameters as the strategy gets them, its number."""

    trial: optuna.trial.Trial
    params: dict[str, Any]
    number: int | None = None


def _space_size(sweep: SweepConfig) -> int | None:
    """How many combinations the parameter space has (None: a continuous range)."""
    for space in sweep.spaces.values():
        if not isinstance(space, Choice) and space.step is None and not space.integer:
            return None
    return sweep.grid_size()


class TrialQueue:
    """Trials to run, in order: those a stopped sweep left RUNNING, then Optuna's proposals."""

    def __init__(
        self, study: optuna.Study, sweep: SweepConfig, dists: dict[str, BaseDistribution]
    ) -> None:
        self.study = study
        self.sweep = sweep
        self.dists = dists
        trials = study.get_trials(deepcopy=False)
        running = [t for t in trials if t.state == TrialState.RUNNING]
        self.taken: dict[tuple[tuple[str, str], ...], int | None] = {}
        for t in trials:
            if counted(t) or t.state == TrialState.RUNNING:
                number = trial_number(t) if counted(t) or TRIAL in t.user_attrs else None
                self.taken[_key(trial_params(sweep, t.params))] = number
        numbered = [trial_number(t) for t in trials if counted(t) or TRIAL in t.user_attrs]
        self.next_number = max(numbered, default=-1) + 1
        # Numbered ones first, in their order; then any left RUNNING before being submitted.
        running.sort(key=lambda t: (TRIAL not in t.user_attrs, trial_number(t), t.number))
        self.resumed = [
            Queued(
                optuna.trial.Trial(study, t._trial_id),
                trial_params(sweep, t.params),
                t.user_attrs.get(TRIAL),
            )
            for t in running
        ]
        self.size = _space_size(sweep)
        self.duplicates = 0
        """Proposals told PRUNED as duplicates by this queue."""
        self.exhausted: str | None = None
        """Why the queue stopped asking Optuna for trials (None while it asks)."""

    def next(self) -> Queued | None:
        """The next trial to run, or None once exhausted (see the module docstring)."""
        if self.resumed:
            return self.resumed.pop(0)
        in_a_row = 0
        while self.exhausted is None:
            if self.size is not None and len(self.taken) >= self.size:
                self.exhausted = f"all {self.size} combinations of the parameter space were taken"
                break
            trial = self.study.ask(self.dists)
            params = trial_params(self.sweep, trial.params)
            key = _key(params)
            if key not in self.taken:
                self.taken[key] = None
                return Queued(trial, params)
            trial.set_user_attr("duplicate_of", self.taken[key])
            self.study.tell(trial, state=TrialState.PRUNED)
            self.duplicates += 1
            in_a_row += 1
            if in_a_row >= MAX_DUPLICATES:
                self.exhausted = (
                    f"the sampler proposed only parameters already taken, {in_a_row} times in a row"
                )
        return None

    def number(self, queued: Queued) -> int:
        """queued's number in the sweep, given now if it has none (on submission)."""
        if queued.number is None:
            queued.number = self.next_number
            self.next_number += 1
            queued.trial.set_user_attr(TRIAL, queued.number)
            self.taken[_key(queued.params)] = queued.number
        return queued.number
