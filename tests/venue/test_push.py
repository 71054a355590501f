"""The push subscription protocol, fed frames: no socket needed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from framework.venue.models import ChangeType, PositionPush, SubscribeAck
from framework.venue.push import PushProtocol, SubscribeRefused
from framework.venue.requests import RequestBuilder
from framework.venue.signing import make_signer

KEY = "0x" + "11" * 32


def protocol(**kw: int) -> PushProtocol:
    """A protocol for two pairs and one coin."""
    builder = RequestBuilder("st_test", make_signer(2, KEY))
    return PushProtocol(builder, pairs=["ETH-USD", "BTC-USD"], coins=["USD"], **kw)


def ack(
    event: str, *, pair: str | None = None, symbol: str | None = None, ok: bool = True
) -> SubscribeAck:
    """An acknowledgement frame, as decoded."""
    return SubscribeAck(event=f"{event}_res", method="SUBSCRIBE", msg="ok", success=ok,
                        pair=pair, symbol=symbol)  # fmt: skip


def push(pid: int, change: str = "NEW", qty: str | None = "1") -> PositionPush:
    """A position push of ETH-USD."""
    return PositionPush(
        change_type=ChangeType(change),
        symbol="ETH-USD",
        position_id=pid,
        current_quantity=None if qty is None else Decimal(qty),
    )


def test_connect_sends_one_signed_subscribe_per_pair_and_coin_with_fresh_timestamps() -> None:
    p = protocol()
    clock = iter(range(1000, 2000))
    messages = p.connect(lambda: next(clock))
    assert [(m["event"], m.get("pair"), m.get("symbol")) for m in messages] == [
        ("api_position", "ETH-USD", None),
        ("api_position", "BTC-USD", None),
        ("api_account", None, "USD"),
    ]
    assert [m["timestamp"] for m in messages] == [1000, 1001, 1002]
    assert all(m["signType"] == "2" and m["signature"].startswith("0x") for m in messages)
    assert not p.subscribed and len(p.pending) == 3


def test_acks_settle_by_echo_or_else_the_oldest_of_their_event() -> None:
    p = protocol()
    p.connect(lambda: 1)
    assert p.ack(ack("api_position", pair="BTC-USD"))
    assert p.pending == ["api_position ETH-USD", "api_account USD"]
    assert p.ack(ack("api_position"))  # no echo: the oldest position subscription
    assert not p.ack(ack("api_position", pair="XRP-USD"))  # nothing pending for it
    assert p.ack(ack("api_account", symbol="USD")) and p.subscribed


def test_a_refused_ack_is_an_error_naming_the_subscription() -> None:
    p = protocol()
    p.connect(lambda: 1)
    with pytest.raises(SubscribeRefused, match="api_position ETH-USD refused"):
        p.ack(ack("api_position", pair="ETH-USD", ok=False))


def test_duplicates_are_dropped_within_a_connection_and_forgotten_by_the_next() -> None:
    p = protocol()
    p.connect(lambda: 1)
    assert p.fresh(push(1)) and not p.fresh(push(1))
    assert p.fresh(push(1, "INCREASE", "2"))
    assert p.fresh(push(1, "CLOSE", "0")) and not p.fresh(push(1, "CLOSE", "0"))
    assert p.fresh(push(2, "LIQUIDATE", None)) and not p.fresh(push(2, "LIQUIDATE", None))
    p.connect(lambda: 2)  # a new connection may repeat a push legitimately
    assert p.fresh(push(1, "CLOSE", "0"))


def test_memory_is_bounded_however_many_positions_open_and_close() -> None:
    p = protocol(max_open=8, max_closed=4)
    p.connect(lambda: 1)
    for pid in range(1000):
        assert p.fresh(push(pid))
        assert p.fresh(push(pid, "CLOSE", "0"))
    assert p.sizes() == (0, 4)
    for pid in range(2000, 2100):
        p.fresh(push(pid))
    assert p.sizes() == (8, 4)
    assert not p.fresh(push(2099))  # the most recent ones are still known
