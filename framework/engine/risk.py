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
9007  a market order while the pair's market data is stale (older than ``stale_after_s``)
9010  missing from a successful batchCreate answer (only with ``missing_result: rejected``)
9011  could not be sent: transport failures before sending outlasted the retries
9012  expired: found unsent in the journal at restart, older than ``pending_max_age_s``
9013  the node is stopping: submitted after the stop's drain, or still queued at its end
9014  the pair's position could pass ``max_position`` (see below)
9015  the intent's lever is above ``max_lever``
9016  the pair's open orders would exceed ``max_open_orders``
====  ===================================================================================

Open quantity and notional of a pair are the framework's own book: intents not yet answered
(PENDING, UNKNOWN) and accepted limit orders that rest (GTC, POST_ONLY) until matches fill
them. Positions are not counted in them. A market order is valued at the pair's reference
price (``mark_price``: the kernel's :class:`~framework.engine.reference.ReferencePrices`, the
mark, else the last trade, own fill or configured price), and refused with 9007 while
``stale`` says the pair's market is stale, right after the pair check.

``max_open_orders`` counts the pair's orders that are not answered yet (PENDING, UNKNOWN) or
rest (ACCEPTED GTC, POST_ONLY), this intent included, whichever strategy placed them.

``max_position`` bounds what the pair's signed net position (long positive) could become if
every order that could still fill on the intent's side did. For a buy of quantity q::

    held + unfilled buys + q <= max_position

and for a sell ``held - unfilled sells - q >= -max_position``. ``held`` is the portfolio's
net position of the pair, or, while the node has read fills the portfolio does not show yet,
that plus those fills (:mod:`framework.engine.held_position`). The unfilled buys (sells) are
``quantity - filled`` of every buy (sell) the engine tracks on the pair: not answered yet,
resting, or accepted and not yet filled (a market or IOC order until its fills add up or it
is settled), whichever strategy placed it. Orders on the other side are not counted (they may
never fill), so an order that only reduces the position always passes: with a limit of 0.04
and a position of -0.1, a buy of 0.1 passes (-0.1 + 0.1 = 0 <= 0.04), a buy of 0.2 does not
(0.1 > 0.04). A LOST order is counted as it was while UNKNOWN for as long as it is a possible
owner (it may rest or fill: ``execution.lost_memory_s``, or one window after a list that
lacks it); the engine's ``tracked`` yields it, and keeps its booking until then. Pure: time
passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Final, Protocol

import attrs

from framework.engine.events import MatchFilled
from framework.engine.held_position import HeldPosition
from framework.engine.intents import OrderStatus
from framework.venue.codec import plain_decimal
from framework.venue.models import MatchRecord, OrderInput
from framework.venue.rules import PairRules, check_order, refusal_detail

__all__ = [
    "FRAMEWORK_CODES",
    "KILL_SWITCH",
    "MAX_LEVER",
    "MAX_NOTIONAL",
    "MAX_OPEN_ORDERS",
    "MAX_OPEN_QUANTITY",
    "MAX_ORDERS_PER_SECOND",
    "MAX_POSITION",
    "MISSING_FROM_ANSWER",
    "NOT_SENT",
    "NO_REFERENCE_PRICE",
    "PENDING_EXPIRED",
    "STALE_MARKET",
    "STOPPING",
    "UNKNOWN_PAIR",
    "RiskGate",
    "RiskSettings",
    "Tracked",
    "is_resting",
]

KILL_SWITCH: Final = 9001
UNKNOWN_PAIR: Final = 9002
MAX_OPEN_QUANTITY: Final = 9003
MAX_NOTIONAL: Final = 9004
NO_REFERENCE_PRICE: Final = 9005
MAX_ORDERS_PER_SECOND: Final = 9006
STALE_MARKET: Final = 9007
MISSING_FROM_ANSWER: Final = 9010
NOT_SENT: Final = 9011
PENDING_EXPIRED: Final = 9012
STOPPING: Final = 9013
MAX_POSITION: Final = 9014
MAX_LEVER: Final = 9015
MAX_OPEN_ORDERS: Final = 9016

