"""The exchange's state: its settings, balances, positions, accounts and markets, bounded.

Plain attrs records owned and changed only by :class:`~framework.sim.exchange.Exchange`;
everything else (the twin's REST answers, the paper venue, the tests) reads them. Amounts
are Decimal. :class:`ExchangeSettings` holds every choice the exchange makes where SPEC.md
says "not shown" (the twin's settings extend it, so its YAML keys are the twin's).

Memory bound (the exchange's choice; the venue's documentation is silent): what an account
keeps per order or per match is bounded by settings, so a long run (or the twin embedded in
the daemon) does not grow without end: ``matches`` and ``orders``
(:mod:`framework.sim.history`), ``order_ids`` the newest ``client_id_history_limit``
accepted orders (100000 by default), ``listed_from_ms`` only matches still kept. A
clientOrderId is refused as already used (``2001 Illegal parameter:clientOrderId``) while
the exchange still remembers an order that carried it, in ``order_ids`` or in the order
records; once both have forgotten it, it is accepted again. The exchange trims after each
operation (:func:`trim_account`, O(1) amortized per order or match), never inside an atomic
batch.

Atomic batches: a batch touches one account (balances, positions, matches, client order ids,
resting quantities), the pairs its orders name (total quantity, holders, book) and the id
sequences. :class:`Savepoint` copies exactly that; :meth:`Savepoint.restore` puts it back and
cancels the orders the batch rested, so a refused atomic batch leaves no trace, not even
used ids. Matches are not copied: the savepoint keeps each pair's :attr:`MatchHistory.end
<framework.sim.history.MatchHistory.end>` and restore truncates back to it. This is exact
because nothing is trimmed while the savepoint is held.
"""

from __future__ import annotations

from collections.abc import KeysView, Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

import attrs

from framework.sim.book import Book
from framework.sim.history import MatchHistory, OrderIndex, Recent
from framework.venue.market import Book as QuoteBook
from framework.venue.models import OrderInput
from framework.venue.rules import PairRules

__all__ = [
    "Account",
    "Balance",
    "ExchangeSettings",
    "FeeSettings",
    "Market",
    "PairSettings",
    "Position",
    "Refusal",
    "Savepoint",
    "Sequences",
    "pnl_at",
    "trim_account",
    "trim_matches",
]

_ZERO = Decimal(0)


def _non_negative(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value}")


