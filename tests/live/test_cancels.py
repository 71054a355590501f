"""Cancels and open orders in a running node, judged by the twin's book and balances.

Each test runs a live Node against the embedded twin (real sockets on 127.0.0.1, still
prices) with ``Hand`` strategies the test drives, and checks what the venue itself holds:
the account's OPEN order records, its frozen balance, the calls the node made. The
framework's own view (updates, open_orders) must agree with it.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio.lowlevel
import pytest

from framework import CancelRejected, MatchRecord, OrderIntent, OrderStatus, OrderUpdate, Strategy
from framework.config import Config, parse_config
from framework.engine.cancels import NO_ANSWER, NO_CANCELS, NOT_OWNER, NOTHING_TO_CANCEL
from framework.engine.events import MatchFilled
from framework.engine.risk import KILL_SWITCH
from framework.live.node import Node
from framework.live.rest import RestClient
from framework.sim.history import OrderRecord
from framework.sim.state import PairSettings
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.order_management import ORDER_MANAGEMENT_PATHS
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from framework.venue.errors import ORDER_COMPLETED
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.requests import BATCH_CANCEL_PATH, CANCEL_BY_CLIENT_ID_PATH, CANCEL_PATH
from framework.venue.signing import make_signer
from strategies.ladder import Ladder
from tests.node_running import running
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

ETH, BTC = "ETH-USD", "BTC-USD"
START = Decimal("100000")  # the twin's demo balance per settlement coin

CONFIG = """\
venue:
  embedded: true
  twin:
    prices: {tick_interval: 0}
{twin}
pairs:
  ETH-USD: {}
  BTC-USD: {quantity_decimals: 4, min_quantity: "0.0001"}
polling:
  match_interval_s: 0.1
strategies:
  - name: hand
    class: tests.live.test_cancels:Hand
  - name: other
    class: tests.live.test_cancels:Hand
{extra}
"""


class Hand(Strategy):
    """Does nothing by itself: the test submits and cancels; it records what comes back."""

    def on_start(self) -> None:
        """Start recording; note the open orders found at start (adopted after a restart)."""
        self.updates: list[OrderUpdate] = []
        self.refusals: list[CancelRejected] = []
        self.matches: list[MatchRecord] = []
        self.open_at_start = self.open_orders()

    def on_order(self, update: OrderUpdate) -> None:
        """Note every update."""
        self.updates.append(update)

    def on_match(self, match: MatchRecord) -> None:
        """Note this strategy's own fills."""
        if match.client_order_id is not None:
            self.matches.append(match)

    def on_cancel_rejected(self, event: CancelRejected) -> None:
        """Note every refused cancel."""
        self.refusals.append(event)

    def limit(self, price: str, *, long: bool = True, pair: str = ETH, qty: str = "0.01") -> str:
        """Submit a GTC limit order; its client order id."""
        return self.submit(
            OrderIntent(pair=pair, is_long=long, quantity=Decimal(qty), price=Decimal(price))
        )

    def statuses(self, cid: str) -> list[OrderStatus]:
        """Every status cid went through, in order."""
        return [u.status for u in self.updates if u.client_order_id == cid]

    def last(self, cid: str) -> OrderStatus | None:
        """The latest status of cid."""
        found = self.statuses(cid)
        return found[-1] if found else None


def config(twin: str = "", extra: str = "") -> Config:
    """The embedded-twin config with more twin settings (indented) and top-level sections."""
    return parse_config(CONFIG.replace("{twin}", twin).replace("{extra}", extra), env={})


HAND = """\
  - name: hand
    class: tests.live.test_cancels:Hand
"""


def venue_config(
    twin: VenueTwin, journal: Path, *, node: str = "pf", strategies: str = HAND
) -> Config:
    """Strategies (one Hand) on ETH-USD at a twin of the test's own, with a file journal."""
    text = f"""\
node: {{name: {node}}}
venue:
  base_url: {twin.base_url}
  ws_url: {twin.ws_url}
  api_key: ${{KEY}}
  api_secret: ${{SECRET}}
pairs:
  ETH-USD: {{}}
polling:
  match_interval_s: 0.1
journal:
  path: {journal}
strategies:
{strategies}"""
    return parse_config(text, env={"KEY": DEMO_API_KEY, "SECRET": DEMO_PRIVATE_KEY})


def hand(node: Node, index: int = 0) -> Hand:
    """The node's index-th Hand."""
    strategy = node.strategies[index]
    assert isinstance(strategy, Hand)
    return strategy


def twin_of(node: Node) -> VenueTwin:
    """The node's embedded twin (its state outlives the node's run)."""
    assert node.venue is not None and node.venue.twin is not None
    return node.venue.twin


