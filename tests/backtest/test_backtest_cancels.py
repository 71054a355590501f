"""Cancels on the paper venue: a strategy that cancels backtests unchanged, with the twin's rules.

The Ladder is backtested over a price track (CSV) that walks down far enough to make it
re-centre: it cancels its grid and builds a new one. The paper account (the twin's exchange)
is the judge: which orders rest, which were cancelled, and that every reserve came back.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from framework import CancelRejected, OrderIntent, OrderStatus, OrderUpdate, Strategy
from framework.backtest.cli import backtest_main
from framework.backtest.paper import PaperSettings, PaperVenue
from framework.backtest.runner import Backtest, BacktestResult, BacktestSettings
from framework.backtest.synth import SynthSettings, generate
from framework.config import parse_config
from framework.engine.cancels import NOTHING_TO_CANCEL
from framework.sim.history import OrderRecord
from strategies.ladder import Ladder

ETH = "ETH-USD"
T0 = 1_700_000_000_000  # the synthetic recording's first ms

LADDER = """\
venue: {embedded: true}
pairs:
  ETH-USD: {}
polling:
  match_interval_s: 0.5
strategies:
  - name: ladder
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD, quantity: "0.01", spacing: "1", levels: 3,
             reference_price: "2000", recentre_levels: 2}
logging: {level: WARNING}
backtest:
  prices_csv: PRICES
"""

# The mark walks down, one bid at a time: 1999 and 1998 fill (each within 2 spacings of
# 2000: a counter sell goes in), then 1997 (3 spacings away: the ladder re-centres there).
PATH = [(0, "2000"), (5_000, "1998.5"), (10_000, "1997.5"), (15_000, "1996.5"), (30_000, "1996.5")]


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording of someone else's activity, about 35 s long, from T0."""
    path = tmp_path_factory.mktemp("rec") / "other.jsonl"
    stats = generate(path, SynthSettings(pushes=200, seed=3, mean_gap_ms=300, start_ms=T0))
    assert stats.last_ts - T0 > 30_000
    return path


def write_config(tmp: Path) -> Path:
    """The Ladder config and its price track, in tmp."""
    prices = tmp / "prices.csv"
    prices.write_text(
        "ts,ETH-USD\n" + "".join(f"{T0 + ms},{p}\n" for ms, p in PATH), encoding="utf-8"
    )
    config = tmp / "ladder.yaml"
    config.write_text(LADDER.replace("PRICES", str(prices)), encoding="utf-8")
    return config


def paper_orders(paper: PaperVenue, cids: Iterable[str]) -> dict[str, OrderRecord]:
    """The paper account's records of the orders cids (those it accepted)."""
    index = paper.exchange.accounts[1].orders
    return {c: r for c in cids if (r := index.by_client_id(c)) is not None}


def prices(*texts: str) -> list[Decimal]:
    """Decimals of texts, in order."""
    return [Decimal(t) for t in texts]


def run_ladder(tmp: Path, recording: Path) -> BacktestResult:
    """Backtest the Ladder config in tmp on recording."""
    config_path = write_config(tmp)
    text = config_path.read_text(encoding="utf-8")
    prices = text.split("prices_csv: ")[1].strip()
    config = parse_config(text.split("backtest:")[0])
    return Backtest(config, recording, BacktestSettings(prices_csv=prices)).run()


def test_the_ladder_recentres_on_the_paper_venue_with_cancels(
    tmp_path: Path, recording: Path
) -> None:
    result = run_ladder(tmp_path, recording)
    (ladder,) = result.strategies
    assert isinstance(ladder, Ladder)
    assert ladder.recentred == 1 and ladder.fills == 3
    assert ladder.reference == Decimal("1997")
    paper, engine = result.paper, result.engine
    orders = paper_orders(paper, result.collector.orders)
    statuses = {cid: o["status"] for cid, o in result.collector.orders.items()}
    canceled = {cid for cid, s in statuses.items() if s == OrderStatus.CANCELED.value}
    # What rested at the re-centre: the three first sells and the two counter sells.
    assert sorted(orders[c].price for c in canceled) == prices(
        "1999", "2000", "2001", "2002", "2003"
    )
    assert all(not orders[c].is_long for c in canceled)
    assert all(orders[c].status == "CANCELED" and orders[c].filled == 0 for c in canceled)
    filled = {c for c, r in orders.items() if r.status == "FILLED"}
    assert sorted(orders[c].price for c in filled) == prices("1997", "1998", "1999")
    # The new grid around 1997 is what rests at the paper venue, and what the ladder holds.
    resting = {c: r for c, r in orders.items() if r.status == "OPEN"}
    assert sorted((r.is_long, r.price) for r in resting.values()) == sorted(
        [(True, Decimal(p)) for p in ("1994", "1995", "1996")]
        + [(False, Decimal(p)) for p in ("1998", "1999", "2000")]
    )
    assert set(ladder.resting) == set(resting)
    assert {o.client_order_id for o in engine.open_orders()} == set(resting)
    assert {o.order_id for o in engine.open_orders()} == {r.order_id for r in resting.values()}
    # Every reserve of a cancelled order came back: the account holds its start less fees
    # (only opening buys filled: no realized PnL), margin and the new grid's reserves frozen.
    balance = paper.exchange.accounts[1].balances["USD"]
    fees = sum((f.fee for f in paper.fills), Decimal(0))
    assert balance.available + balance.frozen == Decimal("100000") - fees
    counters = engine.counters()
    assert counters["orders_canceled"] == 5 and counters.get("cancels_rejected", 0) == 0
    assert result.collector.statuses[OrderStatus.CANCELED.value] == 5
    assert result.results["orders"]["filled"] == 3
    assert result.results["orders"]["canceled"] == 5
    assert result.results["orders"]["cancels_sent"] == 5
    assert result.results["orders"]["cancels_rejected"] == 0


