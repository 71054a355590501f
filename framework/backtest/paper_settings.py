"""The paper venue's settings: YAML ``backtest.paper:`` (and ``venue.paper:``), the fill model.

One concept apart from the venue that uses them (:mod:`framework.backtest.paper`, which
re-exports :class:`PaperSettings`): what the fill rule and the latency come from.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

import attrs

from framework.sim.fill_model import FillModel, FillRule
from framework.sim.latency import LatencySettings

__all__ = ["PaperSettings"]


def _non_negative(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value < 0:
        raise ValueError(f"backtest.{attribute.name} must not be negative, got {value}")


@attrs.frozen(kw_only=True)
class PaperSettings:
    """The fill model (YAML ``backtest.paper:`` keys of the same names).

    ``fill_rule`` (touch, through, queue) and ``latency`` (a model, :mod:`framework.sim.latency`)
    or ``latency_ms`` (constant) override what the ``fill_model`` file (issue 28,
    :mod:`framework.sim.fill_model`) says; without either, the rule is queue and the latency 0.
    """

    fill_price: Literal["next", "last"] = "next"
    max_wait_ms: int = attrs.field(default=2000, validator=_non_negative)
    latency_ms: int = attrs.field(default=0, validator=_non_negative)
    latency: LatencySettings | None = None
    fill_rule: Literal["touch", "through", "queue"] | None = None
    fill_probability: Decimal | None = None
    """touch and through: the chance a reaching trade fills a resting order (else the model
    file's, else 1)."""
    fill_model: str | None = None
    slippage: Decimal = attrs.field(default=Decimal(0), validator=_non_negative)
    maker_fee: Decimal = attrs.field(default=Decimal("0.0002"), validator=_non_negative)
    taker_fee: Decimal = attrs.field(default=Decimal("0.0005"), validator=_non_negative)
    maintenance_margin_rate: Decimal = attrs.field(
        default=Decimal("0.005"), validator=_non_negative
    )
    balances: dict[str, Decimal] = attrs.field(factory=dict)
    default_balance: Decimal = attrs.field(default=Decimal("100000"), validator=_non_negative)
    settle_decimals: int = 8

    def __attrs_post_init__(self) -> None:
        """One latency: the constant or the model."""
        if self.latency is not None and self.latency_ms:
            raise ValueError("backtest.paper: give latency_ms (constant) or latency, not both")
        p = self.fill_probability
        if p is not None and not (p.is_finite() and 0 <= p <= 1):
            raise ValueError(f"fill_probability is a share between 0 and 1, got {p}")
        if p is not None and p < 1 and self.fill_rule == "queue":
            raise ValueError("fill_probability applies to the touch and through rules, not queue")

    def rule(self, model: FillModel | None) -> FillRule:
        """The fill rule: fill_rule, else the model file's, else queue."""
        base = model.fill if model is not None else FillRule()
        if self.fill_rule is not None:
            base = FillRule(rule=self.fill_rule, params=base.params, seed=base.seed)
        if self.fill_probability is not None:
            base = attrs.evolve(base, fill_probability=self.fill_probability)
        return base

    def latency_settings(self, model: FillModel | None) -> LatencySettings:
        """The latency model: latency, else latency_ms when set, else the model file's."""
        if self.latency is not None:
            return self.latency
        if self.latency_ms or model is None:
            return LatencySettings.constant(self.latency_ms)
        return model.latency

    def rule_source(self) -> str:
        """Which key the fill rule comes from: ``fill_rule``, ``fill_model`` or ``default``."""
        if self.fill_rule is not None:
            return "fill_rule"
        return "fill_model" if self.fill_model else "default"

    def latency_source(self) -> str:
        """Which key the latency comes from: ``latency``, ``latency_ms`` or ``fill_model``."""
        if self.latency is not None:
            return "latency"
        return "latency_ms" if self.latency_ms or not self.fill_model else "fill_model"
