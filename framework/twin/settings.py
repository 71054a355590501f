"""Configuration of the venue twin: attrs records loaded from YAML by the project's one
strict converter (:mod:`framework.yaml_attrs`, as the daemon's config).

Every choice the twin makes where SPEC.md says "not shown" is a key here (see
``configs/venue.yaml`` for a commented example). Unknown keys are refused, so a typo fails
loudly; errors are :class:`~framework.venue.errors.ConfigError` naming the file, and the path
and line of every bad value (``pairs.ETH-USD.rules.max_lever: expected int, got 'lots'
(line 4)``). Decimals may be written as YAML numbers or strings; strings are exact and
preferred. Date-times need a zone (``2030-01-01T08:00:00Z``), as in the daemon's config.

Memory bounds (each at least 1, 100000 by default): ``order_history_limit`` (completed
order records per account), ``match_history_limit`` (matches per account and pair, older
ones no longer listed), ``client_id_history_limit`` (accepted clientOrderIds per account kept
for the duplicate check and ``VenueTwin.executed_orders``) and ``received_orders_limit``
(orders kept in ``VenueTwin.received_orders``, also at most ``received_orders_max_bytes``,
32 MiB by default). Whatever the twin keeps per order, match or request is bounded by one
of them, so its memory stays flat over a long run. What one request may cost is bounded by
``server`` (:class:`ServerSettings`: sizes, timeouts, connections).

``market`` (:class:`~framework.sim.market.MarketSettings`, ``enabled: false`` by default):
the seeded book and trades the twin publishes on its public market endpoints and WebSocket
events, and fills user orders against when enabled (``venue.twin.market.enabled: true`` in
a node's config, ``market: {enabled: true}`` in the twin's own settings file). Its
``fill_rule`` (touch, through, queue; queue by default) is how resting orders fill on the
published trades (:mod:`framework.sim.fill_model`), named as a paper venue's
``backtest.paper.fill_rule``, so both can run the same rule.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import attrs

from framework.sim.market import MarketSettings
from framework.sim.state import ExchangeSettings
from framework.venue.errors import ConfigError
from framework.yaml_attrs import ConfigProblems, LineMap, read_yaml, structure
from framework.yaml_read import read_config_text

__all__ = [
    "AccountSettings",
    "FaultSettings",
    "MarketSettings",
    "PriceSettings",
    "ServerSettings",
    "TwinSettings",
    "load_settings",
    "settings_from_mapping",
]

_SECRET_KEYS = frozenset({"hmac_secret"})
_PAIR_NAME = re.compile(r"[A-Z0-9]+-[A-Z0-9]+")
_ADDRESS = re.compile(r"0[xX][0-9a-fA-F]{40}")


def _share(_inst: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} is a share between 0 and 1, got {value}")


def _non_negative(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value}")


def _error_status(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 400 <= value <= 599:
        raise ValueError(f"{attribute.name} is an HTTP error status (400..599), got {value!r}")


def _at_least_one(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1, got {value}")


@attrs.frozen(kw_only=True)
class AccountSettings:
    """An API client the twin accepts; at least one of address, hmac_secret, ed25519_public_key."""

    api_key: str
    address: str | None = None
    hmac_secret: str | None = attrs.field(default=None, repr=False)
    ed25519_public_key: str | None = None
    balances: dict[str, Decimal] = attrs.field(factory=dict)
    user_id: int | None = None

    def __attrs_post_init__(self) -> None:
        """Refuse an account no signature could ever verify, or a malformed address."""
        if not self.api_key:
            raise ValueError("api_key must not be empty")
        if self.address is None and self.hmac_secret is None and self.ed25519_public_key is None:
            raise ValueError(
                "an account needs address (sign type 2), hmac_secret (1) or ed25519_public_key (3)"
            )
        if self.address is not None and _ADDRESS.fullmatch(self.address) is None:
            raise ValueError("address must be 0x followed by 40 hex characters")
        for coin, amount in self.balances.items():
            if amount < 0:
                raise ValueError(f"balance of {coin} must not be negative")


@attrs.frozen(kw_only=True)
class PriceSettings:
    """How mark prices move: a seeded random walk or a CSV track, one tick per interval."""

    model: Literal["random_walk", "csv"] = "random_walk"
    tick_interval: float = attrs.field(default=1.0, validator=_non_negative)
    max_step_ticks: int = attrs.field(default=5, validator=_non_negative)
    csv_path: str | None = None
    loop: bool = True

    def __attrs_post_init__(self) -> None:
        """A CSV model needs its file."""
        if self.model == "csv" and not self.csv_path:
            raise ValueError("prices.model csv needs prices.csv_path")


@attrs.define(kw_only=True)
class FaultSettings:
    """Injected faults; shares are probabilities per call, order, or push (0 disables)."""

    latency: float = attrs.field(default=0.0, validator=_non_negative)
    latency_jitter: float = attrs.field(default=0.0, validator=_non_negative)
    busy_rate: float = attrs.field(default=0.0, validator=_share)
    unavailable_rate: float = attrs.field(default=0.0, validator=_share)
    drop_response_rate: float = attrs.field(default=0.0, validator=_share)
    ws_disconnect_every: float = attrs.field(default=0.0, validator=_non_negative)
    push_duplicate_rate: float = attrs.field(default=0.0, validator=_share)
    push_reorder_rate: float = attrs.field(default=0.0, validator=_share)
    stale_account_rate: float = attrs.field(default=0.0, validator=_share)
    error_after_accept_rate: float = attrs.field(default=0.0, validator=_share)
    error_after_accept_status: int = attrs.field(default=500, validator=_error_status)
    unavailable_envelope: bool = False
    reset_before_read_rate: float = attrs.field(default=0.0, validator=_share)
    answer_delay_s: float = attrs.field(default=0.0, validator=_non_negative)
    answer_delay_jitter_s: float = attrs.field(default=0.0, validator=_non_negative)
    omit_result_rate: float = attrs.field(default=0.0, validator=_share)
    match_delay_min_s: float = attrs.field(default=0.0, validator=_non_negative)
    match_delay_max_s: float = attrs.field(default=0.0, validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        """Check what no single field can: the match delay range."""
        if self.match_delay_max_s < self.match_delay_min_s:
            raise ValueError(
                f"match_delay_max_s ({self.match_delay_max_s}) must not be below"
                f" match_delay_min_s ({self.match_delay_min_s})"
            )


def _positive(_inst: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be above 0, got {value}")


def _none_or_at_least_one(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _at_least_one(_inst, attribute, value)


@attrs.frozen(kw_only=True)
class ServerSettings:
    """Limits of the twin as a server: what one request or connection may cost it.

    ``max_body_bytes`` bounds a request body: a declared Content-Length above it is refused
    with HTTP 413 before a byte of the body is read, and a chunked body as soon as it crosses
    it. The default (64 KiB) holds 20 orders many times over (one is about 200 bytes).
    ``max_header_bytes`` bounds the request line and headers (HTTP 431 beyond). A request's
    headers must arrive within ``header_timeout`` seconds of the connection's first moment
    (or of its first byte after an answered request), its body within ``body_timeout`` of
    the headers' end (else HTTP 408 and the connection is closed); an idle connection is
    closed after ``keep_alive_timeout`` seconds (see :class:`framework.twin.server.LimitedHttp`).
    ``max_connections`` (none by default) is uvicorn's ``limit_concurrency``: beyond it,
    requests are answered HTTP 503. ``ws_max_message_bytes`` is uvicorn's ``ws_max_size``:
    a larger WebSocket message closes the socket with code 1009.
    """

    max_body_bytes: int = attrs.field(default=65_536, validator=_at_least_one)
    max_header_bytes: int = attrs.field(default=16_384, validator=_at_least_one)
    header_timeout: float = attrs.field(default=10.0, validator=_positive)
    body_timeout: float = attrs.field(default=10.0, validator=_positive)
    keep_alive_timeout: int = attrs.field(default=5, validator=_at_least_one)
    max_connections: int | None = attrs.field(default=None, validator=_none_or_at_least_one)
    ws_max_message_bytes: int = attrs.field(default=65_536, validator=_at_least_one)


@attrs.frozen(kw_only=True)
class TwinSettings(ExchangeSettings):
    """Everything the twin needs to run; the defaults give a working two-pair USD venue.

    The exchange's own keys (pairs, fees, slippage, history limits...) are
    :class:`~framework.sim.state.ExchangeSettings`'.
    """

    host: str = "127.0.0.1"
    port: int = 8400
    seed: int = 1
    ws_path: str = "/api/market/ws"
    batch_mode: Literal["partial", "atomic"] = "partial"
    order_id_key: Literal["corderId", "cOrderId"] = "corderId"
    timestamp_window: float = attrs.field(default=30.0, validator=_non_negative)
    # Milliseconds added to the twin's clock (its time endpoint and the timestamp check): a
    # venue whose clock is off from this machine's, for ``perpframe doctor``'s clock check.
    clock_offset_ms: int = 0
    default_sign_type: int = 2
    max_orders: int = 20
    default_page_size: int = 20
    max_page_size: int = 100
    accounts: list[AccountSettings] = attrs.field(factory=list)
    demo_account: bool = True
    demo_balance: Decimal = attrs.field(default=Decimal("100000"), validator=_non_negative)
    prices: PriceSettings = PriceSettings()
    # The public market the twin publishes and fills against (framework.sim.market); off by
    # default: fills at the mark, trades/depth/kline answer empty.
    market: MarketSettings = attrs.Factory(MarketSettings)
    faults: FaultSettings = attrs.field(factory=FaultSettings)
    ws_queue_limit: int = 10000
    # The order-management extension (framework/twin/order_management.py): off, its seven
    # paths answer HTTP 404 like any unknown path.
    order_management: bool = True
    max_cancel_ids: int = attrs.field(default=20, validator=_at_least_one)
    # Orders of authenticated batchCreate bodies kept in VenueTwin.received_orders (whole
    # twin), at most this many and this many bytes, the oldest forgotten first.
    received_orders_limit: int = attrs.field(default=100_000, validator=_at_least_one)
    received_orders_max_bytes: int = attrs.field(default=33_554_432, validator=_at_least_one)
    # Request sizes and timeouts of the server (ServerSettings).
    server: ServerSettings = ServerSettings()

    def __attrs_post_init__(self) -> None:
        """Check what no single field can: pair names, unique keys and ids."""
        if not self.pairs:
            raise ValueError("at least one pair is needed")
        for name in self.pairs:
            if _PAIR_NAME.fullmatch(name) is None:
                raise ValueError(f"pair name {name!r} is not of the form BASE-QUOTE")
        keys = [a.api_key for a in self.accounts]
        if len(set(keys)) != len(keys):
            raise ValueError("api_key values of accounts must be unique")
        if self.default_sign_type not in (1, 2, 3):
            raise ValueError("default_sign_type must be 1, 2 or 3")
        if not 1 <= self.default_page_size <= self.max_page_size:
            raise ValueError("default_page_size must be between 1 and max_page_size")


def settings_from_mapping(
    data: Mapping[str, Any] | None, *, source: str = "<settings>", lines: LineMap | None = None
) -> TwinSettings:
    """Structure a parsed YAML/JSON mapping into TwinSettings, or raise ConfigError."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of settings")
    try:
        return structure(dict(data), TwinSettings, lines=lines, secret_keys=_SECRET_KEYS)
    except ConfigProblems as exc:
        problems = "\n  ".join(exc.problems)
        raise ConfigError(f"{source}: invalid twin settings:\n  {problems}") from None


def load_settings(path: str | Path) -> TwinSettings:
    """Read a YAML file of twin settings (see configs/venue.yaml), or raise ConfigError.

    ``${NAME}`` is replaced by the environment variable NAME, as in the daemon's config.
    """
    source = str(path)
    try:
        text = read_config_text(path)  # bounded; not UTF-8 or too big: one line
        data, lines = read_yaml(text, source=source, env=os.environ)
    except ConfigProblems as exc:
        raise ConfigError("\n".join(exc.problems)) from None
    return settings_from_mapping(data, source=source, lines=lines)
