"""The backtest report's settings table: how the paper venue filled and charged, in words.

report.json's ``settings`` are the deterministic record (keys and values); report.html shows
them as sentences, each naming the key it came from (a config key, the fill_model file or
the default), so a reader sees what the numbers were made under without the YAML at hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from framework.venue.codec import plain_decimal

__all__ = ["settings_rows"]


def _pct(fraction: str) -> str:
    return plain_decimal((Decimal(fraction) * 100).normalize())


def settings_rows(results: Mapping[str, Any], market: bool = False) -> list[tuple[str, str]]:
    """How the paper venue filled and charged (report.json's settings), in words.

    market: the paper venue filled against the recording's market (its books and trades).
    """
    settings = results.get("settings")
    if not settings:
        return [("Settings", "not recorded with these results")]
    if settings["fill_price"] == "next":
        rule = (
            f"the first price at or after the order, at most {settings['max_wait_ms']} ms "
            "ahead (fill_price: next)"
        )
    else:
        rule = "the last price at or before the order: no look-ahead (fill_price: last)"
    sources = settings["prices_csv"] or " then ".join(settings["price_sources"])
    if market:
        rule = (
            "against the recording's market: market orders walk the recorded book, resting "
            "orders fill by the fill rule when a recorded trade reaches them (each pair from "
            f"its own first recorded book or trade; before it, and on pairs without one: {rule})"
        )
        sources = (
            "the recording's market: its marks, else the book's mid, else trades (each pair "
            f"from its own first recorded book or trade; before it, and on pairs without one: "
            f"{sources})"
        )
    own = (
        "replaced by the paper venue's (supersede)"
        if settings["own_activity"] == "supersede"
        else "delivered as recorded (deliver)"
    )
    rows = [
        ("Fill price", rule),
        (
            "Fees",
            f"maker {_pct(settings['maker_fee'])} %, taker {_pct(settings['taker_fee'])} % "
            f"of the notional (maker_fee {settings['maker_fee']}, "
            f"taker_fee {settings['taker_fee']})",
        ),
        (
            "Slippage",
            f"{_pct(settings['slippage'])} % of the price, against takers "
            f"(slippage {settings['slippage']})",
        ),
        (
            "Fill rule",
            f"{_rule_words(settings['fill_rule_params'], market)} "
            f"(from {settings['fill_rule_from']})",
        ),
        (
            "Latency (order to paper account)",
            f"{_latency_words(settings['latency_params'])} (from {settings['latency_from']})",
        ),
        ("Prices from", sources),
        ("The recorded node's own fills, positions and balances", own),
    ]
    rows += [
        (f"Initial equity {coin}", pnl["initial_equity"]) for coin, pnl in results["pnl"].items()
    ]
    return rows


def _rule_words(params: Mapping[str, str], market: bool) -> str:
    """The fill rule of report.json's settings in words (market: the run used it)."""
    rule = params["rule"]
    chance = params.get("fill_probability", "1")
    each = "" if Decimal(chance) == 1 else f", each such trade with probability {chance} (seeded)"
    if rule == "touch":
        words = (
            "a resting order fills whole, at its limit, when a trade prints at its price or "
            f"beyond{each}"
        )
    elif rule == "through":
        words = (
            "a resting order fills whole, at its limit, only when a trade prints beyond its "
            f"price{each}"
        )
    else:
        cancels = (
            "cancels come from behind it first"
            if params["cancels"] == "behind_first"
            else "cancels are taken pro rata"
        )
        words = (
            "a trade beyond a resting order's price fills it whole; a trade at its price first "
            f"works through the size ahead of it ({params['queue_start_share']} of the level's "
            f"displayed size when it starts resting; {cancels}) and fills it, in part, with what "
            f"is left (queue: queue_start_share {params['queue_start_share']}, "
            f"cancels {params['cancels']})"
        )
    if rule != "queue":
        words += f" ({rule})"
    if not market:
        words += (
            "; unused in this run: the recording has no books or trades, resting orders filled "
            "when the price crossed them"
        )
    return words


def _latency_words(params: Mapping[str, Any]) -> str:
    """The latency model of report.json's settings in words."""
    model = params["model"]
    if model == "constant":
        return f"{params['ms']} ms, constant"
    within = f"kept within {params['min_ms']} to {params['max_ms']} ms, seeded"
    if model == "lognormal":
        return (
            f"a log-normal draw per order: median {params['median_ms']} ms, "
            f"sigma {params['sigma']}, {within}"
        )
    return f"a draw per order from {params['samples']} measured samples, {within}"
