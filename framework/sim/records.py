"""The exchange's events and state as the venue's records, as a client decodes them.

The paper venue hands strategies and the engine the very records a client decodes from the
twin's pushes and answers (:func:`position_push`, :func:`account_push`, :func:`match_record`;
:func:`position_record`, :func:`balance_record`, :func:`order_record` for the REST reads),
with no detour through wire objects: amounts as plain decimals, times in UTC to the second.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from framework.sim.events import BalanceChanged, Match, PositionChanged
from framework.sim.exchange import Exchange
from framework.sim.history import OrderRecord
from framework.sim.state import Account, Balance, Position
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

__all__ = [
    "account_push",
    "balance_record",
    "match_record",
    "order_record",
    "position_push",
    "position_record",
]


def _read(value: Decimal) -> Decimal:
    """A decimal as a client reads it from the wire: plain text, no trailing zeros."""
    return Decimal(plain_decimal(value))


def _second(value: datetime) -> datetime:
    """A date-time as a client reads it from the wire: in UTC, to the second."""
    return value.astimezone(UTC).replace(microsecond=0)


def _ms_time(ms: int) -> datetime:
    return _second(datetime.fromtimestamp(ms / 1000, UTC))


_NO_DELIVERY: dict[str, Any] = {
    "is_delivery": False,
    "delivery_time": None,
    "delivery_time_stamp": None,
}


def _delivery(delivery: datetime | None) -> dict[str, Any]:
    """A record's delivery fields (isDelivery, deliveryTime and its ms) of a delivery time."""
    if delivery is None:
        return _NO_DELIVERY
    stamp = int(delivery.timestamp() * 1000)
    return {"is_delivery": True, "delivery_time": _second(delivery), "delivery_time_stamp": stamp}


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
        **_delivery(delivery),
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
        **_delivery(delivery),
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
