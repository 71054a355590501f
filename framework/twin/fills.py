"""The fill step: how one fill changes an account's position and balance, and what it reports.

A fill in the position's direction (or with no position) opens or increases it (NEW,
INCREASE): its margin ``quantity x price / lever`` is frozen and its fee charged from the
available balance, and the opening price becomes the quantity-weighted average. A fill
against the position reduces or closes it (REDUCE, CLOSE): the margin of the closed part is
released with its realized PnL, less the fee. The fee is the taker or maker rate of the
notional; amounts are rounded to the pair's settle decimals. A liquidation (LIQUIDATE) closes
the whole position at the mark with no fee, its loss capped at the margin (isolated) or the
margin plus the available balance (cross).

Each fill records a :class:`~framework.twin.events.Match` in the account's history of the
pair (held back from the match list by the match_delay fault's draw, when there is one) and
reports a :class:`~framework.twin.events.PositionChanged` and a
:class:`~framework.twin.events.BalanceChanged` with the next logId. The history is trimmed
at once unless an atomic batch is open (:mod:`framework.twin.retention`).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import attrs

from framework.twin.events import BalanceChanged, Event, Match, PositionChanged
from framework.twin.match_history import MatchHistory
from framework.twin.retention import trim_matches
from framework.twin.savepoint import Sequences
from framework.twin.settings import FeeSettings
from framework.twin.state import Account, Balance, Market, Position, pnl_at

__all__ = ["FillStep", "can_close", "margin_and_fee"]

_ZERO = Decimal(0)
_ISOLATED = 3


@attrs.define(slots=True, eq=False, kw_only=True)
class FillStep:
    """Applies fills to accounts with the exchange's fee rates, id sequences and match limit."""

    fees: FeeSettings
    ids: Sequences
    match_delay: Callable[[], int] | None
    match_history_limit: int
    # True while an atomic batch holds a savepoint: nothing is trimmed meanwhile.
    hold_trim: bool = False

    def apply(
        self,
        account: Account,
        market: Market,
        order_id: int,
        is_long: bool,
        qty: Decimal,
        price: Decimal,
        lever: int,
        position_type: int,
        taker: bool,
        is_market: bool,
        now_ms: int,
        events: list[Event],
        *,
        released_reserve: Decimal = _ZERO,
        liquidation: bool = False,
    ) -> None:
        """Apply one fill to the account's position and balance; report both changes."""
        exp = market.money_exp
        pair = market.name
        balance = account.balances[market.coin]
        notional = qty * price
        fee = (
            _ZERO
            if liquidation
            else (notional * (self.fees.taker if taker else self.fees.maker)).quantize(exp)
        )
        position = account.positions.get(pair)
        pnl = _ZERO
        before = balance.available
        balance.available += released_reserve
        balance.frozen -= released_reserve
        if position is None or position.is_long == is_long:
            margin = (notional / lever).quantize(exp)
            balance.available -= margin + fee
            balance.frozen += margin
            market.total_quantity += qty
            if position is None:
                self.ids.position_id += 1
                position = Position(
                    id=self.ids.position_id,
                    user_id=account.user_id,
                    pair=pair,
                    is_long=is_long,
                    quantity=qty,
                    opening_price=price,
                    margin=margin,
                    lever=lever,
                    position_type=position_type,
                    entrust_id=order_id,
                    fees=fee,
                    create_ms=now_ms,
                )
                account.positions[pair] = position
                market.holders[account.user_id] = None
                change = "NEW"
            else:
                total = position.quantity + qty
                position.opening_price = (
                    (position.quantity * position.opening_price + notional) / total
                ).quantize(exp)
                position.quantity = total
                position.margin += margin
                position.fees += fee
                change = "INCREASE"
            is_close = False
        else:
            closes = qty == position.quantity
            released = (
                position.margin
                if closes
                else (position.margin * qty / position.quantity).quantize(exp)
            )
            pnl = pnl_at(position, price, qty).quantize(exp)
            if liquidation:
                floor = released
                if position.position_type != _ISOLATED:
                    floor += max(balance.available, _ZERO)
                pnl = max(pnl, -floor)
            position.quantity -= qty
            position.margin -= released
            position.realized_pnl += pnl
            position.fees += fee
            balance.frozen -= released
            balance.available += released + pnl - fee
            market.total_quantity -= qty
            if closes:
                del account.positions[pair]
                del market.holders[account.user_id]
            change = "LIQUIDATE" if liquidation else ("CLOSE" if closes else "REDUCE")
            is_close = True
        self.ids.match_id += 1
        if self.match_delay is not None:
            delay = self.match_delay()
            if delay > 0:
                account.listed_from_ms[self.ids.match_id] = now_ms + delay
        history = account.matches.get(pair)
        if history is None:
            history = account.matches[pair] = MatchHistory(self.match_history_limit)
        history.append(
            Match(
                id=self.ids.match_id,
                order_id=order_id,
                position_id=position.id,
                contract_pair_id=market.contract_pair_id,
                time_ms=now_ms,
                pair=pair,
                coin=market.coin,
                settle_decimals=market.settings.settle_decimals,
                lever=lever,
                is_market=is_market,
                is_close=is_close,
                is_long=is_long,
                is_taker=taker,
                price=price,
                quantity=qty,
                amount=notional,
                fee=fee,
                profit_loss=pnl,
                opening_price=position.opening_price,
                address=account.address,
                delivery_time=market.rules.delivery_time,
            )
        )
        if not self.hold_trim:
            trim_matches(account, history)
        events.append(
            PositionChanged(
                user_id=account.user_id,
                pair=pair,
                change_type=change,
                position_id=position.id,
                is_long=position.is_long,
                current_quantity=position.quantity,
                operate_quantity=qty,
                can_closed_quantity=can_close(account, position),
                contract_pair_id=market.contract_pair_id,
                position_type=position.position_type,
                opening_price=position.opening_price,
                margin_amount=position.margin,
                margin_call_amount=_ZERO,
            )
        )
        self.balance_changed(account, balance, balance.available - before, events)

    def close_at_mark(
        self,
        account: Account,
        market: Market,
        position: Position,
        now_ms: int,
        events: list[Event],
    ) -> None:
        """Liquidate a position: close all of it at the mark, as a taker market order, no fee."""
        self.ids.order_id += 1
        self.apply(
            account,
            market,
            self.ids.order_id,
            not position.is_long,
            position.quantity,
            market.mark,
            position.lever,
            position.position_type,
            True,
            True,
            now_ms,
            events,
            liquidation=True,
        )

    def balance_changed(
        self, account: Account, balance: Balance, operate: Decimal, events: list[Event]
    ) -> None:
        """Report a balance's new amounts (operate: the change of available) with the next logId."""
        self.ids.log_id += 1
        events.append(
            BalanceChanged(
                user_id=account.user_id,
                coin=balance.coin,
                coin_id=balance.coin_id,
                available=balance.available,
                frozen=balance.frozen,
                log_id=self.ids.log_id,
                operate_amount=operate,
            )
        )


def can_close(account: Account, position: Position) -> Decimal:
    """The quantity of a position not yet claimed by resting orders against it."""
    claimed = account.resting.get((position.pair, not position.is_long), _ZERO)
    return max(position.quantity - claimed, _ZERO)


def margin_and_fee(market: Market, notional: Decimal, lever: int, rate: Decimal) -> Decimal:
    """What opening notional freezes and charges: its margin plus its fee, each rounded."""
    exp = market.money_exp
    return (notional / lever).quantize(exp) + (notional * rate).quantize(exp)
