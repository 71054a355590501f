"""Pair rules: each stateless check gives its SPEC section 7 code and exact text, in order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.rules import (
    PairRules,
    check_order,
    decimal_places,
    position_type_error,
    settle_coin_of,
)

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
MARK = Decimal("2000")


def make_order(**changes: Any) -> OrderInput:
    base = OrderInput(
        client_order_id="c1",
        is_long=True,
        is_market=False,
        lever=10,
        match_type=MatchType.GTC,
        pair_name="ETH-USD",
        position_type=PositionType.ISOLATED,
        price=Decimal("2000.5"),
        quantity=Decimal("0.5"),
    )
    return msgspec.structs.replace(base, **changes)


def check(order: OrderInput, rules: PairRules | None = None, mark: Decimal | None = MARK) -> Any:
    return check_order(rules or PairRules(), order, now=NOW, mark_price=mark)


def test_a_valid_order_passes() -> None:
    assert check(make_order()) is None


def test_default_rules_match_the_documented_defaults() -> None:
    rules = PairRules()
    assert (rules.price_decimals, rules.quantity_decimals) == (2, 3)
    assert (rules.min_quantity, rules.max_quantity) == (Decimal("0.001"), Decimal("1000"))
    assert (rules.min_lever, rules.max_lever) == (1, 100)
    assert rules.max_one_way_quantity == Decimal("10000")
    assert rules.max_total_quantity == Decimal("100000")
    assert rules.min_notional == Decimal("1")
    assert rules.trading and rules.delivery_time is None and rules.settle_coin is None


@pytest.mark.parametrize(
    ("changes", "rules", "expected"),
    [
        ({"lever": 0}, PairRules(), (2303, "Lever cannot be less than 1")),
        ({"lever": 101}, PairRules(), (2304, "Lever cannot be greater than 100")),
        ({"price": Decimal("2000.123")}, PairRules(), (2312, "Decimal places out of limit")),
        ({"quantity": Decimal("0.0001")}, PairRules(), (2312, "Decimal places out of limit")),
        ({"quantity": Decimal("0")}, PairRules(), (2301, "Quantity cannot be less than 0.001")),
        (
            {"quantity": Decimal("1001")},
            PairRules(),
            (2302, "Quantity cannot be greater than 1000"),
        ),
        (
            {"quantity": Decimal("0.001"), "price": Decimal("999")},
            PairRules(),
            (2317, "Order too small"),
        ),
        ({}, PairRules(trading=False), (2307, "Contract stops trading")),
        (
            {},
            PairRules(delivery_time=NOW + timedelta(minutes=9)),
            (2316, "10 minutes before delivery:Stop Open/Undo"),
        ),
        (
            {},
            PairRules(position_types=(3,)),
            (2325, "Position type not supported,Supported types are[3]"),
        ),
    ],
)
def test_each_rule_gives_its_code_and_exact_text(
    changes: dict[str, Any], rules: PairRules, expected: tuple[int, str]
) -> None:
    order = (
        make_order(position_type=PositionType.CROSS)
        if rules.position_types == (3,)
        else (make_order(**changes))
    )
    assert check(order, rules) == expected


def test_bounds_render_as_plain_decimals() -> None:
    rules = PairRules(min_quantity=Decimal("1E+1"), max_quantity=Decimal("2E+3"))
    assert check(make_order(quantity=Decimal("1")), rules) == (
        2301,
        "Quantity cannot be less than 10",
    )
    assert check(make_order(quantity=Decimal("3000")), rules) == (
        2302,
        "Quantity cannot be greater than 2000",
    )


def test_checks_run_in_the_documented_order() -> None:
    # Everything is wrong at once: positionType wins, then lever, then decimals ...
    rules = PairRules(position_types=(3,), trading=False)
    order = make_order(
        position_type=PositionType.CROSS, lever=0, price=Decimal("1.123"), quantity=Decimal("0")
    )
    assert check(order, rules)[0] == 2325
    assert (
        check(msgspec.structs.replace(order, position_type=PositionType.ISOLATED), rules)[0] == 2303
    )
    order = make_order(lever=10, price=Decimal("1.123"), quantity=Decimal("0"))
    assert check(order, rules)[0] == 2312
    assert check(msgspec.structs.replace(order, price=Decimal("1")), rules)[0] == 2301
    assert check(make_order(quantity=Decimal("0.001"), price=Decimal("1")), rules)[0] == 2317
    assert check(make_order(), rules)[0] == 2307


def test_market_orders_measure_their_size_at_the_mark() -> None:
    order = make_order(is_market=True, price=None, quantity=Decimal("0.001"))
    assert check(order, mark=Decimal("500")) == (2317, "Order too small")
    assert check(order, mark=Decimal("2000")) is None
    assert check(order, mark=None) is None  # no mark: the size check cannot run


def test_delivery_freeze_starts_exactly_ten_minutes_before() -> None:
    at = NOW + timedelta(minutes=10)
    assert check(make_order(), PairRules(delivery_time=at))[0] == 2316
    assert check(make_order(), PairRules(delivery_time=at + timedelta(seconds=1))) is None
    assert check(make_order(), PairRules(delivery_time=NOW - timedelta(days=1)))[0] == 2316


def test_trailing_zeros_do_not_count_as_decimal_places() -> None:
    assert decimal_places(Decimal("1.500")) == 1
    assert decimal_places(Decimal("100")) == 0
    assert decimal_places(Decimal("1E+2")) == 0
    assert decimal_places(Decimal("0.001")) == 3
    assert check(make_order(quantity=Decimal("0.5000"), price=Decimal("2000.10"))) is None


def test_position_type_error_lists_the_supported_types() -> None:
    assert position_type_error(PairRules(), 5) == (
        2325,
        "Position type not supported,Supported types are[3, 4]",
    )
    assert position_type_error(PairRules(), 4) is None


def test_settle_coin_is_the_quote_unless_configured() -> None:
    assert settle_coin_of("ETH-USD") == "USD"
    assert settle_coin_of("BTC-USDT", PairRules()) == "USDT"
    assert settle_coin_of("ETH-USD", PairRules(settle_coin="USDC")) == "USDC"


@given(
    quantity=st.decimals(min_value=Decimal("0.001"), max_value=Decimal("1000"), places=3),
    price=st.decimals(min_value=Decimal("1"), max_value=Decimal("100000"), places=2),
    lever=st.integers(min_value=1, max_value=100),
)
def test_orders_inside_every_bound_pass(quantity: Decimal, price: Decimal, lever: int) -> None:
    order = make_order(quantity=quantity, price=price, lever=lever)
    result = check(order)
    if quantity * price < 1:
        assert result == (2317, "Order too small")
    else:
        assert result is None
