"""The paper venue on the wall clock: what a live node in paper mode sends its orders to.

``perpframe live --paper`` (``venue: {mode: paper}``) runs the same daemon, strategies, risk,
journal and metrics; the market comes from the configured ``market:`` source, and the orders
go to :class:`WallClockPaper`, the engine's :class:`~framework.engine.venue.Venue` over the
backtest's :class:`~framework.backtest.paper.PaperVenue` account (through its public methods
only, so the fill and latency models built there plug in unchanged):

* Market: every market record the node hears is handed to the strategies, then to
  ``PaperVenue.on_market`` (:meth:`WallClockPaper.feeding`), as a backtest does: from the
  first book or trade on, market orders walk the latest book and resting orders fill when a
  trade reaches their price; a polled mark moves the mark (liquidations).
* Orders: a batch reaches the paper account a latency after it is sent (``venue.paper``:
  ``latency_ms``, a ``latency`` model or a ``fill_model`` file's, drawn per batch), on the
  wall clock. The pushes a call makes (its fills, a cancel's release) are
  delivered right after its answer reached the engine, as live; those the market makes (a
  resting order filled by a trade) at once.
* Pushes and matches: positions and balances as the records the stream decodes, into the
  node's intake; matches are read by the node's own match poller, on its configured
  interval, from the paper account's match list (what ``take_matches`` collects for a
  backtest's report is dropped here, as are its fills' copies beyond :data:`KEEP`: a
  daemon's memory stays flat).

No API key is needed for it: nothing is signed (:class:`NoSigner` stands in when the config
has none; only the market's WebSocket subscribes would need one).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import anyio

from framework.backtest.paper import PaperSettings, PaperVenue
from framework.backtest.prices import PriceTrack
from framework.backtest.sim_venue import SimVenue
from framework.config import Config
from framework.engine.cancels import CancelAnswer, CancelBatch
from framework.venue.errors import ConfigError
from framework.venue.market import Bar, Book, IndexPrice, MarketRecord, MarkPrice, Trade
from framework.venue.models import (
    AccountBalance,
    AccountPush,
    MatchRecord,
    OrderInput,
    OrderResult,
    Position,
    PositionPush,
)
from framework.venue.order_management import OrderRecord
from framework.yaml_attrs import ConfigProblems, structure

__all__ = ["KEEP", "NoSigner", "WallClockPaper", "paper_settings"]

log = logging.getLogger("framework.paper")

KEEP: Final = 1000
"""Copies of fills and position changes the paper account keeps for a report (a backtest's);
a daemon keeps at most this many of each."""
_MARKET: Final = frozenset({Trade, Book, Bar, MarkPrice, IndexPrice})


def paper_settings(
    raw: Mapping[str, Any], *, at: tuple[str, ...] = ("venue", "paper")
) -> PaperSettings:
    """``venue.paper`` (or the section at ``at``) as PaperSettings; ConfigError naming the key."""
    try:
        return structure(dict(raw), PaperSettings, at=at)
    except ConfigProblems as exc:
        raise ConfigError("; ".join(exc.problems)) from None


class NoSigner:
    """The signer of a paper node without an API secret: nothing it sends needs one."""

    def __init__(self, sign_type: int) -> None:
        self._sign_type = sign_type

    @property
    def sign_type(self) -> int:
        """The configured sign type (nothing is signed with it)."""
        return self._sign_type

    def sign(self, text: str) -> str:
        """Refuse: a paper node without venue.api_secret signs nothing."""
        raise ConfigError("paper mode without venue.api_secret: this request must be signed")


class WallClockPaper:
    """The paper venue as the engine's Venue, on the wall clock (see the module)."""

    def __init__(
        self,
        config: Config,
        *,
        deliver: Callable[[PositionPush | AccountPush], None],
        now_ms: Callable[[], int],
        settings: PaperSettings | None = None,
    ) -> None:
        self.settings = settings if settings is not None else paper_settings(config.venue.paper)
        self.paper = PaperVenue(
            self.settings,
            rules=config.pairs,
            track=PriceTrack(()),  # no track: prices come from the market heard
            deliver=deliver,
            now_ms=now_ms,
            coins={pair: config.settle_coin(pair) for pair in config.pairs},
        )
        self._now_ms = now_ms

        def never(at: int, then: Callable[[], None]) -> None:  # reads never wait
            raise RuntimeError("the wall-clock paper venue schedules nothing")

        self._reads = SimVenue(self.paper, now_ms=now_ms, schedule=never)

    def __repr__(self) -> str:
        return f"WallClockPaper(pairs={list(self.paper.exchange.markets)})"

    def describe(self) -> dict[str, object]:
        """What the log's start line says of the paper venue."""
        s = self.settings
        return {
            "fill_rule": self.paper.fill_rule.describe(),
            "latency": self.paper.latency.describe(),
            "maker_fee": str(s.maker_fee),
            "taker_fee": str(s.taker_fee),
            "balances": {c: str(b) for c, b in self.paper.initial.items()},
        }

    # ---- the market

    def on_market(self, record: MarketRecord) -> None:
        """A market record the node heard: the paper account's market moves (fills, marks)."""
        self.paper.on_market(record)
        self._trim()

    def feeding(self, then: Callable[[Any], None]) -> Callable[[Any], None]:
        """An intake that hands each record to then, and a market record to the paper account
        after it: the strategies hear a trade before the fills it makes (as the venue sends
        them, and as a backtest replays them); an order sent from the hook meets the book the
        record brought (it reaches the paper account later, on the loop)."""
        on_market, market = self.on_market, _MARKET

        def intake(record: Any) -> None:
            then(record)
            if type(record) in market:
                on_market(record)

        return intake

    # ---- Venue: orders

    def send_batch(self, orders: Sequence[OrderInput]) -> Awaitable[list[OrderResult]]:
        """The batch, placed when it reaches the paper account (a latency draw from now)."""
        return self._create(list(orders))

    async def _create(self, orders: list[OrderInput]) -> list[OrderResult]:
        delay = self.paper.arrival_delay_ms()  # the constant, or a draw of the model
        if delay:
            await anyio.sleep(delay / 1000)
        paper = self.paper
        paper.hold_pushes()
        try:
            return paper.batch_create(orders, self._now_ms())
        finally:
            self._release_soon()

    async def cancel(self, batch: CancelBatch) -> dict[int | str, CancelAnswer]:
        """Cancel paper orders (the twin's rules); their pushes follow the answer."""
        self.paper.hold_pushes()
        try:
            return await self._reads.cancel(batch)
        finally:
            self._release_soon()

    async def cancel_all(
        self, pair: str | None = None, is_long: bool | None = None
    ) -> tuple[int, ...] | None:
        """Cancel every open paper order (of pair, of one side); the pushes follow."""
        self.paper.hold_pushes()
        try:
            return await self._reads.cancel_all(pair, is_long)
        finally:
            self._release_soon()

    def _release_soon(self) -> None:
        """Deliver the held pushes once the caller has handled the answer (next loop turn)."""
        asyncio.get_running_loop().call_soon(self._release)

    def _release(self) -> None:
        self.paper.release_pushes()
        self._trim()

    def _trim(self) -> None:
        """Keep the copies a backtest's report reads bounded (see the module)."""
        paper = self.paper
        paper.take_matches()  # the match poll reads the account's own (bounded) list
        if len(paper.fills) > KEEP:
            del paper.fills[:-KEEP]
        for changes in paper.positions.values():
            if len(changes) > KEEP:
                del changes[:-KEEP]

    # ---- Venue: reads, as a RestClient decodes them from the twin

    async def warm_up(self) -> None:
        """Nothing to open: the paper account is in-process."""

    async def all_open_orders(self, pair: str) -> list[OrderRecord]:
        """Every open paper order of pair."""
        return await self._reads.all_open_orders(pair)

    async def query_order(self, entrust_id: int) -> OrderRecord:
        """A paper order's record; 2340 when unknown."""
        return await self._reads.query_order(entrust_id)

    async def positions(
        self, pair: str, page_no: int | None = None, page_size: int | None = None
    ) -> list[Position]:
        """One page of the paper positions of pair."""
        return await self._reads.positions(pair, page_no, page_size)

    async def balance(self, symbol: str) -> AccountBalance:
        """The paper balance of one coin."""
        return await self._reads.balance(symbol)

    async def matches(
        self,
        pair: str,
        match_id: int | None = None,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> list[MatchRecord]:
        """One page of the paper matches of pair, newest first (what a match poll reads)."""
        return await self._reads.matches(pair, match_id, page_no, page_size)
