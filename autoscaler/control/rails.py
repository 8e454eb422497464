"""Safety rails applied after AM arbitration (the model and its checks live in the one validation layer,
``autoscaler.schemas.application.RailsSpec``; see its docstring for the fields and units).

Where they are declared: ``spec.rails`` of the Application manifest (stored in ``Application.rails``, exported
back, shown by the API). ``ApplicationControl.rails`` is the legacy store of the first control-plane version: it
is read only when the Application declares no rails. ``PUT /api/v1/control/applications/<name>/rails/`` writes
``Application.rails`` (the same validation as a manifest).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from autoscaler.schemas.application import FreezeWindowSpec as FreezeWindow
from autoscaler.schemas.application import RailsSpec as Rails

__all__ = ["FreezeWindow", "Rails", "RailsError", "effective_rails_data", "parse_rails"]


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
