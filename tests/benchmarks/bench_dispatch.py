"""Dispatch latency: a raw frame to a strategy hook, beside a plain function-call loop.

Run: python tests/benchmarks/bench_dispatch.py. The measured path is what the node does
with a WebSocket text frame: the venue codec decodes it straight from its bytes
(framework.venue.codec.decode_frame), then push_router (portfolio update, logId rule) ->
Bus.publish -> the strategy's handler (pair filter) -> Strategy.on_position / on_account,
with three strategies and an infrastructure subscriber on the bus. The decoded-push row is
the same path without the decode. Rounds alternate between the measured paths and the
baseline so machine noise hits all alike; figures are medians. The target (issue 17) is at
most 6 microseconds per event from the raw frame.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import orjson

from framework.engine.bus import Bus
from framework.engine.clock import VirtualClock
from framework.engine.portfolio import Portfolio, push_router
from framework.engine.strategy import BasicContext, Strategy, attach
from framework.venue.codec import decode_frame
from framework.venue.models import AccountPush, PositionPush

TARGET_US = 6.0
ROUNDS = 9
EVENTS = 20_000


class Counting(Strategy):
    """Counts what it hears, the least a strategy does."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.positions = 0
        self.accounts = 0

    def on_position(self, push: PositionPush) -> None:
        self.positions += 1

    def on_account(self, push: AccountPush) -> None:
        self.accounts += 1


def position_frame(i: int) -> dict[str, object]:
    return {
        "event": "api_position",
        "success": True,
        "data": {
            "changeType": "INCREASE",
            "currentQuantity": str(1 + i % 50),
            "direction": "LONG",
            "operateQuantity": "1",
            "positionId": 7,
            "symbol": "ETH-USD",
            "canClosedQuantity": str(1 + i % 50),
            "contractPairId": 1,
            "positionType": 3,
            "openingPrice": "2001.5",
            "marginAmount": "400.3",
            "marginCallAmount": "0",
        },
    }


def account_frame(i: int) -> dict[str, object]:
    return {
        "event": "api_account",
        "success": True,
        "symbol": "USD",
        "data": {
            "availableAmount": f"{100000 - i}.25",
            "frozenAmount": "400.2",
            "logId": i + 1,
            "operateAmount": "-1.0005",
            "symbol": "USD",
            "coinId": 1,
        },
    }


def frames() -> list[bytes]:
    """Alternating position and account frames, as the venue sends them."""
    out = []
    for i in range(EVENTS):
        frame = position_frame(i) if i % 2 == 0 else account_frame(i)
        out.append(orjson.dumps(frame))
    return out


def build() -> tuple[Callable[[PositionPush | AccountPush], None], list[Counting]]:
    """The node's inbound wiring: portfolio, bus, three strategies, one metrics handler."""
    bus = Bus()
    portfolio = Portfolio()
    context = BasicContext(portfolio, VirtualClock(0), lambda s, i: "x")
    strategies = [
        Counting("eth", context, {"pair": "ETH-USD"}),
        Counting("btc", context, {"pair": "BTC-USD"}),
        Counting("all", context),
    ]
    for s in strategies:
        attach(bus, s)
    seen = [0]

    def metrics(event: PositionPush) -> None:
        seen[0] += 1

    bus.subscribe(PositionPush, metrics)
    return push_router(portfolio, bus.publish), strategies


def time_dispatch(pushes: Sequence[PositionPush | AccountPush]) -> float:
    on_frame, strategies = build()
    start = time.perf_counter()
    for push in pushes:
        on_frame(push)
    elapsed = time.perf_counter() - start
    assert strategies[0].positions == strategies[2].positions == (len(pushes) + 1) // 2
    assert strategies[2].accounts == len(pushes) // 2
    return elapsed / len(pushes)


def time_from_text(raw: Sequence[bytes]) -> float:
    on_frame, strategies = build()
    decode = decode_frame
    start = time.perf_counter()
    for text in raw:
        on_frame(decode(text))  # type: ignore[arg-type]
    elapsed = time.perf_counter() - start
    assert strategies[2].positions == (len(raw) + 1) // 2
    return elapsed / len(raw)


def time_plain_calls(pushes: Sequence[PositionPush | AccountPush]) -> float:
    strategy = Counting("plain", BasicContext(Portfolio(), VirtualClock(0), lambda s, i: "x"))
    hook = strategy.on_position
    start = time.perf_counter()
    for push in pushes:
        hook(push)  # type: ignore[arg-type]
    return (time.perf_counter() - start) / len(pushes)


def main() -> int:
    """Print the figures; exit 1 when the raw-frame path misses the target."""
    raw = frames()
    pushes = [decode_frame(t) for t in raw]
    decoded: list[PositionPush | AccountPush] = [
        p for p in pushes if isinstance(p, PositionPush | AccountPush)
    ]
    dispatch, from_text, plain = [], [], []
    for _ in range(ROUNDS):
        plain.append(time_plain_calls(decoded))
        dispatch.append(time_dispatch(decoded))
        from_text.append(time_from_text(raw))
    d, t, p = (statistics.median(x) * 1e6 for x in (dispatch, from_text, plain))
    print(
        f"events per round: {len(decoded)} (half position, half account pushes), rounds: {ROUNDS}"
    )
    print(f"{'plain function call (baseline)':<44} {p:8.3f} us/event")
    print(f"{'decoded push -> strategy hook (bus)':<44} {d:8.3f} us/event")
    print(f"{'raw frame -> decode -> strategy hook':<44} {t:8.3f} us/event   target <= {TARGET_US}")
    print(f"dispatch overhead over a plain call: {d / p:.1f}x; at {datetime.now(UTC):%Y-%m-%d}")
    ok = t <= TARGET_US
    print("PASS" if ok else "FAIL", f"raw frame -> hook {t:.2f} us/event vs target {TARGET_US} us")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