def _at_least_one(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1, got {value}")


@attrs.frozen(kw_only=True)
class FeeSettings:
    """Fee rates charged on the notional of every fill (maker: resting GTC fills)."""

    maker: Decimal = attrs.field(default=Decimal("0.0002"), validator=_non_negative)
    taker: Decimal = attrs.field(default=Decimal("0.0005"), validator=_non_negative)


@attrs.frozen(kw_only=True)
class PairSettings:
    """One contract pair: its rules, starting mark, ids and liquidity."""

    initial_price: Decimal = Decimal("2000")
    contract_pair_id: int | None = None
    liquidity: Decimal | None = attrs.field(default=None, validator=_non_negative)
    settle_decimals: int = 8
    rules: PairRules = PairRules()


def _default_pairs() -> dict[str, PairSettings]:
    return {
        "ETH-USD": PairSettings(initial_price=Decimal("2000"), contract_pair_id=1),
        "BTC-USD": PairSettings(
            initial_price=Decimal("60000"),
            contract_pair_id=2,
            rules=PairRules(quantity_decimals=4, min_quantity=Decimal("0.0001")),
        ),
    }


@attrs.frozen(kw_only=True)
class ExchangeSettings:
    """The exchange's markets, fees, fill and margin model and memory bounds."""

    post_only_crossing: Literal["reject", "cancel"] = "reject"
    fees: FeeSettings = FeeSettings()
    slippage: Decimal = attrs.field(default=Decimal("0.0005"), validator=_non_negative)
    maintenance_margin_rate: Decimal = attrs.field(
        default=Decimal("0.005"), validator=_non_negative
    )
    coins: dict[str, int] = attrs.field(factory=lambda: {"USD": 1})
    pairs: dict[str, PairSettings] = attrs.field(factory=_default_pairs)
    # Memory bounds, each at least 1, the oldest forgotten first. Completed order records
    # per account (open orders are always kept): older ones answer 2340.
    order_history_limit: int = attrs.field(default=100_000, validator=_at_least_one)
    # Matches per account and pair: older ones are no longer listed.
    match_history_limit: int = attrs.field(default=100_000, validator=_at_least_one)
    # Accepted clientOrderIds per account remembered for the duplicate check (2001) and as
    # ground truth (VenueTwin.executed_orders); an id no longer remembered here nor by an
    # order record is accepted again.
    client_id_history_limit: int = attrs.field(default=100_000, validator=_at_least_one)


Refusal = tuple[int, str]
"""A refused order or call: (SPEC section 7 code, filled message)."""


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
    order_ids: Recent[str, int] = attrs.Factory(Recent)
    # Match id -> time (ms) from which the match list shows a match held back by the
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
    # The market's current book when fills read one (framework.sim.market_fills): levels
    # taken by this exchange's fills are gone from it until the next book is set.
    quotes: QuoteBook | None = None


def pnl_at(position: Position, price: Decimal, quantity: Decimal) -> Decimal:
    """The PnL of closing quantity of a position at price (not rounded)."""
    diff = price - position.opening_price
    return diff * quantity if position.is_long else -diff * quantity


def trim_account(account: Account, client_id_history_limit: int) -> None:
    """Bound what the account keeps per order and match (never inside an atomic batch)."""
    account.orders.trim()
    order_ids = account.order_ids
    while len(order_ids) > client_id_history_limit:
        order_ids.pop_oldest()
    for history in account.matches.values():
        trim_matches(account, history)


def trim_matches(account: Account, history: MatchHistory) -> None:
    """Forget the matches beyond the history's limit, and their held-back listing times."""
    forgotten = history.trim()
    held = account.listed_from_ms
    if held:
        for match in forgotten:
            held.pop(match.id, None)


@attrs.define(slots=True, kw_only=True)
class Sequences:
    """The exchange's id sequences: each id is the last one given out."""

    order_id: int = 1_000_000
    match_id: int = 0
    position_id: int = 0
    log_id: int = 0
    seq: int = 0


@attrs.frozen(slots=True, kw_only=True)
class Savepoint:
    """Copies of everything one batch of one account can change."""

    balances: dict[str, tuple[Decimal, Decimal]]
    positions: dict[str, Position | None]
    matches: dict[str, int]
    resting: dict[tuple[str, bool], Decimal]
    totals: dict[str, Decimal]
    ids: Sequences
    quotes: dict[str, QuoteBook | None] = attrs.Factory(dict)

    @classmethod
    def take(
        cls,
        account: Account,
        markets: Mapping[str, Market],
        ids: Sequences,
        items: Sequence[OrderInput | Refusal],
    ) -> Savepoint:
        """Remember the state a batch of items may change."""
        pairs = {i.pair_name for i in items if not isinstance(i, tuple) and i.pair_name in markets}
        return cls(
            balances={c: (b.available, b.frozen) for c, b in account.balances.items()},
            positions={
                p: attrs.evolve(pos) if (pos := account.positions.get(p)) is not None else None
                for p in pairs
            },
            matches={
                p: history.end if (history := account.matches.get(p)) is not None else 0
                for p in pairs
            },
            resting=dict(account.resting),
            totals={p: markets[p].total_quantity for p in pairs},
            ids=attrs.evolve(ids),
            quotes={p: markets[p].quotes for p in pairs},
        )

    def restore(
        self,
        account: Account,
        markets: Mapping[str, Market],
        ids: Sequences,
        added_client_ids: list[str],
    ) -> None:
        """Undo everything done since the savepoint; added_client_ids leave order_ids."""
        for coin, (available, frozen) in self.balances.items():
            balance = account.balances[coin]
            balance.available, balance.frozen = available, frozen
        for pair, position in self.positions.items():
            market = markets[pair]
            if position is None:
                account.positions.pop(pair, None)
                market.holders.pop(account.user_id, None)
            else:
                account.positions[pair] = position
                market.holders[account.user_id] = None
            history = account.matches.get(pair)
            if history is not None:
                history.truncate(self.matches[pair])
            market.total_quantity = self.totals[pair]
            market.quotes = self.quotes.get(pair, market.quotes)
            for order in market.book.orders():
                if order.seq > self.ids.seq:
                    market.book.cancel(order)
        account.resting = dict(self.resting)
        for client_id in added_client_ids:
            account.order_ids.pop(client_id, None)
        for field in attrs.fields(Sequences):
            setattr(ids, field.name, getattr(self.ids, field.name))
