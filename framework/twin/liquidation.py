"""When positions are liquidated: the maintenance-margin rule for isolated and cross.

Pure decisions over the exchange's state; :class:`~framework.twin.exchange.Exchange` closes
what is returned at the mark. An isolated position goes when its margin plus unrealized PnL
falls to its maintenance margin, ``maintenance_rate x quantity x mark``. Cross positions of
one account and settlement coin go together when the available balance plus their margins
and unrealized PnL falls to the sum of their maintenance margins.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from framework.twin.state import Account, Market, Position, pnl_at

__all__ = ["liquidation_price", "positions_to_liquidate"]

_ISOLATED = 3


def positions_to_liquidate(
    market: Market,
    accounts: Mapping[int, Account],
    markets: Mapping[str, Market],
    maintenance_rate: Decimal,
) -> list[tuple[Account, Position]]:
    """The positions to close after market's mark moved, in holder order."""
    due: list[tuple[Account, Position]] = []
    cross_accounts: list[Account] = []
    for user_id in market.holders:
        account = accounts[user_id]
        position = account.positions[market.name]
        if position.position_type != _ISOLATED:
            cross_accounts.append(account)
            continue
        upnl = pnl_at(position, market.mark, position.quantity)
        if position.margin + upnl <= maintenance_rate * position.quantity * market.mark:
            due.append((account, position))
    for account in cross_accounts:
        crossed = [
            p
            for p in account.positions.values()
            if p.position_type != _ISOLATED and markets[p.pair].coin == market.coin
        ]
        equity = account.balances[market.coin].available
        maintenance = Decimal(0)
        for p in crossed:
            mark = markets[p.pair].mark
            equity += p.margin + pnl_at(p, mark, p.quantity)
            maintenance += maintenance_rate * p.quantity * mark
        if equity <= maintenance:
            due.extend((account, p) for p in crossed)
    return due


def liquidation_price(
    position: Position, maintenance_rate: Decimal, price_exp: Decimal
) -> Decimal | None:
    """The mark at which an isolated position is liquidated; None for cross positions."""
    if position.position_type != _ISOLATED:
        return None
    qty, entry, rate = position.quantity, position.opening_price, maintenance_rate
    if position.is_long:
        price = (entry * qty - position.margin) / (qty * (1 - rate))
    else:
        price = (entry * qty + position.margin) / (qty * (1 + rate))
    return max(price, Decimal(0)).quantize(price_exp)
