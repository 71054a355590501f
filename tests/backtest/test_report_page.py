"""report.html opened in a headless browser: charts drawn, no JavaScript error, no network.

What the page must show (issue 29): the settings above the charts, net PnL labelled by its
parts, round-trip statistics, gross PnL against fees, cancels, refusals and resting orders
on the price chart, client order ids in the fills table, every chart on one time range.
"""

from __future__ import annotations

import html
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
  const plots = [...document.querySelectorAll(".js-plotly-plot")];
  const charts = plots.map(d => ({
    id: d.id, svg: d.querySelectorAll(".main-svg").length,
    traces: d.querySelectorAll(".scatterlayer .trace").length,
    names: d.data.map(t => t.name),
    ranges: Object.keys(d.layout).filter(k => k.startsWith("xaxis")).map(k => d.layout[k].range),
    last: d.data.flatMap(t => [...(t.x || [])]).filter(x => x).sort().pop()}));
  const tables = {};
  for (const t of document.querySelectorAll("table[id]")) {
    tables[t.id] = {
      headers: [...t.querySelectorAll("th")].map(th => th.textContent),
      rows: [...t.querySelectorAll("tr")].filter(tr => tr.querySelector("td"))
        .map(tr => [...tr.children].map(td => td.textContent))};
  }
  const settings = document.getElementById("settings");
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify({errors: __errors, charts: charts, tables: tables,
    settings_first: !!(settings.compareDocumentPosition(plots[0])
      & Node.DOCUMENT_POSITION_FOLLOWING),
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


# The shipped sample, with a ladder that re-centres (it cancels its resting orders) and an
# open-quantity limit it runs into (refusals, code 9003).
TWEAKS = (
    ("      levels: 4\n", "      levels: 4\n      recentre_levels: 1\n"),
    ("logging:", 'execution: {risk: {max_open_quantity: "0.1"}}\nlogging:'),
)


def test_report_html_draws_its_charts_without_javascript_errors(tmp_path: Path) -> None:
    chromium = browser()
    config = (ROOT / "configs" / "backtest.yaml").read_text(encoding="utf-8")
    for old, new in TWEAKS:
        assert old in config
        config = config.replace(old, new, 1)
    (tmp_path / "backtest.yaml").write_text(config, encoding="utf-8")
    report = tmp_path / "report"
    command = [
        "backtest",
        "-c",
        str(tmp_path / "backtest.yaml"),
        "--recording",
        str(ROOT / "samples" / "demo.jsonl.gz"),
        "--report",
        str(report),
    ]
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
    results = orjson.loads((report / "report.json").read_bytes())
    assert results["orders"]["canceled"] > 0 and results["orders"]["rejected"] > 0
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
    probe = orjson.loads(html.unescape(found.group(1)))
    assert probe["errors"] == []
    assert probe["resources"] == []  # nothing fetched: plotly.js is inline
    charts = {c["id"]: c for c in probe["charts"]}
    # The shipped sample: one settlement coin, two pairs.
    assert set(charts) == {"equity-0", "pnl-0", "positions", "price-0", "price-1"}
    for chart in charts.values():
        assert chart["svg"] >= 1 and chart["traces"] >= 1, chart
    assert charts["equity-0"]["names"] == ["equity USD", "drawdown"]
    assert charts["pnl-0"]["names"] == [
        "gross PnL (realized + unrealized)",
        "fees paid",
        "net PnL (gross − fees)",
    ]
    # ETH-USD (price-1): the ladder's fills, resting orders, cancels and refusals.
    assert charts["price-1"]["names"] == [
        "price",
        "buy",
        "sell",
        "resting buys",
        "resting sells",
        "cancelled",
        "refused",
    ]
    # One time range for every chart (each axis of each), and every chart drawn to its end.
    ranges = {tuple(r) for c in charts.values() for r in c["ranges"]}
    assert len(ranges) == 1, ranges
    ((_, end),) = ranges
    assert {c["id"]: c["last"] for c in charts.values()} == dict.fromkeys(charts, end)
    # The settings come first, in words.
    assert probe["settings_first"]
    settings = dict(probe["tables"]["settings"]["rows"])
    assert settings["Fill price"].startswith("the first price at or after the order")
    assert settings["Fees"].startswith("maker 0.02 %, taker 0.05 %")
    assert settings["Slippage"].startswith("0 % of the price")
    # Net PnL by its labelled parts, as report.json has them.
    summary = dict(probe["tables"]["summary"]["rows"])
    usd = results["pnl"]["USD"]
    assert summary["USD net PnL = realized − fees + unrealized"] == (
        f"{usd['net_pnl']} = {usd['realized_pnl']} − {usd['fees']} + {usd['unrealized_pnl']}"
    )
    assert summary["USD gross PnL = realized + unrealized (before fees)"] == usd["gross_pnl"]
    # Round trips: a statistics row per strategy and for all, and each trip.
    stats = probe["tables"]["round-trip-statistics"]
    assert "win rate %" in stats["headers"] and "profit factor" in stats["headers"]
    assert [row[1] for row in stats["rows"]] == ["ladder", "pulse", "all"]
    every = results["round_trips"]["USD"]["all"]
    assert stats["rows"][-1][2] == str(every["closed"]) and every["closed"] > 0
    assert len(probe["tables"]["round-trips"]["rows"]) == every["closed"] + every["open"]
    # Fills carry their client order ids, the ids the orders table lists.
    fills = probe["tables"]["fills"]
    column = fills["headers"].index("client order id")
    ids = {row[column] for row in fills["rows"]}
    orders = probe["tables"]["orders"]
    known = {row[orders["headers"].index("client order id")] for row in orders["rows"]}
    assert "" not in ids and ids <= known and len(fills["rows"]) == results["fills"]["count"]
