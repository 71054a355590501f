"""The venue port: the one Executor drives any Venue, with no event loop when none waits."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from decimal import Decimal
from functools import partial

import pytest

from framework.config import Config
from framework.engine.cancel_calls import CancelAnswer, CancelBatch
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import OrderUpdate
from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.kernel import Kernel
from framework.engine.open_orders import VenueOrder
from framework.engine.venue import Executor, run_now
from framework.venue.models import AccountBalance, MatchRecord, OrderInput, OrderResult, Position
from framework.venue.rules import PairRules


class Instant:
    """A venue that answers every call at once: accepts each order, cancels each id."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []

    def send_batch(self, orders: Sequence[OrderInput]) -> Awaitable[list[OrderResult]]:
        self.sent.append([o.client_order_id or "" for o in orders])
        return self._accept(orders)

    async def _accept(self, orders: Sequence[OrderInput]) -> list[OrderResult]:
        return [
            OrderResult(client_order_id=o.client_order_id, order_id=i + 1, pair_name=o.pair_name)
            for i, o in enumerate(orders)
        ]

    async def cancel(self, batch: CancelBatch) -> dict[int | str, CancelAnswer]:
        return {order_id: CancelAnswer(200) for order_id in batch.order_ids}

    async def cancel_all(
        self, pair: str | None = None, is_long: bool | None = None
    ) -> tuple[int, ...] | None:
        return ()

    async def all_open_orders(self, pair: str) -> list[VenueOrder]:
        return []

    async def query_order(self, entrust_id: int) -> VenueOrder | None:
        return None

    async def positions(
        self, pair: str, page_no: int | None = None, page_size: int | None = None
    ) -> list[Position]:
        return []

    async def balance(self, symbol: str) -> AccountBalance:
        return AccountBalance(symbol=symbol)

    async def matches(
        self,
        pair: str,
        match_id: int | None = None,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> list[MatchRecord]:
        return []

    async def warm_up(self) -> None:
        return None


def test_the_executor_drives_a_venue_that_never_waits_with_no_event_loop() -> None:
    clock = VirtualClock(0)
    kernel = Kernel(Config(pairs={"ETH-USD": PairRules()}), clock)
    updates: list[OrderStatus] = []
    kernel.bus.subscribe(OrderUpdate, lambda u: updates.append(u.status))
    venue = Instant()
    ids = ClientIdGenerator.ephemeral("t", now_ms=0, random_bits=1)
    executor = Executor(partial(kernel.build_engine, ids=ids), venue)
    limit = OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal("1"), price=Decimal("10"))
    coid = executor.engine.submit("s", limit)
    assert executor.pending
    executor.pump()
    assert venue.sent == [[coid]]
    assert updates == [OrderStatus.ACCEPTED]
    assert executor.engine.cancel("s", coid)
    executor.pump()
    assert updates == [OrderStatus.ACCEPTED, OrderStatus.CANCELED]
    assert executor.engine.idle


def test_a_call_that_waits_is_an_error_where_nothing_runs_an_event_loop() -> None:
    class Waits:
        def __await__(self):  # type: ignore[no-untyped-def]
            yield None

    async def answer() -> None:
        await Waits()

    with pytest.raises(RuntimeError, match="nothing here runs an event loop"):
        run_now(answer())
