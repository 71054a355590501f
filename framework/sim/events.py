"""What the exchange reports: position and balance changes, match records, as venue records too.

Every operation of :class:`~framework.sim.exchange.Exchange` returns the changes it caused as
:data:`Event` values, in the order they happened; the twin's server turns them into SPEC
section 6 pushes on the wire, the paper venue into the very records a client decodes from
those pushes (:func:`position_push`, :func:`account_push`, :func:`match_record`, with no
detour through wire objects). Match records are kept by the exchange and listed by
selectContractMatchPairList. The REST reads' records (:func:`match_record`,
:func:`position_record`, :func:`balance_record`, :func:`order_record`) are what a client
decodes from the twin's answers: the paper venue answers with them. All are frozen records
with Decimal amounts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

import attrs

from framework.venue.codec import plain_decimal
from framework.venue.models import (
    AccountBalance,
    AccountPush,
    ChangeType,
    Direction,
    MatchRecord,
    PositionPush,
)
from framework.venue.models import Position as PositionRecord
from framework.venue.order_management import OrderRecord as VenueOrder

if TYPE_CHECKING:  # the exchange's state records (they import this module)
    from framework.sim.exchange import Exchange
    from framework.sim.history import OrderRecord
    from framework.sim.state import Account, Balance, Position

__all__ = [
    "BalanceChanged",
    "Event",
    "Match",
    "PositionChanged",
    "account_push",
    "balance_record",
    "match_record",
    "order_record",
    "position_push",
    "position_record",
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


def _ms_time(ms: int) -> datetime:
    return _second(datetime.fromtimestamp(ms / 1000, UTC))


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
        create_time=_ms_time(match.time_ms),
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


def position_record(exchange: Exchange, account: Account, position: Position) -> PositionRecord:
    """A position of the position list, as a client decodes it (SPEC 2.3; the twin's
    neutral values where it has no model: see :mod:`framework.twin.wire`)."""
    market = exchange.markets[position.pair]
    rules = market.rules
    can_close = exchange.can_close(account, position)
    restrict = exchange.liquidation_price(position)
    delivery = rules.delivery_time
    return PositionRecord(
        id=position.id,
        entrust_id=position.entrust_id,
        contract_pair_id=market.contract_pair_id,
        symbol=position.pair,
        position_type=position.position_type,
        is_long=position.is_long,
        opening_price=_read(position.opening_price),
        quantity=_read(position.quantity),
        closing_quantity=_read(position.quantity - can_close),
        remaining_close_quantity=_read(can_close),
        amount=_read(position.quantity * position.opening_price),
        margin_call_amount=Decimal(0),
        tariff_amount=_read(position.fees),
        lever=position.lever,
        margin_amount=_read(position.margin),
        restrict_price=None if restrict is None else _read(restrict),
        unrealized_pnl=_read(exchange.unrealized_pnl(position)),
        realized_pnl=_read(position.realized_pnl),
        profit_type=0,
        loss_type=0,
        lights=0,
        status=1,
        create_time=_ms_time(position.create_ms),
        create_time_stamp=position.create_ms,
        is_dual=False,
        face_multiplier=Decimal(1),
        account_coin_id=market.coin_id,
        account_coin_symbol=market.coin,
        account_settle_decimal=market.settings.settle_decimals,
        trade_coin_decimal=rules.quantity_decimals,
        is_delivery=delivery is not None,
        delivery_time=None if delivery is None else _second(delivery),
        delivery_time_stamp=None if delivery is None else int(delivery.timestamp() * 1000),
        settle_show_decimal=rules.price_decimals,
    )


def balance_record(user_id: int, balance: Balance) -> AccountBalance:
    """The balance of one coin, as a client decodes it (SPEC 2.4)."""
    return AccountBalance(
        user_id=user_id,
        coin_id=balance.coin_id,
        symbol=balance.coin,
        available_amount=_read(balance.available),
        frozen_amount=_read(balance.frozen),
    )


def order_record(record: OrderRecord) -> VenueOrder:
    """An order record of the order-management extension, as a client decodes it."""
    return VenueOrder(
        entrust_id=record.order_id,
        client_order_id=record.client_order_id,
        pair_name=record.pair,
        is_long=record.is_long,
        is_market=record.is_market,
        match_type=record.match_type,
        position_type=record.position_type,
        lever=record.lever,
        price=None if record.price is None else _read(record.price),
        quantity=_read(record.quantity),
        filled_quantity=_read(record.filled),
        status=record.status,
        create_time_stamp=record.create_ms,
        update_time_stamp=record.update_ms,
    )
