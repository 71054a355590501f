"""The opt-in metrics endpoint: Prometheus text at /metrics and a JSON /healthz.

Counters are read from the node's own tallies at scrape time (a custom collector), so nothing
is counted twice and the hot path only bumps plain integers. The one histogram,
push-to-submit latency, is observed directly: the time from an inbound event arriving to a
strategy's submit made while handling it, labelled by trigger (``push``, ``match`` from a
poll, ``timer``, or ``market`` for a market record). /healthz answers 200 when the stream is connected and the
poller running (and the market socket connected, when there is one), else 503, with every
component's state in the body.

Gauges a trader alerts on are read at scrape time from callables the node passes (each
optional; a gauge whose callable is absent is not exposed): ``perp_position{pair}`` (net
signed quantity), ``perp_balance{coin,kind}`` (available, frozen), ``perp_pnl{pair,kind}``
(realized, unrealized, fees), ``perp_resting_orders{pair}``, ``perp_unknown_orders`` and
``perp_strategies_stopped`` with ``perp_strategy_stopped{strategy}``.
:func:`portfolio_feeds` builds the position and balance callables from a Portfolio.

The market feed (issue 27) adds its own, read the same way (:meth:`Metrics.watch_market`):
``perp_market_events_total{channel}`` (records handed to strategies: trade, depth, kline,
mark, index), ``perp_market_age_seconds{pair}`` (since the pair's last market event; a pair
never heard has none), ``perp_market_gaps_total`` and ``perp_market_gap_seconds_total``
(reconnects after a lost market socket, and the seconds unheard),
``perp_market_malformed_total{kind}`` (bad frames: not_json, unknown_event, trade, book,
bar, frame) and ``perp_market_poll_errors_total{kind}`` (failed mark and index polls). With a
market socket, /healthz also wants the ``market`` component connected.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

import anyio
import attrs
import orjson
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from framework.engine.portfolio import Portfolio

__all__ = [
    "COUNTERS",
    "HEALTHY",
    "Feeds",
    "MarketGauges",
    "Metrics",
    "portfolio_feeds",
    "serve_metrics",
    "summary_tallies",
]

log = logging.getLogger("framework.metrics")

COUNTERS: Final = {
    "pushes": "Position and account pushes received",
    "matches": "New match records published",
    "polls": "Match-result polls run",
    "batches": "Order batches sent",
    "orders_accepted": "Orders the venue accepted",
    "rejects": "Orders rejected (locally by risk checks or by the venue)",
    "reconnects": "WebSocket reconnections",
    "orders_missing": "Tracked resting orders the open-order check found the venue no longer lists",
}
"""Counter names (perp_<name>_total) and their help; values come from the node's tallies."""

HEALTHY: Final = {"stream": "connected", "poller": "running"}
"""The state each component must be in for /healthz to answer 200."""

LATENCY_BUCKETS: Final = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5,
)  # fmt: skip


def summary_tallies(summary: Mapping[str, Any]) -> dict[str, int]:
    """The COUNTERS' values from a node's summary (``Node.summary()``)."""
    return {
        "pushes": summary["pushes"],
        "matches": summary["matches"],
        "polls": summary["polls"],
        "batches": int(summary.get("batches_sent", 0)),
        "orders_accepted": summary["orders_accepted"],
        "rejects": summary["orders_rejected"],
        "reconnects": summary["reconnects"],
        "orders_missing": int(summary.get("orders_missing", 0)),
    }


class _TallyCollector(Collector):
    """Exposes the node's integer tallies as Prometheus counters at scrape time."""

    def __init__(
        self,
        read: Callable[[], Mapping[str, int]],
        components: dict[str, str],
        healthy: Mapping[str, str] = HEALTHY,
    ) -> None:
        self._read = read
        self._components = components
        self._healthy = healthy

    def collect(self) -> Iterator[Any]:
        """One counter family per known tally, plus an up gauge per component."""
        values = self._read()
        for name, help_ in COUNTERS.items():
            family = CounterMetricFamily(f"perp_{name}", help_)
            family.add_metric([], float(values.get(name, 0)))
            yield family
        up = GaugeMetricFamily(
            "perp_component_up", "1 when a component is healthy", labels=["component"]
        )
        for component, state in sorted(self._components.items()):
            up.add_metric([component], 1.0 if self._healthy.get(component, state) == state else 0.0)
        yield up


Amounts = Mapping[str, Decimal | None]