def book(twin: VenueTwin, pair: str | None = None) -> dict[str, OrderRecord]:
    """The demo account's OPEN order records at the twin, by client order id."""
    assert twin.demo_user_id is not None
    orders = twin.exchange.accounts[twin.demo_user_id].orders
    return {r.client_order_id: r for r in orders.open_orders(pair)}


def record(twin: VenueTwin, cid: str) -> OrderRecord:
    """The twin's record of the order with client id cid (open or completed)."""
    assert twin.demo_user_id is not None
    found = twin.exchange.accounts[twin.demo_user_id].orders.by_client_id(cid)
    assert found is not None, f"the twin never accepted {cid}"
    return found


def usd(twin: VenueTwin) -> tuple[Decimal, Decimal]:
    """(available, frozen) of the demo account's USD at the twin."""
    assert twin.demo_user_id is not None
    balance = twin.exchange.balance(twin.demo_user_id, "USD")
    assert balance is not None
    return balance.available, balance.frozen


def book_all(twin: VenueTwin) -> dict[str, OrderRecord]:
    """Every order record of the demo account at the twin (open or completed), by client id."""
    assert twin.demo_user_id is not None
    account = twin.exchange.accounts[twin.demo_user_id]
    found = (account.orders.by_client_id(c) for c in account.order_ids)
    return {r.client_order_id: r for r in found if r is not None}


def twin_matches(twin: VenueTwin) -> list[Any]:
    """The demo account's matches on ETH-USD at the twin."""
    assert twin.demo_user_id is not None
    return list(twin.exchange.accounts[twin.demo_user_id].matches.get(ETH, []))


def own_order_ids(twin: VenueTwin, node: Node) -> set[int]:
    """The twin's order ids of the orders the node sent."""
    sent = {c for c, _ in twin.received_orders}
    return {r.order_id for c, r in book_all(twin).items() if c in sent}


def refusals(node: Node) -> list[CancelRejected]:
    """Every CancelRejected published so far (noted by a bus subscriber set up on first use)."""
    seen: list[CancelRejected] | None = getattr(node, "_test_refusals", None)
    if seen is None:
        seen = []
        node._test_refusals = seen  # type: ignore[attr-defined]
        node.bus.subscribe(CancelRejected, seen.append)
    return seen


def prices(*texts: str) -> list[Decimal]:
    """Decimals of texts, in order."""
    return [Decimal(t) for t in texts]


def watch_calls(node: Node) -> list[tuple[str, dict[str, list[str]]]]:
    """Start noting every REST answer the node reads: (path, query parameters)."""
    assert node.rest is not None
    seen: list[tuple[str, dict[str, list[str]]]] = []
    node.rest.observer = lambda path, query, body, request=None: seen.append(
        (path, parse_qs(query))
    )
    return seen


def accepted(strategy: Hand, cids: list[str]) -> bool:
    """Every cid is ACCEPTED (and nothing else yet)."""
    return all(strategy.last(c) is OrderStatus.ACCEPTED for c in cids)


def ended(strategy: Hand, cids: list[str]) -> bool:
    """Every cid has reached FILLED or CANCELED."""
    return all(strategy.last(c) in (OrderStatus.FILLED, OrderStatus.CANCELED) for c in cids)


async def resting_on_twin(node: Node, strategy: Hand, prices: list[str], **kw: Any) -> list[str]:
    """Place GTC limit orders at prices and wait until the node has them ACCEPTED."""
    cids = [strategy.limit(p, **kw) for p in prices]
    await eventually(lambda: accepted(strategy, cids))
    assert set(cids) <= set(book(twin_of(node)))
    return cids


# -- one order ---------------------------------------------------------------------------------


async def test_an_accepted_resting_order_leaves_the_twins_book_and_frees_its_reserve() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        (cid,) = await resting_on_twin(node, h, ["1900"])
        available, frozen = usd(twin)
        assert frozen > 0 and available + frozen == START
        assert [o.client_order_id for o in h.open_orders()] == [cid]
        calls = watch_calls(node)
        assert h.cancel(cid) is True
        await eventually(lambda: h.last(cid) is OrderStatus.CANCELED)
        assert h.statuses(cid) == [OrderStatus.ACCEPTED, OrderStatus.CANCELED]
        update = h.updates[-1]
        assert update.order_id == record(twin, cid).order_id
        assert record(twin, cid).status == "CANCELED"
        assert book(twin) == {}
        assert usd(twin) == (START, Decimal(0))  # the reserve came back exactly
        assert h.open_orders() == []
        # One cancel of one id, by its orderId.
        assert [p for p, _ in calls if "cancel" in p.lower()] == [CANCEL_PATH]
        # Asked again: nothing to cancel, said in on_cancel_rejected, no call.
        assert h.cancel(cid) is False
        assert [(r.client_order_id, r.code) for r in h.refusals] == [(cid, NOTHING_TO_CANCEL)]
    assert h.refusals[0].strategy == "hand"


