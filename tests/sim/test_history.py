"""What the exchange keeps per order: little, and read back exactly as it was recorded.

Matches and completed order records are kept packed (framework/sim/history.py); what a read
gives must equal, field by field and Decimal digit by digit, what was recorded, and the
bytes kept per order must stay well below the unpacked objects' (about 1300 per market
order and its match before).
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections import OrderedDict
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import attrs
import pytest

from framework.sim.events import Match
from framework.sim.exchange import Exchange
from framework.sim.history import MatchHistory, Recent
from framework.sim.state import ExchangeSettings
from framework.venue.models import MatchType, OrderInput, PositionType

ETH = "ETH-USD"
USER = 1


def fields(value: Any) -> dict[str, Any]:
    """Every field with its type and, for Decimals, its exact digits and exponent."""
    return {
        k: (type(v), v.as_tuple() if isinstance(v, Decimal) else v)
        for k, v in attrs.asdict(value, recurse=False).items()
    }


def match(match_id: int, **changes: Any) -> Match:
    """A match with unusual amounts (signs, exponents, trailing zeros)."""
    base = Match(
        id=match_id,
        order_id=1_000_000 + match_id,
        position_id=7,
        contract_pair_id=1,
        time_ms=1_800_000_000_123 + match_id,
        pair=ETH,
        coin="USD",
        settle_decimals=8,
        lever=25,
        is_market=match_id % 2 == 0,
        is_close=match_id % 3 == 0,
        is_long=match_id % 5 == 0,
        is_taker=match_id % 7 != 0,
        price=Decimal("2001.50"),
        quantity=Decimal("1E-8"),
        amount=Decimal("1.00E+3"),
        fee=Decimal("-0"),
        profit_loss=Decimal("-12.34000000"),
        opening_price=Decimal("1999.9"),
        address="0xAbC",
        delivery_time=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    return attrs.evolve(base, **changes)


def test_kept_matches_read_back_exactly() -> None:
    history = MatchHistory(100)
    made = [match(i) for i in range(1, 31)]
    # Shared fields that differ from the first match's: kept as the match itself.
    made.append(match(31, address=None, delivery_time=None, pair="".join(["ETH", "-USD"])))
    made.append(match(32, is_long=1, lever=True))  # not of their plain types: kept as is
    for m in made:
        history.append(m)
    assert [fields(m) for m in history] == [fields(m) for m in made]
    assert [fields(m) for m in history[5:9]] == [fields(m) for m in made[5:9]]
    assert fields(history[-1]) == fields(made[-1]) and history[-1] == made[-1]
    assert history.count_below(31) == 30 and history.count_below(40) == 32
    history.limit = 10
    forgotten = history.trim()
    assert [fields(m) for m in forgotten] == [fields(m) for m in made[:22]]


def test_a_recent_map_behaves_as_an_ordered_dict_forgetting_its_oldest() -> None:
    rng = random.Random(5)
    recent: Recent[str, int] = Recent()
    model: OrderedDict[str, int] = OrderedDict()
    for step in range(5000):
        roll = rng.random()
        if roll < 0.5:
            key = f"k{rng.randrange(400)}"  # new keys, and old ones again once forgotten
            recent[key] = model[key] = step
        elif roll < 0.8 and model:
            assert recent.pop_oldest() == model.popitem(last=False)
        elif model:  # a rollback: one of the newest keys goes
            key = list(model)[-rng.randrange(1, min(len(model), 5) + 1)]
            assert recent.pop(key) == model.pop(key)
        assert len(recent) == len(model)
        assert list(recent.items()) == list(model.items())
    assert "nope" not in recent and recent.get("nope") is None
    while model:
        assert recent.pop_oldest() == model.popitem(last=False)
    with pytest.raises(KeyError):
        recent.pop_oldest()


def order(cid: str, **changes: Any) -> OrderInput:
    """A market order of 0.01 ETH-USD, long, isolated, 10x."""
    base: dict[str, Any] = {
        "client_order_id": cid,
        "is_long": True,
        "is_market": True,
        "lever": 10,
        "match_type": MatchType.IOC,
        "pair_name": ETH,
        "position_type": PositionType.ISOLATED,
        "quantity": Decimal("0.0100"),
    }
    return OrderInput(**(base | changes))


def test_completed_order_records_read_back_exactly() -> None:
    exchange = Exchange(ExchangeSettings())
    account = exchange.open_account(USER, None, {"USD": Decimal(1_000_000)})
    orders = account.orders

    def place(item: OrderInput, now_ms: int) -> int:
        outcome = exchange.submit(USER, [item], now_ms, atomic=False)
        assert outcome.error is None and len(outcome.accepted) == 1, outcome
        return outcome.accepted[0][1]

    market = place(order("m1"), 1_000)
    record = orders.get(market)
    assert record is not None
    assert fields(record) == fields(
        attrs.evolve(
            record,
            client_order_id="m1",
            pair=ETH,
            is_long=True,
            is_market=True,
            match_type=2,
            position_type=3,
            lever=10,
            price=None,
            quantity=Decimal("0.0100"),
            filled=Decimal("0.0100"),
            status="FILLED",
            create_ms=1_000,
            update_ms=1_000,
            resting=None,
        )
    )
    assert fields(orders.by_client_id("m1")) == fields(record)
    # Resting orders: the live record while OPEN, then an equal one once filled or cancelled.
    bid = place(order("b1", is_market=False, match_type=MatchType.GTC, price=Decimal("1990.0")), 2)
    ask = place(
        order(
            "a1", is_long=False, is_market=False, match_type=MatchType.GTC, price=Decimal("2100")
        ),
        3,
    )
    live_bid, live_ask = orders.get(bid), orders.get(ask)
    assert live_bid is not None and live_bid.status == "OPEN" and live_bid.resting is not None
    assert live_ask is not None and live_ask.status == "OPEN"
    exchange.set_mark(ETH, Decimal("1989"), 5_000)
    exchange.cancel_order(orders.get(ask), 6_000)
    assert live_bid.status == "FILLED" and live_ask.status == "CANCELED"
    assert fields(orders.get(bid)) == fields(live_bid)
    assert fields(orders.by_client_id("a1")) == fields(live_ask)
    assert len(orders) == 3 and orders.open_orders() == []
    assert exchange.cancel_order(orders.get(bid), 7_000)[0] == 2341  # completed


def kept_per_order(count: int) -> float:
    """Bytes an exchange keeps per market order (and its match) beyond every limit at 1."""
    kept = []
    for limit in (count, 1):
        settings = ExchangeSettings(
            order_history_limit=limit, match_history_limit=limit, client_id_history_limit=limit
        )
        gc.collect()
        tracemalloc.start()
        try:
            exchange = Exchange(settings)
            exchange.open_account(USER, None, {"USD": Decimal(10_000_000)})
            for i in range(count):
                # fresh objects per order, as the twin parses them from each body
                item = order(f"o{i}", is_long=i % 2 == 0, quantity=Decimal(f"0.0{1 + i % 5}"))
                exchange.submit(USER, [item], 1_000 + i, atomic=False)
            gc.collect()
            kept.append(tracemalloc.get_traced_memory()[0])
        finally:
            tracemalloc.stop()
        del exchange
    return (kept[0] - kept[1]) / count


def test_an_exchange_keeps_a_few_hundred_bytes_per_order() -> None:
    assert kept_per_order(1000) < 800  # about 600 (the unpacked objects: about 1300)
