"""Synthetic recordings: any number of realistic pushes and REST answers, deterministically.

The generator drives the venue twin's own exchange (:class:`framework.sim.exchange.Exchange`)
with a seeded trader: marks follow the twin's random walk, the trader sends market orders
that open, add to, reduce and close one-way positions, and every change the exchange reports
becomes the very push the twin would send (:mod:`framework.twin.wire`). The REST answers a
live node records are interleaved at their times: subscription acknowledgements and the
initial sync, a match-result poll per pair every ``poll_interval_ms`` and balance and
position snapshots every ``snapshot_interval_ms``. With ``own_orders`` the trader is the
recorded node itself: each order's batchCreate answer is recorded too.

Used by ``tests/benchmarks/bench_replay.py`` and the tests; from a shell::

    python -m framework.backtest.synth --pushes 1000000 --out /tmp/big.jsonl
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

import attrs
import orjson

from framework.recording import RecordingWriter
from framework.sim.events import BalanceChanged
from framework.sim.events import Event as TwinEvent
from framework.sim.exchange import Exchange
from framework.sim.state import PairSettings
from framework.twin import wire
from framework.twin.prices import RandomWalk
from framework.twin.settings import TwinSettings
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.requests import BALANCE_PATH, BATCH_CREATE_PATH, MATCHES_PATH, POSITIONS_PATH

__all__ = ["SynthSettings", "SynthStats", "generate", "main"]

_USER = 1
_ADDRESS = "0x" + "5" * 40
_NEWLINE = orjson.OPT_APPEND_NEWLINE


def _default_pairs() -> dict[str, PairSettings]:
    return TwinSettings().pairs


@attrs.frozen(kw_only=True)
class SynthSettings:
    """What to generate; the same settings always give the same file."""

    pushes: int = 10_000
    seed: int = 1
    start_ms: int = 1_700_000_000_000
    mean_gap_ms: float = 40.0
    tick_ms: int = 250
    max_step_ticks: int = 20
    poll_interval_ms: int = 1000
    page_size: int = 10
    snapshot_interval_ms: int = 30_000
    own_orders: bool = False
    balance: Decimal = Decimal("1000000")
    lever: int = 10
    pairs: dict[str, PairSettings] = attrs.field(factory=_default_pairs)


@attrs.define
class SynthStats:
    """What a generation wrote."""

    lines: int = 0
    pushes: int = 0
    rest: int = 0
    orders: int = 0
    first_ts: int = 0
    last_ts: int = 0


class _Generator:
    def __init__(self, settings: SynthSettings, writer: RecordingWriter) -> None:
        self.s = settings
        self.writer = writer
        self.rng = random.Random(settings.seed)
        twin = TwinSettings(pairs=settings.pairs, demo_account=False)
        self.exchange = Exchange(twin)
        self.coins = sorted({m.coin for m in self.exchange.markets.values()})
        self.exchange.open_account(_USER, _ADDRESS, dict.fromkeys(self.coins, settings.balance))
        self.walk = RandomWalk(
            {p: s.initial_price for p, s in settings.pairs.items()},
            {p: Decimal(1).scaleb(-s.rules.price_decimals) for p, s in settings.pairs.items()},
            random.Random(settings.seed + 1),
            max_step_ticks=settings.max_step_ticks,
        )
        self.pairs = sorted(settings.pairs)
        self.stats = SynthStats(first_ts=settings.start_ms)
        self.sid = 0
        self.order_seq = 0

    # ---- writing

    def ws(self, ts: int, frame: object) -> None:
        text = orjson.dumps(frame).decode()
        self.writer.write_line(
            orjson.dumps({"ts": ts, "source": "ws", "frame": text}, option=_NEWLINE)
        )
        self.stats.lines += 1
        self.stats.last_ts = ts

    def rest(self, ts: int, path: str, query: str, data: object) -> None:
        self.sid += 1
        body = orjson.dumps(wire.envelope(200, "SUCCESS", data, self.sid)).decode()
        record = {"ts": ts, "source": "rest", "path": path, "query": query, "body": body}
        self.writer.write_line(orjson.dumps(record, option=_NEWLINE))
        self.stats.lines += 1
        self.stats.rest += 1
        self.stats.last_ts = ts

    def events(self, ts: int, events: Sequence[TwinEvent]) -> None:
        for event in events:
            if isinstance(event, BalanceChanged):
                self.ws(ts, wire.account_frame(event))
            else:
                self.ws(ts, wire.position_frame(event))
            self.stats.pushes += 1

    # ---- REST answers the node would have recorded

    def poll(self, ts: int, pair: str) -> None:
        found = self.exchange.matches(
            _USER, pair, before=None, page_no=1, page_size=self.s.page_size
        )
        query = f"pageSize={self.s.page_size}&pairName={pair}"
        self.rest(ts, MATCHES_PATH, query, [wire.match_object(m) for m in found])

    def snapshots(self, ts: int) -> None:
        account = self.exchange.accounts[_USER]
        for pair in self.pairs:
            positions = [
                wire.position_object(self.exchange, account, p)
                for p in self.exchange.positions(_USER, pair)
            ]
            self.rest(ts, POSITIONS_PATH, f"pageNo=1&pageSize=100&pairName={pair}", positions)
        for coin in self.coins:
            balance = self.exchange.balance(_USER, coin)
            assert balance is not None
            self.rest(ts, BALANCE_PATH, f"symbol={coin}", wire.balance_object(_USER, balance))

    # ---- the trader

    def order(self, ts: int) -> None:
        rng = self.rng
        pair = self.pairs[rng.randrange(len(self.pairs))]
        market = self.exchange.markets[pair]
        rules = market.rules
        position = self.exchange.accounts[_USER].positions.get(pair)
        size = rules.min_quantity * rng.randint(1, 20)
        if position is None:
            is_long = rng.random() < 0.5
        else:
            # Lean towards reducing once a position is large, so positions open and close.
            grow = rng.random() < (0.55 if position.quantity < size * 5 else 0.25)
            is_long = position.is_long if grow else not position.is_long
            if is_long != position.is_long:
                size = min(size, position.quantity)
        self.order_seq += 1
        client_id = f"syn{self.order_seq:x}"
        order = OrderInput(
            client_order_id=client_id,
            is_long=is_long,
            is_market=True,
            lever=self.s.lever,
            match_type=MatchType.IOC,
            pair_name=pair,
            position_type=PositionType.ISOLATED,
            price=None,
            quantity=size,
        )
        outcome = self.exchange.submit(_USER, [order], ts, atomic=False)
        self.events(ts, outcome.events)
        self.stats.orders += 1
        if self.s.own_orders and outcome.accepted:
            data = [{"corderId": c, "orderId": o, "pairName": p} for c, o, p in outcome.accepted]
            self.rest(ts + 1, BATCH_CREATE_PATH, "", data)

    def run(self) -> SynthStats:
        s = self.s
        rng = self.rng
        ts = s.start_ms
        for pair in self.pairs:
            ack = wire.subscribe_ack(
                "api_position", success=True, msg="subscribe success", pair=pair
            )
            self.ws(ts, ack)
        for coin in self.coins:
            ack = wire.subscribe_ack(
                "api_account", success=True, msg="subscribe success", symbol=coin
            )
            self.ws(ts, ack)
        self.snapshots(ts)
        for pair in self.pairs:
            self.poll(ts, pair)
        next_tick = ts + s.tick_ms
        next_poll = ts + s.poll_interval_ms
        next_snapshot = ts + s.snapshot_interval_ms
        while self.stats.pushes < s.pushes:
            ts += max(1, int(rng.expovariate(1.0 / s.mean_gap_ms)))
            while next_tick <= ts:
                for pair, price in self.walk.step().items():
                    self.events(next_tick, self.exchange.set_mark(pair, price, next_tick))
                next_tick += s.tick_ms
            while next_poll <= ts:
                for pair in self.pairs:
                    self.poll(next_poll, pair)
                next_poll += s.poll_interval_ms
            while next_snapshot <= ts:
                self.snapshots(next_snapshot)
                next_snapshot += s.snapshot_interval_ms
            self.order(ts)
        for pair in self.pairs:
            self.poll(ts + 1, pair)
        return self.stats


def generate(path: str | Path, settings: SynthSettings | None = None) -> SynthStats:
    """Write a synthetic recording to path (gzip when it ends in .gz), replacing the file."""
    settings = settings or SynthSettings()
    target = Path(path)
    if target.exists():
        target.unlink()
    with RecordingWriter(target, append=False, flush_every=2048) as writer:
        return _Generator(settings, writer).run()


def main(argv: list[str] | None = None) -> int:
    """``python -m framework.backtest.synth --pushes N --out PATH [--seed S] [--own-orders]``."""
    defaults = SynthSettings()
    parser = argparse.ArgumentParser(description="Write a synthetic recording.")
    parser.add_argument("--out", required=True, help="output file (.jsonl or .jsonl.gz)")
    parser.add_argument("--pushes", type=int, default=defaults.pushes)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--own-orders",
        action="store_true",
        help="record batchCreate answers: the trader is the recorded node",
    )
    parser.add_argument("--poll-ms", type=int, default=defaults.poll_interval_ms)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    stats = generate(
        args.out,
        SynthSettings(
            pushes=args.pushes,
            seed=args.seed,
            own_orders=args.own_orders,
            poll_interval_ms=args.poll_ms,
        ),
    )
    elapsed = time.perf_counter() - began
    print(
        f"wrote {args.out}: {stats.lines} lines, {stats.pushes} pushes, {stats.rest} REST "
        f"answers, {stats.orders} orders, span {(stats.last_ts - stats.first_ts) / 1000:.0f} s,"
        f" in {elapsed:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