@attrs.frozen(kw_only=True)
class Feeds:
    """The callables behind the trading gauges, read at scrape time (None: gauge absent)."""

    positions: Callable[[], Mapping[str, Decimal]] | None = None
    """Pair -> net signed quantity (long positive)."""
    balances: Callable[[], Mapping[str, Amounts]] | None = None
    """Coin -> {"available": ..., "frozen": ...}."""
    pnl: Callable[[], Mapping[str, Amounts]] | None = None
    """Pair -> {"realized": ..., "unrealized": ..., "fees": ...} (whichever are known)."""
    resting: Callable[[], Mapping[str, int]] | None = None
    """Pair -> accepted orders that may still rest on the book."""
    unknown: Callable[[], int] | None = None
    """Intents whose outcome is UNKNOWN."""
    stopped: Callable[[], Collection[str]] | None = None
    """Names of the strategies stopped for failing."""


def _labelled(
    name: str, help_: str, labels: Sequence[str], rows: Iterator[tuple[tuple[str, ...], float]]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_, labels=list(labels))
    for values, value in rows:
        family.add_metric(list(values), value)
    return family


class _FeedCollector(Collector):
    """Exposes the trading gauges from Feeds at scrape time."""

    def __init__(self, feeds: Feeds) -> None:
        self._feeds = feeds

    def collect(self) -> Iterator[Any]:
        """One gauge family per feed given."""
        f = self._feeds
        if f.positions is not None:
            positions = f.positions()
            yield _labelled(
                "perp_position",
                "Net position per pair (signed quantity: long positive, short negative)",
                ["pair"],
                (((pair,), float(q)) for pair, q in sorted(positions.items())),
            )
        if f.balances is not None:
            yield _labelled(
                "perp_balance",
                "Balance per settlement coin (kind: available, frozen)",
                ["coin", "kind"],
                _amount_rows(f.balances()),
            )
        if f.pnl is not None:
            yield _labelled(
                "perp_pnl",
                "PnL per pair (kind: realized, unrealized, fees)",
                ["pair", "kind"],
                _amount_rows(f.pnl()),
            )
        if f.resting is not None:
            resting = f.resting()
            yield _labelled(
                "perp_resting_orders",
                "Accepted orders per pair that may still rest on the book",
                ["pair"],
                (((pair,), float(n)) for pair, n in sorted(resting.items())),
            )
        if f.unknown is not None:
            unknown = GaugeMetricFamily(
                "perp_unknown_orders", "Orders whose outcome is UNKNOWN (taken or not)"
            )
            unknown.add_metric([], float(f.unknown()))
            yield unknown
        if f.stopped is not None:
            stopped = sorted(f.stopped())
            count = GaugeMetricFamily(
                "perp_strategies_stopped", "Strategies stopped for failing in their hooks"
            )
            count.add_metric([], float(len(stopped)))
            yield count
            yield _labelled(
                "perp_strategy_stopped",
                "1 for each strategy stopped for failing",
                ["strategy"],
                (((name,), 1.0) for name in stopped),
            )


@attrs.frozen(kw_only=True)
class MarketGauges:
    """The callables behind the market's metrics (see the module), read at scrape time."""

    events: Callable[[], Mapping[str, int]]
    """Channel (trade, depth, kline, mark, index) -> records handed to the intake."""
    ages: Callable[[], Mapping[str, float | None]]
    """Pair -> seconds since its last market event (None: never heard)."""
    gaps: Callable[[], int]
    """Times the market socket came back after a subscribed session ended."""
    gap_seconds: Callable[[], float]
    """Seconds unheard in those gaps, summed."""
    malformed: Callable[[], Mapping[str, int]]
    """Kind -> bad market frames skipped."""
    poll_errors: Callable[[], Mapping[str, int]]
    """Kind (mark, index) -> failed price polls."""


class _MarketCollector(Collector):
    """Exposes the market feed's counters and ages from MarketGauges at scrape time."""

    def __init__(self, gauges: MarketGauges) -> None:
        self._gauges = gauges

    def collect(self) -> Iterator[Any]:
        """The market's families (see the module)."""
        g = self._gauges
        yield _counted(
            "perp_market_events", "Market records handed to strategies, per channel", "channel",
            g.events(),
        )  # fmt: skip
        ages = GaugeMetricFamily(
            "perp_market_age_seconds", "Seconds since the pair's last market event", labels=["pair"]
        )
        for pair, age in sorted(g.ages().items()):
            if age is not None:
                ages.add_metric([pair], age)
        yield ages
        gaps = CounterMetricFamily(
            "perp_market_gaps", "Market socket reconnects after a subscribed session was lost"
        )
        gaps.add_metric([], float(g.gaps()))
        yield gaps
        seconds = CounterMetricFamily(
            "perp_market_gap_seconds", "Seconds the market socket was down between sessions"
        )
        seconds.add_metric([], float(g.gap_seconds()))
        yield seconds
        yield _counted(
            "perp_market_malformed", "Bad market frames skipped, per kind", "kind", g.malformed()
        )
        yield _counted(
            "perp_market_poll_errors", "Failed mark and index price polls, per kind", "kind",
            g.poll_errors(),
        )  # fmt: skip


