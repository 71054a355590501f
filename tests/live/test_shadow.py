"""The shadow (issue 28): live trading against the twin with a paper venue beside it.

With the twin's own fill rule and no added latency on either side, paper and live agree
order by order (near-zero divergence). With the twin's latency raised by a known amount and
the paper venue's left at zero, the shadow reports that gap in time to first fill. The live
orders are the same either way: the shadow never sends, delays or changes one.
"""

from __future__ import annotations

import statistics
from decimal import Decimal
from pathlib import Path

import pytest

from framework import OrderIntent, Strategy
from framework.config import parse_config
from framework.live.node import Node
from framework.venue.market import Book
from framework.venue.models import MatchType
from tests.node_running import running
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

PAIR = "ETH-USD"
ORDERS = 24


class Taker(Strategy):
    """A small IOC market order every 0.15 s once the book is heard, sides alternating."""

    def on_start(self) -> None:
        self.book: Book | None = None
        self.sent = 0
        self.schedule("take", 0.15)

    def on_book(self, book: Book) -> None:
        self.book = book

    def on_timer(self, name: str) -> None:
        if self.book is None or self.sent >= ORDERS:
            return
        self.sent += 1
        self.submit(
            OrderIntent(
                pair=PAIR,
                is_long=bool(self.sent % 2),
                quantity=Decimal("0.01"),
                match_type=MatchType.IOC,
            )
        )


def config_text(tmp_path: Path, latency_s: float) -> str:
    return f"""\
venue:
  embedded: true
  twin:
    seed: 3
    market: {{enabled: true}}
    prices: {{tick_interval: 0.5}}
    faults: {{latency: {latency_s}}}
pairs: {{{PAIR}: {{}}}}
polling: {{match_interval_s: 0.1}}
market:
  pairs:
    {PAIR}: {{channels: [trade, depth], mark_interval_s: 0}}
shadow:
  enabled: true
  paper: {{latency_ms: 0}}
  settle_s: 3
  summary_every_s: 0
  report: {tmp_path / "shadow.html"}
  bands: {{min_orders: 5}}
strategies:
  - name: taker
    class: tests.live.test_shadow:Taker
"""


async def shadow_run(tmp_path: Path, latency_s: float) -> tuple[Node, dict[str, object]]:
    node = Node(parse_config(config_text(tmp_path, latency_s)))
    async with running(node) as summary:
        assert node.shadow is not None
        ledger = node.shadow.ledger
        await eventually(lambda: len(ledger.closed) >= ORDERS, timeout=30)
    return node, summary


async def test_a_shadow_of_the_twin_with_its_own_rule_and_latency_agrees(tmp_path: Path) -> None:
    node, summary = await shadow_run(tmp_path, 0.0)
    assert node.shadow is not None
    ledger = node.shadow.ledger
    diffs = list(ledger.closed)
    assert len(diffs) == ORDERS
    outcomes = [d.outcome for d in diffs]
    assert outcomes.count("both filled") >= ORDERS - 2, outcomes
    gaps = [abs(g) for d in diffs if (g := d.price_gap_bps) is not None]
    assert statistics.median(gaps) == 0, gaps  # the same book, the same price
    s = ledger.summary(PAIR)
    print(s.text())
    assert s.fill_ratio is not None and abs(s.fill_ratio - 1) <= Decimal("0.1")
    assert s.median_first_fill_gap_ms is not None and abs(s.median_first_fill_gap_ms) < 25
    assert summary["shadow"]["alarms"] == {}  # type: ignore[index]
    page = (tmp_path / "shadow.html").read_text(encoding="utf-8")
    assert 'id="pair-0"' in page and page.count("<tr>") == ORDERS + 1
    assert summary["shadow"]["report"] == str(tmp_path / "shadow.html")  # type: ignore[index]


async def test_the_shadow_reports_the_twins_added_latency(tmp_path: Path) -> None:
    added_ms = 200
    node, summary = await shadow_run(tmp_path, added_ms / 1000)
    assert node.shadow is not None
    s = node.shadow.ledger.summary(PAIR)
    # Paper (no latency) fills first; live's fills wait the twin's added latency.
    print(s.text())
    assert s.median_first_fill_gap_ms is not None
    assert abs(-s.median_first_fill_gap_ms - added_ms) <= 0.15 * added_ms, s
    assert summary["orders_sent"] == ORDERS  # the live orders all went, unchanged
