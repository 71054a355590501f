"""StreamClient against the venue twin: order, reconnect + resync, stale and duplicate pushes.

The whole inbound path runs here over real sockets: twin -> WebSocket -> StreamClient ->
push_router/Portfolio -> Bus -> Strategy, with the MatchPoller feeding matches and the
RestResync running after every (re)subscribe.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from decimal import Decimal

import anyio
import attrs
import pytest

from framework.engine.bus import Bus
from framework.engine.events import BalanceSynced, MatchFilled, PositionsSynced
from framework.engine.portfolio import Portfolio, push_router
from framework.engine.strategy import BasicContext, Strategy, attach
from framework.live.poller import MatchPoller, MemoryCursorStore
from framework.live.rest import RestClient
from framework.live.stream import RestResync, StreamClient
from framework.live.wallclock import WallClock
from framework.twin.demo import DEMO_API_KEY
from framework.twin.server import VenueTwin
from framework.venue.errors import SendFailed
from framework.venue.models import (
    AccountPush,
    MatchRecord,
    MatchType,
    OrderInput,
    PositionPush,
    PositionType,
)
from framework.venue.requests import RequestBuilder
from framework.venue.signing import Signer
from tests.live.conftest import Eventually

pytestmark = pytest.mark.anyio

PAIR = "ETH-USD"
COIN = "USD"
_ids = itertools.count(1)


class Recorder(Strategy):
    """Keeps what reaches its hooks."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.positions: list[PositionPush] = []
        self.accounts: list[AccountPush] = []
        self.matches: list[MatchRecord] = []

    def on_position(self, push: PositionPush) -> None:
        self.positions.append(push)

    def on_account(self, push: AccountPush) -> None:
        self.accounts.append(push)

    def on_match(self, match: MatchRecord) -> None:
        self.matches.append(match)


class Crashing(Strategy):
    """Raises in every position hook."""

    calls = 0

    def on_position(self, push: PositionPush) -> None:
        Crashing.calls += 1
        raise RuntimeError("strategy bug")


def no_submit(strategy: str, intent: object) -> str:
    raise AssertionError("these tests submit through REST directly")


@attrs.define
class Rig:
    """The inbound path wired as the node wires it."""

    bus: Bus
    portfolio: Portfolio
    recorder: Recorder
    stream: StreamClient
    poller: MatchPoller
    resync: RestResync
    store: MemoryCursorStore
    synced: list[object]


@contextlib.asynccontextmanager
async def running_rig(
    twin: VenueTwin,
    rest: RestClient,
    signer: Signer,
    *,
    interval_s: float = 60.0,
    page_size: int = 3,
    extra: list[Strategy] | None = None,
    api_key: str = DEMO_API_KEY,
    resync_failures: int = 0,
) -> AsyncIterator[Rig]:
    bus = Bus(max_failures=2)
    portfolio = Portfolio()
    context = BasicContext(portfolio, WallClock(), no_submit)
    recorder = Recorder("recorder", context, {"pair": PAIR})
    for strategy in [*(extra or []), recorder]:
        attach(bus, strategy)
    synced: list[object] = []
    bus.subscribe(PositionsSynced, synced.append)
    bus.subscribe(BalanceSynced, synced.append)
    store = MemoryCursorStore()
    poller = MatchPoller(
        rest,
        pairs=[PAIR],
        interval_s=interval_s,
        page_size=page_size,
        store=store,
        on_match=lambda m: bus.publish(MatchFilled(m)),
    )
    resync = RestResync(
        rest, pairs=[PAIR], coins=[COIN], portfolio=portfolio, publish=bus.publish, poller=poller
    )
    failures_left = resync_failures

    async def flaky_resync() -> None:
        nonlocal failures_left
        if failures_left > 0:
            failures_left -= 1
            raise SendFailed("venue unreachable for the resync (test)")
        await resync()

    stream = StreamClient(
        twin.ws_url,
        RequestBuilder(api_key, signer),
        pairs=[PAIR],
        coins=[COIN],
        on_frame=push_router(portfolio, bus.publish),
        resync=flaky_resync,
        clock=WallClock(),
        ack_timeout_s=3.0,
        backoff_initial_s=0.01,
        backoff_max_s=0.2,
    )
    await poller.initialize()
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream.run)
        poller.start()
        try:
            yield Rig(bus, portfolio, recorder, stream, poller, resync, store, synced)
        finally:
            await poller.aclose()
            tg.cancel_scope.cancel()