def test_a_ladder_backtest_with_cancels_gives_the_same_report_twice(
    tmp_path: Path, recording: Path
) -> None:
    config = write_config(tmp_path)
    pages = []
    for out in ("a", "b"):
        argv = ["-c", str(config), "--recording", str(recording), "--report", str(tmp_path / out)]
        assert backtest_main(argv) == 0
        pages.append((tmp_path / out / "report.json").read_bytes())
    assert pages[0] == pages[1]
    page = (tmp_path / "a" / "report.html").read_text(encoding="utf-8")
    assert page.count(OrderStatus.CANCELED.value) >= 5  # the Orders table shows each cancel
    results = orjson.loads(pages[0])
    assert results["fills"]["by_strategy"] == {"ladder": 3}


def test_cancel_on_stop_cancels_what_rests_when_a_backtest_stops(
    tmp_path: Path, recording: Path
) -> None:
    """``execution.cancel_on_stop`` means in a backtest what it means live."""
    text = write_config(tmp_path).read_text(encoding="utf-8")
    prices = text.split("prices_csv: ")[1].strip()
    config = parse_config(text.split("backtest:")[0] + "execution: {cancel_on_stop: true}\n")
    result = Backtest(config, recording, BacktestSettings(prices_csv=prices)).run()
    orders = paper_orders(result.paper, result.collector.orders)
    assert not [r for r in orders.values() if r.status == "OPEN"]
    assert result.engine.open_orders() == []
    # The re-centre's five, then the six of the new grid at the stop.
    assert result.engine.counters()["orders_canceled"] == 5 + 6


class Canceller(Strategy):
    """Places bids, cancels them queued, in flight and done; records what comes back."""

    def on_start(self) -> None:
        self.updates: list[OrderUpdate] = []
        self.refusals: list[CancelRejected] = []
        self.ticks = 0
        self.bid = self.fill = self.queued = ""
        self.schedule("t", 1.0)

    def on_timer(self, name: str) -> None:
        self.ticks += 1
        if self.ticks == 1:
            self.bid = self.submit(self._limit("1900"))
            self.fill = self.submit(self._limit("2100"))  # crosses: fills at once
            self.queued = self.submit(self._limit("1901"))
            assert self.cancel(self.queued) is True  # still queued: never sent
        elif self.ticks == 2:  # the answers take 1.5 s: the create is in flight
            assert self.cancel(self.bid) is True  # waits for the answer, then goes
        elif self.ticks == 4:
            assert self.cancel(self.bid) is False  # cancelled already
            assert self.cancel(self.fill) is False  # filled

    def _limit(self, price: str) -> OrderIntent:
        return OrderIntent(pair=ETH, is_long=True, quantity=Decimal("0.01"), price=Decimal(price))

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update)

    def on_cancel_rejected(self, event: CancelRejected) -> None:
        self.refusals.append(event)


