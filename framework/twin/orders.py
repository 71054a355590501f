"""Reading a batchCreate body's orders: wire objects to OrderInput records, or refusals.

Strict on purpose, so a client bug shows up against the twin rather than the venue:

* ``orders`` missing gives ``2002 Required parameter:orders``; not an array, empty, or more
  than ``max_orders`` (20) elements gives ``2001 Illegal parameter:orders`` for the whole call.
* In each order, the first missing required field (SPEC 2.1 order) gives ``2002 Required
  parameter:<field>``; ``price`` is required when ``isMarket`` is false.
* A value of the wrong JSON type or outside its enum gives ``2001 Illegal parameter:<field>``:
  ``clientOrderId`` a non-empty string of at most 64 characters, ``isLong``/``isMarket``
  booleans, ``lever`` and ``matchType`` (1-4) integers, ``pairName`` a configured pair,
  ``price`` and ``quantity`` decimal strings (``"12.5"``; JSON numbers, exponents and
  non-finite values are refused), ``price`` above zero.
* ``positionType`` is an integer; a value other than 3 or 4 gives ``2325``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from framework.venue.errors import render_message
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.rules import PairRules, position_type_error

__all__ = ["REQUIRED_FIELDS", "parse_orders"]

REQUIRED_FIELDS: Final = (
    "clientOrderId",
    "isLong",
    "isMarket",
    "lever",
    "matchType",
    "pairName",
    "positionType",
    "quantity",
)
"""Fields every order must carry (SPEC 2.1), in the order they are checked."""

_DECIMAL: Final = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")
_MATCH_TYPES: Final = {int(m): m for m in MatchType}
_POSITION_TYPES: Final = {int(p): p for p in PositionType}
_MAX_CLIENT_ID: Final = 64

Refusal = tuple[int, str]


def _illegal(name: str) -> Refusal:
    return 2001, render_message(2001, name)


def _decimal(value: Any) -> Decimal | None:
    if type(value) is str and len(value) <= 40 and _DECIMAL.fullmatch(value) is not None:
        return Decimal(value)
    return None


def parse_order(raw: Any, pairs: Mapping[str, PairRules]) -> OrderInput | Refusal:
    """One wire order as an OrderInput, or the (code, message) refusing it."""
    if type(raw) is not dict:
        return _illegal("orders")
    for name in REQUIRED_FIELDS:
        if raw.get(name) is None:
            return 2002, render_message(2002, name)
    client_id = raw["clientOrderId"]
    if type(client_id) is not str or not 0 < len(client_id) <= _MAX_CLIENT_ID:
        return _illegal("clientOrderId")
    is_long = raw["isLong"]
    if type(is_long) is not bool:
        return _illegal("isLong")
    is_market = raw["isMarket"]
    if type(is_market) is not bool:
        return _illegal("isMarket")
    lever = raw["lever"]
    if type(lever) is not int:
        return _illegal("lever")
    match_type = _MATCH_TYPES.get(raw["matchType"]) if type(raw["matchType"]) is int else None
    if match_type is None:
        return _illegal("matchType")
    pair = raw["pairName"]
    rules = pairs.get(pair) if type(pair) is str else None
    if rules is None:
        return _illegal("pairName")
    raw_type = raw["positionType"]
    if type(raw_type) is not int:
        return _illegal("positionType")
    position_type = _POSITION_TYPES.get(raw_type)
    if position_type is None:
        return position_type_error(rules, raw_type) or _illegal("positionType")
    raw_price = raw.get("price")
    price = None
    if raw_price is not None:
        price = _decimal(raw_price)
        if price is None or price <= 0:
            return _illegal("price")
    elif not is_market:
        return 2002, render_message(2002, "price")
    quantity = _decimal(raw["quantity"])
    if quantity is None:
        return _illegal("quantity")
    return OrderInput(
        client_order_id=client_id,
        is_long=is_long,
        is_market=is_market,
        lever=lever,
        match_type=match_type,
        pair_name=pair,
        position_type=position_type,
        price=price,
        quantity=quantity,
    )


def parse_orders(
    raw: Any, pairs: Mapping[str, PairRules], *, max_orders: int
) -> list[OrderInput | Refusal] | Refusal:
    """Every order of a batch (each parsed or refused), or the refusal of the whole call."""
    if raw is None:
        return 2002, render_message(2002, "orders")
    if type(raw) is not list or not 0 < len(raw) <= max_orders:
        return _illegal("orders")
    return [parse_order(item, pairs) for item in raw]
