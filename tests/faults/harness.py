"""The fault suite's harness: a live Node trading against a VenueTwin that injects faults.

- :func:`node_config`: a Config pointing a Node at a twin, with the twin's demo credentials,
  fast polls, a short ``execution.unknown_window_s`` and the suite's strategy
  (:class:`tests.faults.trader.FaultTrader`); used in-process and by the crash child.
- :func:`run_case`: one whole run: a twin with still prices, a seeded long position, the node,
  the case's faults (set once the node is up), the bursts, then waiting until quiet (every
  intent terminal, nothing UNKNOWN; polled with ``eventually``), the faults cleared, the books
  given a moment to agree, and a graceful stop. :mod:`tests.faults.invariants` judges it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

import anyio
import attrs
import yaml

from framework import OrderIntent
from framework.config import Config, ConfigProblems, parse_config
from framework.engine.reconcile import order_input
from framework.live.node import Node
from framework.live.rest import RestClient
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import FaultSettings, PriceSettings, TwinSettings
from framework.venue.signing import make_signer
from tests.faults.trader import CLASS, PAIR, QUANTITY, FaultTrader
from tests.faults.truth import Truth, twin_matches, twin_net_quantity
from tests.live.conftest import eventually
from tests.node_running import running

COIN: Final = "USD"
SEED_QUANTITY: Final = Decimal("5")
"""The long position seeded before the node starts: 75 shorts of 0.01 never reach zero."""
SEED_ID: Final = "seed1"
UNKNOWN_WINDOW_S: Final = 2.0
QUIET_TIMEOUT_S: Final = UNKNOWN_WINDOW_S + 8.0
TERMINAL: Final = frozenset({"FILLED", "REJECTED", "LOST", "AMBIGUOUS"})
"""Final states of an intent (OrderStatus values, compared by name)."""
FAST_EXECUTION: Final[dict[str, Any]] = {
    "calls_per_second": 1000,
    "retry_base_s": 0.02,
    "retry_max_s": 0.2,
    "unknown_window_s": UNKNOWN_WINDOW_S,
    "drain_timeout_s": 3.0,
}


def node_config(
    base_url: str,
    ws_url: str,
    *,
    journal: str,
    params: Mapping[str, Any],
    execution: Mapping[str, Any] | None = None,
    polling: Mapping[str, Any] | None = None,
) -> Config:
    """A Config trading FaultTrader on PAIR at a twin, with its demo credentials."""
    data = {
        "node": {"name": "ft"},
        "venue": {
            "base_url": base_url,
            "ws_url": ws_url,
            "api_key": "${KEY}",
            "api_secret": "${SECRET}",
            "timeout_s": 5.0,
        },
        "pairs": {PAIR: {}},
        "polling": {"match_interval_s": 0.1, **(polling or {})},
        "stream": {"backoff_initial_s": 0.05, "backoff_max_s": 0.5, "ack_timeout_s": 2.0},
        "execution": {**FAST_EXECUTION, **(execution or {})},
        "journal": {"path": journal},
        "logging": {"level": "WARNING"},
        "strategies": [{"name": "trader", "class": CLASS, "params": dict(params)}],
    }
    text = yaml.safe_dump(data, sort_keys=False)
    try:
        return parse_config(text, env={"KEY": DEMO_API_KEY, "SECRET": DEMO_PRIVATE_KEY})
    except ConfigProblems as exc:
        raise AssertionError(f"the node does not take the suite's config (yet): {exc}") from None


def check_knobs(faults: Mapping[str, Any]) -> None:
    """Fail, naming them, when the twin's FaultSettings lacks some of the knobs."""
    missing = sorted(set(faults) - set(attrs.fields_dict(FaultSettings)))
    assert not missing, (
        f"the twin's FaultSettings has no {', '.join(missing)} (the twin work has not landed); "
        "the case cannot inject its fault"
    )


def still_twin() -> VenueTwin:
    """A twin on 127.0.0.1, any free port, with still prices (no background ticks)."""
    return VenueTwin(TwinSettings(prices=PriceSettings(tick_interval=0)), host="127.0.0.1", port=0)


async def seed_position(twin: VenueTwin) -> None:
    """Open the long position the bursts trade around, over the venue API."""
    signer = make_signer(2, DEMO_PRIVATE_KEY)
    seed = OrderIntent(pair=PAIR, is_long=True, quantity=SEED_QUANTITY)
    async with RestClient(twin.base_url, DEMO_API_KEY, signer) as rest:
        await rest.batch_create([order_input(SEED_ID, seed)])