def test_paper_cancels_of_queued_in_flight_and_done_orders(tmp_path: Path, recording: Path) -> None:
    config_path = write_config(tmp_path)
    text = config_path.read_text(encoding="utf-8")
    prices = text.split("prices_csv: ")[1].strip()
    config = parse_config(text.split("backtest:")[0])
    settings = BacktestSettings(prices_csv=prices, paper=PaperSettings(latency_ms=1500))
    result = Backtest(
        config, recording, settings, strategies=[lambda ctx: Canceller("c", ctx, {})]
    ).run()
    (strategy,) = result.strategies
    assert isinstance(strategy, Canceller)
    assert strategy.ticks >= 4
    seen = [(u.client_order_id, u.status) for u in strategy.updates]

    def of(cid: str) -> list[OrderStatus]:
        return [s for c, s in seen if c == cid]

    assert of(strategy.queued) == [OrderStatus.CANCELED]
    assert of(strategy.bid) == [OrderStatus.ACCEPTED, OrderStatus.CANCELED]
    assert of(strategy.fill) == [OrderStatus.ACCEPTED, OrderStatus.FILLED]
    assert [(r.client_order_id, r.code) for r in strategy.refusals] == [
        (strategy.bid, NOTHING_TO_CANCEL),
        (strategy.fill, NOTHING_TO_CANCEL),
    ]
    orders = paper_orders(result.paper, [strategy.bid, strategy.fill, strategy.queued])
    assert strategy.queued not in orders  # the paper venue never saw it
    assert orders[strategy.bid].status == "CANCELED"
    assert orders[strategy.fill].status == "FILLED"
    assert result.paper.exchange.accounts[1].orders.open_orders() == []
    position_margin = sum(p.margin for p in result.paper.exchange.accounts[1].positions.values())
    assert result.paper.exchange.accounts[1].balances["USD"].frozen == position_margin


class LateBidder(Strategy):
    """A bid every second; on_stop notes which of its orders were still unanswered."""

    def on_start(self) -> None:
        self.sent: list[str] = []
        self.answered: set[str] = set()
        self.unanswered_at_stop: list[str] = []
        self.schedule("t", 1.0)

    def on_timer(self, name: str) -> None:
        self.sent.append(
            self.submit(
                OrderIntent(pair=ETH, is_long=True, quantity=Decimal("0.01"), price=Decimal(1900))
            )
        )

    def on_order(self, update: OrderUpdate) -> None:
        self.answered.add(update.client_order_id)

    def on_stop(self) -> None:
        self.unanswered_at_stop = [c for c in self.sent if c not in self.answered]


def test_a_backtest_settles_before_on_stop_for_half_the_drain_timeout_as_live(
    tmp_path: Path, recording: Path
) -> None:
    """The first Settle ends at half of execution.drain_timeout_s in both runtimes: answers
    that take 8 s of a 10 s timeout are still out when on_stop runs, and come in the Drain."""
    text = write_config(tmp_path).read_text(encoding="utf-8")
    prices = text.split("prices_csv: ")[1].strip()
    config = parse_config(text.split("backtest:")[0] + "execution: {drain_timeout_s: 10}\n")
    settings = BacktestSettings(prices_csv=prices, paper=PaperSettings(latency_ms=8000))
    result = Backtest(
        config, recording, settings, strategies=[lambda ctx: LateBidder("late", ctx, {})]
    ).run()
    (strategy,) = result.strategies
    assert isinstance(strategy, LateBidder)
    # the newest ones (four in flight at most, 8 s each) are past the first Settle's 5 s
    unanswered = strategy.unanswered_at_stop
    assert unanswered and unanswered == strategy.sent[-len(unanswered) :]
    assert set(strategy.sent) <= strategy.answered  # the Drain answered them all


class StopBidder(Strategy):
    """Submits one bid in on_stop; records every update."""

    def on_start(self) -> None:
        self.updates: list[OrderStatus] = []
        self.cid = ""

    def on_stop(self) -> None:
        self.cid = self.submit(
            OrderIntent(pair=ETH, is_long=True, quantity=Decimal("0.01"), price=Decimal(1900))
        )

    def on_order(self, update: OrderUpdate) -> None:
        self.updates.append(update.status)


@pytest.mark.parametrize(("latency_ms", "expected"), [(50, [OrderStatus.ACCEPTED]),
                                                       (20_000, [OrderStatus.UNKNOWN])])  # fmt: skip
def test_a_batch_in_flight_at_the_end_is_answered_within_the_run(
    tmp_path: Path, recording: Path, latency_ms: int, expected: list[OrderStatus]
) -> None:
    """With no drain time left, the Drain still awaits answers up to venue.timeout_s (10 s),
    as live; a call slower than that is answered as cut in flight before run() returns,
    never later by garbage collection (it was, as AMBIGUOUS news after the report)."""
    text = write_config(tmp_path).read_text(encoding="utf-8")
    prices = text.split("prices_csv: ")[1].strip()
    config = parse_config(text.split("backtest:")[0] + "execution: {drain_timeout_s: 0}\n")
    settings = BacktestSettings(prices_csv=prices, paper=PaperSettings(latency_ms=latency_ms))
    result = Backtest(
        config, recording, settings, strategies=[lambda ctx: StopBidder("s", ctx, {})]
    ).run()
    (strategy,) = result.strategies
    assert isinstance(strategy, StopBidder)
    assert strategy.updates == expected
    gc.collect()
    assert strategy.updates == expected  # nothing arrives after the run
