"""The shadow: live trading with a paper venue beside it, every order placed on both.

:class:`ShadowVenue` is the engine's :class:`~framework.engine.venue.Venue` in shadow mode
(``perpframe live --shadow``, ``shadow: {enabled: true}``). It hands every call to the live
venue first and unchanged, and returns the live answer: the shadow never sends, delays or
changes a live order. Only after the live request was written does it place the same orders
(same clientOrderIds, the same send time) on an in-process paper venue
(:class:`~framework.paper.venue.WallClockPaper`, its own latency and fill model, fed the
same market records as the strategies), on the next turn of the loop; a live cancel is
repeated on paper by clientOrderId the same way. The paper account's pushes and match list
go nowhere but the shadow: strategies, risk, journal and metrics see the live venue only.

What each side did reaches the ledger (:class:`~framework.shadow.compare.Shadow`):

* live: the engine's events on the bus (:meth:`ShadowVenue.follow`): an OrderUpdate's
  refusal (REJECTED, its code), end (CANCELED, FILLED) or doubt (AMBIGUOUS, LOST: the live
  side stays unknown; a fill is never guessed), and each match the engine bound to one of
  its orders (MatchFilled naming a clientOrderId; its time the venue's createTimeStamp);
* paper: the batch's answer (accepted orders, refusals of the whole call or of orders left
  out of the answer), each paper fill (PaperVenue.on_fill, bound by the paper orderId), and
  the end of orders that do not rest (market, IOC, FOK: done once placed).

A summary line per pair is logged every ``summary_every_s`` and at stop; an alarm (a
WARNING, and the metric) when a pair's summary leaves a band; ``shadow.html`` at stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

from framework.config import Config
from framework.engine.bus import Bus
from framework.engine.cancels import CancelAnswer, CancelBatch
from framework.engine.events import MatchFilled, OrderUpdate
from framework.engine.intents import OrderStatus
from framework.engine.open_orders import VenueOrder
from framework.engine.venue import Venue
from framework.paper.venue import WallClockPaper
from framework.shadow.compare import Bands, Shadow, Summary
from framework.venue.errors import FrameworkError
from framework.venue.models import (
    AccountBalance,
    MatchRecord,
    MatchType,
    OrderInput,
    OrderResult,
    Position,
)

__all__ = ["LEFT_OUT", "ShadowCollector", "ShadowVenue", "open_shadow"]

log = logging.getLogger("framework.shadow")

LEFT_OUT: Final = -1
"""The code a side's refusal is given when the answer left the order out without one."""
_RESTS: Final = frozenset({MatchType.GTC, MatchType.POST_ONLY})
_ENDS: Final = frozenset({OrderStatus.CANCELED, OrderStatus.FILLED})
_DOUBT: Final = frozenset({OrderStatus.AMBIGUOUS, OrderStatus.LOST})


