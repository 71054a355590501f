"""Ladder: a grid market maker that keeps limit orders on both sides of the book's mid."""

from __future__ import annotations

from decimal import ROUND_DOWN, ROUND_UP, Decimal
from typing import Any

import attrs

from framework import (
    Book,
    CancelRejected,
    MatchRecord,
    OrderIntent,
    OrderStatus,
    OrderUpdate,
    Strategy,
)
from framework.config import structure_params
from framework.engine.risk import STALE_MARKET
from framework.engine.strategy import StrategyContext

__all__ = ["Ladder"]


class Ladder(Strategy):
    """Grid market maker: a ladder of GTC limit orders around a reference price.

    It quotes around the market when it hears one, and needs none:

    1. The reference is ``reference_price`` when given, else the mid of the pair's book
       (``self.market.book(pair).mid``, the ``market:`` section's depth channel); with no
       book yet, one market order of ``quantity`` (``probe_long`` decides the side) is sent
       and its fill price is used, unless a book comes first.
    2. ``levels`` buy orders are placed at reference - k x spacing and ``levels`` sell orders
       at reference + k x spacing (k = 1..levels), each of ``quantity``.
    3. Whenever one of its resting orders fills at price P, the counter order goes in: a buy
       filled at P becomes a sell at P + spacing, a sell filled at P a buy at P - spacing.
       Each round trip earns ``spacing x quantity`` minus fees, and the ladder keeps
       2 x levels orders outstanding.
    4. When a fill, or the book's mid, lands more than ``recentre_levels`` x spacing from
       the reference, the ladder re-centres: it cancels its resting orders (an extension
       beyond SPEC.md; see the README) and builds the grid again around that price. An
       order being cancelled is forgotten once CANCELED; if it fills first (the venue
       refuses the cancel) or the cancel is refused, its fill is still answered like any
       other. So the grid follows the market's mid, and without a book its own fills.

    After a restart the ladder adopts what it left on the book: at on_start its open orders
    (the journal's, checked against the venue's open-order list) that sit on the new grid
    are kept, the others cancelled, and only the missing levels are placed, so a restart
    never lays a second grid over the first. An order the venue no longer lists is adopted
    until the venue's record of it arrives: filled, its fill is answered; cancelled while
    the node was down, it is forgotten and its level stays empty until a re-centre.

    All orders have the same quantity, so a counter order never exceeds the position it
    reduces (the venue's rule 2318). Decisions depend only on the books, fills and order
    updates received, so the same inputs always give the same orders.
    """

    @attrs.frozen(kw_only=True)
    class Params:
        """The ladder's YAML params (strategies[i].params)."""

        pair: str
        quantity: Decimal = Decimal("0.01")
        spacing: Decimal = Decimal("1")
        levels: int = 3
        lever: int = 1
        reference_price: Decimal | None = None
        probe_long: bool = True
        tick: Decimal = Decimal("0.01")
        recentre_levels: int | None = None
        """Re-centre when a fill is more than this many spacings away (None: levels + 1)."""

        def __attrs_post_init__(self) -> None:
            """Refuse a ladder that cannot place an order."""
            if self.quantity <= 0 or self.spacing <= 0 or self.tick <= 0:
                raise ValueError("quantity, spacing and tick must be positive")
            if self.levels < 1:
                raise ValueError("levels must be at least 1")
            if self.recentre_levels is not None and self.recentre_levels < 1:
                raise ValueError("recentre_levels must be at least 1")

    def __init__(
        self, name: str, context: StrategyContext, params: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(name, context, params, **kwargs)
        self.settings = structure_params(self.Params, self.params)
        self.reference: Decimal | None = None
        self.probe_id: str | None = None
        # client_order_id -> (is_long, price) of the orders this ladder has resting.
        self.resting: dict[str, tuple[bool, Decimal]] = {}
        # The same, of the orders it asked to cancel and has no outcome for yet: they may
        # still fill (a fill that reached the venue first), and then the fill is answered.
        self.cancelling: dict[str, tuple[bool, Decimal]] = {}
        self.fills = 0
        self.recentred = 0
        self.adopted = 0

    def on_start(self) -> None:
        """Adopt the orders left resting, then build around reference_price, the mid or a probe."""
        s = self.settings
        for order in self.open_orders(s.pair):
            if order.price is not None:
                self.resting[order.client_order_id] = (order.is_long, order.price)
        self.adopted = len(self.resting)
        if self.adopted:
            self.log.info("adopted resting orders", extra={"orders": self.adopted})
        book = self.market.book(s.pair)
        centre = s.reference_price
        if centre is None and book is not None:
            centre = book.mid
        if centre is not None:
            self._build(centre)
            return
        self.probe_id = self.submit(
            OrderIntent(
                pair=s.pair, is_long=s.probe_long, quantity=s.quantity, lever=s.lever, tag="probe"
            )
        )
        self.log.info("probing the price with a market order", extra={"pair": s.pair})

    def on_match(self, match: MatchRecord) -> None:
        """Build the ladder on the probe's fill; answer each resting fill with its counter order."""
        cid = match.client_order_id
        if cid is None or match.average_price is None:
            return  # not ours
        if cid == self.probe_id and self.reference is None:
            self._build(match.average_price)
            return
        side = self.resting.pop(cid, None)
        if side is None:
            side = self.cancelling.pop(cid, None)  # filled before its cancel reached the venue
        if side is None:
            return
        was_long, price = side
        s = self.settings
        counter = price + s.spacing if was_long else price - s.spacing
        if counter <= 0:
            return
        self.fills += 1
        if self.reference is not None and abs(price - self.reference) > self._recentre_distance():
            self._recentre(price)
            return
        self.log.info(
            "%s filled at %s, counter %s at %s",
            "buy" if was_long else "sell",
            price,
            "sell" if was_long else "buy",
            counter,
        )
        self._place(not was_long, counter)

    def on_book(self, book: Book) -> None:
        """Quote around the mid: build on it (no probe fill yet), re-centre when it drifts."""
        mid = book.mid
        if mid is None:
            return  # a side of the book is empty
        if self.reference is None:
            self._build(mid)
        elif abs(mid - self.reference) > self._recentre_distance():
            self._recentre(mid)

    def on_order(self, update: OrderUpdate) -> None:
        """Forget refused and cancelled orders; an unplaceable probe leaves the ladder unbuilt."""
        if update.status is OrderStatus.CANCELED:
            self.resting.pop(update.client_order_id, None)
            self.cancelling.pop(update.client_order_id, None)
            return
        if update.status in (OrderStatus.REJECTED, OrderStatus.LOST):
            self.resting.pop(update.client_order_id, None)
            self.cancelling.pop(update.client_order_id, None)
            if update.client_order_id == self.probe_id and self.reference is None:
                if update.code == STALE_MARKET:  # fed, but nothing heard yet: a book will come
                    self.log.info("no market data yet: the ladder builds on the first book")
                    return
                self.log.warning(
                    "the probe was refused: the ladder has no price to build around and"
                    " stays unbuilt until a restart (%s %s) or a book of its pair",
                    update.code,
                    update.msg,
                )
                return
            self.log.warning(
                "order refused",
                extra={
                    "client_order_id": update.client_order_id,
                    "code": update.code,
                    "reason": update.msg,
                },
            )

    def on_stop(self) -> None:
        """Report what the ladder leaves resting (execution.cancel_on_stop withdraws it)."""
        self.log.info(
            "ladder stopping",
            extra={"resting": len(self.resting), "fills": self.fills},
        )

    def _recentre_distance(self) -> Decimal:
        s = self.settings
        levels = s.recentre_levels if s.recentre_levels is not None else s.levels + 1
        return levels * s.spacing

    def _recentre(self, price: Decimal) -> None:
        """Withdraw the grid and build it again around price."""
        self.recentred += 1
        self.log.info("re-centring", extra={"from": str(self.reference), "to": str(price)})
        for cid in list(self.resting):
            self._withdraw(cid)
        self._build(price)

    def _build(self, reference: Decimal) -> None:
        s = self.settings
        self.reference = reference
        self.log.info("building ladder", extra={"reference": str(reference), "levels": s.levels})
        wanted = {self._grid(True, reference - k * s.spacing) for k in range(1, s.levels + 1)}
        wanted |= {self._grid(False, reference + k * s.spacing) for k in range(1, s.levels + 1)}
        for cid, side in list(self.resting.items()):
            if side in wanted:
                wanted.discard(side)  # already resting there (adopted): kept
            else:
                self._withdraw(cid)
        for is_long, price in sorted(wanted, key=lambda side: (not side[0], side[1])):
            self._place(is_long, price)

    def on_cancel_rejected(self, event: CancelRejected) -> None:
        """A cancel that did not happen: the order may still rest, and its fill is answered."""
        side = self.cancelling.pop(event.client_order_id, None)
        if side is not None:  # not filled yet (its match would have taken it): still ours
            self.resting[event.client_order_id] = side
        self.log.warning("cancel refused", extra={"client_order_id": event.client_order_id,
                                                   "code": event.code, "reason": event.msg})  # fmt: skip

    def _withdraw(self, cid: str) -> None:
        """Cancel a resting order: CANCELED forgets it, a refusal keeps it (on_cancel_rejected)."""
        self.cancelling[cid] = self.resting.pop(cid)
        self.cancel(cid)

    def _grid(self, is_long: bool, price: Decimal) -> tuple[bool, Decimal]:
        # Round away from the reference: a buy never above, a sell never below, the grid price.
        rounding = ROUND_DOWN if is_long else ROUND_UP
        return is_long, price.quantize(self.settings.tick, rounding=rounding)

    def _place(self, is_long: bool, price: Decimal) -> None:
        s = self.settings
        is_long, price = self._grid(is_long, price)
        if price <= 0:
            return
        cid = self.submit(
            OrderIntent(
                pair=s.pair,
                is_long=is_long,
                quantity=s.quantity,
                price=price,
                lever=s.lever,
                tag="ladder",
            )
        )
        self.resting[cid] = (is_long, price)
