"""The shadow's ledger: one order sent live and on paper, compared side by side.

Pure bookkeeping (no I/O, time passed in): the live node tells it what each side did with an
order under one clientOrderId (accepted or refused with a code, each fill with its price,
quantity, fee, PnL and maker/taker flag, canceled), and it closes the comparison of an
order when both sides are done with it (filled whole, canceled, refused) or ``settle_ms``
after the send, whichever comes first. A closed order is a :class:`Diff`:

* ``outcome``: ``both filled``, ``live only``, ``paper only``, ``neither``, ``both refused``
  (same code), ``refused apart`` (different codes, or one side refused);
* each side's filled fraction, average price, maker or taker, time to first fill, fees, PnL;
* the price gap in basis points, positive when paper filled at a better price than live
  (bought cheaper, sold dearer): a paper venue that flatters the strategy shows positive gaps.

A fill is only ever bound to the order its side named: live fills come attributed by the
engine (a match naming the order), paper fills from the paper venue's own order ids. A live
fill the engine could not bind uniquely (AMBIGUOUS, LOST) is not guessed here: the order is
closed as ``unknown`` on the live side and left out of the summaries.

:class:`Summary` rolls the last ``window`` closed orders of a pair into the figures a trader
reads ("paper fills 1.40x live; median price gap 3.1 bps") and checks them against bands.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Final, Literal

import attrs

__all__ = [
    "Bands",
    "Diff",
    "Outcome",
    "Shadow",
    "SideResult",
    "Summary",
]

Outcome = Literal[
    "both filled",
    "live only",
    "paper only",
    "neither",
    "both refused",
    "refused apart",
    "unknown",
]
_ZERO: Final = Decimal(0)
_BPS: Final = Decimal(10_000)


@attrs.define(slots=True)
class SideResult:
    """What one side (live or paper) did with an order."""

    accepted: bool | None = None
    """None: no answer yet; False: refused (``code``)."""
    code: int | None = None
    filled: Decimal = _ZERO
    notional: Decimal = _ZERO
    fee: Decimal = _ZERO
    pnl: Decimal = _ZERO
    taker: bool | None = None
    """True when any fill was taker, False when every fill was maker, None without fills."""
    first_fill_after_ms: int | None = None
    """Milliseconds from the send to the first fill."""
    done: bool = False
    unknown: bool = False
    """The side's fills cannot be bound to this order alone (live AMBIGUOUS or LOST)."""

    @property
    def average(self) -> Decimal | None:
        """The average fill price, None without fills."""
        return self.notional / self.filled if self.filled else None

    def fill(
        self, price: Decimal, quantity: Decimal, fee: Decimal, pnl: Decimal, taker: bool, after: int
    ) -> None:
        """Add one fill, ``after`` ms from the send."""
        self.filled += quantity
        self.notional += price * quantity
        self.fee += fee
        self.pnl += pnl
        self.taker = taker or bool(self.taker)
        if self.first_fill_after_ms is None or after < self.first_fill_after_ms:
            self.first_fill_after_ms = after


@attrs.frozen
class Diff:
    """One closed comparison."""

    client_order_id: str
    pair: str
    is_long: bool
    quantity: Decimal
    sent_ms: int
    closed_ms: int
    outcome: Outcome
    live: SideResult
    paper: SideResult

    @property
    def live_fraction(self) -> Decimal:
        """Live filled / ordered."""
        return self.live.filled / self.quantity

    @property
    def paper_fraction(self) -> Decimal:
        """Paper filled / ordered."""
        return self.paper.filled / self.quantity

    @property
    def price_gap_bps(self) -> Decimal | None:
        """Paper's average price against live's, in bps; positive: paper filled better."""
        live, paper = self.live.average, self.paper.average
        if live is None or paper is None or not live:
            return None
        gap = (live - paper) if self.is_long else (paper - live)
        return gap / live * _BPS

    @property
    def first_fill_gap_ms(self) -> int | None:
        """Paper's time to first fill minus live's (negative: paper filled sooner)."""
        live, paper = self.live.first_fill_after_ms, self.paper.first_fill_after_ms
        return None if live is None or paper is None else paper - live

    @property
    def fee_gap(self) -> Decimal:
        """Paper's fees minus live's."""
        return self.paper.fee - self.live.fee

    @property
    def pnl_gap(self) -> Decimal:
        """Paper's PnL minus live's."""
        return self.paper.pnl - self.live.pnl


def _outcome(live: SideResult, paper: SideResult) -> Outcome:
    if live.unknown or paper.unknown:
        return "unknown"
    if live.accepted is False or paper.accepted is False:
        if live.accepted is False and paper.accepted is False and live.code == paper.code:
            return "both refused"
        return "refused apart"
    if live.filled and paper.filled:
        return "both filled"
    if live.filled:
        return "live only"
    if paper.filled:
        return "paper only"
    return "neither"