async def unknown_on_twin(node: Node, strategy: Hand, price: str) -> str:
    """Place a GTC limit order the twin rests but answers HTTP 500: UNKNOWN at the node."""
    twin = twin_of(node)
    twin.faults.configure(error_after_accept_rate=1.0)  # executed, answered HTTP 500
    cid = strategy.limit(price)
    await eventually(lambda: strategy.last(cid) is OrderStatus.UNKNOWN)
    twin.faults.clear()
    assert cid in book(twin)  # it does rest, the node cannot know
    return cid


async def test_an_unknown_order_is_cancelled_by_its_client_id_and_that_ends_the_doubt() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        cid = await unknown_on_twin(node, h, "1900")
        assert h.open_orders() == []  # only ACCEPTED orders are listed as open
        calls = watch_calls(node)
        assert h.cancel(cid) is True
        await eventually(lambda: h.last(cid) is OrderStatus.CANCELED)
        assert h.statuses(cid) == [OrderStatus.UNKNOWN, OrderStatus.CANCELED]
        assert h.updates[-1].order_id == record(twin, cid).order_id  # the answer named it
        assert [p for p, _ in calls if "cancel" in p.lower()] == [CANCEL_BY_CLIENT_ID_PATH]
        assert [q["clientOrderId"] for p, q in calls if p == CANCEL_BY_CLIENT_ID_PATH] == [[cid]]
        assert record(twin, cid).status == "CANCELED" and book(twin) == {}
        assert usd(twin) == (START, Decimal(0))
        assert node.engine is not None and node.engine.unknown_count == 0
    assert h.refusals == []


async def test_an_unknown_order_whose_cancel_answer_is_lost_too_stays_unknown_and_says_so() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        twin.faults.configure(error_after_accept_rate=1.0)  # creates and cancels: HTTP 500
        cid = h.limit("1900")
        await eventually(lambda: h.last(cid) is OrderStatus.UNKNOWN)
        assert h.cancel(cid) is True
        await eventually(lambda: len(h.refusals) == 1)
        twin.faults.clear()
        assert record(twin, cid).status == "CANCELED"  # it did happen at the venue
        (refusal,) = h.refusals
        assert (refusal.client_order_id, refusal.code) == (cid, NO_ANSWER)
        # Without an orderId nothing can be asked of the venue: the text must not say it was.
        assert "was queried" not in refusal.msg and "cannot be queried" in refusal.msg
        assert refusal.msg.endswith("UNKNOWN")
        assert h.statuses(cid) == [OrderStatus.UNKNOWN]  # the doubt is not ended by a guess
        # Asked again, the venue says the order is complete: still no word on how it ended.
        assert h.cancel(cid) is True
        await eventually(lambda: len(h.refusals) == 2)
        assert h.refusals[1].code == ORDER_COMPLETED
        assert h.statuses(cid) == [OrderStatus.UNKNOWN]
        assert node.bus.handler_errors == 0


async def test_an_order_still_queued_is_cancelled_without_reaching_the_twin() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        # Submitted and cancelled in one call stack: the batch is cut only after it.
        cid = h.limit("1900")
        assert h.cancel(cid) is True
        assert h.statuses(cid) == [OrderStatus.CANCELED]  # at once, no round trip
        keep = h.limit("1901")  # the next order goes, alone
        await eventually(lambda: h.last(keep) is OrderStatus.ACCEPTED)
        assert [c for c, _ in twin.received_orders] == [keep]
        assert set(book(twin)) == {keep}
        assert h.updates[0].msg is not None and "before it was sent" in h.updates[0].msg
    assert h.refusals == []


async def test_an_order_queued_behind_a_batch_in_flight_is_cancelled_unsent() -> None:
    node = Node(config(extra="execution: {max_inflight: 1}"))
    async with running(node):
        h, twin = hand(node), twin_of(node)
        twin.faults.configure(answer_delay_s=0.5)  # the first batch is held at the venue
        first = h.limit("1900")
        await eventually(lambda: [c for c, _ in twin.received_orders] == [first])
        queued = h.limit("1899")  # a later call stack: queued behind the batch in flight
        assert node.engine is not None and node.engine.status(queued) is OrderStatus.PENDING
        assert h.cancel(queued) is True
        assert h.statuses(queued) == [OrderStatus.CANCELED]
        await eventually(lambda: h.last(first) is OrderStatus.ACCEPTED, timeout=5)
        twin.faults.clear()
        await eventually(lambda: node.engine is not None and node.engine.idle)
        assert queued not in {c for c, _ in twin.received_orders}
        assert set(book(twin)) == {first}


