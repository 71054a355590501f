"""A pair's trading rules and the stateless order checks both sides of the wire share.

The venue twin enforces these rules on every order it receives, and the execution engine's
pre-trade risk check calls the same :func:`check_order`, so an order the engine lets through
is refused by the twin only for reasons that depend on state (balance, positions). Sans-I/O:
no sockets, no clock reads -- the caller passes ``now`` and the mark price.

Checks run in this order and the first failure wins (code and SPEC section 7 text):

====  ==========================================================================
2325  positionType not among the pair's supported types (default 3 and 4)
2303  lever below ``min_lever``             2304  lever above ``max_lever``
2312  price or quantity with more decimal places than the pair allows
2301  quantity below ``min_quantity``       2302  quantity above ``max_quantity``
2317  quantity x price below ``min_notional`` (market orders use the mark price)
2307  the pair does not trade
2316  within 10 minutes of (or past) the pair's delivery time
====  ==========================================================================

Decimal places are counted on the value, so ``"1.500"`` has one decimal place. The 2325 text
fills ``{0}`` with the supported types written as ``[3, 4]``. ``now`` and ``delivery_time``
must both be timezone-aware.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Final

import attrs

from framework.venue.codec import plain_decimal
from framework.venue.errors import render_message
from framework.venue.models import OrderInput

__all__ = [
    "DELIVERY_FREEZE",
    "PairRules",
    "check_order",
    "decimal_places",
    "position_type_error",
    "refusal_detail",
    "settle_coin_of",
]

DELIVERY_FREEZE: Final = timedelta(minutes=10)
"""How long before delivery a pair stops taking orders (code 2316)."""


@attrs.frozen(slots=True, kw_only=True)
class PairRules:
    """The bounds one contract pair enforces on every order (defaults: a typical USD pair)."""

    price_decimals: int = 2
    quantity_decimals: int = 3
    min_quantity: Decimal = Decimal("0.001")
    max_quantity: Decimal = Decimal("1000")
    min_lever: int = 1
    max_lever: int = 100
    max_one_way_quantity: Decimal = Decimal("10000")
    max_total_quantity: Decimal = Decimal("100000")
    min_notional: Decimal = Decimal("1")
    trading: bool = True
    delivery_time: datetime | None = None
    settle_coin: str | None = None
    position_types: tuple[int, ...] = (3, 4)


def settle_coin_of(pair: str, rules: PairRules | None = None) -> str:
    """The settlement coin of a pair: the rules' settle_coin, else the QUOTE of BASE-QUOTE."""
    if rules is not None and rules.settle_coin:
        return rules.settle_coin
    _, sep, quote = pair.rpartition("-")
    return quote if sep and quote else pair


def decimal_places(value: Decimal) -> int:
    """How many decimal places a value needs (trailing zeros do not count)."""
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int) or exponent >= 0:
        return 0
    # Only strip zeros when the literal has more places than needed: normalize() is slower.
    return max(0, -int(value.normalize().as_tuple().exponent))


def position_type_error(rules: PairRules, position_type: int) -> tuple[int, str] | None:
    """Code 2325 with its text when the pair does not support position_type, else None."""
    if position_type in rules.position_types:
        return None
    supported = "[" + ", ".join(str(t) for t in rules.position_types) + "]"
    return 2325, render_message(2325, supported)


def check_order(
    rules: PairRules,
    order: OrderInput,
    *,
    now: datetime,
    mark_price: Decimal | None,
) -> tuple[int, str] | None:
    """The first stateless rule the order breaks, as (code, filled SPEC text), or None."""
    failure = position_type_error(rules, int(order.position_type))
    if failure is not None:
        return failure
    if order.lever < rules.min_lever:
        return 2303, render_message(2303, rules.min_lever)
    if order.lever > rules.max_lever:
        return 2304, render_message(2304, rules.max_lever)
    quantity = order.quantity
    price = order.price
    if decimal_places(quantity) > rules.quantity_decimals or (
        price is not None and decimal_places(price) > rules.price_decimals
    ):
        return 2312, render_message(2312)
    if quantity < rules.min_quantity:
        return 2301, render_message(2301, plain_decimal(rules.min_quantity))
    if quantity > rules.max_quantity:
        return 2302, render_message(2302, plain_decimal(rules.max_quantity))
    reference = mark_price if order.is_market or price is None else price
    if reference is not None and quantity * reference < rules.min_notional:
        return 2317, render_message(2317)
    if not rules.trading:
        return 2307, render_message(2307)
    if rules.delivery_time is not None and now >= rules.delivery_time - DELIVERY_FREEZE:
        return 2316, render_message(2316)
    return None


def refusal_detail(
    rules: PairRules, order: OrderInput, code: int, *, mark_price: Decimal | None = None
) -> str | None:
    """What of the order broke the rule of code, with the value and the bound, or None.

    For refusals before sending: the venue's own answer carries only its text.
    """
    pair = order.pair_name
    quantity, price = order.quantity, order.price
    if code == 2312:
        if decimal_places(quantity) > rules.quantity_decimals:
            return (
                f"quantity {plain_decimal(quantity)} has {decimal_places(quantity)} decimals,"
                f" {pair} allows {rules.quantity_decimals}"
            )
        if price is not None and decimal_places(price) > rules.price_decimals:
            return (
                f"price {plain_decimal(price)} has {decimal_places(price)} decimals,"
                f" {pair} allows {rules.price_decimals}"
            )
    if code in (2301, 2302):
        return f"quantity {plain_decimal(quantity)} on {pair}"
    if code in (2303, 2304):
        return f"lever {order.lever} on {pair}"
    if code == 2317:
        by_mark = order.is_market or price is None
        reference = mark_price if by_mark else price
        if reference is not None:
            what = "mark" if by_mark else "price"
            return (
                f"quantity {plain_decimal(quantity)} x {what} {plain_decimal(reference)} ="
                f" {plain_decimal(quantity * reference)}, under {pair}'s min_notional"
                f" {plain_decimal(rules.min_notional)}"
            )
    return None
