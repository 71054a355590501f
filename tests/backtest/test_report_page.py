"""report.html opened in a headless browser: charts drawn, no JavaScript error, no network."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

# Injected first into <head> of a copy of the page: records errors, then after the load
# event (and the plots' promises) writes what it saw into the DOM that --dump-dom prints.
PROBE = """<script>
window.__errors = [];
addEventListener("error", e => __errors.push("error: " + e.message));
addEventListener("unhandledrejection", e => __errors.push("rejection: " + e.reason));
addEventListener("load", () => setTimeout(() => {
  const charts = [...document.querySelectorAll(".js-plotly-plot")].map(d => ({
    id: d.id, svg: d.querySelectorAll(".main-svg").length,
    traces: d.querySelectorAll(".scatterlayer .trace").length}));
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify({errors: __errors, charts: charts,
    resources: performance.getEntriesByType("resource").map(r => r.name)});
  document.body.appendChild(pre);
}, 500));
</script>"""


def browser() -> str:
    """A headless-capable Chromium, or skip saying how to get one."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "no Chromium binary on PATH (apt-get install chromium; .ci/run installs it when "
        "apt-get is available): report.html was not opened in a browser"
    )


def test_report_html_draws_its_charts_without_javascript_errors(tmp_path: Path) -> None:
    chromium = browser()
    report = tmp_path / "report"
    command = ["backtest", "-c", "configs/backtest.yaml", "--report", str(report)]
    made = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    assert f"report: {tmp_path / 'report' / 'report.json'}" in made.stdout
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    shown = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # root in containers
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', shown.stdout, re.S)
    assert found is not None, shown.stdout[-3000:]
    probe = orjson.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert probe["errors"] == []
    assert probe["resources"] == []  # nothing fetched: plotly.js is inline
    charts = {c["id"]: c for c in probe["charts"]}
    # The shipped sample: one settlement coin, two pairs.
    assert set(charts) == {"equity-0", "positions", "price-0", "price-1"}
    for chart in charts.values():
        assert chart["svg"] >= 1 and chart["traces"] >= 1, chart
    assert charts["equity-0"]["traces"] == 2  # equity and drawdown
    assert charts["price-0"]["traces"] == 3  # price, buys, sells
