"""What the exchange reports: position and balance changes, match records, as venue records too.

Every operation of :class:`~framework.sim.exchange.Exchange` returns the changes it caused as
:data:`Event` values, in the order they happened; the twin's server turns them into SPEC
section 6 pushes on the wire, the paper venue into the very records a client decodes from
those pushes (:func:`position_push`, :func:`account_push`, :func:`match_record`, with no
detour through wire objects). Match records are kept by the exchange and listed by
selectContractMatchPairList. All are frozen records with Decimal amounts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import attrs

from framework.venue.codec import plain_decimal
from framework.venue.models import (
    AccountPush,
    ChangeType,
    Direction,
    MatchRecord,
    PositionPush,
)

__all__ = [
    "BalanceChanged",
    "Event",
    "Match",
    "PositionChanged",
    "account_push",
    "match_record",
    "position_push",
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


def _read(value: Decimal) -> Decimal:
    """A decimal as a client reads it from the wire: plain text, no trailing zeros."""
    return Decimal(plain_decimal(value))


def _second(value: datetime) -> datetime:
    """A date-time as a client reads it from the wire: in UTC, to the second."""
    return value.astimezone(UTC).replace(microsecond=0)


def position_push(event: PositionChanged) -> PositionPush:
    """The api_position push of a position change, as a client decodes it (SPEC 6.1)."""
    return PositionPush(
        change_type=ChangeType(event.change_type),
        current_quantity=_read(event.current_quantity),
        direction=Direction.LONG if event.is_long else Direction.SHORT,
        operate_quantity=_read(event.operate_quantity),
        position_id=event.position_id,
        symbol=event.pair,
        can_closed_quantity=_read(event.can_closed_quantity),
        contract_pair_id=event.contract_pair_id,
        position_type=event.position_type,
        opening_price=_read(event.opening_price),
        margin_amount=_read(event.margin_amount),
        margin_call_amount=_read(event.margin_call_amount),
    )


def account_push(event: BalanceChanged) -> AccountPush:
    """The api_account push of a balance change, as a client decodes it (SPEC 6.2)."""
    return AccountPush(
        available_amount=_read(event.available),
        frozen_amount=_read(event.frozen),
        log_id=event.log_id,
        operate_amount=_read(event.operate_amount),
        symbol=event.coin,
        coin_id=event.coin_id,
    )


def match_record(match: Match) -> MatchRecord:
    """A match as a client decodes it from the match list (SPEC 2.5)."""
    delivery = match.delivery_time
    return MatchRecord(
        id=match.id,
        entrust_id=match.order_id,
        contract_position_id=match.position_id,
        contract_pair_id=match.contract_pair_id,
        create_time=_second(datetime.fromtimestamp(match.time_ms / 1000, UTC)),
        create_time_stamp=match.time_ms,
        symbol=match.pair,
        account_coin_symbol=match.coin,
        account_settle_decimal=match.settle_decimals,
        lever=match.lever,
        is_market=match.is_market,
        is_close=match.is_close,
        is_long=match.is_long,
        is_taker=match.is_taker,
        average_price=_read(match.price),
        quantity=_read(match.quantity),
        amount=_read(match.amount),
        trade_fee=_read(match.fee),
        position_fee=Decimal(0),
        profit_loss=_read(match.profit_loss),
        is_delivery=delivery is not None,
        delivery_time=None if delivery is None else _second(delivery),
        delivery_time_stamp=None if delivery is None else int(delivery.timestamp() * 1000),
        address=match.address,
        opening_price=_read(match.opening_price),
    )
