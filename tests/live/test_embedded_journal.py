"""The journal of a node without journal.path (embedded twin): bounded memory, nothing kept.

Measured with SQLite's own byte count (tests/sqlite_memory.py): a journal held in memory
keeps every intent's row for the whole run (the control below), the node's keeps only its
page cache however many intents it has written.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from framework import OrderIntent, OrderStatus, Strategy
from framework.config import parse_config
from framework.live.journal import Journal
from framework.live.node import Node
from tests.node_running import running
from tests.sqlite_memory import sqlite_memory_used
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

CONFIG = """\
venue: {embedded: true, twin: {prices: {tick_interval: 0}}}
pairs: {ETH-USD: {}}
polling: {match_interval_s: 0.1}
strategies:
  - {name: idle, class: "tests.live.test_embedded_journal:Idle"}
"""

WARM = 3000
"""Intents written before measuring: more than the journal's page cache holds."""
MEASURED = 6000
"""Intents written while measuring."""
BOUND = 100_000
"""Bytes SQLite may grow by while MEASURED intents are written (in memory: about 780 KB)."""


class Idle(Strategy):
    """Submits nothing: the journal's rows are the test's."""


def write(journal: Journal, first: int, count: int) -> None:
    """Add count intents of another owner, committed one by one, then fold the log."""
    intent = OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal("0.01"))
    for n in range(first, first + count):
        journal.add(f"other{n:08x}", "other", "s", intent, OrderStatus.PENDING, 1_700_000_000_000)
        journal.commit()
    journal.compact()


def growth(journal: Journal) -> int:
    """Bytes SQLite grew by while MEASURED intents were written, after WARM."""
    write(journal, 0, WARM)
    before = sqlite_memory_used()
    write(journal, WARM, MEASURED)
    after = sqlite_memory_used()
    assert before is not None and after is not None
    return after - before


@pytest.mark.skipif(sqlite_memory_used() is None, reason="libsqlite3 cannot be loaded")
async def test_a_node_without_journal_path_keeps_only_the_page_cache_in_memory() -> None:
    control = Journal.open(":memory:")
    try:
        in_memory = growth(control)
    finally:
        control.close()
    assert in_memory > 5 * BOUND  # the figure sees a journal's rows when they stay in memory
    node = Node(parse_config(CONFIG, env={}))
    async with running(node):
        stream, poller, journal = node.stream, node.poller, node.journal
        assert stream is not None and poller is not None and journal is not None
        # Connected and resynced first (the resync ends with a match poll): the writes below
        # hold the event loop, and a stop cannot then come in the middle of the start-up.
        await eventually(lambda: stream.stats.connects >= 1)
        polls = poller.stats.polls
        await eventually(lambda: poller.stats.polls >= polls + 2)
        grown = growth(journal)
    assert grown < BOUND, f"the journal grew by {grown} bytes over {MEASURED} intents"
