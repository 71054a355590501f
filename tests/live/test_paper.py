"""Paper trading on the live market (issue 28, its first part): ``venue: {mode: paper}``.

The node runs as in live mode against a venue twin with its market on (embedded, over real
sockets on 127.0.0.1): it hears the twin's books, trades and marks, and its orders go to
the in-process paper venue, never to the twin. Its positions and PnL must agree with its
own fills, and its journal (and recording) say paper; a live node refuses its journal.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

import anyio
import orjson
import pytest

from framework import OrderIntent, OrderStatus, Strategy
from framework.config import Config, parse_config
from framework.engine.events import OrderUpdate
from framework.live.cli import check_main
from framework.live.journal import Journal, JournalError
from framework.live.node import Node
from framework.live.node_start import PAPER_MARK_PATH
from framework.live.startup import FatalError
from framework.recording import RecordingReader, RestRecord, WsRecord
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from framework.venue.market import Book, MarkPrice
from framework.venue.models import MatchRecord
from framework.venue.rules import settle_coin_of
from tests.live.test_cli import live, summary_of
from tests.node_running import running
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

PAIR = "ETH-USD"
STEPS = ((True, "0.05"), (False, "0.05"), (False, "0.03"), (True, "0.03"))
"""Market orders (buy?, quantity) one after the other: long, flat, short, flat (the venue
refuses an order that would turn a position round: 2318)."""
_OPEN = {OrderStatus.PENDING, OrderStatus.ACCEPTED, OrderStatus.UNKNOWN}


class Stepper(Strategy):
    """Sends STEPS' market orders on the market it hears, the next once the last one ended."""

    def on_start(self) -> None:
        self.matches: list[MatchRecord] = []
        self.ended: list[OrderStatus] = []
        self.pending: str | None = None

    def on_book(self, book: Book) -> None:
        if book.best_ask is not None:
            self.step()

    def on_mark(self, mark: MarkPrice) -> None:
        self.step()

    def step(self) -> None:
        """The next market order, unless one is out or all were sent."""
        done = len(self.ended)
        if self.pending is None and done < len(STEPS):
            buy, quantity = STEPS[done]
            intent = OrderIntent(pair=PAIR, is_long=buy, quantity=Decimal(quantity))
            self.pending = self.submit(intent)

    def on_order(self, update: OrderUpdate) -> None:
        if update.client_order_id == self.pending and update.status not in _OPEN:
            self.ended.append(update.status)
            self.pending = None

    def on_match(self, match: MatchRecord) -> None:
        self.matches.append(match)


def config(tmp_path: Path, *, mode: str = "paper", extra: str = "") -> Config:
    """A node on an embedded twin with its market on; mode paper unless said."""
    return parse_config(config_text(tmp_path, mode=mode, extra=extra))


def config_text(tmp_path: Path, *, mode: str = "paper", extra: str = "") -> str:
    """The YAML of config()."""
    return f"""\
venue:
  embedded: true
  mode: {mode}
  twin: {{market: {{enabled: true}}, prices: {{tick_interval: 0.05}}}}
pairs: {{{PAIR}: {{}}}}
polling: {{match_interval_s: 0.1}}
journal: {{path: {tmp_path / "journal.sqlite"}}}
market:
  pairs:
    {PAIR}: {{channels: [trade, depth], mark_interval_s: 0.2}}
strategies:
  - name: stepper
    class: tests.live.test_paper:Stepper
{extra}"""


def signed(match: MatchRecord) -> Decimal:
    """A fill's change of the net position: a buy (isLong, opening or closing) adds."""
    assert match.quantity is not None
    return match.quantity if match.is_long else -match.quantity


