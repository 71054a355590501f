"""A new event source is one module at the edge (tests/ticks.py): live, in a backtest, on the
stream and in the replay, with the wiring's refusal of a record type nothing takes."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.asyncio.server import ServerConnection

from framework import Strategy
from framework.backtest.replay import Replayer
from framework.backtest.runner import Backtest, BacktestSettings
from framework.backtest.timeline import Timeline
from framework.config import parse_config
from framework.engine.bus import Bus
from framework.engine.clock import VirtualClock
from framework.engine.portfolio import Portfolio, push_routes
from framework.engine.strategy import HOOKS
from framework.live.node import FatalError, Node
from framework.recording import RecordingReader
from framework.venue.errors import ConfigError
from tests.live.conftest import eventually
from tests.live.test_node import embedded
from tests.live.test_stream_frames import ack_subscribes, client, local_server, running
from tests.node_running import running as node_running
from tests.ticks import Tick, TickListener, TickSource
from tests.venue.frames import account_frame, position_frame

LISTENERS = """\
  - name: eth
    class: tests.ticks:TickListener
    params: {pair: ETH-USD}
  - name: btc
    class: tests.ticks:TickListener
    params: {pair: BTC-USD}
"""

SOURCES = """\
sources:
  - name: ticks
    class: tests.ticks:TickSource
    params: {pair: ETH-USD, every_ms: 100}
"""

BACKTEST = f"""\
venue: {{embedded: true}}
pairs:
  ETH-USD: {{}}
  BTC-USD: {{}}
strategies:
{LISTENERS}
{SOURCES}
logging: {{level: WARNING}}
"""

TICK_FRAME = {"event": "api_tick", "data": {"symbol": "ETH-USD", "price": "1999.5", "seq": 77}}


def listeners(strategies: list[Strategy]) -> tuple[TickListener, TickListener]:
    eth, btc = strategies
    assert isinstance(eth, TickListener) and isinstance(btc, TickListener)
    return eth, btc


@pytest.mark.anyio
async def test_a_configured_source_reaches_the_strategy_live() -> None:
    node = Node(embedded(LISTENERS.split("  - name: btc")[0], SOURCES))
    async with node_running(node):
        (eth,) = node.strategies
        assert isinstance(eth, TickListener)
        await eventually(lambda: len(eth.ticks) >= 3)
    seqs = [tick.seq for _, tick in eth.ticks]
    assert seqs == list(range(1, len(seqs) + 1))


def write(path: Path, lines: list[tuple[int, str]]) -> None:
    path.write_bytes(
        b"".join(orjson.dumps({"ts": ts, "source": "ws", "frame": f}) + b"\n" for ts, f in lines)
    )


def test_the_source_and_recorded_frames_of_its_type_reach_the_strategy_in_a_backtest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.jsonl"
    start = 1_700_000_000_000
    write(
        path,
        [
            (start, account_frame(1, "100")),
            (start + 250, orjson.dumps(TICK_FRAME).decode()),
            (start + 1_000, position_frame(1, "1")),
        ],
    )
    result = Backtest(parse_config(BACKTEST), path, BacktestSettings()).run()
    eth, btc = listeners(result.strategies)
    at = [(int(when.timestamp() * 1000) - start, tick.seq) for when, tick in eth.ticks]
    # Every 100 ms of virtual time from the first record to the last; the recorded one at 250.
    assert at == [(100, 1), (200, 2), (250, 77), *((ms, ms // 100) for ms in range(300, 1001, 100))]
    assert btc.ticks == []  # the pairs filter of the row: ETH-USD ticks, a BTC-USD strategy
    assert result.stats.pushes_delivered == 3


@pytest.mark.anyio
async def test_the_stream_hands_over_a_push_of_a_registered_type() -> None:
    async def handler(ws: ServerConnection, n: int) -> None:
        await ack_subscribes(ws, 2, [])
        await ws.send(orjson.dumps(TICK_FRAME).decode())
        await ws.wait_closed()

    got: list[Any] = []
    async with local_server(handler) as url, running(client(url, got)):
        await eventually(lambda: len(got) == 1)
    assert got == [Tick(symbol="ETH-USD", price=Decimal("1999.5"), seq=77)]


class Quote:
    """A record type no route and no hook takes."""


class QuoteSource(TickSource):
    """Declares Quotes: refused when it is plugged in, live and in a backtest."""

    records = (Tick, Quote)  # type: ignore[assignment]


QUOTES = """\
sources:
  - name: quotes
    class: tests.test_new_source:QuoteSource
"""
REFUSED = "source quotes: nothing takes its Quote records (no intake route, no strategy hook)"


@pytest.mark.anyio
async def test_a_record_type_nothing_takes_is_refused_at_wiring_naming_it_and_its_source(
    tmp_path: Path,
) -> None:
    node = Node(embedded(LISTENERS.split("  - name: btc")[0], QUOTES))
    with pytest.raises(FatalError) as live:
        await node.run()
    assert str(live.value) == REFUSED
    path = tmp_path / "r.jsonl"
    write(path, [(1_000, account_frame(1, "100"))])
    config = parse_config(BACKTEST.replace(SOURCES, QUOTES))
    with pytest.raises(ConfigError) as backtest:
        Backtest(config, path, BacktestSettings()).run()
    assert str(backtest.value) == REFUSED


def test_the_replay_never_drops_a_decoded_record_in_silence(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write(path, [(1_000, orjson.dumps(TICK_FRAME).decode())])
    clock = VirtualClock(0)
    bus = Bus()
    replayer = Replayer(
        clock=clock,
        timeline=Timeline(clock),
        routes=push_routes(Portfolio(), bus.publish),  # no route for Tick: never declared
        on_match=lambda match: None,
    )
    with pytest.raises(ConfigError, match="no source declared Tick records"):
        replayer.run(RecordingReader(path))


def test_every_hook_of_the_base_class_is_a_row_of_the_table() -> None:
    rows = [row.name for row in HOOKS]
    assert [n for n in vars(Strategy) if n.startswith("on_")] == rows[: rows.index("on_mark") + 1]
    assert "on_tick" in rows  # a plug-in's row (tests.ticks), after the framework's


def test_check_names_a_source_class_that_does_not_load() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(BACKTEST.replace("tests.ticks:TickSource", "tests.ticks:Nope"))
    assert "sources[0].class: source class 'tests.ticks:Nope': module 'tests.ticks' has no" in str(
        refused.value
    )
