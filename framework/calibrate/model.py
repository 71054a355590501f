"""The model file ``perpframe calibrate`` writes: the fill model schema, with the fit's notes.

It is the file ``fill_model: path`` reads (:mod:`framework.sim.fill_model`, version 1), so a
backtest, a paper run and a shadow use what calibrate fitted::

    version: 1
    latency: {model: lognormal, median_ms: F, sigma: F}    # send to the book (the match)
    fill: {rule: touch, fill_probability: F}               # the chance a reaching trade fills
    fitted:                                                # not read: what the fit rests on
      kind: perpframe-fill-model
      recording: NAME
      sha256: HEX
      orders: N
      latency_to_answer: {median: {value, low, high, n}, mu, sigma, p90}
      latency_to_match: {...}
      touch_probability: {value, low, high, n}
      filled_by_distance_bps: [{label, value, low, high, n}, ...]
      filled_by_time: [{label, value, low, high, n}, ...]
      partial_share, filled_fraction, market_slippage_bps: {value, low, high, n}

The latency is the one-way time to the book (send to the match's ``createTimeStamp``, fitted
on orders that filled on arrival); without such orders, half the time to the answer. Without
touches, the fill rule is left out (the reader's default applies). A figure without data is
``null`` under ``fitted``.
"""

from __future__ import annotations

from typing import Any, Final

from framework.calibrate.estimates import Estimate, LogNormal
from framework.calibrate.fit import Bucket, Calibration
from framework.sim.fill_model import FILL_MODEL_VERSION

__all__ = ["MODEL_KIND", "model_document"]

MODEL_KIND: Final = "perpframe-fill-model"


def _estimate(e: Estimate | None) -> dict[str, float | int] | None:
    return None if e is None else e.as_dict()


def _fit(fit: LogNormal | None) -> dict[str, Any] | None:
    if fit is None:
        return None
    return {"median": fit.median.as_dict(), "mu": fit.mu.value, "sigma": fit.sigma, "p90": fit.p90}


def _buckets(buckets: tuple[Bucket, ...]) -> list[dict[str, Any]]:
    return [{"label": b.label, **(_estimate(b.share) or {"n": 0})} for b in buckets]


def _latency(cal: Calibration) -> dict[str, Any]:
    if cal.arrival is not None:
        return {
            "model": "lognormal",
            "median_ms": round(cal.arrival.median.value, 3),
            "sigma": round(cal.arrival.sigma, 4),
        }
    if cal.ack is not None:  # one way: half the round trip
        return {
            "model": "lognormal",
            "median_ms": round(cal.ack.median.value / 2, 3),
            "sigma": round(cal.ack.sigma, 4),
        }
    return {"model": "constant", "ms": 0}


def model_document(cal: Calibration, source: dict[str, Any]) -> dict[str, Any]:
    """The model file's content of a Calibration; source: what it was fitted from."""
    document: dict[str, Any] = {"version": FILL_MODEL_VERSION, "latency": _latency(cal)}
    touch = cal.touch_probability
    if touch is not None:
        document["fill"] = {"rule": "touch", "fill_probability": round(touch.value, 6)}
    document["fitted"] = {
        "kind": MODEL_KIND,
        **source,
        "latency_to_answer": _fit(cal.ack),
        "latency_to_match": _fit(cal.arrival),
        "clock_skew": cal.clock_skew,
        "touch_probability": _estimate(touch),
        "fills_without_touch": cal.fills_without_touch,
        "filled_by_distance_bps": _buckets(cal.by_distance),
        "filled_by_time": _buckets(cal.by_horizon),
        "partial_share": _estimate(cal.partial_share),
        "filled_fraction": _estimate(cal.filled_fraction),
        "market_slippage_bps": _estimate(cal.slippage_bps),
    }
    return document
