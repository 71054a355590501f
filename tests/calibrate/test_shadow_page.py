"""shadow.html opened in a headless browser: every pair's charts drawn, no error, no network."""

from __future__ import annotations

from decimal import Decimal as D
from pathlib import Path

from framework.shadow.compare import Shadow
from framework.shadow.report import shadow_html
from tests.backtest.test_report_page import browser, probe_in_chromium

PROBE = """<script>
window.__errors = [];
addEventListener("error", e => __errors.push("error: " + e.message));
addEventListener("load", () => setTimeout(() => {
  const plots = [...document.querySelectorAll(".js-plotly-plot")];
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify({errors: __errors,
    charts: plots.map(d => ({id: d.id, svg: d.querySelectorAll(".main-svg").length,
      names: d.data.map(t => t.name), points: d.data.map(t => (t.x || []).length)})),
    rows: document.querySelectorAll("#orders tr").length - 1,
    summaries: [...document.querySelectorAll("#summaries li")].map(li => li.textContent),
    resources: performance.getEntriesByType("resource").map(r => r.name)});
  document.body.appendChild(pre);
}, 500));
</script>"""


def test_shadow_html_draws_every_pair_without_errors(tmp_path: Path) -> None:
    browser()  # without a Chromium, skip first
    shadow = Shadow(settle_ms=1000)
    for i in range(40):
        pair = "ETH-USD" if i % 2 else "BTC-USD"
        coid = f"o{i}"
        shadow.sent(coid, pair, bool(i % 3), D(1), at=i * 100)
        for side, price in (("live", "100"), ("paper", "100.01")):
            if side == "paper" or i % 4:
                shadow.filled(
                    side,  # type: ignore[arg-type]
                    coid,
                    price=D(price),
                    quantity=D(1),
                    fee=D("0.01"),
                    pnl=D(0),
                    taker=True,
                    at=i * 100 + 5,
                )
        shadow.ended("live", coid, i * 100 + 6)
    probe = probe_in_chromium(shadow_html(shadow), PROBE, tmp_path)
    assert probe["errors"] == [] and probe["resources"] == []
    charts = {c["id"]: c for c in probe["charts"]}
    assert set(charts) == {"pair-0", "pair-1"}
    for chart in charts.values():
        assert chart["svg"] >= 1
        assert chart["names"] == ["price gap", "first-fill gap", "fill ratio", "outcomes"]
    # A price gap is drawn where both sides filled: BTC-USD (even i) half of its 20 orders
    # filled live, ETH-USD (odd i) all of them.
    assert charts["pair-0"]["points"][0] == 10 and charts["pair-1"]["points"][0] == 20
    assert probe["rows"] == 40
    assert [s.split(":")[0] for s in probe["summaries"]] == ["BTC-USD", "ETH-USD"]
    assert "paper fills 2.00x live" in probe["summaries"][0]
    assert "paper fills 1.00x live" in probe["summaries"][1]
