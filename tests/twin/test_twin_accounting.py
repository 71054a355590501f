"""Accounting: after a seeded random run, fills, positions and balances agree to the unit."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest
from websockets.asyncio.client import connect

from framework.twin import VenueTwin
from tests.twin.twin_client import START_BALANCE, TwinClient, order, recv_json

pytestmark = pytest.mark.anyio

PAIRS = {"ETH-USD": (3, Decimal("0.001")), "BTC-USD": (4, Decimal("0.0001"))}


def random_order(rng: random.Random, n: int, pair: str, mark: Decimal) -> dict[str, Any]:
    position_type, step = PAIRS[pair]
    kind = rng.choice(["market", "market", "ioc", "fok", "gtc", "post"])
    quantity = str(step * rng.randint(10, 3000))
    offset = mark * Decimal(rng.randint(-20, 20)) / 1000
    price = str((mark + offset).quantize(Decimal("0.01")))
    common = {
        "long": rng.random() < 0.5,
        "lever": rng.choice([2, 5, 10, 25, 50, 100]),
        "pair": pair,
        "position_type": position_type,
        "quantity": quantity,
    }
    if kind == "market":
        return order(f"r{n}", **common)
    match_type = {"ioc": 2, "fok": 3, "gtc": 1, "post": 4}[kind]
    return order(f"r{n}", market=False, match_type=match_type, price=price, **common)


async def all_matches(trader: TwinClient, pair: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"pageSize": 100}
        if cursor is not None:
            params["matchId"] = cursor
        page = (await trader.matches(pair, **params))["data"]
        if not page:
            return found
        found += page
        cursor = page[-1]["id"]


async def test_fills_positions_and_balance_agree_after_a_random_run(
    twin: VenueTwin, trader: TwinClient
) -> None:
    rng = random.Random(20240601)
    n = 0
    accepted = 0
    async with connect(twin.ws_url, max_queue=None) as ws:
        await ws.send(trader.subscribe_message("api_account", symbol="USD"))
        assert (await recv_json(ws))["success"] is True
        for _ in range(40):
            pair = rng.choice(list(PAIRS))
            orders = []
            for _ in range(rng.randint(1, 20)):
                n += 1
                orders.append(random_order(rng, n, pair, twin.mark(pair)))
            answer = await trader.batch(orders)
            accepted += len(answer["data"] or [])
            for moved in PAIRS:
                mark = twin.mark(moved)
                move = mark * Decimal(rng.randint(-30, 30)) / 1000
                twin.set_mark(moved, (mark + move).quantize(Decimal("0.01")))
        # Sweep the book: every resting order fills or is cancelled.
        for pair in PAIRS:
            resting = twin.exchange.resting_orders(pair)
            if resting:
                twin.set_mark(pair, min(o.price for o in resting) - 1)
                twin.set_mark(pair, max(o.price for o in resting) + 1)
            assert twin.exchange.resting_orders(pair) == []
        # Then a leveraged position, a crash and a squeeze: liquidations enter the books too.
        await trader.batch([order("last", lever=50, quantity="5")])
        for pair in PAIRS:
            for factor in (Decimal("0.5"), Decimal("3")):
                twin.set_mark(pair, (twin.mark(pair) * factor).quantize(Decimal("0.01")))
        assert accepted > 200

        fees = pnl = margins = Decimal(0)
        liquidations = 0
        for pair in PAIRS:
            matches = await all_matches(trader, pair)
            ids = [m["id"] for m in matches]
            assert ids == sorted(set(ids), reverse=True)
            signed = sum(
                (Decimal(m["quantity"]) * (1 if m["isLong"] else -1) for m in matches),
                Decimal(0),
            )
            positions = (await trader.positions(pair))["data"]
            held = sum(
                (Decimal(p["quantity"]) * (1 if p["isLong"] else -1) for p in positions),
                Decimal(0),
            )
            assert signed == held, pair
            fees += sum((Decimal(m["tradeFee"]) for m in matches), Decimal(0))
            liquidations += sum(1 for m in matches if m["isClose"] and m["tradeFee"] == "0")
            pnl += sum((Decimal(m["profitLoss"]) for m in matches), Decimal(0))
            margins += sum((Decimal(p["marginAmount"]) for p in positions), Decimal(0))
        assert fees > 0 and pnl != 0
        assert liquidations >= 1
        balance = (await trader.balance())["data"]
        assert Decimal(balance["frozenAmount"]) == margins
        assert Decimal(balance["availableAmount"]) == START_BALANCE - margins - fees + pnl

        # The last account push shows the same balance; log ids only grew.
        last_log = 0
        frame: dict[str, Any] = {}
        while True:
            frame = await recv_json(ws)
            assert frame["data"]["logId"] > last_log
            last_log = frame["data"]["logId"]
            if frame["data"]["availableAmount"] == balance["availableAmount"] and (
                frame["data"]["logId"] == twin.exchange.last_log_id
            ):
                break
        assert frame["data"]["frozenAmount"] == balance["frozenAmount"]
