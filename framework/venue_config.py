"""The ``venue:`` section of a config: where and as whom the node trades, and how.

Apart from :mod:`framework.config` (the whole file) as :mod:`framework.market_config` is:
the record and the rules that span its fields. Credentials are required with a real venue
and refused with ``embedded: true`` (the twin supplies them); in paper mode
(``mode: paper``: orders go to the in-process paper venue, the market comes from the venue)
the API key and secret are optional, together, and needed only for market channels (the
venue signs WebSocket subscribes); ``paper`` holds the paper venue's settings, read when the
node starts (:func:`framework.paper.venue.paper_settings`).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from framework.market_config import MarketConfig
from framework.twin.settings import TwinSettings
from framework.venue.requests import LANGUAGES, OrderManagementPaths
from framework.venue.signing import make_signer
from framework.yaml_attrs import KeyPath, Problems, Secret
from framework.yaml_lines import shown

__all__ = ["LANGUAGES", "VenueConfig", "check_paper", "check_venue"]


@attrs.frozen(slots=True, kw_only=True)
class VenueConfig:
    """Where and as whom to trade; ``embedded: true`` starts the venue twin in-process."""

    base_url: str | None = None
    ws_url: str | None = None
    api_key: str | None = None
    api_secret: Secret | None = attrs.field(default=None, repr=False)
    sign_type: int = 2
    language: str | None = None
    embedded: bool = False
    timeout_s: float = 10.0
    twin: TwinSettings | None = None
    """Settings of the embedded twin (prices, faults, seed...); its pairs are ``pairs:``."""
    order_paths: OrderManagementPaths = attrs.Factory(OrderManagementPaths)
    """Paths of the order-management extension (cancels, open orders; the SDK's by default)."""
    mode: Literal["live", "paper"] = "live"
    """``paper``: orders go to the in-process paper venue, the market comes from the venue."""
    paper: dict[str, Any] = attrs.Factory(dict)
    """With mode paper: the paper venue's settings (the keys of
    :class:`framework.backtest.paper.PaperSettings`: maker_fee, taker_fee, latency_ms,
    slippage, balances, default_balance...), read when the node starts."""

    @property
    def is_paper(self) -> bool:
        """True when orders go to the paper venue."""
        return self.mode == "paper"


def check_venue(venue: VenueConfig, out: Problems) -> None:
    """The rules of the ``venue:`` section: credentials, URLs, language, timeout, signer."""
    credentials = ("base_url", "ws_url", "api_key", "api_secret")
    for key in credentials:
        value = getattr(venue, key)
        path: KeyPath = ("venue", key)
        if venue.is_paper and key in ("api_key", "api_secret") and not venue.embedded:
            continue  # optional: public market data (check_paper)
        if venue.embedded:
            out.require(
                value is None,
                path,
                "must not be set with venue.embedded: true (the twin supplies it)",
                key=True,
            )
        elif value is None or (isinstance(value, str) and not value.strip()):
            out.add(path, "required unless venue.embedded is true")
    if venue.twin is not None:
        out.require(
            venue.embedded, ("venue", "twin"), "only used with venue.embedded: true", key=True
        )
        for key in ("host", "port", "pairs"):
            path = ("venue", "twin", key)
            out.require(
                path not in out.lines.keys,
                path,
                "set by the node (the twin listens on "
                "127.0.0.1 on a free port and trades the pairs of `pairs:`)",
                key=True,
            )
    out.require(
        not venue.base_url or venue.base_url.startswith(("http://", "https://")),
        ("venue", "base_url"),
        "must start with http:// or https://",
    )
    out.require(
        not venue.ws_url or venue.ws_url.startswith(("ws://", "wss://")),
        ("venue", "ws_url"),
        "must start with ws:// or wss://",
    )
    out.require(
        venue.language is None or venue.language in LANGUAGES,
        ("venue", "language"),
        f"expected one of {', '.join(LANGUAGES)}, got {shown(venue.language)}",
    )
    out.require(venue.timeout_s > 0, ("venue", "timeout_s"), "must be > 0")
    if venue.sign_type not in (1, 2, 3):
        out.add(
            ("venue", "sign_type"),
            f"expected 1 (HMAC), 2 (secp256k1) or 3 (Ed25519), got {venue.sign_type}",
        )
    elif venue.api_secret is not None and venue.api_secret.reveal():
        secret = venue.api_secret.reveal()
        try:
            make_signer(venue.sign_type, secret)
        except (TypeError, ValueError) as exc:
            # The signers' messages never contain the key; scrub anyway, it costs nothing.
            text = str(exc).replace(secret, "***")
            out.add(("venue", "api_secret"), f"not a key for sign_type {venue.sign_type}: {text}")


def check_paper(venue: VenueConfig, market: MarketConfig, out: Problems) -> None:
    """Paper mode: credentials together or not at all, and needed for market channels."""
    if not venue.is_paper:
        out.require(
            not venue.paper, ("venue", "paper"), "only used with venue.mode: paper", key=True
        )
        return
    if venue.embedded:
        return
    keyed = [bool(venue.api_key), bool(venue.api_secret and venue.api_secret.reveal())]
    if keyed == [True, False]:
        out.add(("venue", "api_secret"), "required with venue.api_key")
    elif keyed == [False, True]:
        out.add(("venue", "api_key"), "required with venue.api_secret")
    channels = sorted(p for p, rules in market.pairs.items() if rules.channels)
    if channels and not any(keyed):
        out.add(
            ("venue", "api_key"),
            "required in paper mode for market channels (the venue signs WebSocket subscribes: "
            f"{', '.join(channels)}); without a key, hear only the polled prices "
            "(market.pairs.PAIR.channels: [])",
        )