@attrs.frozen(kw_only=True)
class Bands:
    """Where a pair's rolling summary should stay; leaving one fires the alarm."""

    fill_ratio: tuple[Decimal, Decimal] = (Decimal("0.8"), Decimal("1.25"))
    """Paper's filled orders over live's, low and high."""
    price_gap_bps: Decimal = Decimal(5)
    """The median price gap's largest size either way."""
    divergent_share: Decimal = Decimal("0.2")
    """The largest share of orders whose outcome differs (live only, paper only, refused apart)."""
    min_orders: int = 20
    """No alarm before this many orders are in the window."""


@attrs.frozen
class Summary:
    """A pair's rolling figures over its last closed orders."""

    pair: str
    orders: int
    live_filled: int
    paper_filled: int
    fill_ratio: Decimal | None
    median_gap_bps: Decimal | None
    median_first_fill_gap_ms: float | None
    divergent_share: Decimal
    fee_gap: Decimal
    pnl_gap: Decimal

    def text(self) -> str:
        """One line: 'ETH-USD: 200 orders; paper fills 1.40x live; median price gap 3.1 bps; ...'."""
        ratio = "-" if self.fill_ratio is None else f"{self.fill_ratio:.2f}x"
        gap = "-" if self.median_gap_bps is None else f"{self.median_gap_bps:.1f} bps"
        delay = (
            "-"
            if self.median_first_fill_gap_ms is None
            else f"{self.median_first_fill_gap_ms:+.0f} ms"
        )
        return (
            f"{self.pair}: {self.orders} orders; paper fills {ratio} live; median price gap "
            f"{gap}; first fill paper-live {delay}; outcomes apart {self.divergent_share:.0%}; "
            f"fees paper-live {self.fee_gap:+.8f}; PnL paper-live {self.pnl_gap:+.8f}"
        )

    def outside(self, bands: Bands) -> dict[str, str]:
        """Each band this summary is outside of, by name, with a phrase (empty: inside all)."""
        if self.orders < bands.min_orders:
            return {}
        out = {}
        low, high = bands.fill_ratio
        if self.fill_ratio is not None and not low <= self.fill_ratio <= high:
            out["fill_ratio"] = f"fill ratio {self.fill_ratio:.2f} outside {low}-{high}"
        gap = self.median_gap_bps
        if gap is not None and abs(gap) > bands.price_gap_bps:
            out["price_gap_bps"] = f"median price gap {gap:.1f} bps beyond {bands.price_gap_bps}"
        if self.divergent_share > bands.divergent_share:
            out["divergent_share"] = (
                f"outcomes apart {self.divergent_share:.0%} above {bands.divergent_share:.0%}"
            )
        return out


def _median(values: Iterable[Decimal]) -> Decimal | None:
    kept = sorted(values)
    if not kept:
        return None
    middle = len(kept) // 2
    return kept[middle] if len(kept) % 2 else (kept[middle - 1] + kept[middle]) / 2


def summarize(pair: str, diffs: Iterable[Diff]) -> Summary:
    """The rolling figures of a pair's closed orders (those with an unknown side left out)."""
    known = [d for d in diffs if d.outcome != "unknown"]
    live = sum(1 for d in known if d.live.filled)
    paper = sum(1 for d in known if d.paper.filled)
    apart = sum(1 for d in known if d.outcome in ("live only", "paper only", "refused apart"))
    gaps = [g for d in known if (g := d.price_gap_bps) is not None]
    delays = [float(ms) for d in known if (ms := d.first_fill_gap_ms) is not None]
    return Summary(
        pair=pair,
        orders=len(known),
        live_filled=live,
        paper_filled=paper,
        fill_ratio=Decimal(paper) / Decimal(live) if live else None,
        median_gap_bps=_median(gaps),
        median_first_fill_gap_ms=statistics.median(delays) if delays else None,
        divergent_share=Decimal(apart) / Decimal(len(known)) if known else _ZERO,
        fee_gap=sum((d.fee_gap for d in known), _ZERO),
        pnl_gap=sum((d.pnl_gap for d in known), _ZERO),
    )


@attrs.define
class _Open:
    client_order_id: str
    pair: str
    is_long: bool
    quantity: Decimal
    sent_ms: int
    live: SideResult = attrs.field(factory=SideResult)
    paper: SideResult = attrs.field(factory=SideResult)


