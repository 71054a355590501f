"""The paper venue: the backtest's orders filled at the recording's prices, with the twin's rules.

Matching is the simulated exchange the venue twin serves
(:class:`framework.sim.exchange.Exchange`), so a paper order meets exactly the twin's pre-trade
checks and codes (:func:`framework.venue.rules.check_order` first, then balance, 2305/2306,
2310, 2318), its margin, fee and PnL arithmetic, resting GTC orders, POST_ONLY and
liquidations. What the paper venue adds is where prices come from and how results reach the
strategies:

* Prices: a :class:`PriceTrack` of points found in the recording (match averagePrice at the
  match's time, the openingPrice of NEW position pushes) or read from a CSV file. Each point
  becomes the pair's mark at its time (resting orders fill, positions may be liquidated).
  An order is priced, per ``fill_price``, at the first point at or after its time (``next``,
  the default: the price a live order sent then would have met; at most ``max_wait_ms``
  ahead) or at the last point before it (``last``: no look-ahead at all). Market orders fill
  at that mark moved by ``slippage`` against the taker (0 by default: prices found in a
  recording are trade prices, which already carry the slippage their takers paid; set it
  for a CSV track of marks), limit orders never beyond their limit. A pair with no price yet refuses orders with 2331 (no market predict price).
* With market data (:meth:`PaperVenue.on_market`), a pair's fills follow its recorded books
  and trades from its own first book or trade on (other pairs keep their price track) by the
  fill rule (``fill_rule``: touch, through or queue,
  :mod:`framework.sim.fill_model`).
  An order reaches the account after its latency, a draw of the latency model
  (``latency_ms``, ``latency`` or the ``fill_model`` file; :meth:`PaperVenue.arrival_delay_ms`)
  from the seeded generator passed in.
* Results: the batch answer goes back to the execution engine (accepted orders, or the
  whole-call refusal, as the twin answers in ``partial`` batch mode); every position and
  balance change becomes the record a client decodes from the push the twin would send
  (:mod:`framework.sim.events`), routed through the same portfolio and bus as recorded pushes, those a call makes itself (a
  batch's fills, a cancel's release) after its answer (live, the call's answer usually
  comes before the stream's pushes); matches
  wait for the next virtual match poll, as live. Paper ids (order, position, match, logId) start
  above :data:`PAPER_ID_BASE` so they never meet the recording's.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Final

import attrs

from framework.backtest.paper_settings import PaperSettings
from framework.backtest.prices import PriceTrack
from framework.engine.cancels import CancelAnswer
from framework.engine.clock import datetime_of_ms
from framework.engine.market import MarketView
from framework.fill_model_file import load_fill_model
from framework.sim.events import BalanceChanged, Event
from framework.sim.exchange import CANCEL_MESSAGES, Exchange
from framework.sim.fill_model import FillModel
from framework.sim.history import OrderRecord as SimOrder
from framework.sim.records import (
    account_push,
    match_record,
    position_push,
)
from framework.sim.state import ExchangeSettings, FeeSettings, PairSettings
from framework.venue.errors import error_for, render_message
from framework.venue.market import Book, MarketRecord, MarkPrice, Trade
from framework.venue.models import (
    AccountPush,
    MatchRecord,
    OrderInput,
    OrderResult,
    PositionPush,
)
from framework.venue.rules import PairRules, settle_coin_of

__all__ = [
    "NO_PRICE",
    "PAGE_SIZE",
    "PAPER_ID_BASE",
    "PAPER_USER",
    "Fill",
    "PaperSettings",
    "PaperVenue",
    "PriceTrack",
]

log = logging.getLogger("framework.paper")

PAPER_ID_BASE: Final = 10**12
"""Every id the paper venue makes (orders, positions, matches, logIds) is above it."""

NO_PRICE: Final = 2331
"""The venue's code for 'Market predict price was not obtained': no price known yet."""

PAPER_USER: Final = 1
"""The paper account's user id on its exchange."""
PAGE_SIZE: Final = 20
"""The venue's default page size (open orders, positions, matches)."""
"""The lists' pageSize when none is given (the twin's default_page_size)."""
_ZERO: Final = Decimal(0)


# ------------------------------------------------------------------------------ venue


def _book_price(book: Book) -> Decimal | None:
    """A book's price: its mid, else the best price of its only side (None when empty)."""
    bid, ask = book.best_bid, book.best_ask
    if bid is None or ask is None:
        return ask if bid is None else bid
    return (bid + ask) / 2


