"""The risk limits a trader expects, in a running node, judged by what the twin holds.

Each test runs a live Node against the embedded twin (real sockets on 127.0.0.1, still
prices). The venue's own state decides: the account's position, its open orders and the
orders it received; the framework's refusals must say why in one line.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from framework import OrderIntent, OrderStatus, OrderUpdate, Strategy
from framework.config import Config, parse_config
from framework.engine.risk import MAX_LEVER, MAX_OPEN_ORDERS, MAX_POSITION
from framework.live.node import Node
from framework.twin.server import VenueTwin
from tests.node_running import running
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

ETH = "ETH-USD"
STEP = Decimal("0.01")

CONFIG = """\
venue:
  embedded: true
  twin:
    prices: {{tick_interval: 0}}
pairs:
  ETH-USD: {{}}
polling:
  match_interval_s: 0.1
execution:
  risk:
{risk}
strategies:
  - name: trader
    class: tests.live.test_risk_limits:{strategy}
"""


def config(risk: str, strategy: str = "Trader") -> Config:
    """The embedded-twin config with these execution.risk lines (indented) and strategy."""
    return parse_config(CONFIG.format(risk=risk, strategy=strategy), env={})


class Trader(Strategy):
    """Places what the test asks for and records every update."""

    def on_start(self) -> None:
        """Start recording."""
        self.updates: list[OrderUpdate] = []

    def buy(self, lever: int = 1) -> str:
        """A market buy of 0.01; its client order id."""
        return self.submit(OrderIntent(pair=ETH, is_long=True, quantity=STEP, lever=lever))

    def rest(self, price: str, lever: int = 1) -> str:
        """A GTC buy of 0.01 at price (below the mark: it rests)."""
        return self.submit(
            OrderIntent(pair=ETH, is_long=True, quantity=STEP, price=Decimal(price), lever=lever)
        )

    def on_order(self, update: OrderUpdate) -> None:
        """Note every update."""
        self.updates.append(update)

    def last(self, cid: str) -> OrderUpdate | None:
        """The latest update of cid."""
        found = [u for u in self.updates if u.client_order_id == cid]
        return found[-1] if found else None

    def is_(self, cid: str, status: OrderStatus) -> bool:
        """True when cid's latest update has that status."""
        update = self.last(cid)
        return update is not None and update.status is status

    def with_status(self, status: OrderStatus) -> list[OrderUpdate]:
        """Every update of that status so far."""
        return [u for u in self.updates if u.status is status]


class Accumulator(Trader):
    """Opens with two market buys in one call stack, then buys 0.01 more each time every
    order of it has filled, until one is refused."""

    def on_start(self) -> None:
        """Two buys at once: both unanswered when the second is checked."""
        super().on_start()
        self.pending = {self.buy(), self.buy()}

    def on_order(self, update: OrderUpdate) -> None:
        """After a fill that leaves nothing pending, buy again."""
        super().on_order(update)
        if update.client_order_id not in self.pending or update.status is OrderStatus.ACCEPTED:
            return
        self.pending.discard(update.client_order_id)
        if update.status is OrderStatus.FILLED and not self.pending:
            self.pending.add(self.buy())


def trader(node: Node) -> Trader:
    """The node's strategy."""
    strategy = node.strategies[0]
    assert isinstance(strategy, Trader)
    return strategy


def twin_of(node: Node) -> VenueTwin:
    """The node's embedded twin."""
    assert node.venue is not None and node.venue.twin is not None
    return node.venue.twin


def twin_position(twin: VenueTwin) -> Decimal:
    """The demo account's signed ETH-USD position at the twin."""
    assert twin.demo_user_id is not None
    position = twin.exchange.accounts[twin.demo_user_id].positions.get(ETH)
    if position is None:
        return Decimal(0)
    return position.quantity if position.is_long else -position.quantity


def sent(twin: VenueTwin) -> set[str]:
    """Client order ids of every order the twin received."""
    return {cid for cid, _ in twin.received_orders}