FRAMEWORK_CODES: Final[dict[int, str]] = {
    KILL_SWITCH: "Kill switch is on: no new orders",
    UNKNOWN_PAIR: "Pair {0} is not configured",
    MAX_OPEN_QUANTITY: "Open quantity of {0} would exceed {1}",
    MAX_NOTIONAL: "Open notional of {0} would exceed {1}",
    NO_REFERENCE_PRICE: (
        "No reference price for a market order on {0} (max_notional is set, and the pair has no"
        " mark, market trade, own fill or execution.risk.reference_prices entry yet: feed its"
        " market, set a reference price, place a limit order first, or drop max_notional)"
    ),
    MAX_ORDERS_PER_SECOND: "More than {0} orders in one second",
    STALE_MARKET: "Stale market data on {0}: {1}, stale_after_s is {2} s (a market order"
    " needs a fresh price)",
    MISSING_FROM_ANSWER: "Missing from the venue's answer to its batch",
    NOT_SENT: "Could not be sent: {0}",
    PENDING_EXPIRED: "Unsent at restart and older than {0} s: not sent",
    STOPPING: "The node is stopping: not sent",
    MAX_POSITION: "Position of {0} could reach {1}: position {2}, unfilled {3}s {4}, this {3} {5};"
    " max_position is {6}",
    MAX_LEVER: "Lever {0} is above max_lever {1}",
    MAX_OPEN_ORDERS: "Open orders of {0} would exceed max_open_orders {1}",
}
"""The framework's own refusal codes and their message templates."""

_RESTING: Final = frozenset({1, 4})  # MatchType GTC and POST_ONLY rest on the book
_ACCEPTED: Final = OrderStatus.ACCEPTED
_ZERO: Final = Decimal(0)


def _positive_or_none(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"risk.{attribute.name} must be positive or null, got {value!r}")


def _to_decimal_or_none(value: object) -> Decimal | None:
    if value is None or isinstance(value, Decimal):
        return value
    if isinstance(value, int | str):
        return Decimal(value)
    raise TypeError(f"expected a decimal or null, got {value!r}")


def _to_prices(value: object) -> dict[str, Decimal]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a mapping of pair to price, got {value!r}")
    prices = {str(pair): _to_decimal_or_none(price) for pair, price in value.items()}
    return {pair: price for pair, price in prices.items() if price is not None}


def _positive_prices(_inst: object, _attribute: attrs.Attribute[Any], value: Any) -> None:
    for pair, price in value.items():
        if not price > 0:
            raise ValueError(f"risk.reference_prices.{pair} must be positive, got {price}")


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
    max_position: Decimal | None = attrs.field(
        default=None, converter=_to_decimal_or_none, validator=_positive_or_none
    )
    """Bound on the pair's net position if every unfilled order on the intent's side filled."""
    max_lever: int | None = attrs.field(default=None, validator=_positive_or_none)
    """Highest lever an intent may carry."""
    max_open_orders: int | None = attrs.field(default=None, validator=_positive_or_none)
    """Most orders of the pair unanswered or resting at once, the intent included."""
    reference_prices: dict[str, Decimal] = attrs.field(
        factory=dict, converter=_to_prices, validator=_positive_prices
    )
    """Per pair, the price a market order is valued at when the pair has no mark, market
    trade or own fill yet (:mod:`framework.engine.reference`)."""


