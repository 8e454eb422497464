"""The AM's violation-budget guard as each tick runs it (:mod:`policies.am.guard` holds the rule): its state lives
in the application's memory (``AppMemory.guard``), its scale in the AM's configuration (``AmConfig.guard_scale``)."""

from __future__ import annotations

from autoscaler.control.app_state import AmConfig, AppMemory
from autoscaler.control.models import ApplicationControl, Tick
from autoscaler.control.om_config import guarded_weights
from autoscaler.models import Application
from policies.am.guard import GuardParams, ViolationBudgetGuard
from policies.am.naive import EQUAL_WEIGHTS
from policies.base import Policy
from policies.operator_model import CostWeights


def run_guard(
    app: Application,
    tick: Tick,
    control: ApplicationControl,
    app_mem: AppMemory,
    policies: list[Policy],
    violated_app: bool,
    params: GuardParams | None,
) -> None:
    """The AM's violation-budget guard (:mod:`policies.am.guard`): it sees this period's application violation;
    when it changes its scale, ``AmConfig.guard_scale`` changes, the event (with its reason) joins the AM
    history, the OMs of this tick are reconfigured to the new weights and the configuration version moves on (so
    every OM loads them from the next tick on). Its state lives in the application's durable memory. Turned off
    while its scale is below 1, it gives the tuned weights back."""
    config = AmConfig.of(control)
    scale = config.scale
    if params is not None:
        state = app_mem.guard
        if state and state.get("eta_v") == app.eta_v and state.get("params") == vars(params):
            guard = ViolationBudgetGuard.from_dict(state)
        else:  # first period, or the budget or the parameters changed: count afresh from the scale in place
            guard = ViolationBudgetGuard(app.eta_v, params, scale=scale)
        change = guard.update(violated_app)
        app_mem.guard = guard.to_dict()
        if change is None:
            return
        new, why = change
    else:
        app_mem.guard = None
        if scale == 1.0:
            return
        new, why = 1.0, "guard turned off: the tuned weights are back"
    config.note({"am_slot": f"period {tick.slot}", "policy": "guard", "outcome": why, "wall_s": 0.0})
    config.guard_scale = new
    config.save_to(control)
    control.am_config_version += 1
    w = config.weights
    tuned = CostWeights(float(w["perf"]), float(w["res"]), float(w["rcf"])) if w else EQUAL_WEIGHTS
    for policy in policies:
        policy.reconfigure(guarded_weights(tuned, control.am_config))
