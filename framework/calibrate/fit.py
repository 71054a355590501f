"""The models calibration fits from Observations: latency, fill probability, partials, slippage.

Each figure comes with its 95 % interval and the number of orders it rests on
(:class:`~framework.calibrate.estimates.Estimate`). What is fitted, and from which orders:

* **Latency to the answer** (``ack``): answer receipt minus the batchCreate's ``timestamp``
  (when it was signed and sent), every answered order's batch once. Log-normal.
* **Latency to the match** (``arrival``): the first match's ``createTimeStamp`` (venue time)
  minus the send, for orders that filled as taker on arrival (market orders, crossing limits).
  It is the one-way time an order takes to reach the book. Non-positive gaps mean the two
  clocks disagree by more than the latency: counted (``clock_skew``), not fitted.
* **Touch fill probability**: for resting orders (GTC and POST_ONLY limits that did not fill
  as taker on arrival), each trade printed at or through the order's price while it rested
  is a trial. Trades of one millisecond cannot be told apart from the fill they made, so the
  trials are grouped by millisecond: a group of k trials filled the order with chance
  1 - (1 - p)^k; the fill's millisecond is the group that did, the earlier ones did not.
  p by maximum likelihood, with its profile-likelihood interval
  (:func:`~framework.calibrate.estimates.per_trial`). A fill whose millisecond no recorded
  trade reached is counted apart (``fills_without_touch``), not a trial. p = fills /
  trials (Wilson interval). The twin's ``fill_probability`` is this parameter. A fill with
  no touch before it (a trade the recording missed, or a fill by a rule that needs none) is
  counted apart (``fills_without_touch``), not a trial.
* **Fill probability by distance and by time**: of resting orders, the share that got any
  fill, per distance of the limit from its side's best price at the send (basis points;
  at or inside the best counts as 0); and the share filled within 1, 10, 60, 300 s of its
  answer, by Kaplan-Meier: an order canceled or still open at the recording's end counts
  as unfilled only while it was watched (a horizon past every order's watch is null).
* **Partial fills**: of resting orders with a fill, the share whose matches sum to less than
  their quantity (at the recording's end, or when canceled).
* **Slippage of market orders**: the average fill price against the best opposite price of
  the book before the send, in basis points, positive when the taker paid more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from typing import Final

import attrs

from framework.calibrate.estimates import (
    Estimate,
    LogNormal,
    filled_within,
    lognormal,
    mean,
    per_trial,
    wilson,
)
from framework.calibrate.observations import Observations, OrderSeen
from framework.venue.models import MatchType

__all__ = ["DISTANCE_EDGES_BPS", "HORIZONS_S", "Calibration", "fit"]

DISTANCE_EDGES_BPS: Final = (0, 5, 10, 25, 50)
"""Upper edges of the distance buckets (bps); the last bucket is beyond 50."""
HORIZONS_S: Final = (1, 10, 60, 300)
"""Horizons of the fill-by-time shares, in seconds."""
_BPS: Final = Decimal(10_000)
_RESTS: Final = frozenset({MatchType.GTC, MatchType.POST_ONLY})


@attrs.frozen
class Bucket:
    """A share of orders in one bucket (a distance range or a horizon)."""

    label: str
    share: Estimate | None


@attrs.frozen
class Calibration:
    """Every fitted figure, and the counts behind it."""

    orders: int
    resting: int
    market: int
    ack: LogNormal | None
    ack_values: tuple[float, ...]
    arrival: LogNormal | None
    arrival_values: tuple[float, ...]
    clock_skew: int
    touch_probability: Estimate | None
    fills_without_touch: int
    by_distance: tuple[Bucket, ...]
    by_horizon: tuple[Bucket, ...]
    partial_share: Estimate | None
    filled_fraction: Estimate | None
    slippage_bps: Estimate | None


def _distance_bps(seen: OrderSeen) -> Decimal | None:
    top, price = seen.top, seen.order.price
    if top is None or price is None:
        return None
    best = top.bid if seen.order.is_long else top.ask
    if best is None or best <= 0:
        return None
    gap = (best - price) if seen.order.is_long else (price - best)
    return max(gap, Decimal(0)) / best * _BPS


def _bucket_label(i: int) -> str:
    edges = DISTANCE_EDGES_BPS
    if i == 0:
        return "at or inside the best"
    if i < len(edges):
        return f"{edges[i - 1]}-{edges[i]} bps"
    return f"over {edges[-1]} bps"


def _bucket_of(bps: Decimal) -> int:
    for i, edge in enumerate(DISTANCE_EDGES_BPS):
        if bps <= edge:
            return i
    return len(DISTANCE_EDGES_BPS)


def _slippage(seen: OrderSeen) -> float | None:
    top = seen.top
    if top is None or not seen.matches:
        return None
    best = top.ask if seen.order.is_long else top.bid
    qty = seen.filled
    if best is None or best <= 0 or qty <= 0:
        return None
    notional = sum(
        ((m.average_price or Decimal(0)) * (m.quantity or Decimal(0)) for m in seen.matches),
        Decimal(0),
    )
    average = notional / qty
    gap = (average - best) if seen.order.is_long else (best - average)
    return float(gap / best * _BPS)


def fit(obs: Observations) -> Calibration:
    """Fit every model Observations allow; a model without data is None."""
    orders = list(obs.orders.values())
    end = obs.last_ms or 0
    acks: dict[int, float] = {}
    arrivals: list[float] = []
    skew = 0
    groups: list[tuple[int, bool]] = []
    no_touch = 0
    distance: list[list[bool]] = [[] for _ in range(len(DISTANCE_EDGES_BPS) + 1)]
    watched: list[tuple[float, bool]] = []
    partial: list[bool] = []
    fractions: list[float] = []
    slips: list[float] = []
    resting = market = 0
    for seen in orders:
        if seen.order_id is None:
            continue
        if seen.answer_known:
            acks.setdefault(seen.sent_ms, float(seen.answered_ms - seen.sent_ms))
        first = seen.first_match
        if first is not None and first.is_taker:
            gap = (first.create_time_stamp or 0) - seen.sent_ms
            if gap > 0:
                arrivals.append(float(gap))
            else:
                skew += 1
            if seen.order.is_market:
                market += 1
                slip = _slippage(seen)
                if slip is not None:
                    slips.append(slip)
            continue
        if seen.order.price is None or seen.order.match_type not in _RESTS:
            continue
        resting += 1
        filled_at = first.create_time_stamp if first is not None else None
        counted = Counter(t for t in seen.touches if filled_at is None or t <= filled_at)
        if filled_at is not None and filled_at not in counted:
            no_touch += 1  # no recorded trade reached it in its fill's millisecond
        else:
            groups.extend((k, t == filled_at) for t, k in sorted(counted.items()))
        bps = _distance_bps(seen)
        if bps is not None:
            distance[_bucket_of(bps)].append(first is not None)
        if filled_at is not None:
            watched.append((max(filled_at - seen.answered_ms, 0) / 1000, True))
        else:
            until = seen.ended_ms if seen.ended_ms is not None else end
            watched.append((max(until - seen.answered_ms, 0) / 1000, False))
        if first is not None:
            filled = seen.filled
            partial.append(filled < seen.order.quantity)
            fractions.append(float(min(filled / seen.order.quantity, Decimal(1))))
    ack_values = tuple(acks.values())
    return Calibration(
        orders=len(orders),
        resting=resting,
        market=market,
        ack=lognormal(ack_values),
        ack_values=ack_values,
        arrival=lognormal(arrivals),
        arrival_values=tuple(arrivals),
        clock_skew=skew,
        touch_probability=per_trial(groups),
        fills_without_touch=no_touch,
        by_distance=tuple(
            Bucket(_bucket_label(i), _share(flags)) for i, flags in enumerate(distance)
        ),
        by_horizon=tuple(
            Bucket(f"within {h} s", share)
            for h, share in zip(HORIZONS_S, filled_within(watched, HORIZONS_S), strict=True)
        ),
        partial_share=_share(partial),
        filled_fraction=mean(fractions),
        slippage_bps=mean(slips),
    )


def _share(flags: Sequence[bool]) -> Estimate | None:
    return wilson(sum(flags), len(flags))
