"""The fill model: which rule fills resting orders, with its parameters, and the latency model.

One model serves the twin, backtests of recordings with market data and live paper trading
(issue 28), so that a paper venue and a twin can run the same rule, and so that ``perpframe
calibrate`` can fit one from the user's own matches and write it to a file that all of them
read (``fill_model: path``).

Rules (:class:`FillRule`, ``rule``), applied when the exchange reads a published market
(:mod:`framework.sim.market_fills`); orders that cross on arrival walk the book whatever the
rule:

* ``touch``: a resting order fills whole, at its limit, as maker, when a trade prints at
  its price or beyond it (the rule before issue 28).
* ``through``: only when a trade prints beyond its price (strictly below a bid, above an
  ask); a trade at its price fills nothing.
* ``fill_probability`` (touch and through; 1 by default): each trade that reaches a resting
  order fills it with this probability, else it keeps resting; the draw is a hash of
  ``seed``, the order's id and how many trades have reached it, so a replay draws the same
  (no random state). It is what ``perpframe calibrate`` fits (its "fill per touch").
* ``queue`` (the default): a trade beyond the price fills the rest whole; a trade at the
  price first works through the size estimated ahead of the order, and only what is left
  fills it, in part (a match per part). How the size ahead starts and follows cancels is
  :mod:`framework.sim.queue` (``params``: ``queue_start_share``, ``cancels``).

The model file (YAML or JSON, schema version 1, :class:`FillModel`)::

    version: 1                      # required; a newer version is refused with its number
    latency: {model: lognormal, median_ms: 18, sigma: 0.5}   # framework.sim.latency
    fill:
      rule: queue                   # touch | through | queue
      params: {queue_start_share: 1, cancels: pro_rata}
      fill_probability: 1           # touch and through: the chance a reaching trade fills
    fitted: {orders: 412, ...}      # optional: what calibrate says of its fit (not read)

Every key but ``version`` may be left out (its default). Unknown keys are refused; every bad
value is one line naming the file, the key's path and its line (the loader is
:func:`framework.fill_model_file.load_fill_model`, outside this pure package).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Final, Literal

import attrs

from framework.sim.latency import LatencySettings

__all__ = ["FILL_MODEL_VERSION", "FillModel", "FillRule", "QueueParams"]

FILL_MODEL_VERSION: Final = 1
"""The model file schema version this framework writes and reads."""

Rule = Literal["touch", "through", "queue"]


def _share(_inst: object, attribute: attrs.Attribute[Decimal], value: Decimal) -> None:
    if not value.is_finite() or not 0 <= value <= 1:
        raise ValueError(f"{attribute.name} is a share between 0 and 1, got {value}")


@attrs.frozen(kw_only=True)
class QueueParams:
    """The queue rule's parameters (see :mod:`framework.sim.queue`)."""

    queue_start_share: Decimal = attrs.field(default=Decimal(1), validator=_share)
    cancels: Literal["pro_rata", "behind_first"] = "pro_rata"


@attrs.frozen(kw_only=True)
class FillRule:
    """How resting orders fill against published trades: the rule and its parameters."""

    rule: Rule = "queue"
    params: QueueParams = QueueParams()
    fill_probability: Decimal = attrs.field(default=Decimal(1), validator=_share)
    """touch and through: the chance that a trade reaching a resting order fills it."""
    seed: int = 0
    """The draws' seed (the twin's, the backtest's)."""

    def __attrs_post_init__(self) -> None:
        """A fill probability below 1 is the touch and through rules' only."""
        if self.fill_probability < 1 and self.rule == "queue":
            raise ValueError("fill_probability applies to the touch and through rules, not queue")

    def describe(self) -> str:
        """The rule in a few words (for reports and logs)."""
        if self.rule != "queue":
            if self.fill_probability < 1:
                return f"{self.rule} (fill probability {self.fill_probability})"
            return self.rule
        p = self.params
        return f"queue (start share {p.queue_start_share}, cancels {p.cancels})"


@attrs.frozen(kw_only=True)
class FillModel:
    """A model file's content: version, latency and fill rule (and what calibrate noted)."""

    version: int
    latency: LatencySettings = LatencySettings.constant(0)
    fill: FillRule = FillRule()
    fitted: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        """Only the schema versions this framework knows."""
        if self.version != FILL_MODEL_VERSION:
            raise ValueError(
                f"version {self.version} is not one this framework reads"
                f" (it reads version {FILL_MODEL_VERSION})"
            )
