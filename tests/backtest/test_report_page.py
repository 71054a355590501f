"""report.html opened in a headless browser: charts drawn, no JavaScript error, no network.

What the page must show (issue 29): the settings above the charts, net PnL labelled by its
parts, round-trip statistics, gross PnL against fees, cancels, refusals and resting orders
on the price chart, client order ids in the fills table, every chart on one time range.
"""

from __future__ import annotations

import gzip
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from framework.backtest.market_lines import MAX_BUCKETS

ROOT = Path(__file__).resolve().parents[2]
MARKET_NAMES = ["market trades", "book mid", "mark"]
MARKET_EVENTS = ("api_trade", "api_depth", "api_kline")
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
    points: d.data.map(t => (t.x || []).length),
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


def probe_in_chromium(page: str, probe: str, tmp_path: Path) -> dict[str, Any]:
    """Open page in headless Chromium with probe (a script) first in its head; what the
    probe wrote into ``<pre id="probe">`` as JSON, or skip without a Chromium."""
    chromium = browser()
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("<head>", "<head>" + probe, 1), encoding="utf-8")
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
    probed_json: dict[str, Any] = orjson.loads(html.unescape(found.group(1)))
    return probed_json


# The shipped sample, with a ladder that re-centres (it cancels its resting orders) and an
# open-quantity limit it runs into (refusals, code 9003).
TWEAKS = (
    ("      levels: 4\n", "      levels: 4\n      recentre_levels: 1\n"),
    ("logging:", 'execution: {risk: {max_open_quantity: "0.1"}}\nlogging:'),
)