async def test_a_cancel_of_an_order_in_flight_waits_for_its_answer_then_goes() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        twin.faults.configure(answer_delay_s=1.0)  # executed at once, answered later
        cid = h.limit("1900")
        await eventually(lambda: cid in book(twin))
        assert h.statuses(cid) == []  # no answer yet: the node does not know it rests
        assert h.cancel(cid) is True
        assert h.cancel(cid) is True  # asked already: nothing more
        await eventually(lambda: h.last(cid) is OrderStatus.CANCELED)
        assert h.statuses(cid) == [OrderStatus.ACCEPTED, OrderStatus.CANCELED]
        assert record(twin, cid).status == "CANCELED" and book(twin) == {}
        assert usd(twin) == (START, Decimal(0))
    assert h.refusals == []


async def test_a_partly_filled_order_cancels_its_rest_and_keeps_its_fill(tmp_path: Path) -> None:
    # A twin of the test's own whose ETH-USD book fills at most 0.4 of an order at once.
    pair = PairSettings(initial_price=Decimal("2000"), contract_pair_id=1, liquidity=Decimal("0.4"))
    settings = TwinSettings(prices=PriceSettings(tick_interval=0), pairs={ETH: pair})
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        node = Node(venue_config(twin, tmp_path / "journal.sqlite"))
        async with running(node):
            h = hand(node)
            cid = h.limit("2001", qty="1")  # crosses the mark: 0.4 fills, 0.6 rests
            await eventually(lambda: h.last(cid) is OrderStatus.ACCEPTED)
            assert (record(twin, cid).status, record(twin, cid).filled) == ("OPEN", Decimal("0.4"))
            assert h.cancel(cid) is True
            await eventually(lambda: h.last(cid) is OrderStatus.CANCELED)
            assert h.updates[-1].msg is not None and "filled 0.4 of 1" in h.updates[-1].msg
            assert (record(twin, cid).status, record(twin, cid).filled) == (
                "CANCELED",
                Decimal("0.4"),
            )
            # The fill made before the cancel still reaches the strategy, once, as its own.
            await eventually(lambda: len(h.matches) == 1)
            assert (h.matches[0].client_order_id, h.matches[0].quantity) == (cid, Decimal("0.4"))
            await eventually(lambda: node.portfolio.net_quantity(ETH) == Decimal("0.4"))
            twin.set_mark(ETH, "1990")  # would have filled the rest
            assert twin.exchange.positions(twin.demo_user_id or 0, ETH)[0].quantity == Decimal(
                "0.4"
            )
            position = twin.exchange.positions(twin.demo_user_id or 0, ETH)[0]
            assert usd(twin)[1] == position.margin  # only the position's margin stays frozen
            assert node.engine is not None and node.engine.open_quantity(ETH) == 0
            polls = node.poller.stats.polls if node.poller is not None else 0
            await eventually(
                lambda: node.poller is not None and node.poller.stats.polls > polls + 2
            )
            assert len(h.matches) == 1 and h.statuses(cid).count(OrderStatus.CANCELED) == 1
        assert h.refusals == []


# -- many orders -------------------------------------------------------------------------------


async def test_cancel_all_of_45_orders_goes_in_batch_cancels_of_at_most_20() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        cids = await resting_on_twin(node, h, [str(1900 - i) for i in range(45)])
        assert len(book(twin)) == 45
        ids = {record(twin, c).order_id for c in cids}
        calls = watch_calls(node)
        assert h.cancel_all() == 45
        await eventually(lambda: all(h.last(c) is OrderStatus.CANCELED for c in cids))
        batches = [q["entrustIds"][0].split(",") for p, q in calls if p == BATCH_CANCEL_PATH]
        assert sorted(len(b) for b in batches) == [5, 20, 20]
        assert {int(i) for b in batches for i in b} == ids  # each id in one call only
        assert sum(len(b) for b in batches) == 45
        assert [p for p, _ in calls if "cancel" in p.lower() and p != BATCH_CANCEL_PATH] == []
        assert book(twin) == {} and usd(twin) == (START, Decimal(0))
        assert h.open_orders() == []
    assert h.refusals == []


