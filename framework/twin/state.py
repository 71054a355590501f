"""The exchange's mutable state: balances, positions, accounts and markets.

Plain attrs records owned and changed only by :class:`~framework.twin.exchange.Exchange`;
everything else (the REST answers, the tests) reads them. Amounts are Decimal.
"""

from __future__ import annotations

from decimal import Decimal

import attrs

from framework.twin.book import Book
from framework.twin.events import Match
from framework.twin.order_index import OrderIndex
from framework.twin.settings import PairSettings
from framework.venue.rules import PairRules

__all__ = ["Account", "Balance", "Market", "Position", "Refusal", "pnl_at"]

Refusal = tuple[int, str]
"""A refused order or call: (SPEC section 7 code, filled message)."""

_ZERO = Decimal(0)


@attrs.define(slots=True, eq=False)
class Balance:
    """One coin of one account: available and frozen amounts."""

    coin: str
    coin_id: int
    available: Decimal
    frozen: Decimal = _ZERO


@attrs.define(slots=True, eq=False, kw_only=True)
class Position:
    """An open one-way position (quantity > 0)."""

    id: int
    user_id: int
    pair: str
    is_long: bool
    quantity: Decimal
    opening_price: Decimal
    margin: Decimal
    lever: int
    position_type: int
    entrust_id: int
    realized_pnl: Decimal = _ZERO
    fees: Decimal = _ZERO
    create_ms: int = 0


@attrs.define(slots=True, eq=False, kw_only=True)
class Account:
    """One API client's state: balances, positions, matches, orders and order ids seen."""

    user_id: int
    address: str | None
    balances: dict[str, Balance]
    positions: dict[str, Position] = attrs.Factory(dict)
    # Every match by pair in id order, listed already or not yet.
    matches: dict[str, list[Match]] = attrs.Factory(dict)
    # clientOrderIds of accepted orders: a set for the duplicate check, and a map to the
    # orderId each was given (ground truth for tests, e.g. after an unanswered batch).
    client_ids: set[str] = attrs.Factory(set)
    order_ids: dict[str, int] = attrs.Factory(dict)
    # Match id -> twin time (ms) from which the match list shows a match held back by the
    # match_delay fault; entries go once the time has passed.
    listed_from_ms: dict[int, int] = attrs.Factory(dict)
    resting: dict[tuple[str, bool], Decimal] = attrs.Factory(dict)
    # Every order placed, as the order-management extension reports it (bounded).
    orders: OrderIndex = attrs.Factory(OrderIndex)


@attrs.define(slots=True, eq=False, kw_only=True)
class Market:
    """One pair: its rules, mark, book and the accounts holding a position in it."""

    name: str
    settings: PairSettings
    rules: PairRules
    coin: str
    coin_id: int
    contract_pair_id: int
    mark: Decimal
    money_exp: Decimal
    price_exp: Decimal
    book: Book = attrs.Factory(Book)
    total_quantity: Decimal = _ZERO
    holders: dict[int, None] = attrs.Factory(dict)


def pnl_at(position: Position, price: Decimal, quantity: Decimal) -> Decimal:
    """The PnL of closing quantity of a position at price (not rounded)."""
    diff = price - position.opening_price
    return diff * quantity if position.is_long else -diff * quantity
