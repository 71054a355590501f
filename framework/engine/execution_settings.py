"""Settings of the execution engine (YAML key ``execution``), every field defaulted."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from framework.engine.risk import RiskSettings

__all__ = ["ExecutionSettings"]


def _non_negative(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value < 0:
        raise ValueError(f"execution.{attribute.name} must not be negative, got {value!r}")


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not value > 0:
        raise ValueError(f"execution.{attribute.name} must be positive, got {value!r}")


def _missing_result(_inst: object, _attribute: attrs.Attribute[str], value: str) -> None:
    if value not in ("unknown", "rejected"):
        raise ValueError(f"execution.missing_result: expected unknown or rejected, got {value!r}")


@attrs.frozen(slots=True, kw_only=True)
class ExecutionSettings:
    """Execution engine settings (YAML key ``execution``); every field has a default."""

    linger_ms: int = attrs.field(default=0, validator=_non_negative)
    max_inflight: int = attrs.field(default=4, validator=_positive)
    calls_per_second: float = attrs.field(default=50.0, validator=_positive)
    retry_attempts: int = attrs.field(default=5, validator=_non_negative)
    retry_base_s: float = attrs.field(default=0.2, validator=_non_negative)
    retry_max_s: float = attrs.field(default=5.0, validator=_non_negative)
    unknown_window_s: float = attrs.field(default=60.0, validator=_non_negative)
    lost_memory_s: float = attrs.field(default=3600.0, validator=_non_negative)
    """How long a LOST order that may rest stays a possible owner of same-looking matches and
    adoptable by an open-order list naming it (shortened to one unknown window once a list
    lacks it); across restarts too."""
    drain_timeout_s: float = attrs.field(default=10.0, validator=_non_negative)
    missing_result: Literal["unknown", "rejected"] = attrs.field(
        default="unknown", validator=_missing_result
    )
    pending_max_age_s: float | None = None
    cancel_batch: int = attrs.field(default=20, validator=_positive)
    """Order ids per batchCancelEntrust call (the venue's limit is not published)."""
    cancel_on_stop: bool = False
    """At a graceful stop, cancel every open order the strategies placed."""
    risk: RiskSettings = attrs.field(factory=RiskSettings)