async def test_cancel_all_of_one_pair_leaves_the_other_pair_and_strategy_resting() -> None:
    node = Node(config())
    async with running(node):
        h, o, twin = hand(node), hand(node, 1), twin_of(node)
        eth = await resting_on_twin(node, h, ["1900", "1901"])
        eth += await resting_on_twin(node, h, ["2100"], long=False)
        btc = await resting_on_twin(node, h, ["59000"], pair=BTC, qty="0.001")
        btc += await resting_on_twin(node, h, ["61000"], pair=BTC, qty="0.001", long=False)
        theirs = await resting_on_twin(node, o, ["1902"])
        assert h.cancel_all(ETH) == 3
        await eventually(lambda: all(h.last(c) is OrderStatus.CANCELED for c in eth))
        assert set(book(twin, ETH)) == set(theirs)  # the other strategy's order stays
        assert set(book(twin, BTC)) == set(btc)
        assert {x.client_order_id for x in h.open_orders()} == set(btc)
        assert h.open_orders(ETH) == []
        assert [x.client_order_id for x in o.open_orders()] == theirs
        assert all(h.last(c) is OrderStatus.ACCEPTED for c in btc)


# -- refusals and races ------------------------------------------------------------------------


async def test_cancels_of_filled_unknown_and_others_orders_are_cancel_rejected() -> None:
    node = Node(config())
    async with running(node):
        h, o, twin = hand(node), hand(node, 1), twin_of(node)
        (filled,) = await resting_on_twin(node, h, ["1999"])
        theirs = o.limit("1900")
        await eventually(lambda: o.last(theirs) is OrderStatus.ACCEPTED)
        twin.set_mark(ETH, "1998.5")
        await eventually(lambda: h.last(filled) is OrderStatus.FILLED)
        assert h.cancel(filled) is False
        assert h.cancel("never-placed") is False
        assert h.cancel(theirs) is False  # another strategy's order is not this one's
        assert [(r.client_order_id, r.code) for r in h.refusals] == [
            (filled, NOTHING_TO_CANCEL),
            ("never-placed", NOTHING_TO_CANCEL),
            (theirs, NOT_OWNER),
        ]
        assert all(r.msg for r in h.refusals)
        assert o.refusals == []
        assert theirs in book(twin) and o.last(theirs) is OrderStatus.ACCEPTED
        assert h.cancel_all() == 0
    assert node.bus.handler_errors == 0


async def test_a_fill_that_reaches_the_twin_before_the_cancel_wins() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        (cid,) = await resting_on_twin(node, h, ["1999"])
        assert h.cancel(cid) is True  # queued; the call is written after this call stack
        twin.set_mark(ETH, "1998.5")  # ... and the twin fills the order first
        await eventually(lambda: h.last(cid) is OrderStatus.FILLED)
        await eventually(lambda: len(h.matches) == 1)
        assert record(twin, cid).status == "FILLED"
        assert OrderStatus.CANCELED not in h.statuses(cid)
        # The cancel's refusal and the fill's match travel apart: either may come first.
        await eventually(lambda: len(h.refusals) > 0)
        assert [(r.client_order_id, r.code) for r in h.refusals] == [(cid, ORDER_COMPLETED)]
        assert OrderStatus.CANCELED not in h.statuses(cid)
        assert h.matches[0].client_order_id == cid
        assert h.matches[0].entrust_id == record(twin, cid).order_id
        await eventually(lambda: node.portfolio.net_quantity(ETH) == Decimal("0.01"))
        # More polls later, still one match and one FILLED.
        polls = node.poller.stats.polls if node.poller is not None else 0
        await eventually(lambda: node.poller is not None and node.poller.stats.polls > polls + 2)
        assert len(h.matches) == 1
        assert h.statuses(cid).count(OrderStatus.FILLED) == 1


async def test_a_cancel_that_reaches_the_twin_first_leaves_nothing_to_fill() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        (cid,) = await resting_on_twin(node, h, ["1999"])
        assert h.cancel(cid) is True
        await eventually(lambda: h.last(cid) is OrderStatus.CANCELED)
        twin.set_mark(ETH, "1998.5")  # would have filled it
        assert record(twin, cid).status == "CANCELED"
        assert twin.exchange.positions(twin.demo_user_id or 0, ETH) == []
        polls = node.poller.stats.polls if node.poller is not None else 0
        await eventually(lambda: node.poller is not None and node.poller.stats.polls > polls + 2)
        assert h.matches == [] and h.refusals == []
        assert usd(twin) == (START, Decimal(0))


