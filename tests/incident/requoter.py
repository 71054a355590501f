"""A strategy that cancels: at each timer tick it cancels its last bid and places the next,
far under the market (it never fills), and trades Pulse's way besides."""

from __future__ import annotations

from decimal import Decimal

from framework import MatchRecord, OrderIntent
from strategies.pulse import Pulse

__all__ = ["Requoter"]


class Requoter(Pulse):
    """Pulse, plus one far bid replaced at every pulse: a cancel each."""

    def on_start(self) -> None:
        """Pulse's timer; no bid yet."""
        super().on_start()
        self.bid: str | None = None
        self.last_price: Decimal | None = None

    def on_timer(self, name: str) -> None:
        """Cancel the last bid, place the next one 10 % under the last fill, then pulse."""
        if self.bid is not None:
            self.cancel(self.bid)
            self.bid = None
        if self.last_price is not None:
            price = (self.last_price * Decimal("0.9")).quantize(Decimal("0.1"))
            s = self.settings
            self.bid = self.submit(
                OrderIntent(pair=s.pair, is_long=True, quantity=s.quantity, price=price, tag="bid")
            )
        super().on_timer(name)

    def on_match(self, match: MatchRecord) -> None:
        """Pulse's rule; the fill price places the next bid."""
        super().on_match(match)
        if match.client_order_id is not None and match.average_price is not None:
            self.last_price = match.average_price
