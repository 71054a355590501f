"""How an order meets the mark: what fills now, at what price, and what rests.

Pure and stateless, shared by order placement and atomic batches. Market orders and limit
orders that cross the mark (a buy at or above it, a sell at or below it) fill as taker at
``mark x (1 + slippage)`` for buys and ``mark x (1 - slippage)`` for sells, rounded away from
the mark to the pair's price decimals, and never beyond a limit price. The pair's liquidity
(None: unlimited) caps one order's immediate fill. IOC and market orders drop what does not
fill; FOK fills everything or nothing; GTC rests the rest; POST_ONLY rests only when it does
not cross (the caller decides what a crossing POST_ONLY means).
"""

from __future__ import annotations

from decimal import ROUND_DOWN, ROUND_UP, Decimal

import attrs

from framework.twin.state import Market
from framework.venue.models import MatchType, OrderInput

__all__ = ["FillPlan", "plan_fill"]

_ZERO = Decimal(0)


@attrs.frozen(slots=True)
class FillPlan:
    """What an order does on arrival: fill now at price, rest the rest, crossing or not."""

    fill: Decimal
    price: Decimal
    rest: Decimal
    crossing: bool


def plan_fill(market: Market, order: OrderInput, slippage: Decimal) -> FillPlan:
    """The immediate fill and resting quantity of an order at the market's mark."""
    qty = order.quantity
    is_long = order.is_long
    mark = market.mark
    slip = mark * (1 + slippage) if is_long else mark * (1 - slippage)
    slipped = slip.quantize(market.price_exp, ROUND_UP if is_long else ROUND_DOWN)
    limit = order.price
    if order.is_market or limit is None:
        crossing, price = True, slipped
    else:
        crossing = limit >= mark if is_long else limit <= mark
        price = (min(limit, slipped) if is_long else max(limit, slipped)) if crossing else limit
    match_type = order.match_type
    if not crossing:
        rests = match_type == MatchType.GTC or match_type == MatchType.POST_ONLY
        return FillPlan(_ZERO, price, qty if rests else _ZERO, False)
    liquidity = market.settings.liquidity
    fill = qty if liquidity is None or liquidity >= qty else liquidity
    if match_type == MatchType.FOK and fill < qty:
        fill = _ZERO
    rest = qty - fill if match_type == MatchType.GTC and not order.is_market else _ZERO
    return FillPlan(fill, price, rest, True)
