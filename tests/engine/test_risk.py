"""Pre-trade checks: the venue's own codes and the framework's limits, with no round trip."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import attrs
import pytest

from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import Event, OrderUpdate
from framework.engine.execution import ExecutionEngine, ExecutionSettings
from framework.engine.intents import OrderIntent, OrderStatus, PositionType
from framework.engine.risk import RiskGate, RiskSettings
from framework.venue.models import MatchType, OrderInput, OrderResult
from framework.venue.rules import PairRules

START_MS = 1_700_000_000_000
RULES = PairRules(
    price_decimals=2,
    quantity_decimals=3,
    min_quantity=Decimal("0.01"),
    max_quantity=Decimal("100"),
    min_lever=2,
    max_lever=20,
    min_notional=Decimal("10"),
    position_types=(3,),
)


def engine_with(
    risk: RiskSettings | None = None,
    rules: PairRules = RULES,
    mark: Decimal | None = None,
    on_ready: Callable[[], None] | None = None,
) -> tuple[ExecutionEngine, list[Event], VirtualClock]:
    """An engine with one pair (ETH-USD) and the given limits (on_ready: its driver's wake)."""
    clock = VirtualClock(START_MS)
    events: list[Event] = []
    engine = ExecutionEngine(
        ExecutionSettings(risk=risk or RiskSettings(), calls_per_second=1000.0),
        rules={"ETH-USD": rules},
        publish=events.append,
        now_ms=clock.now_ms,
        ids=ClientIdGenerator.ephemeral("r", now_ms=START_MS, random_bits=1),
        mark_price=lambda pair: mark,
        on_ready=on_ready,
    )
    return engine, events, clock


def order(**changes: Any) -> OrderIntent:
    """A valid limit intent (0.1 at 2000, lever 5), changed as given."""
    base = OrderIntent(
        pair="ETH-USD", is_long=True, quantity=Decimal("0.1"), price=Decimal("2000"), lever=5
    )
    return attrs.evolve(base, **changes)


def refusal(intent: OrderIntent, **kw: object) -> tuple[int | None, str | None]:
    """Submit one intent; the (code, msg) of its REJECTED update (asserts it has one)."""
    engine, events, _ = engine_with(**kw)  # type: ignore[arg-type]
    coid = engine.submit("s", intent)
    (update,) = events
    assert isinstance(update, OrderUpdate)
    assert (update.client_order_id, update.status, update.strategy) == (
        coid,
        OrderStatus.REJECTED,
        "s",
    )
    assert engine.next_batch() is None  # nothing goes out
    return update.code, update.msg


@pytest.mark.parametrize(
    ("changes", "code", "msg"),
    [
        (
            {"quantity": Decimal("0.001")},
            2301,
            "Quantity cannot be less than 0.01: quantity 0.001 on ETH-USD",
        ),
        (
            {"quantity": Decimal("101")},
            2302,
            "Quantity cannot be greater than 100: quantity 101 on ETH-USD",
        ),
        ({"lever": 1}, 2303, "Lever cannot be less than 2: lever 1 on ETH-USD"),
        ({"lever": 21}, 2304, "Lever cannot be greater than 20: lever 21 on ETH-USD"),
        (
            {"quantity": Decimal("0.1234")},
            2312,
            "Decimal places out of limit: quantity 0.1234 has 4 decimals, ETH-USD allows 3",
        ),
        (
            {"price": Decimal("2000.001")},
            2312,
            "Decimal places out of limit: price 2000.001 has 3 decimals, ETH-USD allows 2",
        ),
        (
            {"price": Decimal("50")},
            2317,
            "Order too small: quantity 0.1 x price 50 = 5, under ETH-USD's min_notional 10",
        ),
        (
            {"position_type": PositionType.CROSS},
            2325,
            "Position type not supported,Supported types are[3]",
        ),
    ],
)
def test_venue_rules_refuse_with_the_venue_code(
    changes: dict[str, object], code: int, msg: str
) -> None:
    assert refusal(order(**changes)) == (code, msg)


def test_market_order_too_small_at_the_mark_price() -> None:
    intent = order(price=None, is_market=True, quantity=Decimal("0.01"))
    assert refusal(intent, mark=Decimal("100")) == (
        2317,
        "Order too small: quantity 0.01 x mark 100 = 1, under ETH-USD's min_notional 10",
    )


def test_refusals_before_sending_are_told_in_the_log_ever_less_often_while_they_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine, _events, clock = engine_with()
    for _ in range(3):
        engine.submit("s", order(lever=1))
    engine.submit("t", order(lever=1))  # another strategy: told apart

    def told() -> list[str]:
        return [
            r.getMessage() for r in caplog.records if "refused before sending" in r.getMessage()
        ]

    assert len(told()) == 2
    assert told()[0].endswith(
        "of s refused before sending: 2303 Lever cannot be less than 2: lever 1 on ETH-USD"
    )
    assert " of t refused" in told()[1]
    # s is refused every second from now on: told after 1 minute, then 2, then 4 ...
    lines_at = []
    for second in range(1, 8 * 60 + 1):
        clock.advance(1000)
        before = len(told())
        engine.submit("s", order(lever=1))
        if len(told()) > before:
            lines_at.append(second)
    assert lines_at == [60, 180, 420]  # 1 minute, then 2 more, then 4 more
    assert told()[2].endswith("(61 more refused alike since the last word)")
    # Quiet for an hour, then one more: told at once (with those not told yet), and the
    # interval is a minute again.
    clock.advance(3_600_000)
    engine.submit("s", order(lever=1))
    assert len(told()) == 6 and told()[-1].endswith("(60 more refused alike since the last word)")
    clock.advance(61_000)
    engine.submit("s", order(lever=1))
    assert len(told()) == 7 and "more refused alike" not in told()[-1]


def test_halted_pair_refused_2307() -> None:
    assert refusal(order(), rules=attrs.evolve(RULES, trading=False))[0] == 2307


def test_delivery_freeze_refused_2316() -> None:
    soon = datetime.fromtimestamp(START_MS / 1000, UTC) + timedelta(minutes=5)
    assert refusal(order(), rules=attrs.evolve(RULES, delivery_time=soon))[0] == 2316


def test_unconfigured_pair_refused_9002() -> None:
    assert refusal(order(pair="DOGE-USD")) == (9002, "Pair DOGE-USD is not configured")


def test_kill_switch_refuses_every_new_intent() -> None:
    code, _ = refusal(order(), risk=RiskSettings(kill_switch=True))
    assert code == 9001


def test_kill_switch_at_run_time() -> None:
    engine, events, _ = engine_with()
    engine.submit("s", order())
    engine.kill_switch = True  # the queued resting order is withdrawn before it is sent
    engine.submit("s", order())
    assert [e.status for e in events if isinstance(e, OrderUpdate)] == [
        OrderStatus.CANCELED,
        OrderStatus.REJECTED,
    ]
    engine.kill_switch = False
    engine.submit("s", order())
    batch = engine.next_batch()
    assert batch is not None and len(batch.orders) == 1


def test_max_open_quantity_counts_unanswered_and_resting_orders() -> None:
    engine, events, _ = engine_with(RiskSettings(max_open_quantity=Decimal("0.25")))
    first = engine.submit("s", order())
    engine.submit("s", order())
    engine.submit("s", order())  # 0.3 > 0.25
    assert [(e.code) for e in events if isinstance(e, OrderUpdate)] == [9003]
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_results(
        batch, [OrderResult(client_order_id=first, order_id=1)]
    )  # GTC rests: still open; the other is UNKNOWN: still open
    assert engine.open_quantity("ETH-USD") == Decimal("0.2")


def test_open_quantity_released_by_answers_of_non_resting_orders() -> None:
    engine, events, _ = engine_with(RiskSettings(max_open_quantity=Decimal("0.1")))
    coid = engine.submit("s", order(match_type=MatchType.IOC))
    batch = engine.next_batch()
    assert batch is not None
    engine.begin_send(batch)
    engine.on_results(batch, [OrderResult(client_order_id=coid, order_id=9)])
    assert engine.open_quantity("ETH-USD") == 0
    engine.submit("s", order())
    assert not [e for e in events if isinstance(e, OrderUpdate) and e.code == 9003]


def test_max_notional_per_pair() -> None:
    engine, events, _ = engine_with(RiskSettings(max_notional=Decimal("500")))
    engine.submit("s", order())  # 200
    engine.submit("s", order())  # 400
    engine.submit("s", order())  # 600 > 500
    assert [e.code for e in events if isinstance(e, OrderUpdate)] == [9004]


def test_max_notional_needs_a_reference_price_for_market_orders() -> None:
    market = order(price=None, is_market=True)
    assert refusal(market, risk=RiskSettings(max_notional=Decimal("500")))[0] == 9005


def test_max_orders_per_second_is_a_sliding_window() -> None:
    engine, events, clock = engine_with(RiskSettings(max_orders_per_second=3))
    for _ in range(4):
        engine.submit("s", order())
    assert [e.code for e in events if isinstance(e, OrderUpdate)] == [9006]
    clock.advance(999)
    engine.submit("s", order())
    assert len(events) == 2
    clock.advance(1)
    engine.submit("s", order())
    assert len(events) == 2


def test_risk_settings_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_open_quantity"):
        RiskSettings(max_open_quantity=Decimal("-1"))
    assert RiskSettings(max_notional="100").max_notional == Decimal("100")


def test_gate_release_never_goes_negative() -> None:
    gate = RiskGate(RiskSettings(max_open_quantity=Decimal("1")), {"ETH-USD": RULES})
    now = datetime.fromtimestamp(START_MS / 1000, UTC)
    o = OrderInput(
        client_order_id="x",
        is_long=True,
        is_market=False,
        lever=5,
        match_type=MatchType.GTC,
        pair_name="ETH-USD",
        position_type=PositionType.ISOLATED,
        price=Decimal("2000"),
        quantity=Decimal("0.5"),
    )
    assert gate.check(o, START_MS, now) is None
    gate.release("ETH-USD", Decimal("2"), gate.admitted_price)
    assert gate.open_quantity("ETH-USD") == 0