async def test_a_paper_run_on_the_twins_market_agrees_with_its_own_fills(
    tmp_path: Path,
) -> None:
    recording = tmp_path / "paper.jsonl"
    node = Node(config(tmp_path, extra=f"recording: {{path: {recording}}}\n"))
    async with running(node) as summary:
        strategy = node.strategies[0]
        assert isinstance(strategy, Stepper)
        twin = node.venue.twin if node.venue is not None else None
        assert twin is not None and node.paper is not None
        await eventually(lambda: len(strategy.ended) == len(STEPS), timeout=20)
        await eventually(lambda: len(strategy.matches) == node.tallies.matches > 0)
        halfway = len(strategy.matches)
        await eventually(lambda: node.positions() == {})
    assert strategy.ended == [OrderStatus.FILLED] * len(STEPS)
    assert len(strategy.matches) == halfway  # nothing came after
    assert not list(twin.received_orders)  # nothing reached the venue: paper
    assert summary["mode"] == "paper"
    assert summary["orders_sent"] == len(STEPS) and summary["orders_rejected"] == 0
    # positions: the sum of the fills, as the summary and the paper account say
    net = sum((signed(m) for m in strategy.matches), Decimal(0))
    assert net == 0 and summary["positions"] == {} and node.paper.paper.open_positions() == {}
    held, path = Decimal(0), []
    for match in strategy.matches:  # the position after each fill, as the paper account kept it
        held += signed(match)
        path.append(held)
    kept = [quantity for _, quantity in node.paper.paper.positions[PAIR]]
    assert path == [Decimal(q) for q in ("0.05", "0", "-0.03", "0")] == kept
    # PnL: realized and fees are the fills' sums, and the paper balance moved by exactly that
    realized = sum((m.profit_loss or Decimal(0) for m in strategy.matches), Decimal(0))
    fees = sum((m.trade_fee or Decimal(0) for m in strategy.matches), Decimal(0))
    assert fees > 0
    pnl = summary["pnl"][PAIR]
    assert Decimal(pnl["realized"]) == realized and Decimal(pnl["fees"]) == fees
    coin = settle_coin_of(PAIR)
    paper = node.paper.paper
    assert paper.equity()[coin] == paper.initial[coin] + realized - fees
    assert node.portfolio.balance(coin) is not None
    # the fills followed the market heard: market orders walked the twin's books, as takers
    assert paper.market_fills and all(m.is_taker for m in strategy.matches)
    # the journal and the recording are marked paper
    with sqlite3.connect(tmp_path / "journal.sqlite") as conn:
        (mode,) = conn.execute("SELECT value FROM meta WHERE key = 'mode'").fetchone()
    assert mode == "paper"
    reader = RecordingReader(recording)
    try:
        records = list(reader.records())
    finally:
        reader.close()
    first = records[0]
    assert isinstance(first, RestRecord) and first.path == PAPER_MARK_PATH
    assert orjson.loads(first.body) == {"mode": "paper"}
    events = {orjson.loads(r.frame).get("event") for r in records if isinstance(r, WsRecord)}
    assert "api_depth" in events  # the market heard; no private push was received
    assert not events & {"api_position", "api_account"}


async def test_a_live_node_refuses_a_paper_journal_and_a_paper_node_a_live_one(
    tmp_path: Path,
) -> None:
    Journal.open(tmp_path / "journal.sqlite", mode="paper").close()
    node = Node(config(tmp_path, mode="live"))
    with pytest.raises(FatalError, match="is a paper run's: a live node does not resume it"):
        await node.run()
    live = tmp_path / "live"
    live.mkdir()
    journal = Journal.open(live / "journal.sqlite")  # a live run's, used
    journal.reserve_ids(10)
    journal.close()
    with pytest.raises(JournalError, match="is a live run's: a paper node does not resume it"):
        Journal.open(live / "journal.sqlite", mode="paper")
    node = Node(config(live))
    with pytest.raises(FatalError, match=r"journal.path: .* is a live run's"):
        await node.run()


def test_a_journal_from_before_the_mark_is_live_and_a_used_paper_one_is_not_resumed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite"
    journal = Journal.open(path)
    journal.reserve_ids(5)
    journal.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'mode'")  # as an older version left it
    with pytest.raises(JournalError, match="live run's"):
        Journal.open(path, mode="paper")
    assert Journal.open(path).mode == "live"
    fresh = tmp_path / "paper.sqlite"
    journal = Journal.open(fresh, mode="paper")
    assert journal.mode == "paper"
    journal.reserve_ids(5)
    journal.close()
    with pytest.raises(JournalError, match="holds an earlier paper run"):
        Journal.open(fresh, mode="paper")


def test_paper_mode_needs_no_key_but_market_channels_do() -> None:
    base = """\
venue: {base_url: "http://127.0.0.1:1", ws_url: "ws://127.0.0.1:1", mode: paper}
pairs: {ETH-USD: {}}
strategies: [{name: s, class: "tests.live.test_paper:Stepper"}]
"""
    polled = parse_config(base + "market: {pairs: {ETH-USD: {channels: []}}}\n")
    assert polled.venue.is_paper and polled.venue.api_key is None
    assert polled.journal.path is None  # not required: the paper account lives in memory
    with pytest.raises(Exception, match=r"venue\.api_key: required in paper mode for market"):
        parse_config(base + "market: {pairs: {ETH-USD: {channels: [trade]}}}\n")
    with pytest.raises(Exception, match=r"venue\.api_key: required unless venue.embedded"):
        parse_config(base.replace(", mode: paper", ""))
    with pytest.raises(Exception, match=r"venue\.paper: only used with venue.mode: paper"):
        parse_config(
            base.replace("mode: paper", "mode: live, paper: {latency_ms: 5}")
            + "journal: {path: j.sqlite}\n"
        )
    flagged = parse_config(base.replace(", mode: paper", ""), paper=True)
    assert flagged.venue.is_paper


