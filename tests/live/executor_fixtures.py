"""Helpers of the executor tests: a running engine + LiveExecutor against a venue twin."""

from __future__ import annotations

import random
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from decimal import Decimal
from functools import partial
from typing import Any, get_args

import anyio
import attrs

from framework.config import Config
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.events import Event, OrderUpdate
from framework.engine.execution import ExecutionEngine, ExecutionSettings
from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.kernel import Kernel
from framework.engine.venue import AfterCommit, Venue
from framework.live.executor import LiveExecutor
from framework.live.journal import Journal
from framework.live.rest import ResponseObserver, RestClient
from framework.live.wallclock import WallClock
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from framework.venue.requests import OrderManagementPaths
from framework.venue.rules import PairRules
from framework.venue.signing import make_signer

# The engine's local rules are looser than the twin's (max_quantity 1000) so that tests can
# send orders only the venue refuses.
LOOSE_RULES: Mapping[str, PairRules] = {
    "ETH-USD": PairRules(max_quantity=Decimal("100000")),
    "BTC-USD": PairRules(quantity_decimals=4, min_quantity=Decimal("0.0001")),
}

FAST = ExecutionSettings(calls_per_second=1000.0, retry_base_s=0.01, retry_max_s=0.05)


def twin_settings(**changes: Any) -> TwinSettings:
    """Twin settings for executor tests: still prices, the given changes."""
    return attrs.evolve(TwinSettings(prices=PriceSettings(tick_interval=0)), **changes)


def resting_buy(qty: str = "0.1", price: str = "1500") -> OrderIntent:
    """A GTC buy below the mark (2000): accepted, rests, never fills by itself."""
    return OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal(qty), price=Decimal(price))


def market(qty: str = "0.1", *, long: bool = True) -> OrderIntent:
    """A market order on ETH-USD: fills at once at the mark (plus slippage)."""
    return OrderIntent(pair="ETH-USD", is_long=long, quantity=Decimal(qty))


def build_execution(
    settings: ExecutionSettings,
    venue: Venue,
    *,
    publish: Callable[[Event], None],
    rules: Mapping[str, PairRules],
    journal: Journal | None,
    node: str = "pf",
) -> tuple[ExecutionEngine, LiveExecutor]:
    """An engine built by a kernel of these settings (every event to publish), driven by a
    LiveExecutor over venue; ids from the journal's blocks (ephemeral without one)."""
    clock = WallClock()
    kernel = Kernel(Config(pairs=dict(rules), execution=settings), clock)
    for event_type in get_args(Event):
        kernel.bus.subscribe(event_type, publish)
    if journal is not None:
        ids = ClientIdGenerator(node, journal)
    else:
        ids = ClientIdGenerator.ephemeral(
            node, now_ms=clock.now_ms(), random_bits=secrets.randbits(20)
        )
    engine = partial(
        kernel.build_engine, ids=ids, journal=journal, random=random.SystemRandom().random
    )
    executor = LiveExecutor(engine, venue, journal=journal)
    return executor.engine, executor


@attrs.define
class Session:
    """An engine and its executor running against a twin; events are what was published."""

    engine: ExecutionEngine
    executor: LiveExecutor
    rest: RestClient
    events: list[Event]

    def updates(self, status: OrderStatus | None = None) -> list[OrderUpdate]:
        """Published OrderUpdates (of one status)."""
        return [
            e
            for e in self.events
            if isinstance(e, OrderUpdate) and (status is None or e.status is status)
        ]

    def final(self) -> dict[str, OrderStatus]:
        """The last status published per client order id."""
        return {u.client_order_id: u.status for u in self.updates()}


@asynccontextmanager
async def trading(
    twin: VenueTwin | None,
    settings: ExecutionSettings = FAST,
    *,
    journal: Journal | None = None,
    rules: Mapping[str, PairRules] = LOOSE_RULES,
    observer: ResponseObserver | None = None,
    after_commit: AfterCommit | None = None,
    timeout: float = 5.0,
    base_url: str | None = None,
    order_paths: OrderManagementPaths | None = None,
) -> AsyncIterator[Session]:
    """Run an engine + LiveExecutor on the twin's demo account for the body's duration.

    With base_url, against that server instead (twin may then be None).
    """
    signer = make_signer(2, DEMO_PRIVATE_KEY)
    if base_url is None:
        assert twin is not None, "trading() needs a twin or a base_url"
        base_url = twin.base_url
    async with RestClient(
        base_url, DEMO_API_KEY, signer, observer=observer, timeout=timeout, order_paths=order_paths
    ) as rest:
        events: list[Event] = []
        engine, executor = build_execution(
            settings, rest, publish=events.append, rules=rules, journal=journal
        )
        executor.after_commit = after_commit
        async with anyio.create_task_group() as tg:
            tg.start_soon(executor.run)
            try:
                yield Session(engine, executor, rest, events)
            finally:
                tg.cancel_scope.cancel()