async def test_cancels_racing_a_falling_mark_end_as_the_twin_says_with_each_fill_once() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        prices = [str(1990 - i) for i in range(40)]  # 1990 down to 1951
        cids = await resting_on_twin(node, h, prices)
        assert h.cancel_all() == 40  # two batchCancelEntrust calls, sent after this stack
        twin.set_mark(ETH, "1985.5")  # before they leave: five bids fill first, for sure
        # Then the mark walks down through the other bids while the cancels travel.
        for price in range(1985, 1940, -1):
            twin.set_mark(ETH, Decimal(price) - Decimal("0.5"))
            await anyio.lowlevel.checkpoint()  # let the node's and twin's tasks in between
        await eventually(lambda: ended(h, cids), timeout=10)
        twin_filled = {c for c in cids if record(twin, c).status == "FILLED"}
        twin_canceled = {c for c in cids if record(twin, c).status == "CANCELED"}
        assert twin_filled | twin_canceled == set(cids)
        for c in cids:
            finals = [s for s in h.statuses(c) if s in (OrderStatus.FILLED, OrderStatus.CANCELED)]
            want = OrderStatus.FILLED if c in twin_filled else OrderStatus.CANCELED
            assert finals == [want], (c, h.statuses(c), record(twin, c).status)
        # Every fill the twin made reaches the strategy once, linked to its order.
        await eventually(lambda: len(h.matches) >= len(twin_filled), timeout=10)
        assert sorted(m.client_order_id or "" for m in h.matches) == sorted(twin_filled)
        assert len({m.id for m in h.matches}) == len(h.matches)
        # The refusals are the orders that filled first (2341), never more.
        assert {r.client_order_id for r in h.refusals} <= twin_filled
        assert all(r.code == ORDER_COMPLETED for r in h.refusals)
        assert book(twin) == {} and h.open_orders() == []
        held = Decimal("0.01") * len(twin_filled)
        await eventually(lambda: node.portfolio.net_quantity(ETH) == held)
    print("race:", {"filled": len(twin_filled), "canceled": len(twin_canceled)})


# -- open orders -------------------------------------------------------------------------------


async def test_open_orders_are_exactly_the_twins_resting_orders_of_the_strategy() -> None:
    node = Node(config())
    async with running(node):
        h, o, twin = hand(node), hand(node, 1), twin_of(node)
        mine = await resting_on_twin(node, h, ["1990", "1991"])
        mine += await resting_on_twin(node, h, ["2010"], long=False)
        mine += await resting_on_twin(node, h, ["59000"], pair=BTC, qty="0.001")
        theirs = await resting_on_twin(node, o, ["1992"])
        theirs += await resting_on_twin(node, o, ["2011"], long=False)
        ioc = h.submit(
            OrderIntent(
                pair=ETH,
                is_long=True,
                quantity=Decimal("0.01"),
                price=Decimal("1900"),
                match_type=MatchType.IOC,
            )
        )
        await eventually(lambda: h.last(ioc) is OrderStatus.ACCEPTED)  # an IOC never rests
        # Someone else's order on the same account (placed outside the node).
        signer = make_signer(2, DEMO_PRIVATE_KEY)
        async with RestClient(twin.base_url, DEMO_API_KEY, signer) as rest:
            await rest.batch_create([outside("by-hand-1", "1980")])

        def agree(strategy: Hand, cids: list[str]) -> None:
            at_twin = book(twin)
            seen = {x.client_order_id: x for x in strategy.open_orders()}
            assert set(seen) == set(cids) and set(cids) <= set(at_twin)
            for cid, x in seen.items():
                r = at_twin[cid]
                assert (x.pair, x.is_long, x.price, x.quantity, x.order_id) == (
                    r.pair,
                    r.is_long,
                    r.price,
                    r.quantity,
                    r.order_id,
                )
                assert x.strategy == strategy.name and x.remaining == r.quantity - r.filled

        agree(h, mine)
        agree(o, theirs)
        assert {x.client_order_id for x in h.open_orders(BTC)} == {mine[3]}
        assert "by-hand-1" in book(twin)
        # A fill and a cancel later, still the same picture.
        twin.set_mark(ETH, "1990.5")  # fills 1991 (mine) and 1992 (theirs)
        await eventually(lambda: h.last(mine[1]) is OrderStatus.FILLED)
        await eventually(lambda: o.last(theirs[0]) is OrderStatus.FILLED)
        h.cancel(mine[2])
        await eventually(lambda: h.last(mine[2]) is OrderStatus.CANCELED)
        agree(h, [mine[0], mine[3]])
        agree(o, [theirs[1]])
        assert set(book(twin)) == {mine[0], mine[3], theirs[1], "by-hand-1"}


def outside(cid: str, price: str) -> OrderInput:
    """A GTC buy of 0.01 ETH-USD placed on the demo account by someone other than the node."""
    return OrderInput(
        client_order_id=cid,
        is_long=True,
        is_market=False,
        lever=1,
        match_type=MatchType.GTC,
        pair_name=ETH,
        position_type=PositionType.ISOLATED,
        price=Decimal(price),
        quantity=Decimal("0.01"),
    )


# -- the kill switch, the stop, a venue without cancels ----------------------------------------