async def settle(predicate: Callable[[], Any], timeout: float) -> bool:
    """eventually(predicate), but False instead of an error on timeout."""
    try:
        await eventually(predicate, timeout=timeout)
    except AssertionError:
        return False
    return True


@attrs.frozen
class Case:
    """One fault scenario: twin fault knobs, node settings, the bursts, and evidence it fired."""

    name: str
    faults: Mapping[str, Any] = attrs.Factory(dict)
    bursts: int = 10
    burst_size: int = 15
    every_s: float = 0.1
    polling: Mapping[str, Any] = attrs.Factory(dict)
    execution: Mapping[str, Any] = attrs.Factory(dict)
    fired: Callable[[Run], bool] | None = None
    """True when the run shows the fault was injected (a fault that never fired proves nothing)."""
    stop_after_bursts: int | None = None
    """Stop the node gracefully once this many bursts are submitted (not waiting for quiet)."""


@attrs.define
class Run:
    """A finished run: the twin and the node as they ended, and the truth."""

    case: Case
    twin: VenueTwin
    truth: Truth
    node: Node
    trader: FaultTrader
    summary: dict[str, Any]
    baseline_matches: frozenset[int]
    quiet: bool
    quiet_s: float
    elapsed_s: float

    def listed(self) -> set[int]:
        """Ids of the matches the twin has for the account since the node started."""
        return {m.id for m in twin_matches(self.twin, PAIR)} - self.baseline_matches


def is_quiet(node: Node, trader: FaultTrader) -> bool:
    """Every intent submitted and terminal; nothing queued, in flight or UNKNOWN."""
    engine = node.engine
    if engine is None or not trader.done_submitting or not engine.idle or engine.unknown_count:
        return False
    final = trader.final
    return all(final.get(coid) in TERMINAL for coid in trader.submitted)


def books_agree(node: Node, twin: VenueTwin) -> bool:
    """The node's position and balance equal the twin's."""
    assert twin.demo_user_id is not None
    mine = node.portfolio.balance(COIN)
    theirs = twin.exchange.balance(twin.demo_user_id, COIN)
    return (
        node.portfolio.net_quantity(PAIR) == twin_net_quantity(twin, PAIR)
        and mine is not None
        and theirs is not None
        and (mine.available_amount, mine.frozen_amount) == (theirs.available, theirs.frozen)
    )


async def run_case(case: Case) -> Run:
    """Run one case from start to graceful stop; the invariants are the caller's to check."""
    check_knobs(case.faults)
    began = time.monotonic()
    twin = still_twin()
    truth = Truth.attach(twin)
    params = {
        "pair": PAIR,
        "quantity": str(QUANTITY),
        "bursts": case.bursts,
        "burst_size": case.burst_size,
        "every_s": case.every_s,
    }
    with anyio.fail_after(60):
        async with twin:
            await seed_position(twin)
            baseline = frozenset(m.id for m in twin_matches(twin, PAIR))
            config = node_config(
                twin.base_url,
                twin.ws_url,
                journal=":memory:",
                params=params,
                execution=case.execution,
                polling=case.polling,
            )
            node = Node(config)
            async with running(node) as summary:
                trader = node.strategies[0]
                assert isinstance(trader, FaultTrader)
                await eventually(
                    lambda: node.stream is not None and node.stream.state == "connected"
                )
                twin.faults.configure(**case.faults)
                trader.armed = True
                t0 = time.monotonic()
                if case.stop_after_bursts is not None:
                    stop_at = case.stop_after_bursts
                    await eventually(lambda: trader.bursts_done >= stop_at)
                    quiet = False  # decided once the node has stopped
                else:
                    quiet = await settle(lambda: is_quiet(node, trader), QUIET_TIMEOUT_S)

                    def delivered() -> bool:
                        listed = {m.id for m in twin_matches(twin, PAIR)} - baseline
                        return listed <= {m.id for m in trader.matches}

                    await settle(delivered, 2.0)
                    twin.faults.clear()
                    # Pushes, reconnects and resyncs after the faults: seconds under load.
                    await settle(lambda: books_agree(node, twin), 15.0)
                quiet_s = time.monotonic() - t0
            if case.stop_after_bursts is not None:
                quiet = all(trader.final.get(c) in TERMINAL for c in trader.submitted)
    return Run(
        case, twin, truth, node, trader, summary, baseline, quiet, quiet_s,
        time.monotonic() - began,
    )  # fmt: skip