async def test_a_strategy_buying_again_and_again_reaches_max_position_and_never_passes_it() -> None:
    # The measurement: with max_open_quantity 0.04 the position reached 0.05, since
    # that limit counts resting and unanswered orders only. max_position counts the position.
    node = Node(config('    max_position: "0.04"', "Accumulator"))
    async with running(node):
        t, twin = trader(node), twin_of(node)
        await eventually(lambda: t.with_status(OrderStatus.REJECTED))
        filled = t.with_status(OrderStatus.FILLED)
        (refused,) = t.with_status(OrderStatus.REJECTED)
        assert len(filled) == 4
        assert (refused.code, refused.msg) == (
            MAX_POSITION,
            "Position of ETH-USD could reach 0.05: position 0.04, unfilled buys 0,"
            " this buy 0.01; max_position is 0.04",
        )
        assert twin_position(twin) == Decimal("0.04")
        assert sent(twin) == {u.client_order_id for u in filled}  # the refused one never left
        # Buying by hand is refused too, once the portfolio shows the position as well.
        await eventually(lambda: node.kernel.portfolio.net_quantity(ETH) == Decimal("0.04"))
        cid = t.buy()
        assert (u := t.last(cid)) is not None and u.code == MAX_POSITION
        # A sell reduces the position: it passes; then there is room for one buy again.
        sell = t.submit(OrderIntent(pair=ETH, is_long=False, quantity=STEP))
        await eventually(lambda: t.is_(sell, OrderStatus.FILLED))
        # (until the portfolio shows the sell too, a buy counts the higher of the two views)
        await eventually(lambda: node.kernel.portfolio.net_quantity(ETH) == Decimal("0.03"))
        again = t.buy()
        await eventually(lambda: t.is_(again, OrderStatus.FILLED))
        assert twin_position(twin) == Decimal("0.04")
        assert len(sent(twin)) == 6


async def test_max_open_orders_refuses_a_fourth_resting_order_max_lever_a_high_lever() -> None:
    node = Node(config("    max_open_orders: 3\n    max_lever: 5"))
    async with running(node):
        t, twin = trader(node), twin_of(node)
        resting = [t.rest(p) for p in ("1900", "1890", "1880")]
        fourth = t.rest("1870")  # three are unanswered or resting: refused at once
        update = t.last(fourth)
        assert update is not None and (update.code, update.msg) == (
            MAX_OPEN_ORDERS,
            "Open orders of ETH-USD would exceed max_open_orders 3",
        )
        await eventually(lambda: all(t.is_(c, OrderStatus.ACCEPTED) for c in resting))
        assert twin.demo_user_id is not None
        book = twin.exchange.accounts[twin.demo_user_id].orders.open_orders(ETH)
        assert sorted(r.client_order_id for r in book) == sorted(resting)
        refused = t.rest("1870")  # still three resting
        assert (u := t.last(refused)) is not None and u.code == MAX_OPEN_ORDERS
        # One cancelled: room for one more.
        assert t.cancel(resting[0])
        await eventually(lambda: t.is_(resting[0], OrderStatus.CANCELED))
        again = t.rest("1870")
        await eventually(lambda: t.is_(again, OrderStatus.ACCEPTED))
        # max_lever: lever 6 is refused before sending, lever 5 goes out.
        high = t.rest("1860", lever=6)
        assert (u := t.last(high)) is not None and (u.code, u.msg) == (
            MAX_LEVER,
            "Lever 6 is above max_lever 5",
        )
        assert t.cancel(again)
        await eventually(lambda: t.is_(again, OrderStatus.CANCELED))
        five = t.rest("1860", lever=5)
        await eventually(lambda: t.is_(five, OrderStatus.ACCEPTED))
        assert fourth not in sent(twin) and refused not in sent(twin) and high not in sent(twin)
        assert five in sent(twin)