async def market(rest: RestClient, is_long: bool, qty: str = "1") -> None:
    order = OrderInput(
        client_order_id=f"t{next(_ids)}",
        is_long=is_long,
        is_market=True,
        lever=5,
        match_type=MatchType.GTC,
        pair_name=PAIR,
        position_type=PositionType.ISOLATED,
        quantity=Decimal(qty),
    )
    results = await rest.batch_create([order])
    assert [r.client_order_id for r in results] == [order.client_order_id]


async def all_match_ids(rest: RestClient) -> list[int]:
    ids: list[int] = []
    bound: int | None = None
    while page := await rest.matches(PAIR, match_id=bound, page_size=50):
        ids.extend(m.id for m in page)
        bound = min(m.id for m in page)
    return sorted(ids)


async def test_pushes_reach_the_strategy_in_the_order_the_venue_sent_them(
    twin: VenueTwin, rest: RestClient, demo_signer: Signer, eventually: Eventually
) -> None:
    async with running_rig(twin, rest, demo_signer) as rig:
        await eventually(lambda: rig.stream.state == "connected" and rig.resync.runs == 1)
        for _ in range(4):
            await market(rest, is_long=True)
        await eventually(lambda: len(rig.recorder.positions) == 4)
        await eventually(
            lambda: rig.portfolio.stale_account_pushes + len(rig.recorder.accounts) >= 4
        )
    assert [p.current_quantity for p in rig.recorder.positions] == [
        Decimal(n) for n in (1, 2, 3, 4)
    ]
    log_ids = [a.log_id for a in rig.recorder.accounts]
    assert log_ids == sorted(set(log_ids)) and len(log_ids) >= 4
    assert rig.portfolio.net_quantity(PAIR) == Decimal(4)
    assert rig.stream.stats.malformed == 0 and rig.stream.stats.unknown_events == 0


async def test_a_disconnect_mid_stream_resubscribes_resyncs_and_loses_or_repeats_no_match(
    twin: VenueTwin, rest: RestClient, demo_signer: Signer, eventually: Eventually
) -> None:
    for _ in range(3):  # history before the first start: not replayed (no backfill)
        await market(rest, is_long=True)
    async with running_rig(twin, rest, demo_signer, interval_s=0.03, page_size=2) as rig:
        await eventually(lambda: rig.stream.state == "connected" and rig.resync.runs == 1)
        start = rig.store.get_match_cursor(PAIR)
        assert start == max(await all_match_ids(rest))
        side = False
        for cycle in range(1, 4):
            async with anyio.create_task_group() as tg:

                async def trade() -> None:
                    nonlocal side
                    for _ in range(5):
                        await market(rest, is_long=side)
                        side = not side

                tg.start_soon(trade)
                await anyio.sleep(0)
                assert twin.disconnect_websockets() >= 1
            await eventually(lambda c=cycle: rig.stream.stats.connects == c + 1)
            await eventually(lambda c=cycle: rig.resync.runs == c + 1)
            # Resubscribed: a push caused after the reconnect reaches the strategy.
            seen = len(rig.recorder.positions)
            await market(rest, is_long=side)
            side = not side
            await eventually(lambda s=seen: len(rig.recorder.positions) > s)
        venue_ids = [i for i in await all_match_ids(rest) if i > (start or 0)]
        assert len(venue_ids) == 3 * 6
        await rig.poller.poll_now()
        await eventually(lambda: len(rig.recorder.matches) >= len(venue_ids))
        assert [m.id for m in rig.recorder.matches] == venue_ids
        held = sum((p.quantity or 0) * (1 if p.is_long else -1) for p in await rest.positions(PAIR))
        assert held == Decimal(3)
        await eventually(lambda: rig.portfolio.net_quantity(PAIR) == held)
        # The balance's push of the last fill travels after its position's.
        snapshot = await rest.balance(COIN)
        await eventually(lambda: rig.portfolio.available(COIN) == snapshot.available_amount)
    assert rig.stream.stats.reconnects == 3
    assert rig.stream.stats.disconnects == 3