class ShadowVenue:
    """The live venue, with every order and cancel repeated on a paper venue beside it."""

    def __init__(
        self,
        live: Venue,
        paper: WallClockPaper,
        ledger: Shadow,
        *,
        now_ms: Callable[[], int],
    ) -> None:
        self.live = live
        self.paper = paper
        self.ledger = ledger
        self._now_ms = now_ms
        self._coid_of: dict[int, str] = {}
        """Paper orderId -> clientOrderId (bounded with the ledger's open orders)."""
        self._early: dict[int, list[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        paper.paper.on_fill = self._paper_fill

    def __repr__(self) -> str:
        return f"ShadowVenue(live={self.live!r}, paper={self.paper!r})"

    # ---- reads: the live venue's

    def all_open_orders(self, pair: str) -> Awaitable[Sequence[VenueOrder]]:
        """The live venue's open orders."""
        return self.live.all_open_orders(pair)

    def query_order(self, entrust_id: int) -> Awaitable[VenueOrder | None]:
        """One live order."""
        return self.live.query_order(entrust_id)

    def positions(
        self, pair: str, page_no: int | None = None, page_size: int | None = None
    ) -> Awaitable[list[Position]]:
        """The live positions."""
        return self.live.positions(pair, page_no, page_size)

    def balance(self, symbol: str) -> Awaitable[AccountBalance]:
        """The live balance."""
        return self.live.balance(symbol)

    def matches(
        self,
        pair: str,
        match_id: int | None = None,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> Awaitable[list[MatchRecord]]:
        """The live match list."""
        return self.live.matches(pair, match_id, page_no, page_size)

    def warm_up(self) -> Awaitable[None]:
        """The live order path's warm-up."""
        return self.live.warm_up()

    # ---- live first, then paper

    def send_batch(self, orders: Sequence[OrderInput]) -> Awaitable[list[OrderResult]]:
        """Send live (now, unchanged); then place the same orders on paper, next loop turn."""
        answer = self.live.send_batch(orders)  # raises at once when nothing left: no shadow
        now = self._now_ms()
        batch = list(orders)
        for order in batch:
            self.ledger.sent(
                order.client_order_id, order.pair_name, order.is_long, order.quantity, now
            )
        asyncio.get_running_loop().call_soon(self._spawn, self._place(batch))
        return answer

    async def cancel(self, batch: CancelBatch) -> dict[int | str, CancelAnswer]:
        """Cancel live; then the same orders on paper, by clientOrderId."""
        answer = await self.live.cancel(batch)
        coids = [c for c in batch.client_order_ids if c in self.ledger.open]
        if coids:
            self._cancel_paper(coids)
        return answer

    async def cancel_all(
        self, pair: str | None = None, is_long: bool | None = None
    ) -> tuple[int, ...] | None:
        """Cancel every open order live; then on paper."""
        answer = await self.live.cancel_all(pair, is_long)
        now = self._now_ms()
        for order_id in self.paper.paper.cancel_all(pair, is_long, now):
            coid = self._coid_of.get(order_id)
            if coid is not None:
                self.ledger.ended("paper", coid, now)
        return answer

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _place(self, orders: list[OrderInput]) -> None:
        ledger = self.ledger
        try:
            results = await self.paper.send_batch(orders)
        except FrameworkError as exc:
            code = getattr(exc, "code", None) or LEFT_OUT
            for order in orders:
                ledger.answered("paper", order.client_order_id, code, self._now_ms())
            return
        except Exception:  # the shadow must never take the node down
            log.exception("shadow: the paper venue failed placing a batch")
            return
        now = self._now_ms()
        placed = {r.client_order_id: r.order_id for r in results}
        for order in orders:
            coid = order.client_order_id
            order_id = placed.get(coid)
            if order_id is None:
                ledger.answered("paper", coid, LEFT_OUT, now)
                continue
            self._coid_of[order_id] = coid
            ledger.answered("paper", coid, None, now)
            for fill in self._early.pop(order_id, ()):
                self._paper_fill(fill)
            if order.is_market or order.match_type not in _RESTS:
                ledger.ended("paper", coid, now)  # it does not rest: done once placed
        self._forget()

    def _cancel_paper(self, coids: list[str]) -> None:
        """The paper orders of coids canceled (each ends there, canceled or already done)."""
        paper, now = self.paper.paper, self._now_ms()
        for coid in coids:
            paper.cancel_by_client_id(coid, now)
            self.ledger.ended("paper", coid, now)

    def _paper_fill(self, fill: Any) -> None:
        coid = self._coid_of.get(fill.order_id)
        if coid is None:  # filled while being placed: bound once the answer names it
            if len(self._early) < 10_000:
                self._early.setdefault(fill.order_id, []).append(fill)
            return
        self.ledger.filled(
            "paper",
            coid,
            price=fill.price,
            quantity=fill.quantity,
            fee=fill.fee,
            pnl=fill.profit_loss,
            taker=fill.is_taker,
            at=fill.ts,
        )

    def _forget(self) -> None:
        """Drop the paper ids of orders the ledger no longer compares (bounded memory)."""
        if len(self._coid_of) > 2 * max(len(self.ledger.open), 1000):
            open_ = self.ledger.open
            self._coid_of = {i: c for i, c in self._coid_of.items() if c in open_}

    # ---- the live side, from the engine's events

    def follow(self, bus: Bus) -> None:
        """Hear the live side's outcomes on the bus (as the node's counters do)."""
        bus.subscribe(OrderUpdate, self._live_update)
        bus.subscribe(MatchFilled, self._live_match)

    def _live_update(self, update: OrderUpdate) -> None:
        now = self._now_ms()
        coid = update.client_order_id
        if update.status is OrderStatus.REJECTED:
            self.ledger.answered("live", coid, update.code or LEFT_OUT, now)
        elif update.status is OrderStatus.ACCEPTED:
            self.ledger.answered("live", coid, None, now)
        elif update.status in _DOUBT:
            self.ledger.unknown(coid, now)
        elif update.status in _ENDS:
            # After the event being dispatched: the matches that made it FILLED are
            # published right after this update, and must count before the order closes.
            asyncio.get_running_loop().call_soon(self.ledger.ended, "live", coid, now)

    def _live_match(self, event: MatchFilled) -> None:
        match = event.match
        coid = match.client_order_id
        if coid is None or match.quantity is None or match.average_price is None:
            return  # not bound to one order: never guessed
        fee = (match.trade_fee or Decimal(0)) + (match.position_fee or Decimal(0))
        self.ledger.filled(
            "live",
            coid,
            price=match.average_price,
            quantity=match.quantity,
            fee=fee,
            pnl=match.profit_loss or Decimal(0),
            taker=bool(match.is_taker),
            at=match.create_time_stamp if match.create_time_stamp is not None else self._now_ms(),
        )

    # ---- summaries

    def log_summaries(self) -> list[Summary]:
        """Close what is due, and log one summary line per pair."""
        self.ledger.tick(self._now_ms())
        out = []
        for pair in self.ledger.pairs():
            summary = self.ledger.summary(pair)
            log.info("shadow %s", summary.text())
            out.append(summary)
        return out


class ShadowCollector:
    """The shadow's Prometheus families, computed from the ledger at scrape time."""

    def __init__(self, ledger: Shadow, alarms: Callable[[], Mapping[str, int]]) -> None:
        self._ledger = ledger
        self._alarms = alarms

    def collect(self) -> Iterator[Any]:
        """perp_shadow_orders{outcome}, the per-pair summary gauges, perp_shadow_alarms{pair}."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        ledger = self._ledger
        orders = CounterMetricFamily(
            "perp_shadow_orders",
            "Orders compared live against paper, per outcome",
            labels=["outcome"],
        )
        for outcome, count in sorted(ledger.outcomes.items()):
            orders.add_metric([outcome], float(count))
        yield orders
        gauges = {
            "fill_ratio": GaugeMetricFamily(
                "perp_shadow_fill_ratio",
                "Paper's filled orders over live's, last window of orders",
                labels=["pair"],
            ),
            "gap": GaugeMetricFamily(
                "perp_shadow_price_gap_bps",
                "Median price gap, paper against live, bps (positive: paper filled better)",
                labels=["pair"],
            ),
            "delay": GaugeMetricFamily(
                "perp_shadow_first_fill_gap_ms",
                "Median time to first fill, paper minus live, ms",
                labels=["pair"],
            ),
            "apart": GaugeMetricFamily(
                "perp_shadow_divergent_share",
                "Share of orders whose outcomes differ, last window of orders",
                labels=["pair"],
            ),
        }
        for pair in ledger.pairs():
            s = ledger.summary(pair)
            if s.fill_ratio is not None:
                gauges["fill_ratio"].add_metric([pair], float(s.fill_ratio))
            if s.median_gap_bps is not None:
                gauges["gap"].add_metric([pair], float(s.median_gap_bps))
            if s.median_first_fill_gap_ms is not None:
                gauges["delay"].add_metric([pair], s.median_first_fill_gap_ms)
            gauges["apart"].add_metric([pair], float(s.divergent_share))
        yield from gauges.values()
        alarms = CounterMetricFamily(
            "perp_shadow_alarms", "Times a pair's shadow summary left a band", labels=["pair"]
        )
        for pair, count in sorted(self._alarms().items()):
            alarms.add_metric([pair], float(count))
        yield alarms


def open_shadow(
    config: Config, live: Venue, *, now_ms: Callable[[], int]
) -> tuple[ShadowVenue, dict[str, int]]:
    """The shadow of a live node from its config: the venue to trade on and its alarm counts.

    ConfigError (one line) when the paper settings do not fit.
    """
    from framework.paper.venue import paper_settings

    section = config.shadow
    if section.paper is not None:
        settings = paper_settings(section.paper, at=("shadow", "paper"))
    else:
        settings = paper_settings(config.venue.paper)
    alarms: dict[str, int] = {}

    def alarm(pair: str, why: list[str], summary: Summary) -> None:
        alarms[pair] = alarms.get(pair, 0) + 1
        log.warning("shadow alarm %s: %s; %s", pair, "; ".join(why), summary.text())

    b = section.bands
    ledger = Shadow(
        settle_ms=int(section.settle_s * 1000),
        window=section.window,
        bands=Bands(
            fill_ratio=b.fill_ratio,
            price_gap_bps=b.price_gap_bps,
            divergent_share=b.divergent_share,
            min_orders=b.min_orders,
        ),
        on_alarm=alarm,
    )
    paper = WallClockPaper(config, deliver=_nowhere, now_ms=now_ms, settings=settings)
    return ShadowVenue(live, paper, ledger, now_ms=now_ms), alarms


def _nowhere(_: object) -> None:
    """The paper account's pushes in shadow mode: the strategies hear the live venue only."""
