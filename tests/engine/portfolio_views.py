"""What a reader can ask a Portfolio, as one value to compare (reading decodes what was kept)."""

from __future__ import annotations

from typing import Any

from framework.engine.portfolio import Portfolio

PAIRS = ("ETH-USD", "BTC-USD")
COINS = ("USD", "USDT")


def portfolio_state(pf: Portfolio) -> dict[str, Any]:
    """Positions, balances, marks and drop counters of PAIRS and COINS."""
    counters = pf.counters()
    counters.pop("deferred_pushes_malformed")
    return {
        "positions": {p: pf.positions(p) for p in PAIRS},
        "net": {p: pf.net_quantity(p) for p in PAIRS},
        "position_marks": {p: pf.position_mark(p) for p in PAIRS},
        "pairs": pf.pairs(),
        "balances": {c: pf.balance(c) for c in COINS},
        "available": {c: pf.available(c) for c in COINS},
        "log_ids": {c: pf.log_id(c) for c in COINS},
        "account_marks": {c: pf.account_mark(c) for c in COINS},
        "counters": counters,
    }