async def test_stale_account_pushes_are_dropped_and_never_reach_strategies(
    twin: VenueTwin, rest: RestClient, demo_signer: Signer, eventually: Eventually
) -> None:
    twin.faults.configure(stale_account_rate=1.0)
    async with running_rig(twin, rest, demo_signer) as rig:
        await eventually(lambda: rig.stream.state == "connected" and rig.resync.runs == 1)
        for i in range(4):
            await market(rest, is_long=i % 2 == 0)
        await eventually(lambda: rig.portfolio.stale_account_pushes >= 3)
        await eventually(lambda: len(rig.recorder.positions) == 4)
    log_ids = [a.log_id for a in rig.recorder.accounts]
    assert log_ids == sorted(set(log_ids))
    assert twin.counters.stale_account_pushes >= 3
    balance = rig.portfolio.balance(COIN)
    assert balance is not None and balance.log_id == log_ids[-1]
    assert rig.portfolio.available(COIN) == (await rest.balance(COIN)).available_amount


async def test_duplicated_pushes_reach_strategies_once(
    twin: VenueTwin, rest: RestClient, demo_signer: Signer, eventually: Eventually
) -> None:
    twin.faults.configure(push_duplicate_rate=1.0)
    async with running_rig(twin, rest, demo_signer) as rig:
        await eventually(lambda: rig.stream.state == "connected" and rig.resync.runs == 1)
        for _ in range(3):
            await market(rest, is_long=True)
        await eventually(lambda: rig.stream.stats.duplicates == 3)
        # The account frames (one per fill) and their copies come after the position's.
        await eventually(
            lambda: len(rig.recorder.accounts) == 3 and rig.portfolio.duplicate_account_pushes == 3
        )
    assert [p.current_quantity for p in rig.recorder.positions] == [Decimal(n) for n in (1, 2, 3)]
    log_ids = [a.log_id for a in rig.recorder.accounts]
    assert log_ids == sorted(set(log_ids))
    assert rig.portfolio.duplicate_account_pushes == len(log_ids)


async def test_a_failing_strategy_is_isolated_and_stopped_while_the_stream_goes_on(
    twin: VenueTwin, rest: RestClient, demo_signer: Signer, eventually: Eventually
) -> None:
    Crashing.calls = 0
    crashing = Crashing("crashing", BasicContext(Portfolio(), WallClock(), no_submit))
    async with running_rig(twin, rest, demo_signer, extra=[crashing]) as rig:
        await eventually(lambda: rig.stream.state == "connected" and rig.resync.runs == 1)
        for _ in range(5):
            await market(rest, is_long=True)
        await eventually(lambda: len(rig.recorder.positions) == 5)
    assert Crashing.calls == 3  # max_failures=2: the third failure stops it
    assert crashing.stopped and rig.bus.is_stopped("crashing")
    assert not rig.recorder.stopped
    assert rig.stream.stats.connects == 1 and rig.stream.stats.callback_errors == 0


async def test_resync_publishes_the_positions_and_balance_found_at_connect(
    twin: VenueTwin, rest: RestClient, demo_signer: Signer, eventually: Eventually
) -> None:
    await market(rest, is_long=False, qty="2")
    async with running_rig(twin, rest, demo_signer) as rig:
        await eventually(lambda: len(rig.synced) == 2)
    kinds = {type(e) for e in rig.synced}
    assert kinds == {PositionsSynced, BalanceSynced}
    assert rig.portfolio.net_quantity(PAIR) == Decimal(-2)
    assert rig.recorder.positions == []  # snapshots are not pushes


async def test_a_subscribe_refused_by_the_venue_is_a_clear_error_retried_with_backoff(
    twin: VenueTwin, rest: RestClient, demo_signer: Signer, eventually: Eventually
) -> None:
    async with running_rig(twin, rest, demo_signer, api_key="st_unknown_key") as rig:
        await eventually(lambda: rig.stream.stats.failures >= 3)
        assert rig.stream.state in ("failed", "connecting")
        assert "refused by the venue" in rig.stream.last_error
        assert rig.stream.stats.connects == 0
        assert rig.resync.runs == 0


async def test_a_failed_resync_is_retried_while_the_connection_stays_up(
    twin: VenueTwin, rest: RestClient, demo_signer: Signer, eventually: Eventually
) -> None:
    await market(rest, is_long=False, qty="2")
    async with running_rig(twin, rest, demo_signer, resync_failures=2) as rig:
        await eventually(lambda: len(rig.synced) == 2)
        await eventually(lambda: rig.stream.state == "connected")
        assert rig.stream.stats.resync_errors == 2
        assert rig.stream.stats.connects == 1 and rig.stream.stats.reconnects == 0
    assert rig.portfolio.net_quantity(PAIR) == Decimal(-2)
