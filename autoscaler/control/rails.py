"""Safety rails applied after AM arbitration (:func:`rail_reason`, :func:`check_ineffective`; the model and its checks live in the one validation layer,
``autoscaler.schemas.application.RailsSpec``; see its docstring for the fields and units).

Where they are declared: ``spec.rails`` of the Application manifest (stored in ``Application.rails``, exported
back, shown by the API). ``ApplicationControl.rails`` is the legacy store of the first control-plane version: it
is read only when the Application declares no rails. ``PUT /api/v1/control/applications/<name>/rails/`` writes
``Application.rails`` (the same validation as a manifest).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
from pydantic import ValidationError

from autoscaler.schemas.application import FreezeWindowSpec as FreezeWindow
from autoscaler.schemas.application import RailsSpec as Rails

__all__ = [
    "FreezeWindow",
    "Rails",
    "RailsError",
    "check_ineffective",
    "effective_rails_data",
    "measured_capacity",
    "parse_rails",
    "rail_reason",
]


class RailsError(ValueError):
    """Invalid rails: the message names the field (``rails.<field>``) and the reason."""


def parse_rails(data: dict[str, Any] | None, operators: list[str] | dict[str, int] | None = None) -> Rails:
    """Validate rails; with ``operators`` (names, or name -> maxParallelism) unknown operators in the bounds and
    min > max are errors naming the field."""
    try:
        rails = Rails.model_validate(data or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        raise RailsError(f"rails.{loc}: {msg}") from None
    if operators is not None:
        limits = operators if isinstance(operators, dict) else dict.fromkeys(operators, 10**9)
        errors = rails.operator_errors(limits, prefix="rails")
        if errors:
            raise RailsError(str(errors[0]))
    return rails


def effective_rails_data(application: Any, control: Any | None) -> dict[str, Any]:
    """The rails in force: the Application's declared ``spec.rails``, else the legacy control-app rails."""
    declared = getattr(application, "rails", None) or {}
    if declared:
        return declared
    return (control.rails if control is not None else None) or {}


# ---- the checks each tick runs ---------------------------------------------------------------------------------
def rail_reason(
    rails: Rails,
    when: dt.datetime,
    now_s: float,
    mem: dict[str, Any],
    action: int,
    change: np.ndarray,
    m: Any,
) -> str:
    """Why a safety rail denies ``action`` (``change``: replicas added/removed per node type); "" if none does."""
    if action == 0:
        return ""
    window = rails.frozen(when)
    if window is not None:
        return f"denied by safety rail: freeze window {window.start}-{window.end} UTC"
    d = 1 if (change > 0).any() else -1 if (change < 0).any() else 0
    if d < 0 and rails.scale_down_delay_s > 0 and "last_scale_up_s" in mem:
        since = now_s - mem["last_scale_up_s"]
        if since < rails.scale_down_delay_s:
            return (
                f"denied by safety rail: scale-down delay ({since:.0f} s since the last scale-up "
                f"< {rails.scale_down_delay_s:.0f} s)"
            )
    if d > 0 and mem.get("blocked_until", -1) > now_s:
        return f"denied by safety rail: {mem.get('blocked_reason', 'ineffective scale-up')}"
    return ""


def measured_capacity(m: Any) -> float | None:
    """Capacity estimate (tuples/s) from a period's metrics: processing rate / utilisation."""
    if m.processing_rate is None or not m.utilisation or m.utilisation < 0.05:
        return None
    return float(m.processing_rate) / float(m.utilisation)


def check_ineffective(rails: Rails, memory: dict[str, Any], name: str, m: Any, now_s: float) -> None:
    """After a scale-up, compare the measured capacity rise with the model's expected rise (tuples/s); when it
    fell short, block the operator's scale-ups for ``ineffectiveBlockS`` (``memory[name]``, s since the epoch)."""
    mem = memory.get(name)
    if not mem or "pending_check" not in mem:
        return
    check = mem.pop("pending_check")
    if rails.ineffective_scale_up_ratio <= 0:
        return
    after, before, gain = measured_capacity(m), check.get("capacity_before"), check.get("expected_gain", 0.0)
    if after is None or before is None or gain <= 0:
        return
    rise = after - before
    if rise < rails.ineffective_scale_up_ratio * gain:
        mem["blocked_until"] = now_s + rails.ineffective_block_s
        mem["blocked_reason"] = (
            f"ineffective scale-up at slot {check['slot']}: capacity rose {rise:.1f} tuples/s, "
            f"expected {gain:.1f}"
        )
