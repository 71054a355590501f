"""An exception raised in a strategy's code is told in one line naming the user's own line."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from framework import OrderIntent
from framework.engine.raised import one_line, raised


def bad_intent() -> OrderIntent:
    """A strategy's mistake: a float quantity (raised inside the framework's check)."""
    return OrderIntent(pair="ETH-USD", is_long=True, quantity=0.01, price=Decimal(1))  # type: ignore[arg-type]


def test_the_line_named_is_the_users_not_the_frameworks() -> None:
    with pytest.raises(ValueError) as caught:
        bad_intent()
    line = bad_intent.__code__.co_firstlineno + 2
    assert raised(caught.value) == (
        "ValueError: OrderIntent.quantity: expected a positive Decimal, got float 0.01 (write"
        f' Decimal("0.01"): money is exact) (at test_raised.py:{line})'
    )


def test_a_message_on_several_lines_is_one_and_an_empty_one_is_the_type() -> None:
    assert one_line(RuntimeError("a\n  b")) == "a b"
    assert one_line(KeyError()) == "KeyError"
    assert raised(RuntimeError("never raised")) == "RuntimeError: never raised"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"is_long": "yes"}, "OrderIntent.is_long: expected True or False, got 'yes'"),
        ({"is_market": 1}, "OrderIntent.is_market: expected True or False, got 1"),
        ({"pair": ""}, "OrderIntent.pair: expected a pair name like 'ETH-USD', got ''"),
        ({"price": 2000}, "OrderIntent.price: expected a positive Decimal or None, got int 2000"),
    ],
)
def test_an_intent_names_the_field_and_value_it_refuses(
    changes: dict[str, object], message: str
) -> None:
    fields: dict[str, object] = {
        "pair": "ETH-USD", "is_long": True, "quantity": Decimal("0.1"), "price": Decimal(1)
    }  # fmt: skip
    with pytest.raises(ValueError) as caught:
        OrderIntent(**{**fields, **changes})  # type: ignore[arg-type]
    assert str(caught.value).startswith(message)


def test_the_framework_is_known_through_a_symlink(tmp_path: Path) -> None:
    # A checkout reached through a symlink: its frames are still the framework's.
    import framework
    from framework.engine import raised as module

    link = tmp_path / "checkout"
    link.symlink_to(Path(framework.__file__).parent)
    assert module._kind(str(link / "engine" / "intents.py")) == 2
    assert module._kind(str(tmp_path / "my_bot.py")) == 0
    assert module._kind("<frozen importlib._bootstrap>") == 1
