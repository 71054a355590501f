"""What a sweep leaves behind: trials.csv, best.yaml, sweep.html and the table of the best.

All of it is written from the study (sweep.db), so a resumed or interrupted sweep writes the
same files for every trial it holds. Trials go by their number in the sweep
(:func:`.sweep_queue.trial_number`). sweep.html is self-contained (plotly.js inlined, no
network): the best trials (a column per parameter, numbers rounded to 6 significant
digits), the objective over trials with the best so far, parameter importance (Optuna's
fANOVA, when enough trials finished) and a parallel-coordinates view of the parameters.
trials.csv keeps every number exact; the printed table and sweep.html round them.
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
from framework.backtest.sweep_queue import counted, trial_number

__all__ = ["best_table", "best_trials", "write_best", "write_csv", "write_html", "write_outputs"]


def _finished(study: optuna.Study) -> list[FrozenTrial]:
    """Trials that ran, by number (interrupted ones run again; duplicates never ran)."""
    return sorted((t for t in study.get_trials(deepcopy=False) if counted(t)), key=trial_number)


def best_trials(study: optuna.Study, count: int = 10) -> list[FrozenTrial]:
    """The complete trials, best first (ties: the earlier trial first)."""
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    sign = -1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else 1.0
    complete.sort(key=lambda t: (sign * float(t.value or 0.0), trial_number(t)))
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
                    trial_number(trial),
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
    number = trial_number(trial)
    strategies: list[dict[str, Any]] = []
    config = sweep.with_params(_params(trial))
    swept = {key.partition(".")[0] for key in sweep.spaces}
    for strategy in config.strategies:
        if strategy.name in swept:
            strategies.append({"name": strategy.name, "params": dict(strategy.params)})
    ran = _finished(study)
    failed = sum(t.state == TrialState.FAIL for t in ran)
    header = (
        f"# Best of {len(ran)} trials ({failed} failed) of {sweep.path}: trial {number},\n"
        f"# {sweep.objective.label} = {trial.value} ({sweep.objective.direction}).\n"
        f"# Paste each params: block over that strategy's in {sweep.config_path}.\n"
        f"# Its report: trials/{number:05d}/report.json (perpframe backtest writes the same).\n"
    )
    body = yaml.safe_dump({"strategies": strategies}, sort_keys=False, allow_unicode=True)
    path.write_text(header + body, encoding="utf-8")
    return path


def _history(study: optuna.Study, label: str, maximize: bool) -> Any:
    """The objective of each complete trial by its number, and the best so far."""
    import plotly.graph_objects as go

    complete = sorted(
        study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=trial_number
    )
    numbers = [trial_number(t) for t in complete]
    values = [float(t.value or 0.0) for t in complete]
    best: list[float] = []
    for value in values:
        best.append(value if not best else (max if maximize else min)(best[-1], value))
    fig = go.Figure()
    fig.add_scatter(x=numbers, y=values, mode="markers", name=label)
    fig.add_scatter(x=numbers, y=best, mode="lines", line_shape="hv", name="best so far")
    fig.update_layout(template="plotly_white", hovermode="x unified", height=420)
    fig.update_xaxes(title_text="trial")
    fig.update_yaxes(title_text=label, tickformat=".6~g", hoverformat=".6~g")
    return fig


def _figures(study: optuna.Study, sweep: SweepConfig) -> list[tuple[str, Any]]:
    """(title, plotly figure) of each view that the trials so far allow."""
    from optuna import visualization as vis

    label = sweep.objective.label
    maximize = sweep.objective.direction == "maximize"
    figures: list[tuple[str, Any]] = []
    views: list[tuple[str, Callable[[], Any]]] = [
        ("Objective over trials", lambda: _history(study, label, maximize)),
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


def _best_rows(study: optuna.Study, sweep: SweepConfig, count: int = 10) -> list[list[str]]:
    """The best trials as text: number, objective, each parameter, backtest seconds."""
    keys = list(sweep.spaces)
    rows = []
    for trial in best_trials(study, count):
        params = _params(trial)
        rows.append(
            [
                str(trial_number(trial)),
                _cell(trial.value) if trial.value is not None else "",
                *(_cell(params.get(k, "")) for k in keys),
                f"{trial.user_attrs.get('backtest_s', 0):.2f}",
            ]
        )
    return rows


def _headers(sweep: SweepConfig) -> list[str]:
    return ["trial", "objective", *sweep.spaces, "backtest s"]


def write_html(study: optuna.Study, sweep: SweepConfig, path: Path) -> Path:
    """sweep.html: the best trials and the plots, offline (plotly.js inlined)."""
    from plotly.offline import get_plotlyjs

    label = sweep.objective.label
    parts: list[str] = []
    for title, fig in _figures(study, sweep):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if fig is not None:
            parts.append(fig.to_html(full_html=False, include_plotlyjs=False, default_width="100%"))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in _headers(sweep))
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in _best_rows(study, sweep)
    )
    title = (
        f"Sweep {html.escape(str(sweep.path))}: {html.escape(label)} ({sweep.objective.direction})"
    )
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{_CSS}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        f"<h1>{title}</h1>"
        f"<h2>Best trials</h2><table id='best'><tr>{head}</tr>{rows}</table>"
        + "".join(parts)
        + "</body></html>\n"
    )
    path.write_text(page, encoding="utf-8")
    return path


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
    "padding:3px 8px;text-align:right}th{background:#f4f4f4}"
)


def write_outputs(study: optuna.Study, sweep: SweepConfig, out: Path) -> list[Path]:
    """trials.csv, best.yaml (when a trial completed) and sweep.html in out."""
    written = [write_csv(study, sweep, out / "trials.csv")]
    best = write_best(study, sweep, out / "best.yaml")
    if best is not None:
        written.append(best)
    written.append(write_html(study, sweep, out / "sweep.html"))
    return written


def _cell(value: Any) -> str:
    """A value as the tables show it: floats to 6 significant digits."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def best_table(study: optuna.Study, sweep: SweepConfig, count: int = 10) -> Any:
    """A rich Table of the best trials: number, objective, each parameter, backtest time.

    Headers and cells wrap rather than being cut when the terminal is narrow; printed to a
    pipe or file, give the console the table's full width (see sweep_cli).
    """
    from rich.table import Table

    table = Table(title=f"Best trials: {sweep.objective.label} ({sweep.objective.direction})")
    for header in _headers(sweep):
        table.add_column(header, justify="right", overflow="fold")
    for row in _best_rows(study, sweep, count):
        table.add_row(*row)
    return table