class Shadow:
    """The ledger: orders open on either side, closed diffs, per-pair windows and alarms.

    Bounded: at most ``max_open`` orders are compared at once (a send beyond is counted in
    ``skipped`` and not compared), ``window`` closed diffs per pair kept for the summaries,
    ``keep`` closed diffs in all for the report (the oldest dropped first, counted).
    """

    def __init__(
        self,
        *,
        settle_ms: int = 60_000,
        window: int = 200,
        keep: int = 100_000,
        max_open: int = 100_000,
        bands: Bands | None = None,
        on_alarm: Callable[[str, list[str], Summary], None] | None = None,
    ) -> None:
        self.settle_ms = settle_ms
        self.window = window
        self.max_open = max_open
        self.bands = bands or Bands()
        self.on_alarm = on_alarm
        self.open: dict[str, _Open] = {}
        self.closed: deque[Diff] = deque(maxlen=keep)
        self.dropped = 0
        self.skipped = 0
        self.outcomes: dict[str, int] = {}
        self._recent: dict[str, deque[Diff]] = {}
        self._alarmed: dict[str, frozenset[str]] = {}

    # ---- what the node reports

    def sent(
        self, client_order_id: str, pair: str, is_long: bool, quantity: Decimal, at: int
    ) -> None:
        """An order was sent live (and placed on paper at the same instant)."""
        if len(self.open) >= self.max_open:
            self.skipped += 1
            return
        self.open[client_order_id] = _Open(client_order_id, pair, is_long, quantity, at)

    def answered(
        self, side: Literal["live", "paper"], client_order_id: str, code: int | None, at: int
    ) -> None:
        """One side accepted (code None) or refused (code) the order."""
        order = self.open.get(client_order_id)
        if order is None:
            return
        result = order.live if side == "live" else order.paper
        result.accepted = code is None
        result.code = code
        if code is not None:
            result.done = True
        self._maybe_close(order, at)

    def filled(
        self,
        side: Literal["live", "paper"],
        client_order_id: str,
        *,
        price: Decimal,
        quantity: Decimal,
        fee: Decimal,
        pnl: Decimal,
        taker: bool,
        at: int,
    ) -> None:
        """One fill of the order on one side (at: the fill's time, the side's clock)."""
        order = self.open.get(client_order_id)
        if order is None:
            return
        result = order.live if side == "live" else order.paper
        if result.accepted is None:
            result.accepted = True
        result.fill(price, quantity, fee, pnl, taker, at - order.sent_ms)
        if result.filled >= order.quantity:
            result.done = True
        self._maybe_close(order, at)

    def ended(self, side: Literal["live", "paper"], client_order_id: str, at: int) -> None:
        """The order ended on one side without more fills (canceled, expired, dropped IOC)."""
        order = self.open.get(client_order_id)
        if order is None:
            return
        (order.live if side == "live" else order.paper).done = True
        self._maybe_close(order, at)

    def unknown(self, client_order_id: str, at: int) -> None:
        """The live side's outcome cannot be told for this order alone (AMBIGUOUS, LOST)."""
        order = self.open.get(client_order_id)
        if order is None:
            return
        order.live.unknown = order.live.done = True
        self._maybe_close(order, at)

    def tick(self, now: int) -> None:
        """Close every comparison older than settle_ms."""
        due = [o for o in self.open.values() if now - o.sent_ms >= self.settle_ms]
        for order in due:
            self._close(order, now)

    # ---- results

    def summary(self, pair: str) -> Summary:
        """The pair's rolling figures now."""
        return summarize(pair, self._recent.get(pair, ()))

    def pairs(self) -> list[str]:
        """The pairs with closed orders."""
        return sorted(self._recent)

    def _maybe_close(self, order: _Open, at: int) -> None:
        if order.live.done and order.paper.done:
            self._close(order, at)

    def _close(self, order: _Open, at: int) -> None:
        del self.open[order.client_order_id]
        diff = Diff(
            order.client_order_id,
            order.pair,
            order.is_long,
            order.quantity,
            order.sent_ms,
            at,
            _outcome(order.live, order.paper),
            order.live,
            order.paper,
        )
        if len(self.closed) == self.closed.maxlen:
            self.dropped += 1
        self.closed.append(diff)
        self.outcomes[diff.outcome] = self.outcomes.get(diff.outcome, 0) + 1
        recent = self._recent.get(order.pair)
        if recent is None:
            recent = self._recent[order.pair] = deque(maxlen=self.window)
        recent.append(diff)
        self._check(order.pair)

    def _check(self, pair: str) -> None:
        summary = self.summary(pair)
        outside = summary.outside(self.bands)
        before = self._alarmed.get(pair, frozenset())
        now = frozenset(outside)
        if now - before and self.on_alarm is not None:  # a band newly left
            self.on_alarm(pair, list(outside.values()), summary)
        if now:
            self._alarmed[pair] = now
        else:
            self._alarmed.pop(pair, None)
