"""What a trader reads of a live run per pair: PnL, fees, resting orders (summary, metrics).

:class:`TradingState` follows the bus as infrastructure; the node's summary line and the
``/metrics`` gauges read it. Every map it keeps is per pair, or per resting order (forgotten
when the order ends), so it stays bounded however long the daemon runs.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from framework.engine.bus import Bus
from framework.engine.events import MatchFilled, OrderUpdate
from framework.engine.intents import OrderStatus
from framework.engine.portfolio import Portfolio
from framework.live.metrics import Amounts
from framework.pnl import net_pnl
from framework.venue.models import Position

__all__ = ["TradingState"]


class TradingState:
    """Per pair: this node's realized PnL and fees, unrealized PnL, resting orders.

    Realized PnL and fees add up ``profit_loss`` and ``trade_fee`` of this node's own matches
    (external ones left out); unrealized PnL is the sum of ``unrealized_pnl`` of the pair's
    last REST position snapshot (at start-up, after every reconnect and every
    ``polling.positions_interval_s``; unknown until a snapshot shows the position: a
    position whose id the last snapshot did not show has none), 0 while
    the pair has no open position; net is realized − fees + unrealized (None while unrealized
    is unknown), as in the backtest report (:mod:`framework.pnl`); resting orders are
    the limit orders the venue accepted that the engine still holds as ACCEPTED (not filled).
    """

    def __init__(self, pairs: list[str]) -> None:
        self.pairs = pairs
        self.realized: dict[str, Decimal] = {}
        self.fees: dict[str, Decimal] = {}
        self.unrealized: dict[str, Decimal | None] = {}
        self._shown: dict[str, frozenset[int | None]] = {}  # pair -> position ids snapshotted
        self._accepted: dict[str, set[str]] = {pair: set() for pair in pairs}
        self._status: Callable[[str], OrderStatus | None] = lambda client_order_id: None
        self._portfolio: Portfolio | None = None

    def follow(
        self, bus: Bus, portfolio: Portfolio, status: Callable[[str], OrderStatus | None]
    ) -> None:
        """Subscribe to the bus (as infrastructure); status is the engine's view of an intent."""
        self._status = status
        self._portfolio = portfolio
        bus.subscribe(MatchFilled, self.on_match)
        bus.subscribe(OrderUpdate, self.on_order)

    def on_match(self, event: MatchFilled) -> None:
        """Add an own match's profit_loss and trade_fee to its pair."""
        match = event.match
        if event.external or match.symbol is None:
            return
        pair = match.symbol
        if match.profit_loss is not None:
            self.realized[pair] = self.realized.get(pair, Decimal(0)) + match.profit_loss
        if match.trade_fee is not None:
            self.fees[pair] = self.fees.get(pair, Decimal(0)) + match.trade_fee

    def on_order(self, update: OrderUpdate) -> None:
        """Note an accepted limit order (it may rest on the book until filled); forget it after."""
        intent = update.intent
        if intent is None or intent.is_market:
            return
        if update.status is OrderStatus.ACCEPTED:
            self._accepted.setdefault(intent.pair, set()).add(update.client_order_id)
        else:  # FILLED or another end: no longer resting (the set stays bounded)
            self._accepted.get(intent.pair, set()).discard(update.client_order_id)

    def on_snapshot(self, pair: str, positions: tuple[Position, ...]) -> None:
        """Keep a REST snapshot's unrealized PnL of pair (None when the venue gave none; a flat
        pair's is forgotten: a position opened by a push has none known until the next)."""
        if not positions:
            self.unrealized.pop(pair, None)
            self._shown.pop(pair, None)
            return
        values = [p.unrealized_pnl for p in positions if p.unrealized_pnl is not None]
        self.unrealized[pair] = sum(values, Decimal(0)) if values else None
        self._shown[pair] = frozenset(p.id for p in positions)

    def resting(self) -> dict[str, int]:
        """Pair -> accepted limit orders not filled yet."""
        out = {}
        for pair, ids in self._accepted.items():
            ids.difference_update([i for i in ids if self._status(i) is not OrderStatus.ACCEPTED])
            out[pair] = len(ids)
        return out

    def _unrealized(self, pair: str) -> Decimal | None:
        """The last snapshot's unrealized PnL of an open pair, if the positions held now are
        the ones it showed (by id); None for a position opened since (a closed one's value
        is not a new one's)."""
        value = self.unrealized.get(pair)
        if value is None or self._portfolio is None:
            return value
        held = frozenset(p.position_id for p in self._portfolio.positions(pair))
        return value if held == self._shown.get(pair) else None

    def _open(self, pair: str) -> bool:
        return self._portfolio is None or self._portfolio.net_quantity(pair) != 0

    def pnl(self) -> dict[str, Amounts]:
        """Pair -> realized, unrealized (None when unknown), fees and net (framework.pnl)."""
        out: dict[str, Amounts] = {}
        for pair in self.pairs:
            realized = self.realized.get(pair, Decimal(0))
            unrealized = self._unrealized(pair) if self._open(pair) else Decimal(0)
            fees = self.fees.get(pair, Decimal(0))
            out[pair] = {
                "realized": realized,
                "unrealized": unrealized,
                "fees": fees,
                "net": net_pnl(realized, fees, unrealized),
            }
        return out
