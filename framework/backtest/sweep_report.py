"""What a sweep leaves behind: trials.csv, best.yaml, sweep.html and the table of the best.

All of it is written from the study (sweep.db), so a resumed or interrupted sweep writes the
same files for every trial it holds. sweep.html is self-contained (plotly.js inlined, no
network): the objective over trials with the best so far, parameter importance (Optuna's
fANOVA, when enough trials finished) and a parallel-coordinates view of the parameters.
"""

from __future__ import annotations

import csv
import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState

from framework.backtest.sweep_config import SweepConfig

__all__ = ["best_table", "best_trials", "write_best", "write_csv", "write_html", "write_outputs"]


def _finished(study: optuna.Study) -> list[FrozenTrial]:
    """Trials that ran (interrupted ones are queued again, not results)."""
    return [
        t
        for t in study.get_trials(deepcopy=False)
        if t.state == TrialState.COMPLETE
        or (t.state == TrialState.FAIL and not t.user_attrs.get("interrupted"))
    ]


def best_trials(study: optuna.Study, count: int = 10) -> list[FrozenTrial]:
    """The complete trials, best first (ties: the earlier trial first)."""
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    sign = -1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else 1.0
    complete.sort(key=lambda t: (sign * float(t.value or 0.0), t.number))
    return complete[:count]


def _params(trial: FrozenTrial) -> dict[str, Any]:
    params: dict[str, Any] = trial.user_attrs.get("params") or trial.params
    return params


def write_csv(study: optuna.Study, sweep: SweepConfig, path: Path) -> Path:
    """One row per trial that ran: number, state, value, each parameter, timing, error."""
    keys = list(sweep.spaces)
    columns = ["number", "state", "value", *keys, "backtest_s", "trial_s", "worker", "error"]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for trial in _finished(study):
            params = _params(trial)
            attrs = trial.user_attrs
            writer.writerow(
                [
                    trial.number,
                    trial.state.name.lower(),
                    "" if trial.value is None else repr(trial.value),
                    *(params.get(k, "") for k in keys),
                    attrs.get("backtest_s", ""),
                    attrs.get("trial_s", ""),
                    attrs.get("worker", ""),
                    attrs.get("error", ""),
                ]
            )
    return path


def write_best(study: optuna.Study, sweep: SweepConfig, path: Path) -> Path | None:
    """best.yaml: each swept strategy's whole ``params:`` block with the best trial's values."""
    best = best_trials(study, 1)
    if not best:
        return None
    trial = best[0]
    strategies: list[dict[str, Any]] = []
    config = sweep.with_params(_params(trial))
    swept = {key.partition(".")[0] for key in sweep.spaces}
    for strategy in config.strategies:
        if strategy.name in swept:
            strategies.append({"name": strategy.name, "params": dict(strategy.params)})
    ran = _finished(study)
    failed = sum(t.state == TrialState.FAIL for t in ran)
    header = (
        f"# Best of {len(ran)} trials ({failed} failed) of {sweep.path}: trial {trial.number},\n"
        f"# {sweep.objective.label} = {trial.value} ({sweep.objective.direction}).\n"
        f"# Paste each params: block over that strategy's in {sweep.config_path}.\n"
        f"# Its report: trials/{trial.number:05d}/report.json (run.py backtest writes the same).\n"
    )
    body = yaml.safe_dump({"strategies": strategies}, sort_keys=False, allow_unicode=True)
    path.write_text(header + body, encoding="utf-8")
    return path


def _figures(study: optuna.Study, label: str) -> list[tuple[str, Any]]:
    """(title, plotly figure) of each view that the trials so far allow."""
    from optuna import visualization as vis

    figures: list[tuple[str, Any]] = []
    views: list[tuple[str, Callable[[], Any]]] = [
        ("Objective over trials", lambda: vis.plot_optimization_history(study, target_name=label)),
        ("Parameter importance", lambda: vis.plot_param_importances(study, target_name=label)),
        ("Parallel coordinates", lambda: vis.plot_parallel_coordinate(study, target_name=label)),
    ]
    complete = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    for title, make in views:
        if title == "Parameter importance" and complete < 2:
            continue
        try:
            figures.append((title, make()))
        except (ValueError, RuntimeError, ZeroDivisionError) as exc:
            # Importance needs parameters that vary among complete trials, for one.
            figures.append((f"{title}: not available ({exc})", None))
    return figures


def write_html(study: optuna.Study, sweep: SweepConfig, path: Path) -> Path:
    """sweep.html: the plots and the best trials, offline (plotly.js inlined)."""
    from plotly.offline import get_plotlyjs

    label = sweep.objective.label
    parts: list[str] = []
    for title, fig in _figures(study, label):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if fig is not None:
            parts.append(fig.to_html(full_html=False, include_plotlyjs=False, default_width="100%"))
    rows = "".join(
        f"<tr><td>{t.number}</td><td>{t.value}</td><td>{html.escape(repr(_params(t)))}</td></tr>"
        for t in best_trials(study)
    )
    title = (
        f"Sweep {html.escape(str(sweep.path))}: {html.escape(label)} ({sweep.objective.direction})"
    )
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{title}</title>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        f"<h1>{title}</h1>"
        "<h2>Best trials</h2><table border='1' cellpadding='4'>"
        f"<tr><th>trial</th><th>objective</th><th>parameters</th></tr>{rows}</table>"
        + "".join(parts)
        + "</body></html>\n"
    )
    path.write_text(page, encoding="utf-8")
    return path


def write_outputs(study: optuna.Study, sweep: SweepConfig, out: Path) -> list[Path]:
    """trials.csv, best.yaml (when a trial completed) and sweep.html in out."""
    written = [write_csv(study, sweep, out / "trials.csv")]
    best = write_best(study, sweep, out / "best.yaml")
    if best is not None:
        written.append(best)
    written.append(write_html(study, sweep, out / "sweep.html"))
    return written


def _cell(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def best_table(study: optuna.Study, sweep: SweepConfig, count: int = 10) -> Any:
    """A rich Table of the best trials: number, objective, each parameter, backtest time."""
    from rich.table import Table

    keys = list(sweep.spaces)
    table = Table(title=f"Best trials: {sweep.objective.label} ({sweep.objective.direction})")
    table.add_column("trial", justify="right")
    table.add_column("objective", justify="right")
    for key in keys:
        table.add_column(key, justify="right")
    table.add_column("backtest s", justify="right")
    for trial in best_trials(study, count):
        params = _params(trial)
        table.add_row(
            str(trial.number),
            f"{trial.value:.6g}" if trial.value is not None else "",
            *(_cell(params.get(k, "")) for k in keys),
            f"{trial.user_attrs.get('backtest_s', 0):.2f}",
        )
    return table