async def test_the_kill_switch_withdraws_every_order_of_the_node_and_refuses_new_ones() -> None:
    node = Node(config())
    async with running(node):
        h, o, twin = hand(node), hand(node, 1), twin_of(node)
        mine = await resting_on_twin(node, h, [str(1900 + i) for i in range(25)])
        mine += await resting_on_twin(node, h, ["61000"], pair=BTC, qty="0.001", long=False)
        theirs = await resting_on_twin(node, o, ["2050", "2051"], long=False)
        signer = make_signer(2, DEMO_PRIVATE_KEY)
        async with RestClient(twin.base_url, DEMO_API_KEY, signer) as rest:
            await rest.batch_create([outside("by-hand-2", "1950")])
        assert node.engine is not None
        node.engine.kill_switch = True
        await eventually(lambda: set(book(twin)) == {"by-hand-2"}, timeout=10)
        await eventually(lambda: ended(h, mine) and ended(o, theirs))
        assert all(h.last(c) is OrderStatus.CANCELED for c in mine)
        assert all(o.last(c) is OrderStatus.CANCELED for c in theirs)
        late = h.limit("1800")
        assert h.last(late) is OrderStatus.REJECTED
        assert h.updates[-1].code == KILL_SWITCH
        assert late not in {c for c, _ in twin.received_orders}
        assert h.open_orders() == [] and o.open_orders() == []
        assert record(twin, "by-hand-2").status == "OPEN"  # not the node's: untouched


async def test_the_kill_switch_also_withdraws_orders_whose_create_is_in_flight() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        resting = await resting_on_twin(node, h, ["1900", "1901"])
        twin.faults.configure(answer_delay_s=0.5)
        flying = [h.limit(str(1910 + i)) for i in range(3)]
        await eventually(lambda: set(flying) <= set(book(twin)))
        assert node.engine is not None
        node.engine.kill_switch = True
        await eventually(lambda: ended(h, resting + flying))
        twin.faults.clear()
        assert all(h.last(c) is OrderStatus.CANCELED for c in resting + flying)
        for c in flying:
            assert h.statuses(c) == [OrderStatus.ACCEPTED, OrderStatus.CANCELED]
        assert book(twin) == {} and usd(twin) == (START, Decimal(0))


@pytest.mark.parametrize("cancel_on_stop", [True, False])
async def test_cancel_on_stop_decides_what_a_graceful_stop_leaves_on_the_book(
    cancel_on_stop: bool,
) -> None:
    node = Node(config(extra=f"execution: {{cancel_on_stop: {str(cancel_on_stop).lower()}}}"))
    async with running(node) as summary:
        h, twin = hand(node), twin_of(node)
        mine = await resting_on_twin(node, h, ["1900", "1901"])
        mine += await resting_on_twin(node, h, ["2100"], long=False)
        mine += await resting_on_twin(node, h, ["59000"], pair=BTC, qty="0.001")
        signer = make_signer(2, DEMO_PRIVATE_KEY)
        async with RestClient(twin.base_url, DEMO_API_KEY, signer) as rest:
            await rest.batch_create([outside("by-hand-3", "1950")])
    assert summary["reason"] == "test over"
    left = set(book(twin))
    if cancel_on_stop:
        assert left == {"by-hand-3"}
        assert all(h.last(c) is OrderStatus.CANCELED for c in mine)
        assert summary["orders_canceled"] == 4
    else:
        assert left == {*mine, "by-hand-3"}
        assert all(h.last(c) is OrderStatus.ACCEPTED for c in mine)
        assert summary.get("orders_canceled", 0) == 0
    assert summary["orders_unknown"] == 0