async def test_live_paper_flag_runs_the_file_in_paper_mode(tmp_path: Path) -> None:
    text = config_text(tmp_path, mode="live") + "logging: {json: true}\n"
    path = tmp_path / "my.yaml"
    path.write_text(text)
    async with live(path, "--paper", "--duration", "3") as (process, out, err):
        pass
    assert process.returncode == 0, err
    summary = summary_of(out)
    assert summary["mode"] == "paper"
    assert summary["orders_sent"] >= 1 and summary["orders_rejected"] == 0
    assert any('"paper venue ready' in line for line in err)
    with sqlite3.connect(tmp_path / "journal.sqlite") as conn:
        (mode,) = conn.execute("SELECT value FROM meta WHERE key = 'mode'").fetchone()
    assert mode == "paper"


async def test_paper_needs_no_key_with_polled_prices_only(tmp_path: Path) -> None:
    settings = TwinSettings(prices=PriceSettings(tick_interval=0.05))
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        text = f"""\
venue:
  base_url: "{twin.base_url}"
  ws_url: "{twin.ws_url}"
  mode: paper
  paper: {{taker_fee: "0.0006", latency_ms: 20}}  # the venue's published taker fee
pairs: {{{PAIR}: {{}}}}
polling: {{match_interval_s: 0.1}}
market:
  pairs:
    {PAIR}: {{channels: [], mark_interval_s: 0.1}}
strategies:
  - name: stepper
    class: tests.live.test_paper:Stepper
"""
        node = Node(parse_config(text))
        async with running(node) as summary:
            strategy = node.strategies[0]
            assert isinstance(strategy, Stepper)
            await eventually(lambda: len(strategy.ended) == len(STEPS), timeout=20)
            await eventually(lambda: len(strategy.matches) == 4 and node.positions() == {})
        assert not list(twin.received_orders)
    assert strategy.ended == [OrderStatus.FILLED] * len(STEPS)
    assert summary["mode"] == "paper" and summary["market"]["events"]["mark"] >= 1
    assert node.journal is not None and node.journal.mode == "paper"
    net = sum((signed(m) for m in strategy.matches), Decimal(0))
    assert net == 0 and summary["positions"] == {}
    for match in strategy.matches:  # venue.paper's fee, on the fill's notional
        assert match.trade_fee is not None and match.amount is not None
        assert match.is_taker and match.trade_fee == (match.amount * Decimal("0.0006")).quantize(
            match.trade_fee
        )


def test_check_reads_venue_paper_as_the_node_will(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "my.yaml"
    path.write_text(config_text(tmp_path, mode="live"))
    assert check_main(["-c", str(path), "--paper"]) == 0
    assert "(paper: orders filled in-process, never sent)" in capsys.readouterr().out
    path.write_text(
        config_text(tmp_path).replace("mode: paper", "mode: paper\n  paper: {taker_fe: 1}")
    )
    assert check_main(["-c", str(path)]) == 1
    assert capsys.readouterr().err.startswith(
        "venue.paper.taker_fe: unknown key (did you mean 'taker_fee'?)"
    )


async def test_a_paper_node_whose_market_venue_cannot_be_reached_stops_in_one_line(
    tmp_path: Path,
) -> None:
    """Found by a first-time reader: a paper node pointed at a dead venue warned about
    reconnects, refused every market order (9007), overran --duration 5 by 10 s and exited
    0. As a live node's first sync does, its start now says so in one line."""
    text = f"""\
venue: {{base_url: "http://127.0.0.1:9", ws_url: "ws://127.0.0.1:9/ws", mode: paper}}
pairs: {{{PAIR}: {{}}}}
market:
  pairs:
    {PAIR}: {{channels: [], mark_interval_s: 1}}
journal: {{path: {tmp_path / "j.sqlite"}}}
strategies:
  - name: stepper
    class: tests.live.test_paper:Stepper
"""
    with anyio.fail_after(10), pytest.raises(FatalError) as caught:
        await Node(parse_config(text)).run(duration=5)
    message = str(caught.value)
    assert message.startswith("cannot reach the venue at http://127.0.0.1:9 (paper mode")
    assert "\n" not in message
