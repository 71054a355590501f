"""Positions and balances kept current from pushes and REST snapshots (with the logId rule).

Balances are versioned by the venue's ``logId`` (VENUE-FACTS: a smaller logId is an older
balance): an account push whose logId is below the newest seen for its coin is dropped and
counted as stale, one equal to it is a repeat and dropped too (counted apart). A REST balance
snapshot has no logId, so it may only replace what is known when no push arrived for that coin
while the snapshot was being fetched (see :meth:`Portfolio.account_mark`).

Positions carry no version: a push replaces what is known of its position and a REST snapshot
replaces a pair's positions wholesale. (Duplicate deliveries of a position push are dropped by
the stream, which can tell them apart from a repeat that follows a lost push.)

:func:`push_router` is what a stream's ``on_frame`` is: it applies a push here and publishes
the event only when the push was not dropped, so strategies never see a balance go back.

A replay with nobody listening to pushes files them without decoding them
(:meth:`Portfolio.defer_position_pushes`, :meth:`Portfolio.defer_account_pushes`, or the
:class:`FilingQueues` filed before the next read): the routing fields a first look found
(:mod:`framework.venue.peek`) decide where a push goes and whether it is dropped, by the same
rules, and its frame is kept in place of the state. A read decodes
what it meets with the live codec, so every read sees what eager application would have
made. A kept frame that does not decode (an amount that is not a number) is found then: it
is logged and counted, and its position or balance is unknown from then on (eager
application would have kept the one before).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from itertools import accumulate, islice
from typing import Final, TypeVar

import attrs
import orjson

from framework.engine.events import AccountChanged, Event, PositionChanged
from framework.venue.codec import DEFAULT_CODEC
from framework.venue.errors import DecodeError
from framework.venue.models import (
    AccountBalance,
    AccountPush,
    ChangeType,
    Direction,
    Position,
    PositionPush,
)
from framework.venue.peek import AccountRoute, PositionRoute

__all__ = [
    "Balance",
    "FilingQueues",
    "Portfolio",
    "PositionState",
    "push_router",
]

_P = TypeVar("_P", PositionPush, AccountPush)

_ZERO = Decimal(0)
_CLOSING: Final = frozenset((ChangeType.CLOSE, ChangeType.LIQUIDATE))
_NONZERO: Final = frozenset("123456789")
_SYMBOL: Final = operator.attrgetter("symbol")
_POSITION_KEY: Final = operator.attrgetter("symbol", "position_id")
_LOG_ID: Final = operator.attrgetter("log_id")

log = logging.getLogger("framework.portfolio")


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


def _by_id(state: PositionState) -> tuple[bool, int]:
    return (state.position_id is not None, state.position_id or 0)


def _balance_of_push(push: AccountPush) -> Balance:
    return Balance(
        coin=push.symbol,
        available_amount=push.available_amount,
        frozen_amount=push.frozen_amount,
        log_id=push.log_id,
    )


def _is_zero(quantity: str) -> bool:
    """Whether a wire quantity is zero (a malformed one is not: its decode will tell)."""
    try:
        return Decimal(quantity) == _ZERO
    except InvalidOperation:
        return False


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


@attrs.frozen
class FilingQueues:
    """Pushes waiting to be filed, in arrival order: each route beside its frame.

    Append to both lists of a kind together (a replay appends push by push); the
    portfolio files them before it next answers or applies anything.
    """

    position_routes: list[PositionRoute] = attrs.field(factory=list)
    """The routing fields of api_position pushes."""
    position_frames: list[str] = attrs.field(factory=list)
    """Their frames, as received."""
    account_routes: list[AccountRoute] = attrs.field(factory=list)
    """The routing fields of api_account pushes."""
    account_frames: list[str] = attrs.field(factory=list)
    """Their frames, as received."""


@attrs.define
class Portfolio:
    """Positions per pair and balances per coin, as pushes and snapshots tell them."""

    # A str entry is a kept frame (see defer_position_pushes); reads decode it in place.
    _positions: dict[str, dict[int | None, PositionState | str]] = attrs.field(
        factory=dict, init=False
    )
    _balances: dict[str, Balance | str] = attrs.field(factory=dict, init=False)
    _log_ids: dict[str, int] = attrs.field(factory=dict, init=False)
    _marks: dict[str, int] = attrs.field(factory=dict, init=False)
    # Per pair, the count of position pushes (of every pair) at the pair's latest push.
    _position_marks: dict[str, int] = attrs.field(factory=dict, init=False)
    _position_pushes: int = attrs.field(default=0, init=False)
    stale_account_pushes: int = attrs.field(default=0, init=False)
    duplicate_account_pushes: int = attrs.field(default=0, init=False)
    snapshots_ignored: int = attrs.field(default=0, init=False)
    position_snapshots_ignored: int = attrs.field(default=0, init=False)
    deferred_pushes_malformed: int = attrs.field(default=0, init=False)
    _queues: FilingQueues = attrs.field(factory=FilingQueues, init=False)
    # The queues' routes lists, for the check every method makes first.
    _due_positions: list[PositionRoute] = attrs.field(init=False)
    _due_accounts: list[AccountRoute] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._due_positions = self._queues.position_routes
        self._due_accounts = self._queues.account_routes

    def filing_queues(self) -> FilingQueues:
        """The lists to append pushes to file to, in order (a replay's fastest way to file).

        What waits in them is filed (defer_position_pushes, defer_account_pushes) before
        any method of this portfolio answers or applies anything, and by file_due(); read
        the drop counters through counters(), which files first.
        """
        return self._queues

    def file_due(self) -> None:
        """File what waits in the filing queues."""
        queues = self._queues
        if queues.position_routes:
            routes, frames = queues.position_routes[:], queues.position_frames[:]
            queues.position_routes.clear()
            queues.position_frames.clear()
            self._file_positions(routes, frames)
        if queues.account_routes:
            routes_a, frames_a = queues.account_routes[:], queues.account_frames[:]
            queues.account_routes.clear()
            queues.account_frames.clear()
            self._file_accounts(routes_a, frames_a)

    # ---- positions

    def apply_position_push(self, push: PositionPush) -> None:
        """Apply an api_position push: its current quantity replaces what was known."""
        if self._due_positions or self._due_accounts:
            self.file_due()
        self._position_pushes += 1
        self._position_marks[push.symbol] = self._position_pushes
        pair = self._positions.setdefault(push.symbol, {})
        closed = push.change_type in _CLOSING
        if push.current_quantity == _ZERO or (closed and push.current_quantity is None):
            pair.pop(push.position_id, None)
        else:
            pair[push.position_id] = _position_of_push(push)

    def defer_position_push(self, route: PositionRoute, frame: str) -> None:
        """File an api_position push by its routing fields; its frame is decoded when read.

        The same rule as apply_position_push: a zero quantity (or a close without one)
        removes the position, anything else replaces it.
        """
        self.defer_position_pushes([route], [frame])

    def defer_position_pushes(self, routes: Sequence[PositionRoute], frames: Sequence[str]) -> None:
        """defer_position_push for each route and its frame, in order, at once."""
        self.file_due()
        self._file_positions(routes, frames)

    def _file_positions(self, routes: Sequence[PositionRoute], frames: Sequence[str]) -> None:
        # Only the last push of a position decides it: what applying them one by one leaves.
        if len(routes) != len(frames):
            raise ValueError(f"{len(routes)} position routes for {len(frames)} frames")
        if not routes:
            return
        marks = self._position_marks
        base = self._position_pushes
        self._position_pushes += len(routes)
        books = self._positions
        for (pair, position_id), last in dict(
            zip(map(_POSITION_KEY, routes), range(len(routes)), strict=True)
        ).items():
            positions = books.get(pair)
            if positions is None:
                positions = books[pair] = {}
            if marks.get(pair, 0) <= base + last:
                marks[pair] = base + last + 1
            route = routes[last]
            quantity = route.current_quantity
            if quantity is None:
                closed = route.change_type in _CLOSING
            else:
                # A plain decimal whose first digit after any "0" and "." is 1-9 is not zero.
                lead = quantity.lstrip("0.")
                closed = not (lead and lead[0] in _NONZERO) and _is_zero(quantity)
            if closed:
                positions.pop(position_id, None)
            else:
                positions[position_id] = frames[last]

    def position_mark(self, pair: str) -> int:
        """A token to take before fetching a position snapshot; see apply_positions.

        It changes with every position push for the pair: the count of position pushes
        (of any pair) at the pair's latest one.
        """
        if self._due_positions or self._due_accounts:
            self.file_due()
        return self._position_marks.get(pair, 0)

    def apply_positions(
        self, pair: str, positions: Iterable[Position], *, mark: int | None = None
    ) -> bool:
        """Replace the positions of pair by a REST snapshot; True when anything changed.

        With a mark (taken before the fetch), a snapshot is ignored and counted when a push
        for the pair arrived meanwhile: the push is newer than the snapshot.
        """
        if self._due_positions or self._due_accounts:
            self.file_due()
        if mark is not None and self._position_marks.get(pair, 0) != mark:
            self.position_snapshots_ignored += 1
            return False
        fresh: dict[int | None, PositionState] = {
            p.id: _position_of_snapshot(pair, p)
            for p in positions
            if p.quantity is None or p.quantity != _ZERO
        }
        old = self._settled(pair)
        self._positions[pair] = dict(fresh)
        return _view(old) != _view(fresh)

    def positions(self, pair: str) -> tuple[PositionState, ...]:
        """The open positions of pair by position id (one-way mode: usually zero or one)."""
        if self._due_positions or self._due_accounts:
            self.file_due()
        return tuple(sorted(self._settled(pair).values(), key=_by_id))

    def net_quantity(self, pair: str) -> Decimal:
        """The signed quantity held on pair: long positive, short negative, flat zero."""
        if self._due_positions or self._due_accounts:
            self.file_due()
        return sum((p.signed_quantity for p in self._settled(pair).values()), _ZERO)

    def pairs(self) -> tuple[str, ...]:
        """The pairs with at least one open position."""
        if self._due_positions or self._due_accounts:
            self.file_due()
        return tuple(p for p in list(self._positions) if self._settled(p))

    def _settled(self, pair: str) -> dict[int | None, PositionState]:
        """The positions of pair, kept frames decoded in place (those that fail dropped)."""
        positions = self._positions.get(pair)
        if not positions:
            return {}
        for position_id, entry in list(positions.items()):
            if type(entry) is str:
                push = self._decode_kept(entry, PositionPush)
                if push is None:
                    del positions[position_id]
                else:
                    positions[position_id] = _position_of_push(push)
        return positions  # type: ignore[return-value]  # every entry is a state now

    def _decode_kept(self, frame: str, kind: type[_P]) -> _P | None:
        """A kept frame decoded by the live codec, or None (logged, counted) when it fails."""
        try:
            push = DEFAULT_CODEC.decode_frame(orjson.loads(frame))
        except (orjson.JSONDecodeError, DecodeError) as exc:
            push, problem = None, str(exc)
        else:
            problem = f"expected {kind.__name__}, got {type(push).__name__}"
        if type(push) is kind:
            return push
        self.deferred_pushes_malformed += 1
        log.warning("a kept push does not decode and is dropped: %s", problem)
        return None

    # ---- balances

    def apply_account_push(self, push: AccountPush) -> bool:
        """Apply an api_account push; False (dropped, counted) when its logId is not newer."""
        if self._due_positions or self._due_accounts:
            self.file_due()
        if not self._take_log_id(push.symbol, push.log_id):
            return False
        self._balances[push.symbol] = _balance_of_push(push)
        return True

    def defer_account_push(self, route: AccountRoute, frame: str) -> bool:
        """File an api_account push by coin and logId (same rule); its frame is decoded when read."""
        return self.defer_account_pushes([route], [frame]) == 1

    def defer_account_pushes(self, routes: Sequence[AccountRoute], frames: Sequence[str]) -> int:
        """defer_account_push for each route and its frame, in order, at once; how many were taken."""
        self.file_due()
        return self._file_accounts(routes, frames)

    def _file_accounts(self, routes: Sequence[AccountRoute], frames: Sequence[str]) -> int:
        if len(routes) != len(frames):
            raise ValueError(f"{len(routes)} account routes for {len(frames)} frames")
        if not routes:
            return 0
        coins = set(map(_SYMBOL, routes))
        if len(coins) > 1:
            taken = 0
            for coin in sorted(coins):
                mine = [i for i, route in enumerate(routes) if route.symbol == coin]
                taken += self._file_accounts([routes[i] for i in mine], [frames[i] for i in mine])
            return taken
        coin = routes[0].symbol
        ids = list(map(_LOG_ID, routes))
        newest = self._log_ids.get(coin)
        if (newest is None or ids[0] > newest) and all(map(operator.lt, ids, islice(ids, 1, None))):
            top, taken = len(ids) - 1, len(ids)  # each newer than the one before: all taken
        else:
            # Each push against the newest logId before it: newer taken, older stale, equal
            # repeated.
            before = list(accumulate(ids, max, initial=min(ids) - 1 if newest is None else newest))
            taken = int(sum(map(operator.gt, ids, before)))
            stale = int(sum(map(operator.lt, ids, before)))
            self.stale_account_pushes += stale
            self.duplicate_account_pushes += len(ids) - taken - stale
            top = ids.index(before[-1]) if taken else -1
        if taken:
            self._log_ids[coin] = ids[top]
            self._marks[coin] = self._marks.get(coin, 0) + taken
            self._balances[coin] = frames[top]
        return taken

    def _take_log_id(self, coin: str, log_id: int) -> bool:
        """The logId rule: True (and the coin marked) when log_id is newer than any seen."""
        newest = self._log_ids.get(coin)
        if newest is not None and log_id <= newest:
            if log_id < newest:
                self.stale_account_pushes += 1
            else:
                self.duplicate_account_pushes += 1
            return False
        self._log_ids[coin] = log_id
        self._marks[coin] = self._marks.get(coin, 0) + 1
        return True

    def account_mark(self, coin: str) -> int:
        """A token to take before fetching a balance snapshot; see apply_balance."""
        if self._due_positions or self._due_accounts:
            self.file_due()
        return self._marks.get(coin, 0)

    def apply_balance(
        self, balance: AccountBalance, *, coin: str | None = None, mark: int | None = None
    ) -> bool:
        """Apply a REST balance unless a push (newer) arrived since mark; True when it changed.

        Without a mark the snapshot is applied only if no push was ever seen for the coin.
        """
        if self._due_positions or self._due_accounts:
            self.file_due()
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
        if self._due_positions or self._due_accounts:
            self.file_due()
        entry = self._balances.get(coin)
        if not isinstance(entry, str):
            return entry
        push = self._decode_kept(entry, AccountPush)
        if push is None:
            del self._balances[coin]
            return None
        balance = self._balances[coin] = _balance_of_push(push)
        return balance

    def available(self, coin: str) -> Decimal | None:
        """The available amount of coin, or None when unknown."""
        b = self.balance(coin)
        return None if b is None else b.available_amount

    def log_id(self, coin: str) -> int | None:
        """The newest logId accepted for coin."""
        if self._due_positions or self._due_accounts:
            self.file_due()
        return self._log_ids.get(coin)

    def seed_log_ids(self, log_ids: Mapping[str, int]) -> None:
        """Start from logIds persisted by an earlier run, so older pushes stay dropped."""
        if self._due_positions or self._due_accounts:
            self.file_due()
        for coin, log_id in log_ids.items():
            if log_id > self._log_ids.get(coin, -1):
                self._log_ids[coin] = log_id

    def counters(self) -> dict[str, int]:
        """Drop counters for metrics and the summary line."""
        if self._due_positions or self._due_accounts:
            self.file_due()
        return {
            "stale_account_pushes": self.stale_account_pushes,
            "duplicate_account_pushes": self.duplicate_account_pushes,
            "balance_snapshots_ignored": self.snapshots_ignored,
            "position_snapshots_ignored": self.position_snapshots_ignored,
            "deferred_pushes_malformed": self.deferred_pushes_malformed,
        }


def _view(
    positions: Mapping[int | None, PositionState],
) -> dict[int | None, tuple[bool | None, Decimal]]:
    return {k: (p.is_long, p.quantity) for k, p in positions.items()}


def push_router(
    portfolio: Portfolio, publish: Callable[[Event], None]
) -> Callable[[PositionPush | AccountPush], None]:
    """A stream's on_frame: apply each push to portfolio, publish it unless it was dropped."""
    apply_position = portfolio.apply_position_push
    apply_account = portfolio.apply_account_push

    def on_frame(push: PositionPush | AccountPush) -> None:
        if isinstance(push, PositionPush):
            apply_position(push)
            publish(PositionChanged(push))
        elif apply_account(push):
            publish(AccountChanged(push))

    return on_frame
