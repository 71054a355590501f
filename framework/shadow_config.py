"""The ``shadow:`` section: live trading with a paper venue beside it, compared order by order.

::

    shadow:
      enabled: true              # or: perpframe live -c FILE --shadow
      paper: {latency_ms: 20}    # the paper venue's settings (default: venue.paper)
      settle_s: 60               # an order's comparison closes at the latest this long after it
      window: 200                # orders per pair in the rolling summaries
      summary_every_s: 60        # how often the summaries are logged (0: at stop only)
      report: shadow.html        # written at stop (null: none)
      bands:                     # the alarm fires when a pair's summary leaves one
        fill_ratio: ["0.8", "1.25"]
        price_gap_bps: 5
        divergent_share: "0.2"
        min_orders: 20

The shadow never sends, delays or changes a live order: it sees each batch after the live
request was written. It needs the market (a ``market:`` section) for its paper venue to fill
against, and a live venue (it is refused with ``venue.mode: paper``). Every bad value is one
located line (:func:`check_shadow`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs

from framework.market_config import MarketConfig
from framework.venue_config import VenueConfig
from framework.yaml_attrs import Problems
from framework.yaml_lines import shown

__all__ = ["BandsConfig", "ShadowConfig", "check_shadow"]


@attrs.frozen(slots=True, kw_only=True)
class BandsConfig:
    """Where each pair's rolling summary should stay (see framework.shadow.compare.Bands)."""

    fill_ratio: tuple[Decimal, Decimal] = (Decimal("0.8"), Decimal("1.25"))
    """Paper's filled orders over live's: low, high."""
    price_gap_bps: Decimal = Decimal(5)
    """The median price gap's largest size, either way."""
    divergent_share: Decimal = Decimal("0.2")
    """The largest share of orders whose outcomes differ."""
    min_orders: int = 20
    """No alarm before this many orders are in a pair's window."""


@attrs.frozen(slots=True, kw_only=True)
class ShadowConfig:
    """The shadow's settings; off unless enabled (or ``--shadow``)."""

    enabled: bool = False
    paper: dict[str, Any] | None = None
    """The paper venue's settings (PaperSettings keys); None: venue.paper's."""
    settle_s: float = 60.0
    window: int = 200
    summary_every_s: float = 60.0
    report: str | None = "shadow.html"
    bands: BandsConfig = BandsConfig()


def check_shadow(
    shadow: ShadowConfig, venue: VenueConfig, market: MarketConfig, out: Problems
) -> None:
    """Add one located problem per bad value of the ``shadow:`` section to out."""
    if not shadow.enabled:
        return
    here = ("shadow",)
    out.require(
        not venue.is_paper,
        (*here, "enabled"),
        "a shadow runs beside live trading: not with venue.mode paper (--paper)",
    )
    out.require(
        bool(market.pairs) or market.source is not None,
        (*here, "enabled"),
        "the shadow's paper venue fills against the market: configure a `market:` section",
    )
    out.require(
        0 < shadow.settle_s <= 86400,
        (*here, "settle_s"),
        f"must be > 0 and at most 86400 s, got {shown(shadow.settle_s)}",
    )
    out.require(
        1 <= shadow.window <= 100_000,
        (*here, "window"),
        f"must be between 1 and 100000 orders, got {shown(shadow.window)}",
    )
    out.require(
        0 <= shadow.summary_every_s <= 86400,
        (*here, "summary_every_s"),
        f"must be between 0 and 86400 s (0: at stop only), got {shown(shadow.summary_every_s)}",
    )
    bands = shadow.bands
    low, high = bands.fill_ratio
    out.require(
        0 <= low <= high,
        (*here, "bands", "fill_ratio"),
        f"expected [low, high] with 0 <= low <= high, got [{low}, {high}]",
    )
    out.require(
        bands.price_gap_bps >= 0,
        (*here, "bands", "price_gap_bps"),
        f"must be >= 0, got {bands.price_gap_bps}",
    )
    out.require(
        0 <= bands.divergent_share <= 1,
        (*here, "bands", "divergent_share"),
        f"must be between 0 and 1, got {bands.divergent_share}",
    )
    out.require(
        bands.min_orders >= 1,
        (*here, "bands", "min_orders"),
        f"must be >= 1, got {bands.min_orders}",
    )