async def test_a_venue_without_cancels_starts_and_refuses_each_cancel_with_9022(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    node = Node(config(twin="    order_management: false"))
    async with running(node):
        h, twin = hand(node), twin_of(node)
        (cid,) = await resting_on_twin(node, h, ["1900"])
        assert node.engine is not None and node.engine.cancels.available is False
        calls = watch_calls(node)
        assert h.cancel(cid) is False
        assert [(r.client_order_id, r.code) for r in h.refusals] == [(cid, NO_CANCELS)]
        assert "404" in h.refusals[0].msg
        assert h.cancel_all() == 0
        node.engine.kill_switch = True  # refuses new intents; has nothing to cancel with
        assert [r.code for r in h.refusals] == [NO_CANCELS, NO_CANCELS]
        await eventually(lambda: node.poller is not None and node.poller.stats.polls > 2)
        assert [p for p, _ in calls if p in ORDER_MANAGEMENT_PATHS] == []  # none was tried
        assert cid in book(twin) and h.last(cid) is OrderStatus.ACCEPTED
    off = [r for r in caplog.records if "cancels and open orders turned off" in r.getMessage()]
    assert len(off) == 1
    assert node.bus.handler_errors == 0 and not node.bus.stopped


# -- the Ladder's re-centre ----------------------------------------------------------------------


def ladder_config(twin: str = "", levels: int = 3, recentre: int = 2) -> Config:
    """The embedded-twin config running only the Ladder around 2000 (spacing 1)."""
    ladder = f"""\
  - name: ladder
    class: strategies.ladder:Ladder
    params: {{pair: ETH-USD, quantity: "0.01", spacing: "1", levels: {levels},
              reference_price: "2000", recentre_levels: {recentre}}}
"""
    text = CONFIG.replace("{twin}", twin).replace("{extra}", "")
    text = text[: text.index("strategies:\n")] + "strategies:\n" + ladder
    return parse_config(text, env={})


def the_ladder(node: Node) -> Ladder:
    """The node's Ladder."""
    ladder = node.strategies[0]
    assert isinstance(ladder, Ladder)
    return ladder


async def test_a_ladder_order_filled_before_its_recentre_cancel_still_has_its_fill_answered() -> (
    None
):
    node = Node(ladder_config())
    async with running(node):
        ladder, twin, refused = the_ladder(node), twin_of(node), refusals(node)
        await eventually(lambda: len(book(twin)) == 6)  # 1997-1999 and 2001-2003
        twin.set_mark(ETH, "1997.5")  # fills 1999 and 1998 (2 away: no re-centre)
        await eventually(lambda: ladder.fills == 2 and len(book(twin)) == 6)  # counters in
        assert sorted(r.price for r in book(twin).values() if not r.is_long) == prices(
            "1999", "2000", "2001", "2002", "2003"
        )
        fired: list[bool] = []

        def race(event: MatchFilled) -> None:
            # Right after the ladder decided to re-centre (its cancels are queued, not sent),
            # the twin fills one of the orders it is about to cancel.
            if ladder.recentred == 1 and not fired:
                fired.append(True)
                twin.set_mark(ETH, "1999.5")  # the counter sell at 1999 fills
                twin.set_mark(ETH, "1997")

        node.bus.subscribe(MatchFilled, race)
        twin.set_mark(ETH, "1996.5")  # fills 1997: 3 away, the ladder re-centres there
        await eventually(lambda: bool(fired))
        raced = next(c for c, r in book_all(twin).items() if r.price == 1999 and not r.is_long
                     and r.status == "FILLED")  # fmt: skip
        await eventually(lambda: [(r.client_order_id, r.code) for r in refused] == [(raced, 2341)])
        # Quiet: the engine idle, the ladder's orders exactly those resting at the twin.
        await eventually(lambda: node.engine is not None and node.engine.idle, timeout=10)
        await eventually(lambda: set(ladder.resting) == set(book(twin)), timeout=10)
        own = [m for m in twin_matches(twin) if m.order_id in own_order_ids(twin, node)]
        # Every fill of a ladder order was answered (a counter order or a re-centre).
        await eventually(lambda: ladder.fills == len(own), timeout=10)
        assert raced not in ladder.resting


async def test_a_ladder_on_a_venue_without_cancels_keeps_track_of_what_still_rests() -> None:
    node = Node(ladder_config(twin="    order_management: false", levels=2, recentre=1))
    async with running(node):
        ladder, twin, refused = the_ladder(node), twin_of(node), refusals(node)
        await eventually(lambda: len(book(twin)) == 4)
        twin.set_mark(ETH, "1997.5")  # fills 1999 (counter 2000) and 1998 (re-centre)
        await eventually(lambda: ladder.recentred == 1)
        await eventually(lambda: node.engine is not None and node.engine.idle)
        assert {r.code for r in refused} == {NO_CANCELS}
        # The cancels were refused: the old orders still rest, and the ladder knows them.
        assert {(False, Decimal(2001)), (False, Decimal(2002))} <= {
            (r.is_long, r.price) for r in book(twin).values()
        }
        await eventually(lambda: set(ladder.resting) == set(book(twin)))


async def test_a_ladder_whose_probe_is_refused_says_it_stays_unbuilt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """max_notional set and no fill yet: the probe (a market order) has no reference price."""
    ladder = """\
  - name: ladder
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD, quantity: "0.01", spacing: "1", levels: 2}
"""
    text = CONFIG.replace("{twin}", "").replace("{extra}", "")
    text = text[: text.index("strategies:\n")] + "strategies:\n" + ladder
    text += 'execution:\n  risk: {max_notional: "2000"}\n'
    node = Node(parse_config(text, env={}))
    caplog.set_level(logging.WARNING)
    async with running(node):
        await eventually(lambda: any("probe was refused" in r.getMessage() for r in caplog.records))
    (line,) = [r.getMessage() for r in caplog.records if "probe was refused" in r.getMessage()]
    assert "stays unbuilt until a restart (9005 No reference price" in line
    assert "place a limit order first, or drop max_notional" in line
    assert the_ladder(node).reference is None