def _counted(name: str, help_: str, label: str, counts: Mapping[str, int]) -> CounterMetricFamily:
    """A counter family with one sample per label value."""
    family = CounterMetricFamily(name, help_, labels=[label])
    for value, count in sorted(counts.items()):
        family.add_metric([value], float(count))
    return family


def _amount_rows(data: Mapping[str, Amounts]) -> Iterator[tuple[tuple[str, ...], float]]:
    for key, amounts in sorted(data.items()):
        for kind, value in sorted(amounts.items()):
            if value is not None:
                yield (key, kind), float(value)


def portfolio_feeds(
    portfolio: Portfolio, pairs: Sequence[str], coins: Sequence[str]
) -> dict[str, Any]:
    """Feeds' positions and balances from a portfolio: ``Feeds(**portfolio_feeds(...))``."""

    def positions() -> dict[str, Decimal]:
        return {pair: portfolio.net_quantity(pair) for pair in pairs}

    def balances() -> dict[str, Amounts]:
        out: dict[str, Amounts] = {}
        for coin in coins:
            balance = portfolio.balance(coin)
            if balance is not None:
                out[coin] = {
                    "available": balance.available_amount,
                    "frozen": balance.frozen_amount,
                }
        return out

    return {"positions": positions, "balances": balances}


class Metrics:
    """The node's metrics: a private registry, the latency histogram and component states."""

    def __init__(
        self, read_tallies: Callable[[], Mapping[str, int]], feeds: Feeds | None = None
    ) -> None:
        self.registry = CollectorRegistry()
        self.components: dict[str, str] = {"stream": "starting", "poller": "starting"}
        self.wanted: dict[str, str] = dict(HEALTHY)
        """The state each component must be in for /healthz to answer 200."""
        self.registry.register(_TallyCollector(read_tallies, self.components, self.wanted))
        self.feeds = feeds or Feeds()
        self.registry.register(_FeedCollector(self.feeds))
        self.submit_latency = Histogram(
            "perp_push_to_submit_seconds",
            "Time from an inbound event (trigger: push, match, timer or market) to a strategy's "
            "submit made while handling it",
            labelnames=["trigger"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def watch_market(self, gauges: MarketGauges, *, websocket: bool) -> None:
        """Expose the market feed's metrics; websocket: /healthz also wants it connected."""
        self.registry.register(_MarketCollector(gauges))
        if websocket:
            self.components.setdefault("market", "starting")
            self.wanted["market"] = "connected"

    def set_state(self, component: str, state: str) -> None:
        """Record a component's state (stream: connected/lost/..., poller: running/stopped)."""
        self.components[component] = state

    def healthy(self) -> bool:
        """True when every watched component is in its healthy state."""
        return all(self.components.get(c) == s for c, s in self.wanted.items())

    def health(self) -> dict[str, Any]:
        """The /healthz body."""
        return {"status": "ok" if self.healthy() else "degraded", **self.components}

    def app(self) -> Starlette:
        """The ASGI app serving /metrics (and /metrics/) and /healthz."""

        async def metrics(_: Request) -> Response:
            return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

        async def healthz(_: Request) -> Response:
            return Response(
                orjson.dumps(self.health()),
                status_code=200 if self.healthy() else 503,
                media_type="application/json",
            )

        return Starlette(
            routes=[
                Route("/healthz", healthz),
                Route("/metrics", metrics),
                Route("/metrics/", metrics),
            ]
        )


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the node."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Install nothing: SIGINT and SIGTERM stop the whole node, not just this server."""
        yield


async def serve_metrics(
    metrics: Metrics,
    host: str,
    port: int,
    *,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve /metrics and /healthz until cancelled; task_status gets the bound port."""
    # Binding here makes a taken port a clear OSError for the node instead of uvicorn's exit.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"metrics endpoint cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.setblocking(False)
    bound = int(sock.getsockname()[1])
    config = uvicorn.Config(metrics.app(), log_level="warning", lifespan="off", access_log=False)
    server = _Server(config)
    log.info("metrics endpoint listening", extra={"url": f"http://{host}:{bound}/metrics"})
    task_status.started(bound)
    try:
        await server.serve(sockets=[sock])
    finally:
        if server.started:
            # Cancellation interrupts uvicorn's main loop; close its listener and connections.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await server.shutdown(sockets=[sock])
        sock.close()
