"""The model file ``perpframe calibrate`` writes: versioned, plain YAML, every figure with its interval.

Schema, version 1 (``kind: perpframe-fill-model``)::

    version: 1
    kind: perpframe-fill-model
    fitted_from: {recording: NAME, sha256: HEX, orders: N, first_ms: T, last_ms: T}
    latency:                     # milliseconds
      ack: {dist: lognormal, mu: F, sigma: F, median: {value, low, high, n}, p90: F}
      arrival: {...}             # the same, send to the match's createTimeStamp
    fill:
      rule: touch                # what touch_probability parameterises
      touch_probability: {value, low, high, n}
      by_distance_bps: [{label, value, low, high, n}, ...]
      by_horizon_s: [{label, value, low, high, n}, ...]
      partial_share: {value, low, high, n}
      filled_fraction: {value, low, high, n}
      market_slippage_bps: {value, low, high, n}

A figure without data is ``null``. Readers take the keys they know and ignore others, so a
later version may add keys; a different ``version`` is refused by readers of this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from framework.calibrate.estimates import Estimate, LogNormal

if TYPE_CHECKING:
    from framework.calibrate.fit import Bucket, Calibration

__all__ = ["MODEL_KIND", "MODEL_VERSION", "model_document"]

MODEL_VERSION: Final = 1
MODEL_KIND: Final = "perpframe-fill-model"


def _estimate(e: Estimate | None) -> dict[str, float | int] | None:
    return None if e is None else e.as_dict()


def _latency(fit: LogNormal | None) -> dict[str, Any] | None:
    if fit is None:
        return None
    return {
        "dist": "lognormal",
        "mu": fit.mu.value,
        "sigma": fit.sigma,
        "median": fit.median.as_dict(),
        "p90": fit.p90,
    }


def _buckets(buckets: tuple[Bucket, ...]) -> list[dict[str, Any]]:
    return [{"label": b.label, **(_estimate(b.share) or {"n": 0})} for b in buckets]


def model_document(cal: Calibration, source: dict[str, Any]) -> dict[str, Any]:
    """The model file's content of a Calibration; source: what it was fitted from."""
    return {
        "version": MODEL_VERSION,
        "kind": MODEL_KIND,
        "fitted_from": source,
        "latency": {"ack": _latency(cal.ack), "arrival": _latency(cal.arrival)},
        "fill": {
            "rule": "touch",
            "touch_probability": _estimate(cal.touch_probability),
            "by_distance_bps": _buckets(cal.by_distance),
            "by_horizon_s": _buckets(cal.by_horizon),
            "partial_share": _estimate(cal.partial_share),
            "filled_fraction": _estimate(cal.filled_fraction),
            "market_slippage_bps": _estimate(cal.slippage_bps),
        },
    }
