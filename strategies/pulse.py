"""Pulse: a momentum taker that opens, holds and closes market positions on a timer."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs

from framework import (
    MatchRecord,
    OrderIntent,
    OrderStatus,
    OrderUpdate,
    PositionPush,
    Strategy,
    Trade,
)
from framework.config import structure_params
from framework.engine.strategy import StrategyContext

__all__ = ["Pulse"]


class Pulse(Strategy):
    """Momentum taker: follows the market's trades, else "win-stay, lose-shift", on a timer.

    Every ``every_s`` seconds the ``pulse`` timer fires and the strategy looks at its position
    on ``pair`` (kept current by api_position pushes through the portfolio):

    * flat: open ``quantity`` with a market order in the current direction (``start_long`` at
      first);
    * open for ``hold`` pulses: close it with a market order of exactly the open quantity in
      the other direction (never more, so the venue's rule 2318 cannot trip).

    The direction follows the market when the strategy hears its trades (``on_trade``, the
    ``market:`` section's trade channel): at each pulse, a last trade price above the one at
    the previous pulse sets it long, below short. A closing fill's realized profit turns it
    too: a winning trade keeps the direction (the move continued), a losing one flips it;
    without trades (or while the price stands still) that alone decides. While an order is
    waiting for its outcome no other order is sent. The decisions depend only on timer
    ticks, trades, pushes and fills, so the same inputs give the same orders.
    """

    @attrs.frozen(kw_only=True)
    class Params:
        """The pulse's YAML params (strategies[i].params)."""

        pair: str
        quantity: Decimal = Decimal("0.01")
        every_s: float = 1.0
        hold: int = 3
        lever: int = 1
        start_long: bool = True

        def __attrs_post_init__(self) -> None:
            """Refuse settings that cannot trade."""
            if self.quantity <= 0 or self.every_s <= 0:
                raise ValueError("quantity and every_s must be positive")
            if self.hold < 1:
                raise ValueError("hold must be at least 1")

    def __init__(
        self, name: str, context: StrategyContext, params: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(name, context, params, **kwargs)
        self.settings = structure_params(self.Params, self.params)
        self.long = self.settings.start_long
        self.pending: str | None = None
        self.held = 0
        self.wins = 0
        self.losses = 0
        self.last_trade: Decimal | None = None  # the market's latest trade price
        self.seen: Decimal | None = None  # ... as it was at the previous pulse

    def on_start(self) -> None:
        """Start the pulse timer."""
        self.schedule("pulse", self.settings.every_s)

    def on_timer(self, name: str) -> None:
        """Open when flat, close after hold pulses; nothing while an order is outstanding."""
        if name != "pulse":
            return
        price, seen, self.seen = self.last_trade, self.seen, self.last_trade
        if price is not None and seen is not None and price != seen:
            self.long = price > seen  # momentum: follow the market's move since the last pulse
        if self.pending is not None:
            return
        s = self.settings
        position = self.portfolio.net_quantity(s.pair)
        if position == 0:
            self.held = 0
            self.pending = self.submit(
                OrderIntent(
                    pair=s.pair, is_long=self.long, quantity=s.quantity, lever=s.lever, tag="open"
                )
            )
            return
        self.held += 1
        if self.held >= s.hold:
            self.pending = self.submit(
                OrderIntent(
                    pair=s.pair,
                    is_long=position < 0,
                    quantity=abs(position),
                    lever=s.lever,
                    tag="close",
                )
            )

    def on_trade(self, trade: Trade) -> None:
        """Keep the market's latest trade price: the next pulse compares it with the last."""
        self.last_trade = trade.price

    def on_order(self, update: OrderUpdate) -> None:
        """Any outcome of the outstanding order frees the pulse to act again."""
        if update.client_order_id == self.pending and update.status != OrderStatus.PENDING:
            self.pending = None
            if update.status in (OrderStatus.REJECTED, OrderStatus.LOST):
                self.log.warning("order refused", extra={"code": update.code, "reason": update.msg})

    def on_position(self, push: PositionPush) -> None:
        """Log the position as the venue reports it (the portfolio already holds it)."""
        self.log.info(
            "position",
            extra={
                "change": str(push.change_type),
                "quantity": str(push.current_quantity),
                "direction": str(push.direction),
            },
        )

    def on_match(self, match: MatchRecord) -> None:
        """On a closing fill of ours: keep the direction after a win, flip it after a loss."""
        if match.client_order_id is None or not match.is_close or match.profit_loss is None:
            return
        if match.profit_loss > 0:
            self.wins += 1
        else:
            self.losses += 1
            self.long = not self.long

    def on_stop(self) -> None:
        """Report the tally (an open position is left as it is)."""
        self.log.info("pulse stopping", extra={"wins": self.wins, "losses": self.losses})
