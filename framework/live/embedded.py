"""Where the node trades: the configured venue, or the venue twin started in-process.

With ``venue.embedded: true`` the twin listens on 127.0.0.1 on a free port, trades exactly
the pairs of ``pairs:`` with their rules (starting marks from the twin's defaults), takes the
rest of its settings from ``venue.twin`` and registers its TEST-ONLY demo key pair, which
the node then uses: no credentials are needed and nothing leaves the machine.

It shares the daemon's memory, about 750 bytes per order (its record, match, client id and
received copy; ``tests/benchmarks/bench_twin_memory.py``): with the twin's default history
limits (100000 of each) some 75 MB once a long or busy run has filled them. In the daemon it
keeps EMBEDDED_HISTORY of each instead (about 5 MB), wherever ``venue.twin`` leaves a limit
at the twin's default, and only EMBEDDED_RECEIVED received orders: those copies are the
tests' ground truth of what reached the venue (``VenueTwin.received_orders``), which a
daemon never reads.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import attrs

from framework.config import Config, Secret
from framework.sim.state import PairSettings
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import TwinSettings

__all__ = ["EMBEDDED_HISTORY", "EMBEDDED_RECEIVED", "VenueAccess", "open_venue", "twin_settings"]

log = logging.getLogger("framework.node")

EMBEDDED_HISTORY: Final = 10_000
"""The embedded twin's history limits (completed orders, matches per pair, client ids) where
venue.twin leaves the twin's default: far more than the node reads back (its match cursor,
the orders in doubt), a tenth of the memory."""
EMBEDDED_RECEIVED: Final = 1_000
"""The embedded twin's received_orders_limit where venue.twin leaves the twin's default."""
_HISTORY: Final = {
    "order_history_limit": EMBEDDED_HISTORY,
    "match_history_limit": EMBEDDED_HISTORY,
    "client_id_history_limit": EMBEDDED_HISTORY,
    "received_orders_limit": EMBEDDED_RECEIVED,
}


@attrs.frozen(slots=True, kw_only=True)
class VenueAccess:
    """URLs and credentials the node uses; twin is set when the venue is embedded."""

    base_url: str
    ws_url: str
    api_key: str
    api_secret: Secret = attrs.field(repr=False)
    sign_type: int
    twin: VenueTwin | None = attrs.field(default=None, repr=False)


def twin_settings(config: Config) -> TwinSettings:
    """The embedded twin's settings: venue.twin with the pairs and rules of ``pairs:``, and
    EMBEDDED_HISTORY (EMBEDDED_RECEIVED) for the limits venue.twin leaves at their default."""
    base = config.venue.twin or TwinSettings()
    default = TwinSettings()
    history: dict[str, Any] = {
        name: kept
        for name, kept in _HISTORY.items()
        if getattr(base, name) == getattr(default, name)
    }
    known = default.pairs
    pairs = {
        name: attrs.evolve(known.get(name, PairSettings()), rules=rules)
        for name, rules in config.pairs.items()
    }
    coins = dict(base.coins)
    for coin in config.coins():
        coins.setdefault(coin, max(coins.values(), default=0) + 1)
    return attrs.evolve(base, host="127.0.0.1", port=0, pairs=pairs, coins=coins, **history)


@asynccontextmanager
async def open_venue(config: Config) -> AsyncIterator[VenueAccess]:
    """Yield the venue access of config, running the embedded twin for the duration."""
    venue = config.venue
    if not venue.embedded:
        assert venue.base_url and venue.ws_url
        assert venue.is_paper or (venue.api_key and venue.api_secret)
        yield VenueAccess(  # paper mode may have no key: public market data only
            base_url=venue.base_url,
            ws_url=venue.ws_url,
            api_key=venue.api_key or "",
            api_secret=venue.api_secret or Secret(""),
            sign_type=venue.sign_type,
        )
        return
    known = TwinSettings().pairs
    for pair in config.pairs:
        if pair not in known:
            log.warning(
                "embedded venue twin: %s is not a pair it knows (%s); its mark starts at %s"
                " and walks from there: play prices, not the market's",
                pair,
                ", ".join(known),
                PairSettings().initial_price,
            )
    async with VenueTwin(twin_settings(config)) as twin:
        log.info(
            "embedded venue twin started (TEST-ONLY demo key pair, play money)",
            extra={"base_url": twin.base_url, "pairs": list(config.pairs)},
        )
        try:
            yield VenueAccess(
                base_url=twin.base_url,
                ws_url=twin.ws_url,
                api_key=DEMO_API_KEY,
                api_secret=Secret(DEMO_PRIVATE_KEY),
                sign_type=2,
                twin=twin,
            )
        finally:
            log.info("embedded venue twin stopping")
