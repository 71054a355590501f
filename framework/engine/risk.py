"""Pre-trade checks: the venue's own stateless rules plus the framework's limits.

The venue's rules are :func:`framework.venue.rules.check_order` (the same function the venue
twin enforces), so a refused intent carries the venue's code and text (2301-2304, 2312,
2317, 2325, ...). The framework's limits have codes of their own, outside the venue's table,
so a strategy can tell them apart:

====  ===================================================================================
9001  kill switch on: every new intent is refused
9002  the pair is not configured (no rules for it)
9003  the pair's open quantity would exceed ``max_open_quantity``
9004  the pair's open notional would exceed ``max_notional``
9005  no reference price for a market order while ``max_notional`` is set
9006  more than ``max_orders_per_second`` intents in the last second
9010  missing from a successful batchCreate answer (only with ``missing_result: rejected``)
9011  could not be sent: transport failures before sending outlasted the retries
9012  expired: found unsent in the journal at restart, older than ``pending_max_age_s``
9013  the node is stopping: submitted after the stop's drain, or still queued at its end
====  ===================================================================================

Open quantity and notional of a pair are the framework's own book: intents not yet answered
(PENDING, UNKNOWN) and accepted limit orders that rest (GTC, POST_ONLY) until matches fill
them. Positions are not counted here (the portfolio owns them). Pure: time passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

import attrs

from framework.venue.models import OrderInput
from framework.venue.rules import PairRules, check_order, refusal_detail

__all__ = [
    "FRAMEWORK_CODES",
    "KILL_SWITCH",
    "MAX_NOTIONAL",
    "MAX_OPEN_QUANTITY",
    "MAX_ORDERS_PER_SECOND",
    "MISSING_FROM_ANSWER",
    "NOT_SENT",
    "NO_REFERENCE_PRICE",
    "PENDING_EXPIRED",
    "STOPPING",
    "UNKNOWN_PAIR",
    "RiskGate",
    "RiskSettings",
    "is_resting",
]

KILL_SWITCH: Final = 9001
UNKNOWN_PAIR: Final = 9002
MAX_OPEN_QUANTITY: Final = 9003
MAX_NOTIONAL: Final = 9004
NO_REFERENCE_PRICE: Final = 9005
MAX_ORDERS_PER_SECOND: Final = 9006
MISSING_FROM_ANSWER: Final = 9010
NOT_SENT: Final = 9011
PENDING_EXPIRED: Final = 9012
STOPPING: Final = 9013

FRAMEWORK_CODES: Final[dict[int, str]] = {
    KILL_SWITCH: "Kill switch is on: no new orders",
    UNKNOWN_PAIR: "Pair {0} is not configured",
    MAX_OPEN_QUANTITY: "Open quantity of {0} would exceed {1}",
    MAX_NOTIONAL: "Open notional of {0} would exceed {1}",
    NO_REFERENCE_PRICE: "No reference price for a market order on {0} (max_notional is set)",
    MAX_ORDERS_PER_SECOND: "More than {0} orders in one second",
    MISSING_FROM_ANSWER: "Missing from the venue's answer to its batch",
    NOT_SENT: "Could not be sent: {0}",
    PENDING_EXPIRED: "Unsent at restart and older than {0} s: not sent",
    STOPPING: "The node is stopping: not sent",
}
"""The framework's own refusal codes and their message templates."""

_RESTING: Final = frozenset({1, 4})  # MatchType GTC and POST_ONLY rest on the book


def _positive_or_none(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"risk.{attribute.name} must be positive or null, got {value!r}")


def _to_decimal_or_none(value: object) -> Decimal | None:
    if value is None or isinstance(value, Decimal):
        return value
    if isinstance(value, int | str):
        return Decimal(value)
    raise TypeError(f"expected a decimal or null, got {value!r}")


@attrs.frozen(slots=True, kw_only=True)
class RiskSettings:
    """Framework limits (YAML key execution.risk); each applies per pair, null = no limit."""

    max_open_quantity: Decimal | None = attrs.field(
        default=None, converter=_to_decimal_or_none, validator=_positive_or_none
    )
    max_notional: Decimal | None = attrs.field(
        default=None, converter=_to_decimal_or_none, validator=_positive_or_none
    )
    max_orders_per_second: float | None = attrs.field(default=None, validator=_positive_or_none)
    kill_switch: bool = False


@attrs.define(slots=True)
class _Exposure:
    quantity: Decimal = Decimal(0)
    notional: Decimal = Decimal(0)


def is_resting(order: OrderInput) -> bool:
    """True when an accepted order may rest on the book (a GTC or POST_ONLY limit order)."""
    return not order.is_market and order.match_type in _RESTING


