"""The periodic open-order check of a running node, against the twin's book.

An order cancelled behind the node's back (by a person on the same account) must not stay
ACCEPTED in ``open_orders()``: the check lists the venue's open orders, queries the tracked
resting order the list lacks, and the venue's record ends it. Orders that still rest are
left alone; an UNKNOWN order the list names by its clientOrderId is ACCEPTED with its orderId.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from framework import OrderStatus
from framework.config import Config, ConfigProblems, parse_config
from framework.live.node import Node
from framework.live.rest import RestClient
from framework.live.venue_jobs import OpenOrderCheck
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.venue.requests import QUERY_ORDER_PATH
from framework.venue.signing import make_signer
from tests.live.test_cancels import (
    START,
    book,
    hand,
    record,
    resting_on_twin,
    twin_of,
    unknown_on_twin,
    usd,
)
from tests.node_running import running
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

CONFIG = """\
venue:
  embedded: true
  twin:
    prices: {tick_interval: 0}
pairs:
  ETH-USD: {}
polling:
  match_interval_s: 0.1
  open_orders_interval_s: %s
strategies:
  - name: hand
    class: tests.live.test_cancels:Hand
"""


def config(interval: str = "0.2") -> Config:
    """One Hand on ETH-USD at the embedded twin, the check every interval seconds."""
    return parse_config(CONFIG % interval, env={})


@asynccontextmanager
async def person(twin: VenueTwin) -> AsyncIterator[RestClient]:
    """A REST client on the node's own account (the demo key), as a person at a terminal."""
    async with RestClient(twin.base_url, DEMO_API_KEY, make_signer(2, DEMO_PRIVATE_KEY)) as rest:
        yield rest


def check_of(node: Node) -> OpenOrderCheck:
    """The node's open-order check."""
    assert node.order_check is not None
    return node.order_check


async def rounds_pass(node: Node, n: int) -> None:
    """Wait until n more rounds of the check have completed."""
    target = check_of(node).rounds + n
    await eventually(lambda: check_of(node).rounds >= target, timeout=10)


async def test_an_order_cancelled_behind_the_nodes_back_ends_canceled_and_others_stay() -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        gone, stays = await resting_on_twin(node, h, ["1900", "1890"])
        await rounds_pass(node, 2)  # a round that began before they rested has ended
        queried = check_of(node).queried
        queries: list[str] = []
        assert node.rest is not None
        node.rest.observer = lambda path, query, body: queries.append(path)
        async with person(twin) as rest:
            answer = await rest.cancel_order(record(twin, gone).order_id)
        assert answer is not None and record(twin, gone).status == "CANCELED"
        await eventually(lambda: h.last(gone) is OrderStatus.CANCELED, timeout=10)
        assert h.statuses(gone) == [OrderStatus.ACCEPTED, OrderStatus.CANCELED]
        assert [o.client_order_id for o in h.open_orders()] == [stays]
        assert check_of(node).queried == queried + 1
        assert node.summary()["orders_missing"] == check_of(node).queried
        assert queries.count(QUERY_ORDER_PATH) == 1  # the order the list lacked, and only it
        # Later rounds find the other order resting: it is never queried nor changed.
        await rounds_pass(node, 2)
        assert h.statuses(stays) == [OrderStatus.ACCEPTED]
        assert queries.count(QUERY_ORDER_PATH) == 1
        assert set(book(twin)) == {stays}
        available, frozen = usd(twin)
        assert available + frozen == START and frozen > 0  # only the resting one reserved
    assert h.refusals == []


async def test_an_unknown_order_the_check_lists_is_accepted_open_and_cancellable() -> None:
    # The list names the order by its clientOrderId: it rests at the venue under the list's
    # orderId, so it is ACCEPTED with that id, in open_orders(), and cancelled by that id.
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        cid = await unknown_on_twin(node, h, "1900")
        await eventually(lambda: h.last(cid) is OrderStatus.ACCEPTED, timeout=10)
        assert h.statuses(cid) == [OrderStatus.UNKNOWN, OrderStatus.ACCEPTED]
        assert h.updates[-1].order_id == record(twin, cid).order_id
        assert node.engine is not None and node.engine.unknown_count == 0
        assert [(o.client_order_id, o.order_id) for o in h.open_orders()] == [
            (cid, record(twin, cid).order_id)
        ]
        assert h.cancel(cid) is True
        await eventually(lambda: h.last(cid) is OrderStatus.CANCELED, timeout=10)
        assert book(twin) == {} and h.refusals == []


async def test_an_order_filled_before_its_match_is_listed_ends_filled_with_its_fill_once() -> None:
    # The twin lists matches 8 s late: the check finds the filled order missing from the open
    # orders first (a round every 0.2 s), the query's record says FILLED; the match, listed
    # later, is linked to it. FILLED is waited for less than the delay, so the match cannot
    # have been listed by then, however slow the machine.
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        (cid,) = await resting_on_twin(node, h, ["1999"])
        await rounds_pass(node, 2)  # a round that began before it rested has ended
        queried = check_of(node).queried
        twin.faults.configure(match_delay_min_s=8.0, match_delay_max_s=8.0)
        twin.set_mark("ETH-USD", "1998.5")  # the bid is crossed: the twin fills it
        await eventually(lambda: h.last(cid) is OrderStatus.FILLED, timeout=6)
        assert h.matches == []  # the check, not the match, told it
        assert check_of(node).queried == queried + 1
        assert h.open_orders() == []
        await eventually(lambda: len(h.matches) == 1, timeout=20)
        assert h.matches[0].client_order_id == cid
        assert h.matches[0].entrust_id == record(twin, cid).order_id
        await rounds_pass(node, 2)
        assert len(h.matches) == 1
        assert h.statuses(cid) == [OrderStatus.ACCEPTED, OrderStatus.FILLED]


async def test_a_round_that_cannot_read_the_list_says_so_and_the_next_one_checks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = Node(config())
    async with running(node):
        h, twin = hand(node), twin_of(node)
        (cid,) = await resting_on_twin(node, h, ["1900"])
        twin.faults.configure(unavailable_rate=1.0)  # every REST call: HTTP 503
        await rounds_pass(node, 2)
        assert any(
            r.getMessage().startswith("open orders of ETH-USD not read") for r in caplog.records
        )
        assert node.engine is not None and node.engine.cancels.available
        assert h.statuses(cid) == [OrderStatus.ACCEPTED]
        twin.faults.clear()
        async with person(twin) as rest:
            await rest.cancel_order(record(twin, cid).order_id)
        await eventually(lambda: h.last(cid) is OrderStatus.CANCELED, timeout=10)


async def test_interval_zero_checks_only_at_start() -> None:
    node = Node(config("0"))
    async with running(node):
        assert node.order_check is None


def test_a_negative_interval_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigProblems) as caught:
        config("-1")
    assert list(caught.value.problems) == [
        "polling.open_orders_interval_s: must be between 0 and 86400 (0: only at start) (line 9)"
    ]
