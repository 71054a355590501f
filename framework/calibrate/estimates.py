"""The few estimators calibration needs, each with its 95 % interval.

Written here rather than taken from scipy/numpy: four closed forms (Wilson's interval for a
proportion, a mean's normal interval, a log-normal fit by the moments of the logs, the
Kaplan-Meier estimate with Greenwood's variance, and a one-parameter likelihood maximized by
golden-section search with its profile-likelihood interval) over at
most a million values do not justify a 30 MB dependency; :mod:`statistics` does the sums.
Times are float milliseconds (a latency is no money); prices stay Decimal up to the basis
points computed from them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Final

import attrs

__all__ = [
    "Z95",
    "Estimate",
    "LogNormal",
    "filled_within",
    "lognormal",
    "mean",
    "per_trial",
    "wilson",
]

Z95: Final = statistics.NormalDist().inv_cdf(0.975)
"""The two-sided 95 % normal quantile (1.95996...)."""


@attrs.frozen
class Estimate:
    """A value with its 95 % interval and the number of observations it rests on."""

    value: float
    low: float
    high: float
    n: int

    def text(self, unit: str = "", digits: int = 3) -> str:
        """'0.301 (95 % 0.262-0.343, n=412)', unit appended to each figure."""
        f = f"{{:.{digits}g}}{unit}"
        return (
            f"{f.format(self.value)} (95 % {f.format(self.low)}-{f.format(self.high)}, n={self.n})"
        )

    def as_dict(self) -> dict[str, float | int]:
        """The figures for a model file."""
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


def wilson(successes: int, trials: int) -> Estimate | None:
    """A proportion and its Wilson score interval; None without trials."""
    if trials <= 0:
        return None
    p = successes / trials
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = Z95 * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half), trials)


def mean(values: Sequence[float]) -> Estimate | None:
    """A mean and its normal interval (the standard error from the sample); None when empty."""
    n = len(values)
    if n == 0:
        return None
    m = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(n) if n > 1 else 0.0
    return Estimate(m, m - Z95 * se, m + Z95 * se, n)


@attrs.frozen
class LogNormal:
    """A log-normal fit of positive values: mu and sigma of their logs, with intervals."""

    mu: Estimate
    sigma: float
    median: Estimate
    """exp(mu): the fitted median, its interval from mu's."""
    p90: float
    """The fitted 90th percentile."""
    n: int

    def sample_quantile(self, q: float) -> float:
        """The fitted q-quantile."""
        return math.exp(self.mu.value + self.sigma * statistics.NormalDist().inv_cdf(q))

    def density(self, x: float) -> float:
        """The fitted density at x > 0."""
        if x <= 0 or self.sigma <= 0:
            return 0.0
        z = (math.log(x) - self.mu.value) / self.sigma
        return math.exp(-0.5 * z * z) / (x * self.sigma * math.sqrt(2 * math.pi))


def lognormal(values: Sequence[float]) -> LogNormal | None:
    """The log-normal fit of the positive values (non-positive ones are the caller's to count)."""
    logs = [math.log(v) for v in values if v > 0]
    n = len(logs)
    if n == 0:
        return None
    mu = statistics.fmean(logs)
    sigma = statistics.stdev(logs) if n > 1 else 0.0
    se = sigma / math.sqrt(n)
    mu_e = Estimate(mu, mu - Z95 * se, mu + Z95 * se, n)
    median = Estimate(math.exp(mu), math.exp(mu_e.low), math.exp(mu_e.high), n)
    p90 = math.exp(mu + sigma * statistics.NormalDist().inv_cdf(0.9))
    return LogNormal(mu_e, sigma, median, p90, n)


def filled_within(
    watched: Sequence[tuple[float, bool]], horizons: Sequence[float]
) -> list[Estimate | None]:
    """The share filled within each horizon, from (time, filled) per order: Kaplan-Meier.

    time: until the fill (filled True), or until the order stopped being watched (canceled,
    or the recording ended: censored, filled False). A censored order counts as not filled
    only while it was watched, so short recordings and cancels do not read as misses.
    Greenwood's variance gives the interval. None for a horizon past the last time seen.
    """
    n = len(watched)
    if n == 0:
        return [None for _ in horizons]
    ordered = sorted(watched, key=lambda w: (w[0], not w[1]))  # fills before censors at a tie
    last = ordered[-1][0]
    out: list[Estimate | None] = []
    for horizon in horizons:
        if horizon > last:
            out.append(None)
            continue
        survive, greenwood, at_risk, i = 1.0, 0.0, n, 0
        while i < n and ordered[i][0] <= horizon:
            t = ordered[i][0]
            fills = gone = 0
            while i < n and ordered[i][0] == t:
                fills += ordered[i][1]
                gone += 1
                i += 1
            if fills:
                survive *= 1 - fills / at_risk
                if at_risk > fills:
                    greenwood += fills / (at_risk * (at_risk - fills))
            at_risk -= gone
        p = 1 - survive
        half = Z95 * survive * math.sqrt(greenwood)
        out.append(Estimate(p, max(0.0, p - half), min(1.0, p + half), n))
    return out


_GOLDEN: Final = (math.sqrt(5) - 1) / 2
_HALF_CHI2: Final = statistics.NormalDist().inv_cdf(0.975) ** 2 / 2


def per_trial(groups: Sequence[tuple[int, bool]]) -> Estimate | None:
    """The chance p that one trial succeeds, from groups of k trials that succeeded or not.

    A group is (k, success): k trials at one instant, success when one of them did (so its
    chance is 1 - (1 - p)^k; with every k = 1 this is the binomial proportion). Maximum
    likelihood; the 95 % interval is where the log-likelihood is within chi2(1)/2 of its
    maximum. None without trials.
    """
    kept = [(k, s) for k, s in groups if k > 0]
    trials = sum(k for k, _ in kept)
    if not trials:
        return None
    eps = 1e-9

    def loglik(p: float) -> float:
        q = 1.0 - p
        total = 0.0
        for k, success in kept:
            miss = q**k
            total += math.log(max(1.0 - miss, 1e-300)) if success else k * math.log(max(q, 1e-300))
        return total

    lo, hi = eps, 1.0 - eps
    a, b = lo + (1 - _GOLDEN) * (hi - lo), lo + _GOLDEN * (hi - lo)
    fa, fb = loglik(a), loglik(b)
    for _ in range(100):
        if fa < fb:
            lo, a, fa = a, b, fb
            b = lo + _GOLDEN * (hi - lo)
            fb = loglik(b)
        else:
            hi, b, fb = b, a, fa
            a = lo + (1 - _GOLDEN) * (hi - lo)
            fa = loglik(a)
    best = (lo + hi) / 2
    peak = loglik(best)
    if all(s for _, s in kept):  # every group succeeded: the maximum is at 1
        best, peak = 1.0, loglik(1.0 - eps)
    if not any(s for _, s in kept):
        best, peak = 0.0, loglik(eps)

    def edge(inside: float, outside: float) -> float:
        for _ in range(60):
            middle = (inside + outside) / 2
            if peak - loglik(middle) <= _HALF_CHI2:
                inside = middle
            else:
                outside = middle
        return inside

    low = edge(min(max(best, eps), 1 - eps), eps) if best > eps else 0.0
    high = edge(min(max(best, eps), 1 - eps), 1 - eps) if best < 1 - eps else 1.0
    return Estimate(best, low, high, trials)