class RiskGate:
    """Decides whether an intent may go out; keeps each pair's open quantity and notional."""

    __slots__ = (
        "_exposure",
        "_limits",
        "_mark_price",
        "_rate_window",
        "_rules",
        "admitted_price",
        "kill_switch",
    )

    def __init__(
        self,
        settings: RiskSettings,
        rules: Mapping[str, PairRules],
        *,
        mark_price: Callable[[str], Decimal | None] | None = None,
    ) -> None:
        self._limits = settings
        self._rules = rules
        self._mark_price = mark_price
        self.kill_switch = settings.kill_switch
        self._exposure: dict[str, _Exposure] = {}
        self._rate_window: deque[int] = deque()
        self.admitted_price: Decimal | None = None
        """The reference price of the order check() admitted last (for book and release)."""

    def reference_price(self, order: OrderInput) -> Decimal | None:
        """The price that values an order: its limit price, else the pair's mark price."""
        if order.price is not None and not order.is_market:
            return order.price
        return self._mark_price(order.pair_name) if self._mark_price is not None else None

    def check(self, order: OrderInput, now_ms: int, now: datetime) -> tuple[int, str] | None:
        """The first check the order fails as (code, text), or None; None also books it."""
        if self.kill_switch:
            return KILL_SWITCH, FRAMEWORK_CODES[KILL_SWITCH]
        pair = order.pair_name
        rules = self._rules.get(pair)
        if rules is None:
            return UNKNOWN_PAIR, FRAMEWORK_CODES[UNKNOWN_PAIR].format(pair)
        limits = self._limits
        mark = self._mark_price(pair) if self._mark_price is not None and order.is_market else None
        failure = check_order(rules, order, now=now, mark_price=mark)
        if failure is not None:
            code, text = failure
            detail = refusal_detail(rules, order, code, mark_price=mark)
            return (code, text) if detail is None else (code, f"{text}: {detail}")
        rate = limits.max_orders_per_second
        if rate is not None:
            window = self._rate_window
            while window and window[0] <= now_ms - 1000:
                window.popleft()
            if len(window) >= rate:
                return MAX_ORDERS_PER_SECOND, FRAMEWORK_CODES[MAX_ORDERS_PER_SECOND].format(rate)
        notional = Decimal(0)
        price = None
        exposure = self._exposure.get(pair)
        if self.tracks_exposure:
            if exposure is None:
                exposure = self._exposure[pair] = _Exposure()
            cap = limits.max_open_quantity
            if cap is not None and exposure.quantity + order.quantity > cap:
                return MAX_OPEN_QUANTITY, FRAMEWORK_CODES[MAX_OPEN_QUANTITY].format(pair, cap)
            cap = limits.max_notional
            if cap is not None:
                price = self.reference_price(order)
                if price is None:
                    return NO_REFERENCE_PRICE, FRAMEWORK_CODES[NO_REFERENCE_PRICE].format(pair)
                notional = order.quantity * price
                if exposure.notional + notional > cap:
                    return MAX_NOTIONAL, FRAMEWORK_CODES[MAX_NOTIONAL].format(pair, cap)
        if rate is not None:
            self._rate_window.append(now_ms)
        if exposure is not None:
            exposure.quantity += order.quantity
            exposure.notional += notional
        self.admitted_price = price
        return None

    @property
    def tracks_exposure(self) -> bool:
        """True when a quantity or notional limit is set (open orders must be booked)."""
        return self._limits.max_open_quantity is not None or self._limits.max_notional is not None

    def book(self, pair: str, quantity: Decimal, price: Decimal | None) -> None:
        """Count an order that bypassed check() (restored from the journal) as open."""
        exposure = self._exposure.setdefault(pair, _Exposure())
        exposure.quantity += quantity
        if price is not None:
            exposure.notional += quantity * price

    def release(self, pair: str, quantity: Decimal, price: Decimal | None) -> None:
        """Quantity of an order that is no longer open (answered, filled or lost), at its price."""
        exposure = self._exposure.get(pair)
        if exposure is None:
            return
        exposure.quantity = max(Decimal(0), exposure.quantity - quantity)
        if price is not None:
            exposure.notional = max(Decimal(0), exposure.notional - quantity * price)

    def open_quantity(self, pair: str) -> Decimal:
        """The pair's open quantity as the framework counts it."""
        exposure = self._exposure.get(pair)
        return exposure.quantity if exposure is not None else Decimal(0)

    def open_notional(self, pair: str) -> Decimal:
        """The pair's open notional as the framework counts it."""
        exposure = self._exposure.get(pair)
        return exposure.notional if exposure is not None else Decimal(0)