class Tracked(Protocol):
    """What the gate reads of an order the engine tracks (a reconcile.LiveOrder)."""

    order: OrderInput
    status: OrderStatus
    filled: Decimal


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
        "_held",
        "_limits",
        "_mark_price",
        "_rate_window",
        "_rules",
        "_scans",
        "_stale",
        "_tracked",
        "admitted_price",
        "kill_switch",
    )

    def __init__(
        self,
        settings: RiskSettings,
        rules: Mapping[str, PairRules],
        *,
        mark_price: Callable[[str], Decimal | None] | None = None,
        position: Callable[[str], Decimal] | None = None,
        tracked: Callable[[], Iterable[Tracked]] | None = None,
        window_ms: int = 60_000,
        stale: Callable[[str], tuple[float | None, float] | None] | None = None,
    ) -> None:
        """``mark_price``: the pair's reference price for market orders (None: none).
        ``position``: the pair's signed net position (the portfolio's; None: flat).
        ``tracked``: every order the engine tracks (None: none). ``window_ms``: see
        :class:`~framework.engine.held_position.HeldPosition`. ``stale``: (age or None, bound)
        when the pair's market is stale, else None (None: never stale)."""
        self._limits = settings
        self._rules = rules
        self._mark_price = mark_price
        self._stale = stale
        self._tracked: Callable[[], Iterable[Tracked]] = tracked if tracked is not None else tuple
        self._scans = settings.max_open_orders is not None or settings.max_position is not None
        self._held = (
            None
            if settings.max_position is None
            else HeldPosition(position if position is not None else _flat, window_ms=window_ms)
        )
        self.kill_switch = settings.kill_switch
        self._exposure: dict[str, _Exposure] = {}
        self._rate_window: deque[int] = deque()
        self.admitted_price: Decimal | None = None
        """The reference price of the order check() admitted last (for book and release)."""

    def reference_price(self, order: OrderInput) -> Decimal | None:
        """The price that values an order: its limit price, else the pair's reference price."""
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
        if order.is_market and self._stale is not None:
            stale = self._stale(pair)
            if stale is not None:
                return STALE_MARKET, _stale_text(pair, *stale)
        limits = self._limits
        mark = self._mark_price(pair) if self._mark_price is not None and order.is_market else None
        failure = check_order(rules, order, now=now, mark_price=mark)
        if failure is not None:
            code, text = failure
            detail = refusal_detail(rules, order, code, mark_price=mark)
            return (code, text) if detail is None else (code, f"{text}: {detail}")
        cap_lever = limits.max_lever
        if cap_lever is not None and order.lever > cap_lever:
            return MAX_LEVER, FRAMEWORK_CODES[MAX_LEVER].format(order.lever, cap_lever)
        rate = limits.max_orders_per_second
        if rate is not None:
            window = self._rate_window
            while window and window[0] <= now_ms - 1000:
                window.popleft()
            if len(window) >= rate:
                return MAX_ORDERS_PER_SECOND, FRAMEWORK_CODES[MAX_ORDERS_PER_SECOND].format(rate)
        if self._scans:
            failure = self._projected(order, now_ms)
            if failure is not None:
                return failure
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

    def _projected(self, order: OrderInput, now_ms: int) -> tuple[int, str] | None:
        """max_open_orders, then max_position, on the orders the engine tracks plus order."""
        pair, is_long = order.pair_name, order.is_long
        count = 0
        unfilled = _ZERO
        for e in self._tracked():  # one pass: only when one of these limits is set
            o = e.order
            if o.pair_name != pair:
                continue
            if e.status is not _ACCEPTED or is_resting(o):
                count += 1
            if o.is_long is is_long and o.quantity > e.filled:
                unfilled += o.quantity - e.filled
        limits = self._limits
        cap = limits.max_open_orders
        if cap is not None and count + 1 > cap:
            return MAX_OPEN_ORDERS, FRAMEWORK_CODES[MAX_OPEN_ORDERS].format(pair, cap)
        limit = limits.max_position
        if limit is None or self._held is None:
            return None
        held = self._held.held(pair, is_long, now_ms)
        q = order.quantity
        reach = held + unfilled + q if is_long else held - unfilled - q
        if (reach > limit) if is_long else (reach < -limit):
            side = "buy" if is_long else "sell"
            text = FRAMEWORK_CODES[MAX_POSITION].format(
                pair,
                plain_decimal(reach),
                plain_decimal(held),
                side,
                plain_decimal(unfilled),
                plain_decimal(q),
                plain_decimal(limit),
            )
            return MAX_POSITION, text
        return None

    def watch_matches(
        self,
        attribute: Callable[[MatchRecord], MatchFilled | None],
        now_ms: Callable[[], int],
    ) -> Callable[[MatchRecord], MatchFilled | None]:
        """attribute, made to show every match read to max_position first (unchanged when
        max_position is not set)."""
        if self._held is None:
            return attribute
        return self._held.reading(attribute, now_ms)

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


def _flat(_pair: str) -> Decimal:
    return _ZERO


def _seconds(value: float) -> str:
    """Seconds to the millisecond, without trailing zeros (10.0 -> 10, 12.5 -> 12.5)."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _stale_text(pair: str, age: float | None, bound: float) -> str:
    """The 9007 text: the pair, how old its latest market record is (or none yet), the bound."""
    heard = "no market data yet" if age is None else f"the latest is {_seconds(age)} s old"
    return FRAMEWORK_CODES[STALE_MARKET].format(pair, heard, _seconds(bound))