def opened(tmp_path: Path, config: str, recording: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Backtest recording with config into tmp_path/report, open report.html in Chromium:
    (report.json's results, what the probe saw)."""
    browser()  # without a Chromium, skip before the backtest
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "backtest.yaml").write_text(config, encoding="utf-8")
    report = tmp_path / "report"
    command = [
        "backtest",
        "-c",
        str(tmp_path / "backtest.yaml"),
        "--recording",
        str(recording),
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
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    probe = probe_in_chromium(page, PROBE, tmp_path)
    assert probe["errors"] == []
    assert probe["resources"] == []  # nothing fetched: plotly.js is inline
    return results, probe


def tweaked_config() -> str:
    """configs/backtest.yaml with TWEAKS applied."""
    config = (ROOT / "configs" / "backtest.yaml").read_text(encoding="utf-8")
    for old, new in TWEAKS:
        assert old in config
        config = config.replace(old, new, 1)
    return config


def test_report_html_draws_its_charts_without_javascript_errors(tmp_path: Path) -> None:
    results, probe = opened(tmp_path, tweaked_config(), ROOT / "samples" / "demo.jsonl.gz")
    assert results["orders"]["canceled"] > 0 and results["orders"]["rejected"] > 0
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
    # ETH-USD (price-1): the market's trades, book mid and mark (the sample has market
    # data: trade and depth frames, mark polls), the ladder's fills, resting orders, cancels
    # and refusals. BTC-USD (price-0): trades and mark (no depth subscribed), the pulse's fills.
    assert charts["price-1"]["names"] == [
        *MARKET_NAMES,
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
    assert settings["Fill price"].startswith("against the recording's market: market orders")
    assert (
        "(each pair from its own first recorded book or trade; before it, and on pairs "
        "without one: the first price at or after" in settings["Fill price"]
    )
    assert settings["Prices from"].startswith("the recording's market: its marks, else")
    assert settings["Fees"].startswith("maker 0.02 %, taker 0.05 %")
    assert settings["Slippage"].startswith("0 % of the price")
    # The fill rule and the latency, with their parameters and the keys they came from
    # (the shipped config: fill_rule: queue, latency_ms: 0).
    assert settings["Fill rule"].startswith("a trade beyond a resting order's price fills it")
    assert settings["Fill rule"].endswith(
        "(queue: queue_start_share 1, cancels pro_rata) (from backtest.paper.fill_rule)"
    )
    assert settings["Latency (order to paper account)"] == (
        "0 ms, constant (from backtest.paper.latency_ms)"
    )
    assert "Answer latency" not in settings
    assert results["settings"]["latency_params"] == {"model": "constant", "ms": 0}
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


def without_market(recording: Path, out: Path) -> Path:
    """The recording without its market data: no market polls, trade, depth or bar frames."""
    kept = []
    with gzip.open(recording, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = orjson.loads(line)
            if record["source"] == "market":
                continue
            if record["source"] == "ws" and orjson.loads(record["frame"]).get("event") in (
                *MARKET_EVENTS,
                *(f"{event}_res" for event in MARKET_EVENTS),
            ):
                continue
            kept.append(line)
    with gzip.open(recording, "rt", encoding="utf-8") as lines:
        assert 0 < len(kept) < sum(1 for _ in lines)
    out.write_text("".join(kept), encoding="utf-8")
    return out


def test_the_price_charts_draw_the_market_only_when_the_recording_has_it(tmp_path: Path) -> None:
    sample = ROOT / "samples" / "demo.jsonl.gz"
    _, probe = opened(tmp_path / "with", tweaked_config(), sample)
    charts = {c["id"]: c for c in probe["charts"]}
    for chart, kinds in (("price-1", MARKET_NAMES), ("price-0", ["market trades", "mark"])):
        names = charts[chart]["names"]
        assert names[: len(kinds)] == kinds and "price" not in names, names
        # Every market line drawn, downsampled to a bounded number of points (the sample's
        # 3 minutes fit whole: 4 points at most per 100 ms bucket).
        assert all(1 < n <= 4 * MAX_BUCKETS + 1 for n in charts[chart]["points"][: len(kinds)])
    # The same recording without its market data: the recorded price track, no market line.
    config = tweaked_config()
    config = config[: config.index("\nmarket:") + 1] + config[config.index("\nstrategies:") + 1 :]
    assert "\nmarket:" not in config
    # ...and its fill rule and latency from a fill_model file: a log-normal latency.
    config = config.replace("    fill_rule: queue ", "    # fill_rule: queue ", 1)
    config = config.replace("    # fill_model: models/fill.yaml", "    fill_model: fill.yaml", 1)
    assert "\n    fill_model: fill.yaml" in config and "\n    fill_rule:" not in config
    (tmp_path / "without").mkdir()
    (tmp_path / "without" / "fill.yaml").write_text(
        "version: 1\nlatency: {model: lognormal, median_ms: 20, sigma: 0.5}\n"
        "fill: {rule: through, fill_probability: 0.5}\n",
        encoding="utf-8",
    )
    plain = without_market(sample, tmp_path / "plain.jsonl")
    results, probe = opened(tmp_path / "without", config, plain)
    charts = {c["id"]: c for c in probe["charts"]}
    assert {"price-0", "price-1"} <= set(charts)
    for chart in ("price-0", "price-1"):
        names = charts[chart]["names"]
        assert names[0] == "price" and not set(MARKET_NAMES) & set(names), names
    settings = dict(probe["tables"]["settings"]["rows"])
    assert settings["Fill price"].startswith("the first price at or after the order")
    assert settings["Prices from"] == "matches then positions"
    assert settings["Fill rule"] == (
        "a resting order fills whole, at its limit, only when a trade prints beyond its price, "
        "each such trade with probability 0.5 (seeded) (through); unused in this run: the recording has no books or trades, resting orders "
        "filled when the price crossed them (from the fill_model file fill.yaml)"
    )
    assert settings["Latency (order to paper account)"] == (
        "a log-normal draw per order: median 20.0 ms, sigma 0.5, kept within 0 to 60000 ms, "
        "seeded (from the fill_model file fill.yaml)"
    )
    assert results["settings"]["latency_params"] == {
        "model": "lognormal", "median_ms": 20.0, "sigma": 0.5, "min_ms": 0, "max_ms": 60000
    }  # fmt: skip
    assert results["settings"]["latency_from"] == "the fill_model file fill.yaml"