class _MsClock:
    """The clock of a now_ms callable (the paper venue's own read model's)."""

    __slots__ = ("now_ms",)

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self.now_ms = now_ms

    def now(self) -> datetime:
        """The current time."""
        return datetime_of_ms(self.now_ms())


@attrs.frozen(slots=True)
class Fill:
    """One paper fill, for the report."""

    ts: int
    pair: str
    is_long: bool
    quantity: Decimal
    price: Decimal
    fee: Decimal
    profit_loss: Decimal
    is_taker: bool
    is_close: bool
    order_id: int


class PaperVenue:
    """The backtest's account on the twin's exchange, priced by a PriceTrack."""

    def __init__(
        self,
        settings: PaperSettings,
        *,
        rules: Mapping[str, PairRules],
        track: PriceTrack,
        deliver: Callable[[PositionPush | AccountPush], None],
        now_ms: Callable[[], int],
        coins: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
        model: FillModel | None = None,
    ) -> None:
        """rng draws the latency (seeded by the caller; None: seed 0); model is the
        ``fill_model`` file's content (None: read from settings.fill_model when set)."""
        if model is None and settings.fill_model:
            model = load_fill_model(settings.fill_model)
        self.fill_rule = settings.rule(model)
        """The rule resting orders fill by on the recorded trades."""
        self.latency = settings.latency_settings(model)
        """The latency model: how long an order takes to reach the paper account."""
        self._latency = self.latency.build()
        self._rng = rng if rng is not None else random.Random(0)
        self.settings = settings
        self.track = track
        self._deliver = deliver
        self._holding = False
        self._held: list[PositionPush | AccountPush] = []
        self._now_ms = now_ms
        self.coin_of = {p: (coins or {}).get(p) or settle_coin_of(p, r) for p, r in rules.items()}
        coin_ids = {c: i + 1 for i, c in enumerate(sorted(set(self.coin_of.values())))}
        pairs = {
            pair: PairSettings(
                # Unseen until the pair's first price is applied: a track not yet read stays so.
                initial_price=(track.first(pair) if track.loaded else None) or Decimal(1),
                contract_pair_id=i + 1,
                settle_decimals=settings.settle_decimals,
                rules=attrs.evolve(r, settle_coin=self.coin_of[pair]),
            )
            for i, (pair, r) in enumerate(rules.items())
        }
        self.exchange = Exchange(
            ExchangeSettings(
                pairs=pairs,
                coins=coin_ids,
                fees=FeeSettings(maker=settings.maker_fee, taker=settings.taker_fee),
                slippage=settings.slippage,
                maintenance_margin_rate=settings.maintenance_margin_rate,
            ),
            id_base=PAPER_ID_BASE,
            fill_rule=self.fill_rule,
        )
        self.initial = {
            coin: settings.balances.get(coin, settings.default_balance) for coin in coin_ids
        }
        self.exchange.open_account(PAPER_USER, None, self.initial)
        self._priced: set[str] = set()
        self._schedule: Callable[[int, Callable[[], None]], None] | None = None
        self._feed_at = 0
        self._parked = False
        self._seen_matches: dict[str, int] = {}
        self._pending: list[MatchRecord] = []
        self.fills: list[Fill] = []
        self.positions: dict[str, list[tuple[int, Decimal]]] = {p: [] for p in rules}
        self.refusals: dict[int, int] = {}
        self.on_fill: Callable[[Fill], None] | None = None
        self.changes = 0
        """How many times the paper account changed (orders, fills, marks of what is held)."""
        self.market_pairs: set[str] = set()
        """The pairs a recorded book or trade came for: their fills follow the recorded market,
        their marks are the recorded ones (else its book's mid and trades), the track is unused
        for them. Other pairs keep their price track."""
        self._marked: set[str] = set()  # pairs with a recorded mark price
        self._view = MarketView(_MsClock(now_ms))
        """The market heard (fed by on_market until read_market gives the owner's)."""
        self._own_view = True
        self._caught: dict[str, tuple[object, object, object]] = {}  # see _read_market
        self._books: dict[str, Book] = {}  # per pair: the book last handed to the exchange
        self.on_change: Callable[[], None] | None = None
        """Called when the paper account is about to change (an order, a fill, a mark)."""

    @property
    def market_fills(self) -> bool:
        """True once a recorded book or trade came for some pair (see market_pairs)."""
        return bool(self.market_pairs)

    # ---- prices

    def start_prices(self, schedule: Callable[[int, Callable[[], None]], None]) -> None:
        """Apply the track's points at their times, through schedule(ms, callback).

        schedule must run a point before anything else booked for its ms. The feed parks
        while nothing rests and nothing is held (a point would change only the mark then):
        a mark read meanwhile is the track's last price at that time, and the feed comes
        back at the first point after the order that made the venue busy.
        """
        self._schedule = schedule
        self._feed_at = 0
        self._arm()

    @property
    def idle(self) -> bool:
        """True when no paper order rests and no paper position is open."""
        return all(not m.book and not m.holders for m in self.exchange.markets.values())

    def _arm(self) -> None:
        if self._schedule is None:
            return
        if self.idle:
            self._parked = True
            return
        self._parked = False
        rows = self.track.rows
        if self._feed_at < len(rows):
            self._schedule(rows[self._feed_at][0], self._feed)

    def _feed(self) -> None:
        rows, now, at = self.track.rows, self._now_ms(), self._feed_at
        while at < len(rows) and rows[at][0] <= now:
            ts, pair, price = rows[at]
            if pair not in self.market_pairs:
                self.apply_price(pair, price, ts)
            at += 1
        self._feed_at = at
        self._arm()

    def _resume(self, now: int) -> None:
        """After an order placed while parked: the feed goes on from the first point after now."""
        self._feed_at = self.track.first_after(now)
        self._arm()

    def _catch_up(self, pair: str, now: int) -> None:
        if pair in self.market_pairs:
            return
        price = self.track.last_at(pair, now)
        if price is not None:
            self.apply_price(pair, price, now)

    def apply_price(self, pair: str, price: Decimal, ts: int) -> None:
        """A price point of the track is reached: it becomes the pair's mark."""
        market = self.exchange.markets.get(pair)
        if market is None:
            return
        self._priced.add(pair)
        if market.mark == price:
            return
        if not market.book and not market.holders:
            # Nothing rests and nothing is held on the pair: the mark is all that changes
            # (what set_mark would do, without its book and liquidation passes).
            market.mark = price
            return
        self._emit(self.exchange.set_mark(pair, price, ts), ts)

    def read_market(self, view: MarketView) -> None:
        """Read idle pairs' market from view from now on, which its owner feeds every record
        (the replay's read model): records of idle pairs need not reach :meth:`on_market`,
        and while the account is :attr:`idle` a replay leaves them all out."""
        self._view, self._own_view = view, False
        self._caught.clear()

    def on_market(self, record: MarketRecord) -> None:
        """A recorded market record: from a pair's first book or trade on, its fills follow them.

        A book is what market orders walk (never better than its best price; what it cannot
        fill is left unfilled), a trade fills the resting orders it trades through (at their
        limit, as maker); a mark moves the mark (liquidations), and fills nothing then. The
        exchange's rule (:mod:`framework.sim.market_fills`) is the twin's with its market on.
        A pair where nothing rests and nothing is held is idle: its records change nothing
        but its book and mark, which are read from the read model when needed (_read_market).
        """
        pair = record.pair
        market = self.exchange.markets.get(pair)
        if market is None:
            return
        if self._own_view:
            self._view.apply(record)
        kind = type(record)
        if kind is MarkPrice:
            self._marked.add(pair)
            self.apply_price(pair, record.price, self._now_ms())  # type: ignore[union-attr]
            return
        if kind is not Book and kind is not Trade:
            return  # an index price or a bar: no fill, no mark
        if pair not in self.market_pairs:
            self._follow(pair)
        if not market.book and not market.holders:
            return  # idle: read when needed
        now = self._now_ms()
        if kind is Book:
            self.exchange.set_book(pair, record)  # type: ignore[arg-type]
            self._books[pair] = record  # type: ignore[assignment]
            price = _book_price(record)  # type: ignore[arg-type]
        else:
            self._emit(self.exchange.market_trades(pair, (record,), now), now)  # type: ignore[arg-type]
            price = record.price  # type: ignore[union-attr]
        if price is not None and pair not in self._marked:  # no recorded mark: the market's
            self.apply_price(pair, price, now)

    def _follow(self, pair: str) -> None:
        self.market_pairs.add(pair)
        self.exchange.follow_market(pair)
        log.info("market data heard for %s: its paper fills follow them", pair)

    def read_all(self) -> None:
        """Bring every idle pair's book and mark up to the market heard (before an order, and
        at the end of a replay)."""
        for pair in self.exchange.markets:
            self._read_market(pair)

    def _read_market(self, pair: str) -> None:
        """An idle pair's book and mark as the market heard makes them: the latest book is
        what an order walks; the mark is the latest recorded mark, else the latest trade's
        price or the latest book's (its mid; the best price of its only side), whichever was
        heard later (in the same ms, the trade's)."""
        market = self.exchange.markets.get(pair)
        if market is None or market.book or market.holders:
            return  # not idle: every record of the pair was heard (on_market)
        view = self._view
        book, trade, marked = view.book(pair), view.trade(pair), view.mark(pair)
        seen = self._caught.get(pair)
        if seen is not None and seen[0] is book and seen[1] is trade and seen[2] is marked:
            return
        self._caught[pair] = (book, trade, marked)
        if (book is not None or trade is not None) and pair not in self.market_pairs:
            self._follow(pair)
        if book is not None and book is not self._books.get(pair):
            # A new book heard: what orders walk. The one handed over before stays as the
            # orders since left it (the levels they took are taken until a book comes).
            market.quotes = self._books[pair] = book
        price = marked
        if price is not None:
            self._marked.add(pair)
        elif pair not in self._marked:
            if book is not None and (
                trade is None
                or (view.heard_at(pair, Book) or 0) > (view.heard_at(pair, Trade) or 0)
            ):
                price = _book_price(book)
            if price is None and trade is not None:
                price = trade.price
        if price is not None:
            self.apply_price(pair, price, self._now_ms())

    def mark(self, pair: str) -> Decimal | None:
        """The pair's current mark, None before its first price."""
        self._read_market(pair)
        if self._parked:
            self._catch_up(pair, self._now_ms())
        market = self.exchange.markets.get(pair)
        return market.mark if market is not None and pair in self._priced else None

    def _reference(self, pair: str, now: int) -> Decimal | None:
        s = self.settings
        if s.fill_price == "next" and pair not in self.market_pairs:
            price = self.track.next_at(pair, now, s.max_wait_ms)
            if price is not None:
                return price
        return self.mark(pair)

    # ---- orders

    def arrival_delay_ms(self) -> int:
        """How long an order sent now takes to reach the paper account (one latency draw)."""
        return self._latency.sample(self._rng)

    def batch_create(self, orders: Sequence[OrderInput], now: int) -> list[OrderResult]:
        """Place a batch; the accepted orders' results, or the whole-call refusal raised."""
        self._changed()
        self.read_all()  # every idle pair's book and mark as they are now, before the orders
        parked = self._parked
        if parked:  # every mark becomes what the feed would have made it by now
            self._parked = False
            for pair in self.exchange.markets:
                self._catch_up(pair, now)
        try:
            return self._place(orders, now)
        finally:
            if parked:
                self._resume(now)

    def hold_pushes(self) -> None:
        """From now on, the pushes a call makes itself (its fills, a cancel's release) wait
        for :meth:`release_pushes`: the caller delivers the call's answer first, as live,
        where a call's answer usually comes before the stream's pushes of what it did."""
        self._holding = True

    def release_pushes(self) -> None:
        """Deliver the held pushes, in order, and stop holding."""
        self._holding = False
        held, self._held = self._held, []
        deliver = self._deliver
        for push in held:
            deliver(push)

    def _place(self, orders: Sequence[OrderInput], now: int) -> list[OrderResult]:
        refusals: dict[int, tuple[int, str]] = {}
        placeable: list[tuple[int, OrderInput]] = []
        for index, order in enumerate(orders):
            pair = order.pair_name
            if pair not in self.exchange.markets:
                refusals[index] = (2001, render_message(2001, "pairName"))
                continue
            price = self._reference(pair, now)
            if price is None:
                refusals[index] = (NO_PRICE, render_message(NO_PRICE))
                continue
            self._priced.add(pair)
            if self.exchange.markets[pair].mark != price:
                self._emit(self.exchange.set_mark(pair, price, now), now)
            placeable.append((index, order))
        outcome = self.exchange.submit(PAPER_USER, [o for _, o in placeable], now, atomic=False)
        for position, code, msg in outcome.refusals:
            refusals[placeable[position][0]] = (code, msg)
        for code, _ in refusals.values():
            self.refusals[code] = self.refusals.get(code, 0) + 1
        self._emit(outcome.events, now, own=True)
        if not outcome.accepted:
            code, msg = refusals[min(refusals)]
            raise error_for(code, msg)
        return [
            OrderResult(client_order_id=cid, order_id=oid, pair_name=pair)
            for cid, oid, pair in outcome.accepted
        ]

    def cancel(self, order_ids: Sequence[int], now: int) -> dict[int | str, CancelAnswer]:
        """Cancel paper orders by id with the twin's rules (2340 unknown, 2341 completed)."""
        self._changed()
        orders = self.exchange.accounts[PAPER_USER].orders
        return {oid: self._cancel(orders.get(oid), now) for oid in order_ids}

    def cancel_by_client_id(self, client_order_id: str, now: int) -> CancelAnswer:
        """Cancel a paper order by its clientOrderId (the twin's rules)."""
        self._changed()
        return self._cancel(
            self.exchange.accounts[PAPER_USER].orders.by_client_id(client_order_id), now
        )

    def _cancel(self, record: SimOrder | None, now: int) -> CancelAnswer:
        code, events = self.exchange.cancel_order(record, now)
        if record is None or code != 200:
            return CancelAnswer(code, CANCEL_MESSAGES[code])
        self._emit(events, now, own=True)
        return CancelAnswer(200, "", record.filled, record.order_id)

    def cancel_all(self, pair: str | None, is_long: bool | None, now: int) -> tuple[int, ...]:
        """Cancel every open paper order (of pair, of one side): the ids, ascending."""
        self._changed()
        cancelled, events = self.exchange.cancel_all(PAPER_USER, pair, is_long, now)
        self._emit(events, now, own=True)
        return tuple(cancelled)

    def _changed(self) -> None:
        self.changes += 1
        if self.on_change is not None:
            self.on_change()

    def take_matches(self) -> list[MatchRecord]:
        """The paper matches made since the last call (what a match poll finds), oldest first."""
        out, self._pending = self._pending, []
        return out

    # ---- changes -> pushes, matches, ledger

    def _emit(self, events: list[Event], now: int, *, own: bool = False) -> None:
        """Deliver the pushes of events (own: made by the call itself, held while holding)."""
        if not events:
            return
        self._changed()
        deliver = self._held.append if own and self._holding else self._deliver
        for event in events:
            if isinstance(event, BalanceChanged):
                deliver(account_push(event))
            else:
                quantity = event.current_quantity if event.is_long else -event.current_quantity
                self.positions.setdefault(event.pair, []).append((now, quantity))
                deliver(position_push(event))
        self._collect_matches()

    def _collect_matches(self) -> None:
        account = self.exchange.accounts[PAPER_USER]
        for pair, found in account.matches.items():
            # end counts every match ever made on the pair; the twin keeps only the newest
            # (match_history_limit), so the new ones are the last end - seen kept.
            seen = self._seen_matches.get(pair, 0)
            end = found.end
            if end <= seen:
                continue
            self._seen_matches[pair] = end
            for match in found[max(len(found) - (end - seen), 0) :]:
                self._pending.append(match_record(match))
                fill = Fill(
                    match.time_ms,
                    pair,
                    match.is_long,
                    match.quantity,
                    match.price,
                    match.fee,
                    match.profit_loss,
                    match.is_taker,
                    match.is_close,
                    match.order_id,
                )
                self.fills.append(fill)
                if self.on_fill is not None:
                    self.on_fill(fill)

    # ---- valuation

    def equity(self) -> dict[str, Decimal]:
        """Per coin: available + frozen + unrealized PnL at the current marks."""
        exchange = self.exchange
        account = exchange.accounts[PAPER_USER]
        out = {coin: b.available + b.frozen for coin, b in account.balances.items()}
        for position in account.positions.values():
            coin = self.coin_of[position.pair]
            out[coin] = out.get(coin, _ZERO) + exchange.unrealized_pnl(position)
        return out

    def unrealized(self) -> dict[str, Decimal]:
        """Per pair: the unrealized PnL of the open paper position at the current mark."""
        account = self.exchange.accounts[PAPER_USER]
        return {p: self.exchange.unrealized_pnl(pos) for p, pos in account.positions.items()}

    def open_positions(self) -> dict[str, Decimal]:
        """Per pair: the signed quantity of the open paper position."""
        account = self.exchange.accounts[PAPER_USER]
        return {
            p: pos.quantity if pos.is_long else -pos.quantity
            for p, pos in account.positions.items()
        }
