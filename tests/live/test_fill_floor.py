"""A partly filled order adopted after a restart is not counted as filled twice, at the twin.

The twin counterpart of tests/engine/test_fill_floor.py. The pair's liquidity caps what a
crossing GTC order fills at once, so it fills in part and rests the rest. Its answer is
lost (the outcome is UNKNOWN) and its match is held back from the match list; the node is
restarted and adopts the order from the open-order list, whose record says what has filled.
When the held-back match is listed at last it is the fill that record counted already: the
order stays ACCEPTED with the rest resting, and ends FILLED only when the rest fills.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import attrs
import pytest

from framework import OrderStatus
from framework.live.node import Node
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from tests.live.test_cancels import book, hand, record, venue_config
from tests.node_running import running
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

ETH = "ETH-USD"
NOW = Decimal("0.006")  # what the pair's liquidity lets the order fill on arrival
REST = Decimal("0.004")


def shallow_twin(liquidity: Decimal = NOW) -> VenueTwin:
    """A twin with still prices whose ETH-USD fills at most liquidity of an order on arrival."""
    defaults = TwinSettings()
    pairs = dict(defaults.pairs)
    pairs[ETH] = attrs.evolve(pairs[ETH], liquidity=liquidity)
    settings = TwinSettings(prices=PriceSettings(tick_interval=0), pairs=pairs)
    return VenueTwin(settings, host="127.0.0.1", port=0)


async def test_an_adopted_partly_filled_order_is_not_filled_by_its_late_match(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal.sqlite"
    async with shallow_twin() as twin:
        first = Node(venue_config(twin, journal, node="ff"))
        async with running(first):
            h = hand(first)
            # The answer is lost, and the match of the part that fills is listed 5 s late (run 1
            # stops well before: had it seen the match, it would be external there).
            twin.faults.configure(
                drop_response_rate=1.0, match_delay_min_s=5.0, match_delay_max_s=5.0
            )
            cid = h.limit("2010")  # crosses the mark (2000): 0.006 fills, 0.004 rests
            await eventually(lambda: h.last(cid) is OrderStatus.UNKNOWN, timeout=10)
            twin.faults.configure(drop_response_rate=0.0)
        assert h.matches == []  # the node stopped before the match was listed
        assert record(twin, cid).filled == NOW and record(twin, cid).status == "OPEN"

        second = Node(venue_config(twin, journal, node="ff"))
        async with running(second):
            h2 = hand(second)
            (adopted,) = h2.open_at_start
            assert (adopted.client_order_id, adopted.filled) == (cid, NOW)
            # The held-back match is listed: the fill the record counted, not another one.
            await eventually(lambda: len(h2.matches) == 1, timeout=10)
            (late,) = h2.matches
            assert (late.client_order_id, late.quantity) == (cid, NOW)
            assert h2.statuses(cid) == [OrderStatus.ACCEPTED]
            (still,) = h2.open_orders()
            assert (still.client_order_id, still.filled, still.remaining) == (cid, NOW, REST)
            assert set(book(twin, ETH)) == {cid}  # the twin agrees: the rest still rests
            twin.faults.clear()
            twin.set_mark(ETH, "2005")  # the rest fills, as maker at 2010
            await eventually(lambda: h2.last(cid) is OrderStatus.FILLED, timeout=10)
            await eventually(lambda: len(h2.matches) == 2, timeout=10)
            assert sum((m.quantity or Decimal(0)) for m in h2.matches) == NOW + REST
            assert h2.open_orders() == []
        assert record(twin, cid).status == "FILLED"
