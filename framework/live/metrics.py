"""The opt-in metrics endpoint: Prometheus text at /metrics and a JSON /healthz.

Counters are read from the node's own tallies at scrape time (a custom collector), so nothing
is counted twice and the hot path only bumps plain integers. The one histogram,
push-to-submit latency, is observed directly: the time from an inbound event arriving to a
strategy's submit made while handling it, labelled by trigger (``push``, ``match`` from a
poll, or ``timer``). /healthz answers 200 when the stream is connected and the
poller running, else 503, with every component's state in the body.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import anyio
import orjson
import uvicorn
from prometheus_client import CollectorRegistry, Histogram, make_asgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

__all__ = ["COUNTERS", "HEALTHY", "Metrics", "serve_metrics"]

log = logging.getLogger("framework.metrics")

COUNTERS: Final = {
    "pushes": "Position and account pushes received",
    "matches": "New match records published",
    "polls": "Match-result polls run",
    "batches": "Order batches sent",
    "orders_accepted": "Orders the venue accepted",
    "rejects": "Orders rejected (locally by risk checks or by the venue)",
    "reconnects": "WebSocket reconnections",
}
"""Counter names (perp_<name>_total) and their help; values come from the node's tallies."""

HEALTHY: Final = {"stream": "connected", "poller": "running"}
"""The state each component must be in for /healthz to answer 200."""

LATENCY_BUCKETS: Final = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5,
)  # fmt: skip


class _TallyCollector(Collector):
    """Exposes the node's integer tallies as Prometheus counters at scrape time."""

    def __init__(self, read: Callable[[], Mapping[str, int]], components: dict[str, str]) -> None:
        self._read = read
        self._components = components

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
            up.add_metric([component], 1.0 if HEALTHY.get(component, state) == state else 0.0)
        yield up


class Metrics:
    """The node's metrics: a private registry, the latency histogram and component states."""

    def __init__(self, read_tallies: Callable[[], Mapping[str, int]]) -> None:
        self.registry = CollectorRegistry()
        self.components: dict[str, str] = {"stream": "starting", "poller": "starting"}
        self.registry.register(_TallyCollector(read_tallies, self.components))
        self.submit_latency = Histogram(
            "perp_push_to_submit_seconds",
            "Time from an inbound event (trigger: push, match or timer) to a strategy's "
            "submit made while handling it",
            labelnames=["trigger"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def set_state(self, component: str, state: str) -> None:
        """Record a component's state (stream: connected/lost/..., poller: running/stopped)."""
        self.components[component] = state

    def healthy(self) -> bool:
        """True when every watched component is in its healthy state."""
        return all(self.components.get(c) == s for c, s in HEALTHY.items())

    def health(self) -> dict[str, Any]:
        """The /healthz body."""
        return {"status": "ok" if self.healthy() else "degraded", **self.components}

    def app(self) -> Starlette:
        """The ASGI app serving /metrics and /healthz."""

        async def healthz(_: Request) -> Response:
            return Response(
                orjson.dumps(self.health()),
                status_code=200 if self.healthy() else 503,
                media_type="application/json",
            )

        return Starlette(
            routes=[
                Route("/healthz", healthz),
                Mount("/metrics", app=make_asgi_app(registry=self.registry)),
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
