"""The exchange's mutable state: balances, positions, accounts and markets.

Plain attrs records owned and changed only by :class:`~framework.twin.exchange.Exchange`;
everything else (the REST answers, the tests) reads them. Amounts are Decimal.

Memory bound: what an account keeps per order or per match is bounded by settings, so a
long run (or the twin embedded in the daemon) does not grow without end. ``matches`` keeps
the newest ``match_history_limit`` matches per pair (:mod:`framework.twin.match_history`);
``order_ids`` the newest ``client_id_history_limit`` accepted orders; ``orders`` every open
order and the newest ``order_history_limit`` completed ones
(:mod:`framework.twin.order_index`); ``listed_from_ms`` only matches still kept. Each
defaults to 100000. The exchange trims them after each operation, never inside an atomic
batch (see :mod:`framework.twin.savepoint`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import KeysView
from decimal import Decimal

import attrs

from framework.twin.book import Book
from framework.twin.match_history import MatchHistory
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
    # The newest matches by pair in id order, listed already or not yet (bounded).
    matches: dict[str, MatchHistory] = attrs.Factory(dict)
    # clientOrderId -> orderId of the newest accepted orders, oldest first (bounded): the
    # duplicate check's memory, and ground truth for tests (e.g. after an unanswered batch).
    order_ids: OrderedDict[str, int] = attrs.Factory(OrderedDict)
    # Match id -> twin time (ms) from which the match list shows a match held back by the
    # match_delay fault; entries go once the time has passed or the match is forgotten.
    listed_from_ms: dict[int, int] = attrs.Factory(dict)
    resting: dict[tuple[str, bool], Decimal] = attrs.Factory(dict)
    # Every open order and the newest completed ones, as the order-management extension
    # reports them (bounded).
    orders: OrderIndex = attrs.Factory(OrderIndex)

    @property
    def client_ids(self) -> KeysView[str]:
        """The clientOrderIds of order_ids (the newest accepted orders), a live view."""
        return self.order_ids.keys()


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
