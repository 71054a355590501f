"""Positions and balances kept current from pushes and REST snapshots (with the logId rule).

Balances are versioned by the venue's ``logId`` (VENUE-FACTS: a smaller logId is an older
balance): an account push whose logId is below the newest seen for its coin is dropped and
counted as stale, one equal to it is a repeat and dropped too (counted apart). A REST balance
snapshot has no logId, so it may only replace what is known when no push arrived for that coin
while the snapshot was being fetched (see :meth:`Portfolio.account_mark`).

Positions carry no version: a push replaces what is known of its position and a REST snapshot
replaces a pair's positions wholesale. (Duplicate deliveries of a position push are dropped by
the stream, which can tell them apart from a repeat that follows a lost push.)

:func:`push_routes` is what the portfolio registers with the kernel's intake, one route per
push type: it applies a push here and publishes the event only when the push was not
dropped, so strategies never see a balance go back.

The portfolio keeps the pushed record itself as what it knows (no copy per push): a read
turns it into a :class:`PositionState` or :class:`Balance` the first time it is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, Final

import attrs

from framework.engine.events import Event
from framework.venue.models import (
    AccountBalance,
    AccountPush,
    ChangeType,
    Direction,
    Position,
    PositionPush,
)

__all__ = [
    "Balance",
    "Portfolio",
    "PositionState",
    "push_router",
    "push_routes",
]

_ZERO = Decimal(0)
_CLOSING: Final = frozenset((ChangeType.CLOSE, ChangeType.LIQUIDATE))


@attrs.frozen(slots=True, kw_only=True)
class PositionState:
    """What is known of one position; quantity is unsigned, is_long gives the side."""

    pair: str
    position_id: int | None
    is_long: bool | None
    quantity: Decimal
    opening_price: Decimal | None = None
    margin_amount: Decimal | None = None
    position_type: int | None = None
    from_snapshot: bool = False

    @property
    def signed_quantity(self) -> Decimal:
        """Quantity with the side as its sign: long positive, short negative."""
        return -self.quantity if self.is_long is False else self.quantity


@attrs.frozen(slots=True, kw_only=True)
class Balance:
    """What is known of one settlement coin; log_id None when only a snapshot was seen."""

    coin: str
    available_amount: Decimal | None
    frozen_amount: Decimal | None
    log_id: int | None = None
    from_snapshot: bool = False


def _position_of_push(push: PositionPush) -> PositionState:
    return PositionState(
        pair=push.symbol,
        position_id=push.position_id,
        is_long=None if push.direction is None else push.direction is Direction.LONG,
        quantity=push.current_quantity if push.current_quantity is not None else _ZERO,
        opening_price=push.opening_price,
        margin_amount=push.margin_amount,
        position_type=push.position_type,
    )


def _signed_of_push(push: PositionPush) -> Decimal:
    quantity = push.current_quantity if push.current_quantity is not None else _ZERO
    return -quantity if push.direction is Direction.SHORT else quantity


def _by_id(state: PositionState) -> tuple[bool, int]:
    return (state.position_id is not None, state.position_id or 0)


def _balance_of_push(push: AccountPush) -> Balance:
    return Balance(
        coin=push.symbol,
        available_amount=push.available_amount,
        frozen_amount=push.frozen_amount,
        log_id=push.log_id,
    )


def _position_of_snapshot(pair: str, p: Position) -> PositionState:
    return PositionState(
        pair=p.symbol or pair,
        position_id=p.id,
        is_long=p.is_long,
        quantity=p.quantity if p.quantity is not None else _ZERO,
        opening_price=p.opening_price,
        margin_amount=p.margin_amount,
        position_type=p.position_type,
        from_snapshot=True,
    )


@attrs.define
class Portfolio:
    """Positions per pair and balances per coin, as pushes and snapshots tell them."""

    # A push entry is the last push of that position (or coin), kept as it came; a read
    # turns it into a PositionState (Balance) in place.
    _positions: dict[str, dict[int | None, PositionState | PositionPush]] = attrs.field(
        factory=dict, init=False
    )
    _balances: dict[str, Balance | AccountPush] = attrs.field(factory=dict, init=False)
    _log_ids: dict[str, int] = attrs.field(factory=dict, init=False)
    _marks: dict[str, int] = attrs.field(factory=dict, init=False)
    # Per pair, the count of position pushes (of every pair) at the pair's latest push.
    _position_marks: dict[str, int] = attrs.field(factory=dict, init=False)
    _position_pushes: int = attrs.field(default=0, init=False)
    stale_account_pushes: int = attrs.field(default=0, init=False)
    duplicate_account_pushes: int = attrs.field(default=0, init=False)
    snapshots_ignored: int = attrs.field(default=0, init=False)
    position_snapshots_ignored: int = attrs.field(default=0, init=False)

    # ---- positions

    def apply_position_push(self, push: PositionPush) -> None:
        """Apply an api_position push: its current quantity replaces what was known."""
        symbol = push.symbol
        self._position_pushes = count = self._position_pushes + 1
        self._position_marks[symbol] = count
        pair = self._positions.get(symbol)
        if pair is None:
            pair = self._positions[symbol] = {}
        quantity = push.current_quantity
        if quantity:  # the common case first: an open position's new quantity
            pair[push.position_id] = push
        elif quantity is not None or push.change_type in _CLOSING:  # zero, or closed
            pair.pop(push.position_id, None)
        else:
            pair[push.position_id] = push

    def position_mark(self, pair: str) -> int:
        """A token to take before fetching a position snapshot; see apply_positions.

        It changes with every position push for the pair: the count of position pushes
        (of any pair) at the pair's latest one.
        """
        return self._position_marks.get(pair, 0)

    def apply_positions(
        self, pair: str, positions: Iterable[Position], *, mark: int | None = None
    ) -> bool:
        """Replace the positions of pair by a REST snapshot; True when anything changed.

        With a mark (taken before the fetch), a snapshot is ignored and counted when a push
        for the pair arrived meanwhile: the push is newer than the snapshot.
        """
        if mark is not None and self._position_marks.get(pair, 0) != mark:
            self.position_snapshots_ignored += 1
            return False
        fresh: dict[int | None, PositionState] = {
            p.id: _position_of_snapshot(pair, p)
            for p in positions
            if p.quantity is None or p.quantity != _ZERO
        }
        old = self._states(pair)
        self._positions[pair] = dict(fresh)
        return _view(old) != _view(fresh)

    def positions(self, pair: str) -> tuple[PositionState, ...]:
        """The open positions of pair by position id (one-way mode: usually zero or one)."""
        return tuple(sorted(self._states(pair).values(), key=_by_id))

    def net_quantity(self, pair: str) -> Decimal:
        """The signed quantity held on pair: long positive, short negative, flat zero."""
        positions = self._positions.get(pair)
        if not positions:
            return _ZERO
        total = _ZERO
        for entry in positions.values():
            if type(entry) is PositionPush:
                total += _signed_of_push(entry)
            else:
                total += entry.signed_quantity  # type: ignore[union-attr]
        return total

    def pairs(self) -> tuple[str, ...]:
        """The pairs with at least one open position."""
        return tuple(p for p, positions in self._positions.items() if positions)

    def _states(self, pair: str) -> dict[int | None, PositionState]:
        """The positions of pair, kept pushes turned into states in place."""
        positions = self._positions.get(pair)
        if not positions:
            return {}
        for position_id, entry in positions.items():
            if type(entry) is PositionPush:
                positions[position_id] = _position_of_push(entry)
        return positions  # type: ignore[return-value]  # every entry is a state now

    # ---- balances

    def apply_account_push(self, push: AccountPush) -> bool:
        """Apply an api_account push; False (dropped, counted) when its logId is not newer."""
        coin = push.symbol
        log_id = push.log_id
        newest = self._log_ids.get(coin)
        if newest is not None and log_id <= newest:
            if log_id < newest:
                self.stale_account_pushes += 1
            else:
                self.duplicate_account_pushes += 1
            return False
        self._log_ids[coin] = log_id
        marks = self._marks
        marks[coin] = marks.get(coin, 0) + 1
        self._balances[coin] = push
        return True

    def account_mark(self, coin: str) -> int:
        """A token to take before fetching a balance snapshot; see apply_balance."""
        return self._marks.get(coin, 0)

    def apply_balance(
        self, balance: AccountBalance, *, coin: str | None = None, mark: int | None = None
    ) -> bool:
        """Apply a REST balance unless a push (newer) arrived since mark; True when it changed.

        Without a mark the snapshot is applied only if no push was ever seen for the coin.
        """
        symbol = balance.symbol or coin
        if symbol is None:
            raise ValueError("apply_balance: the balance names no coin; pass coin=")
        seen = self._marks.get(symbol, 0)
        if (mark is None and seen) or (mark is not None and seen != mark):
            self.snapshots_ignored += 1
            return False
        old = self.balance(symbol)
        self._balances[symbol] = Balance(
            coin=symbol,
            available_amount=balance.available_amount,
            frozen_amount=balance.frozen_amount,
            log_id=self._log_ids.get(symbol),
            from_snapshot=True,
        )
        return old is None or (old.available_amount, old.frozen_amount) != (
            balance.available_amount,
            balance.frozen_amount,
        )

    def balance(self, coin: str) -> Balance | None:
        """What is known of coin's balance, or None."""
        entry = self._balances.get(coin)
        if type(entry) is AccountPush:
            entry = self._balances[coin] = _balance_of_push(entry)
        return entry  # type: ignore[return-value]  # a Balance or None now

    def available(self, coin: str) -> Decimal | None:
        """The available amount of coin, or None when unknown."""
        entry = self._balances.get(coin)
        return None if entry is None else entry.available_amount

    def log_id(self, coin: str) -> int | None:
        """The newest logId accepted for coin."""
        return self._log_ids.get(coin)

    def seed_log_ids(self, log_ids: Mapping[str, int]) -> None:
        """Start from logIds persisted by an earlier run, so older pushes stay dropped."""
        for coin, log_id in log_ids.items():
            if log_id > self._log_ids.get(coin, -1):
                self._log_ids[coin] = log_id

    def counters(self) -> dict[str, int]:
        """Drop counters for metrics and the summary line."""
        return {
            "stale_account_pushes": self.stale_account_pushes,
            "duplicate_account_pushes": self.duplicate_account_pushes,
            "balance_snapshots_ignored": self.snapshots_ignored,
            "position_snapshots_ignored": self.position_snapshots_ignored,
        }


