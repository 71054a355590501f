"""How long an order takes to reach the simulated book: constant, log-normal or empirical.

A paper order (backtest or live paper) reaches the exchange after a modelled delay, as a live
one reaches the venue after the network and the venue's gateway (issue 28). The model is a
small interface, :class:`LatencyModel` ``.sample(rng) -> ms``; the random generator is passed
in, seeded by the caller, so the same seed gives the same delays and a replay is exact.

:class:`LatencySettings` is the model as configured (a ``latency:`` key, or a model file's
``latency:`` section, :mod:`framework.sim.fill_model`):

* ``{model: constant, ms: 20}`` (or just ``20``): every order waits ``ms``.
* ``{model: lognormal, median_ms: 18, sigma: 0.5}``: ``exp(N(ln median_ms, sigma))`` ms,
  rounded to the ms; the usual shape of network round trips (a floor, a long right tail).
* ``{model: empirical, samples_ms: [12, 15, 15, 40]}``: one of the samples, each as likely
  (what ``perpframe calibrate`` measured; at most 100000 of them).

Every model is clamped to ``[min_ms, max_ms]`` (0 and 60000 by default), so one draw from a
long tail never parks an order for hours.
"""

from __future__ import annotations

import math
import random
from typing import Any, Final, Literal, Protocol

import attrs

__all__ = [
    "MAX_SAMPLES",
    "ConstantLatency",
    "EmpiricalLatency",
    "LatencyModel",
    "LatencySettings",
    "LogNormalLatency",
]

MAX_SAMPLES: Final = 100_000
"""The most samples an empirical model may hold."""


class LatencyModel(Protocol):
    """A delay in ms drawn with the rng passed in (seeded by the caller)."""

    def sample(self, rng: random.Random) -> int:
        """One delay, in ms (never negative)."""
        ...


@attrs.frozen(slots=True)
class ConstantLatency:
    """Every order waits the same ms (draws nothing)."""

    ms: int

    def sample(self, rng: random.Random) -> int:
        """The constant."""
        return self.ms


@attrs.frozen(slots=True)
class LogNormalLatency:
    """exp(N(ln median_ms, sigma)) ms, rounded, clamped to [min_ms, max_ms]."""

    median_ms: float
    sigma: float
    min_ms: int
    max_ms: int

    def sample(self, rng: random.Random) -> int:
        """One draw (one normal variate from rng)."""
        drawn = round(rng.lognormvariate(math.log(self.median_ms), self.sigma))
        return min(max(drawn, self.min_ms), self.max_ms)


@attrs.frozen(slots=True)
class EmpiricalLatency:
    """One of the measured samples, each as likely, clamped to [min_ms, max_ms]."""

    samples_ms: tuple[int, ...]
    min_ms: int
    max_ms: int

    def sample(self, rng: random.Random) -> int:
        """One draw (one index from rng)."""
        drawn = self.samples_ms[rng.randrange(len(self.samples_ms))]
        return min(max(drawn, self.min_ms), self.max_ms)


def _non_negative(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value}")


@attrs.frozen(kw_only=True)
class LatencySettings:
    """A latency model as configured; :meth:`model` builds it."""

    model: Literal["constant", "lognormal", "empirical"] = "constant"
    ms: int | None = attrs.field(default=None, validator=_non_negative)
    median_ms: float | None = attrs.field(default=None, validator=_non_negative)
    sigma: float | None = attrs.field(default=None, validator=_non_negative)
    samples_ms: tuple[int, ...] | None = None
    min_ms: int = attrs.field(default=0, validator=_non_negative)
    max_ms: int = attrs.field(default=60_000, validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        """Each model needs its own keys and takes no other model's."""
        own = {
            "constant": ("ms",),
            "lognormal": ("median_ms", "sigma"),
            "empirical": ("samples_ms",),
        }
        for model, keys in own.items():
            for key in keys:
                given = getattr(self, key) is not None
                if model == self.model and not given:
                    raise ValueError(f"model {self.model} needs {key}")
                if model != self.model and given:
                    raise ValueError(f"{key} is a key of model {model}, not {self.model}")
        if self.max_ms < self.min_ms:
            raise ValueError(f"max_ms ({self.max_ms}) must not be below min_ms ({self.min_ms})")
        median = self.median_ms
        if median is not None and not (math.isfinite(median) and median > 0):
            raise ValueError(f"median_ms must be above 0, got {self.median_ms}")
        if self.sigma is not None and not math.isfinite(self.sigma):
            raise ValueError(f"sigma must be a finite number, got {self.sigma}")
        samples = self.samples_ms
        if samples is not None:
            if not 1 <= len(samples) <= MAX_SAMPLES:
                raise ValueError(f"samples_ms: between 1 and {MAX_SAMPLES} samples")
            if min(samples) < 0:
                raise ValueError(f"samples_ms must not be negative, got {min(samples)}")

    def build(self) -> LatencyModel:
        """The model these settings describe."""
        if self.model == "lognormal":
            assert self.median_ms is not None and self.sigma is not None
            return LogNormalLatency(self.median_ms, self.sigma, self.min_ms, self.max_ms)
        if self.model == "empirical":
            assert self.samples_ms is not None
            return EmpiricalLatency(self.samples_ms, self.min_ms, self.max_ms)
        assert self.ms is not None
        return ConstantLatency(min(max(self.ms, self.min_ms), self.max_ms))

    def describe(self) -> str:
        """The model in a few words (for reports and logs)."""
        if self.model == "lognormal":
            return f"log-normal, median {self.median_ms} ms, sigma {self.sigma}"
        if self.model == "empirical":
            return f"empirical, {len(self.samples_ms or ())} samples"
        return f"{self.ms} ms"

    @classmethod
    def constant(cls, ms: int) -> LatencySettings:
        """A constant delay of ms."""
        return cls(model="constant", ms=ms)
