"""The metrics endpoint: /metrics served directly (no redirect), and the trading gauges."""

from __future__ import annotations

import signal
from decimal import Decimal
from pathlib import Path

import anyio
import httpx
import orjson
import pytest

from framework.engine.portfolio import Portfolio
from framework.live.metrics import Feeds, Metrics, portfolio_feeds, serve_metrics
from framework.venue.models import AccountPush
from tests.live.test_cli import EMBEDDED, live, write
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def test_metrics_are_served_at_metrics_with_the_trading_gauges() -> None:
    portfolio = Portfolio()
    portfolio.apply_account_push(
        AccountPush(
            symbol="USD", log_id=1, available_amount=Decimal("990.5"), frozen_amount=Decimal(2)
        )
    )
    feeds = Feeds(
        **portfolio_feeds(portfolio, ["ETH-USD"], ["USD"]),
        pnl=lambda: {"ETH-USD": {"realized": Decimal("1.5"), "fees": Decimal("0.25")}},
        resting=lambda: {"ETH-USD": 3},
        unknown=lambda: 1,
        stopped=lambda: ["flaky"],
    )
    metrics = Metrics(lambda: {"pushes": 7}, feeds)
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_metrics, metrics, "127.0.0.1", 0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            answer = await client.get("/metrics")
            slash = await client.get("/metrics/")
        tg.cancel_scope.cancel()
    assert answer.status_code == 200 and slash.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    text = answer.text
    for line in (
        "perp_pushes_total 7.0",
        'perp_position{pair="ETH-USD"} 0.0',
        'perp_balance{coin="USD",kind="available"} 990.5',
        'perp_balance{coin="USD",kind="frozen"} 2.0',
        'perp_pnl{kind="realized",pair="ETH-USD"} 1.5',
        'perp_pnl{kind="fees",pair="ETH-USD"} 0.25',
        'perp_resting_orders{pair="ETH-USD"} 3.0',
        "perp_unknown_orders 1.0",
        "perp_strategies_stopped 1.0",
        'perp_strategy_stopped{strategy="flaky"} 1.0',
    ):
        assert line in text.splitlines(), (line, text)


async def test_without_feeds_only_the_counters_are_exposed() -> None:
    registry = Metrics(lambda: {}).registry
    assert registry.get_sample_value("perp_pushes_total") == 0.0
    assert registry.get_sample_value("perp_unknown_orders") is None


async def test_live_answers_a_plain_get_of_metrics_with_200(tmp_path: Path) -> None:
    config = write(tmp_path, EMBEDDED + "metrics: {enabled: true, port: 0}\n")
    async with live(config) as (process, _out, err):
        urls: list[str] = []

        def listening() -> bool:
            for line in err:
                if line.startswith("{"):
                    record = orjson.loads(line)
                    if record.get("msg") == "metrics endpoint listening":
                        urls.append(record["url"])
                        return True
            return False

        await eventually(listening, timeout=30)
        assert urls[0].endswith("/metrics")
        async with httpx.AsyncClient() as client:
            answer = await client.get(urls[0])  # no redirect following, as plain curl
        process.send_signal(signal.SIGINT)
    assert answer.status_code == 200
    assert "perp_pushes_total" in answer.text
    assert process.returncode == 0
