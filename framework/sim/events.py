"""What the exchange reports: position and balance changes, and match records.

Every operation of :class:`~framework.sim.exchange.Exchange` returns the changes it caused as
:data:`Event` values, in the order they happened; the twin's server turns them into SPEC
section 6 pushes on the wire, the paper venue into venue records
(:mod:`framework.sim.records`). Match records are kept by the exchange and listed by
selectContractMatchPairList. All are frozen records with Decimal amounts.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import attrs

__all__ = [
    "BalanceChanged",
    "Event",
    "Match",
    "PositionChanged",
]


@attrs.frozen(slots=True, kw_only=True)
class PositionChanged:
    """A position of one account moved (SPEC 6.1); quantities after the change."""

    user_id: int
    pair: str
    change_type: str
    position_id: int
    is_long: bool
    current_quantity: Decimal
    operate_quantity: Decimal
    can_closed_quantity: Decimal
    contract_pair_id: int
    position_type: int
    opening_price: Decimal
    margin_amount: Decimal
    margin_call_amount: Decimal


@attrs.frozen(slots=True, kw_only=True)
class BalanceChanged:
    """A balance of one account moved (SPEC 6.2); log_id grows strictly with every change."""

    user_id: int
    coin: str
    coin_id: int
    available: Decimal
    frozen: Decimal
    log_id: int
    operate_amount: Decimal


Event = PositionChanged | BalanceChanged
"""One change reported by the exchange."""


@attrs.frozen(slots=True, kw_only=True)
class Match:
    """One fill of one account (SPEC 2.5); ids grow strictly across the exchange."""

    id: int
    order_id: int
    position_id: int
    contract_pair_id: int
    time_ms: int
    pair: str
    coin: str
    settle_decimals: int
    lever: int
    is_market: bool
    is_close: bool
    is_long: bool
    is_taker: bool
    price: Decimal
    quantity: Decimal
    amount: Decimal
    fee: Decimal
    profit_loss: Decimal
    opening_price: Decimal
    address: str | None
    delivery_time: datetime | None
