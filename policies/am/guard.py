"""The AM's violation-budget guard: a feedback loop on the operators' cost weights at run time.

BO (and Alg. 5) choose the per-operator bounds and weights from what was observed; a busier future than anything
observed, or OMs still learning, make the application violate R_max more often than the budget eta_V allows.
The guard watches the application's violations every control period and shifts every OM's cost weights towards
performance by one factor ``scale`` in ``[min_scale, 1]``: the resource and reconfiguration weights are
multiplied by ``scale``, the performance weight takes the rest (1 = the weights the AM tuned):

- tighten (``scale *= tighten``) when the violation fraction over the last ``window`` periods exceeds
  ``trigger * eta_V`` and the whole run's fraction so far exceeds ``spent * eta_V`` -- the budget is being
  spent faster than it is earned;
- relax (``scale /= tighten``, up to 1) when the windowed fraction is below ``relax_below * eta_V`` -- the
  extra capacity is no longer needed;
- after a change it waits ``cooldown`` periods, so the OMs can act under the new weights before it judges again.

A heavier performance weight makes an OM pay for capacity sooner (the expected cost of a violation outweighs a
replica's price at lower rates), so the guard trades resource cost for violations only while the budget is at
risk. It leaves the bounds alone: an OM's learned violation statistics are about its bound (``model-based``
forgets them when the bound changes), not about its weights, so what the OMs learned stays valid. Units: periods
(control periods), fractions.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from policies.operator_model import CostWeights
from policies.options import option as _option

# defaults (policies.options, measured by ``python -m benchmarks am --guard``): judge the last 200 periods;
# act when they spend the budget faster than half of eta_V (the margin BO aims at in simulation) and the run so
# far has spent more than a quarter of it; 15% at a time, down to 0.2
WINDOW = _option("guard_window").default
TRIGGER = _option("guard_trigger").default
SPENT = _option("guard_spent").default
RELAX_BELOW = _option("guard_relax_below").default
TIGHTEN = _option("guard_tighten").default
MIN_SCALE = _option("guard_min_scale").default
COOLDOWN = _option("guard_cooldown").default


def scaled_weights(tuned: CostWeights, scale: float) -> CostWeights:
    """``tuned`` with its resource and reconfiguration weights times ``scale`` (in (0, 1]) and the performance
    weight taking the rest; ``tuned`` itself at scale 1."""
    if scale >= 1.0:
        return tuned
    res, rcf = tuned.res * scale, tuned.rcf * scale
    return CostWeights(perf=1.0 - res - rcf, res=res, rcf=rcf)


@dataclass
class GuardParams:
    """Parameters of :class:`ViolationBudgetGuard` (periods and fractions of eta_V); validated on creation."""

    window: int = WINDOW
    trigger: float = TRIGGER
    spent: float = SPENT
    relax_below: float = RELAX_BELOW
    tighten: float = TIGHTEN
    min_scale: float = MIN_SCALE
    cooldown: int = COOLDOWN

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"guard.window: must be >= 1 period, got {self.window}")
        if self.cooldown < 0:
            raise ValueError(f"guard.cooldown: must be >= 0 periods, got {self.cooldown}")
        if not 0.0 < self.tighten < 1.0:
            raise ValueError(f"guard.tighten: must be in (0, 1), got {self.tighten}")
        if not 0.0 < self.min_scale <= 1.0:
            raise ValueError(f"guard.min_scale: must be in (0, 1], got {self.min_scale}")
        if self.trigger <= 0.0:
            raise ValueError(f"guard.trigger: must be > 0 (a multiple of eta_V), got {self.trigger}")
        if self.spent < 0.0:
            raise ValueError(f"guard.spent: must be >= 0 (a multiple of eta_V), got {self.spent}")
        if not 0.0 <= self.relax_below <= self.trigger:
            raise ValueError(
                f"guard.relax_below: must be in [0, trigger = {self.trigger}], got {self.relax_below}"
            )


@dataclass
class ViolationBudgetGuard:
    """Scale factor for the OMs' tuned resource and reconfiguration weights, updated once per control period from
    whether the application violated R_max in it (see the module docstring). ``eta_v``: the violation budget
    (fraction of periods)."""

    eta_v: float
    params: GuardParams = field(default_factory=GuardParams)
    scale: float = 1.0
    periods: int = 0
    violations: int = 0
    recent: deque[bool] = field(default_factory=deque)  # the last ``window`` periods, oldest first
    last_change: int = -(10**9)

    def __post_init__(self) -> None:
        if not 0.0 <= self.eta_v < 1.0:
            raise ValueError(f"eta_v: must be in [0, 1), got {self.eta_v}")
        self.recent = deque(self.recent)
        self._in_window = sum(self.recent)  # violated periods in ``recent``

    def update(self, violated: bool) -> tuple[float, str] | None:
        """Record one period; return ``(new scale, reason)`` when the scale changes, else None."""
        p = self.params
        self.periods += 1
        self.violations += int(violated)
        self.recent.append(bool(violated))
        self._in_window += int(violated)
        if len(self.recent) > p.window:
            self._in_window -= int(self.recent.popleft())
        if self.periods - self.last_change < p.cooldown or len(self.recent) < p.window:
            return None
        windowed = self._in_window / len(self.recent)
        so_far = self.violations / self.periods
        if windowed > p.trigger * self.eta_v and so_far > p.spent * self.eta_v and self.scale > p.min_scale:
            new = max(p.min_scale, self.scale * p.tighten)
            why = (
                f"violations {100 * windowed:.2f}% over the last {p.window} periods > "
                f"{100 * p.trigger * self.eta_v:.2f}% and {100 * so_far:.2f}% so far > "
                f"{100 * p.spent * self.eta_v:.2f}%: resource and reconfiguration weights {new:.3f} x tuned"
            )
        elif (windowed < p.relax_below * self.eta_v or windowed == 0.0) and self.scale < 1.0:
            new = min(1.0, self.scale / p.tighten)
            why = (
                f"violations {100 * windowed:.2f}% over the last {p.window} periods < "
                f"{100 * p.relax_below * self.eta_v:.2f}%: resource and reconfiguration weights back to "
                f"{new:.3f} x tuned"
            )
        else:
            return None
        self.scale = new
        self.last_change = self.periods
        return new, why

    def weights(self, tuned: CostWeights) -> CostWeights:
        """``tuned`` under the current scale (:func:`scaled_weights`)."""
        return scaled_weights(tuned, self.scale)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready state (for the control plane's durable memory)."""
        return {
            "eta_v": self.eta_v,
            "params": vars(self.params).copy(),
            "scale": self.scale,
            "periods": self.periods,
            "violations": self.violations,
            "recent": "".join("1" if v else "0" for v in self.recent),
            "last_change": self.last_change,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ViolationBudgetGuard:
        """Inverse of :meth:`to_dict`."""
        return cls(
            float(data["eta_v"]),
            GuardParams(**data["params"]),
            float(data["scale"]),
            int(data["periods"]),
            int(data["violations"]),
            deque(c == "1" for c in data["recent"]),
            int(data["last_change"]),
        )


#: the guard's options (``spec.policies.am.params``, every AM policy; :mod:`policies.options`): manifest name ->
#: GuardParams field
GUARD_FIELDS: dict[str, str] = {
    "guard_window": "window",
    "guard_trigger": "trigger",
    "guard_spent": "spent",
    "guard_relax_below": "relax_below",
    "guard_tighten": "tighten",
    "guard_min_scale": "min_scale",
    "guard_cooldown": "cooldown",
}
#: the AM manifest parameters of the guard and the hold on scale-ins, with their defaults
GUARD_DEFAULTS: dict[str, Any] = {
    name: _option(name).default for name in ("guard", *GUARD_FIELDS, "hold_scale_ins")
}


def guard_params(params: dict[str, Any]) -> GuardParams | None:
    """The guard an AM's ``params`` ask for (None when ``guard`` is false); an option left out takes its default
    (:mod:`policies.options`)."""
    if not params.get("guard", GUARD_DEFAULTS["guard"]):
        return None
    return GuardParams(
        **{field_name: params.get(key, GUARD_DEFAULTS[key]) for key, field_name in GUARD_FIELDS.items()}
    )