def _view(
    positions: Mapping[int | None, PositionState],
) -> dict[int | None, tuple[bool | None, Decimal]]:
    return {k: (p.is_long, p.quantity) for k, p in positions.items()}


def push_routes(
    portfolio: Portfolio, publish: Callable[[Event], None]
) -> dict[type[Any], Callable[[Any], None]]:
    """The intake's routes of the two pushes: apply one to portfolio, publish it unless dropped.

    What the portfolio registers with the kernel's intake (record type -> its consumer).
    """
    apply_position = portfolio.apply_position_push
    apply_account = portfolio.apply_account_push

    def on_position(push: PositionPush) -> None:
        apply_position(push)
        publish(push)

    def on_account(push: AccountPush) -> None:
        if apply_account(push):
            publish(push)

    return {PositionPush: on_position, AccountPush: on_account}


def push_router(
    portfolio: Portfolio, publish: Callable[[Event], None]
) -> Callable[[PositionPush | AccountPush], None]:
    """The two push routes as one callable (tests and bench_dispatch; the node routes through
    Kernel.intake): apply each push to portfolio, publish it unless it was dropped."""
    routes = push_routes(portfolio, publish)

    def on_frame(push: PositionPush | AccountPush) -> None:
        routes[type(push)](push)

    return on_frame
