"""Safety rails applied after AM arbitration, stored in ``ApplicationControl.rails`` and validated here.

- ``minReplicas`` / ``maxReplicas``: operator name -> bound on the total replicas (``"*"`` = every operator);
- ``scaleDownDelayS``: no scale-down of an operator within this many seconds after its last scale-up;
- ``freezeWindows``: list of ``{start, end}`` UTC times of day ``"HH:MM"`` (a window may wrap midnight) during
  which no change is applied;
- ``ineffectiveScaleUpRatio``: after a scale-up, the measured capacity (processing rate / utilisation, tuples/s)
  must rise by at least this fraction of the expected rise, else further scale-ups of that operator are blocked
  for ``ineffectiveBlockS`` seconds;
- ``rollbackOnFailure``: when the period after a reconfiguration shows the job failing (metrics missing because
  operators have no running replica), restore the deployment in place before it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel


class FreezeWindow(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)

    start: str = Field(pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    end: str = Field(pattern=r"^([01]\d|2[0-3]):[0-5]\d$")

    def contains(self, when: dt.datetime) -> bool:
        minute = when.hour * 60 + when.minute
        a = int(self.start[:2]) * 60 + int(self.start[3:])
        b = int(self.end[:2]) * 60 + int(self.end[3:])
        return a <= minute < b if a <= b else minute >= a or minute < b


class Rails(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)

    min_replicas: dict[str, int] = Field(default_factory=dict)
    max_replicas: dict[str, int] = Field(default_factory=dict)
    scale_down_delay_s: float = Field(default=0.0, ge=0, alias="scaleDownDelayS")
    freeze_windows: list[FreezeWindow] = Field(default_factory=list)
    ineffective_scale_up_ratio: float = Field(default=0.0, ge=0, le=1)
    ineffective_block_s: float = Field(default=600.0, ge=0, alias="ineffectiveBlockS")
    rollback_on_failure: bool = True

    @field_validator("min_replicas", "max_replicas")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        for name, n in value.items():
            if n < 1:
                raise ValueError(f"{name}: must be >= 1 replica, got {n}")
        return value

    def bounds(self, operator: str, k_max: int) -> tuple[int, int]:
        """(min, max) total replicas of ``operator`` given its K_max."""
        lo = self.min_replicas.get(operator, self.min_replicas.get("*", 1))
        hi = self.max_replicas.get(operator, self.max_replicas.get("*", k_max))
        return lo, min(hi, k_max)

    def frozen(self, when: dt.datetime) -> FreezeWindow | None:
        for window in self.freeze_windows:
            if window.contains(when):
                return window
        return None


class RailsError(ValueError):
    """Invalid rails: the message names the field (``rails.<field>``) and the reason."""


def parse_rails(data: dict[str, Any] | None, operators: list[str] | None = None) -> Rails:
    """Validate stored rails; unknown operators in min/max bounds and min > max are errors naming the field."""
    try:
        rails = Rails.model_validate(data or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise RailsError(f"rails.{loc}: {err['msg']}") from None
    if operators is not None:
        for key in ("min_replicas", "max_replicas"):
            for name in getattr(rails, key):
                if name != "*" and name not in operators:
                    raise RailsError(f"rails.{to_camel(key)}.{name}: unknown operator")
        for name in set(rails.min_replicas) | set(rails.max_replicas):
            lo, hi = rails.bounds(name, 10**9)
            if lo > hi:
                raise RailsError(f"rails.minReplicas.{name}: {lo} is above maxReplicas {hi}")
    return rails
