"""Atomic batches: a savepoint of what one batch can change, and its restoration.

A batch touches one account (balances, positions, matches, client order ids, resting
quantities), the pairs its orders name (total quantity, holders, book) and the id sequences.
The savepoint copies exactly that; :meth:`Savepoint.restore` puts it back and cancels the
orders the batch rested, so a refused atomic batch leaves no trace, not even used ids.

Matches are not copied: the savepoint keeps each pair's :attr:`MatchHistory.end
<framework.twin.match_history.MatchHistory.end>` and restore truncates back to it; the
batch's clientOrderIds are taken out of ``order_ids``. This is exact because the bounded
structures (matches, ``order_ids``, order records) are trimmed only after the batch, once
the savepoint is released: nothing from before the savepoint is forgotten while it is held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

import attrs

from framework.twin.state import Account, Market, Position, Refusal
from framework.venue.models import OrderInput

__all__ = ["Savepoint", "Sequences"]


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
            for order in market.book.orders():
                if order.seq > self.ids.seq:
                    market.book.cancel(order)
        account.resting = dict(self.resting)
        for client_id in added_client_ids:
            account.order_ids.pop(client_id, None)
        for field in attrs.fields(Sequences):
            setattr(ids, field.name, getattr(self.ids, field.name))
