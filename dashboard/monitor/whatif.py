"""What-if: replay an application's recorded input rates through the application simulator with another OM policy,
other cost weights or another SLO, and compare with what the control plane actually did over the same periods.

The simulated system is the application's own model (managed operators, selectivities, node types and prices of
its catalog; per operator the engine model its OM fitted from its own metrics -- a Spark operator's micro-batch
model -- or else the M/G/1 queue of its learned service time), starting from the deployment recorded at the first
period; the AM's arbiter, with the application's AM options (token bucket, reserve, batching, hold) and the
what-if's eta_R, grants or denies proposals as in the live control loop. Units: cost per hour in currency/h,
fractions in [0, 1].
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autoscaler.models import Application
from dashboard.monitor import chart_data, rollup, series
from policies import registry

COMPARE_POINTS = 500
#: rows above this are simulated on their last part only (a what-if must stay a few seconds)
MAX_STEPS = 50_000


def validate(app: Application, data: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Check what-if parameters; returns (normalised params, errors as [{loc, msg}])."""
    from autoscaler.control.policy_choice import DEFAULT_OM_POLICY, policy_choice

    errors: list[dict[str, str]] = []
    current, current_params = policy_choice(app, "om", DEFAULT_OM_POLICY)
    out: dict[str, Any] = {}
    policy = (data.get("policy") or current).strip()
    if policy not in registry.OM_POLICIES or policy in registry.OFFLINE_OM:
        errors.append({"loc": "policy", "msg": f"unknown or offline-only OM policy {policy!r}"})
    out["policy"] = policy
    params = data.get("params")
    if isinstance(params, str):
        import json

        text = params.strip()
        try:
            params = json.loads(text) if text else {}
        except json.JSONDecodeError as exc:
            errors.append({"loc": "params", "msg": f"not valid JSON: {exc.msg}"})
            params = {}
    if params is None:
        params = current_params if policy == current else {}
    if not isinstance(params, dict):
        errors.append({"loc": "params", "msg": "must be a JSON object"})
        params = {}
    if not errors:
        try:
            out["params"] = registry.validate_params("om", policy, params)
        except ValueError as exc:
            errors.append({"loc": "params", "msg": str(exc)})
    for key, lo, hi, default in (
        ("rMaxMs", 0.0, math.inf, app.r_max_ms),
        ("etaV", 0.0, 1.0, app.eta_v),
        ("etaR", 0.0, 1.0, app.eta_r),
        ("wPerf", 0.0, math.inf, None),
        ("wRes", 0.0, math.inf, None),
        ("wRcf", 0.0, math.inf, None),
    ):
        raw = data.get(key)
        if raw in (None, ""):
            out[key] = default
            continue
        try:
            v = float(raw)
        except (TypeError, ValueError):
            errors.append({"loc": key, "msg": f"must be a number, got {raw!r}"})
            continue
        if not math.isfinite(v) or v < lo or (key == "rMaxMs" and v <= 0) or (hi < math.inf and v >= hi):
            bound = "> 0" if key == "rMaxMs" else f"in [{lo:g}, {hi:g})" if hi < math.inf else ">= 0"
            errors.append({"loc": key, "msg": f"must be {bound}, got {raw}"})
            continue
        out[key] = v
    weights = [out.get(k) for k in ("wPerf", "wRes", "wRcf")]
    if any(w is not None for w in weights):
        if any(w is None for w in weights):
            errors.append({"loc": "wPerf", "msg": "give all three weights or none"})
        elif abs(sum(weights) - 1.0) > 1e-6:
            errors.append({"loc": "wPerf", "msg": f"weights must sum to 1, got {sum(weights):g}"})
    rng = data.get("range") or "all"
    if rng not in chart_data.RANGES_S:
        errors.append({"loc": "range", "msg": f"must be one of {', '.join(chart_data.RANGES_S)}"})
    out["range"] = rng
    return out, errors


def run(
    app: Application, params: dict[str, Any], progress: Callable[[float], None] | None = None
) -> dict[str, Any]:
    """Simulate ``params`` (from :func:`validate`) over the recorded trace; returns the comparison."""
    from autoscaler.control.am import managed_application, simulation_models
    from autoscaler.control.models import ApplicationControl
    from autoscaler.control.om_config import naive_configuration
    from autoscaler.control.policy_choice import DEFAULT_AM_POLICY, policy_choice
    from autoscaler.control.topology import topology
    from policies import options
    from policies.am.arbiter import Arbiter
    from policies.am.naive import naive_bounds
    from policies.operator_model import CostWeights
    from policies.sim.application import simulate_application

    rollup.catch_up(app)
    start, end, _ = chart_data.resolve_range(app, params.get("range", "all"), None, None)
    frame = rollup.load(app, start, end)
    rate = frame.col("rate")
    ok = np.isfinite(rate) & (frame.col("no_data") != 1.0)
    if ok.sum() < 2:
        raise ValueError("range: fewer than 2 recorded periods with data: nothing to replay")
    idx = np.flatnonzero(ok)[-MAX_STEPS:]
    trace, times = rate[idx], frame.times[idx]
    period_s = float(np.median(np.diff(frame.times))) if len(frame) > 1 else float(app.om_period_s)
    topo = topology(app)
    papp = managed_application(topo)
    r_max_s = float(params["rMaxMs"]) / 1000.0
    papp = dataclasses.replace(papp, r_max_s=r_max_s)
    bounds = naive_bounds(papp, r_max_s)
    control = ApplicationControl.objects.filter(application=app).first()
    w = ((control.am_config if control else None) or naive_configuration(topo))["weights"]
    weights = (
        CostWeights(params["wPerf"], params["wRes"], params["wRcf"])
        if params.get("wPerf") is not None
        else CostWeights(w["perf"], w["res"], w["rcf"])
    )
    node_types = topo.node_types
    cls = registry.load("om", params["policy"])
    oms = []
    for u, op in enumerate(topo.operators):
        spec = papp.operator_spec(u, node_types, r_max_s=float(bounds[u]), weights=weights)
        spec.k_max = op.max_parallelism
        spec.c_max = op.max_parallelism * max(t.price for t in node_types) or 1.0
        oms.append(cls(spec, dict(params.get("params") or {}), seed=op.pk))
    k0 = []
    for op in topo.operators:
        k = np.array([frame.col(f"replicas:{op.name}:{t}")[idx[0]] for t in topo.type_names])
        k = np.nan_to_num(k).astype(np.int64)
        if k.sum() == 0:
            k[0] = 1
        k0.append(k)
    # the tick's arbitration: the application's AM options (policies.options: bucket, reserve, batching, hold)
    am_name, am_params = policy_choice(app, "am", DEFAULT_AM_POLICY)
    am_options = options.resolve("am", am_name, am_params)
    arbiter = Arbiter(
        float(params["etaR"]),
        am_options["bucket_capacity"],
        k_max=[op.max_parallelism for op in topo.operators],
        k_min=1,
        node_type_names=topo.type_names,
        batching=am_options["batching"],
        scale_in_reserve=am_options["scale_in_reserve"],
        hold_scale_ins=am_options["hold_scale_ins"],
    )
    n = len(trace)
    every = max(n // 50, 1)

    def hook(t: int, _rates: np.ndarray) -> None:
        if progress is not None:
            progress(t / n)

    sim = simulate_application(
        papp,
        trace,
        node_types,
        oms=oms,
        arbiter=arbiter,
        models=simulation_models(app, topo),  # an engine model the OMs fitted, else the learned service time
        k0=k0,
        am_hook=hook,
        hook_every=every,
    )
    eta_v, eta_r = float(params["etaV"]), float(params["etaR"])
    sim_cost = sim.price  # currency/h per period
    violated = frame.col("violated")[idx]
    reconf = frame.col("reconfigured")[idx]
    actual_cost_h = frame.col("cost")[idx] * 3600.0 / period_s
    actual_violated = np.where(np.isfinite(violated), violated, 0.0)
    # the actual violations are judged against the recorded SLO; the simulated ones against the what-if's
    simulated = {
        "costPerHour": float(sim_cost.mean()),
        "totalCost": float(sim_cost.sum() * period_s / 3600.0),
        "violationFraction": float(sim.violation.mean()),
        "reconfigurationFraction": float(sim.reconfiguration.mean()),
        "avgReplicas": float(sim.replicas.sum(axis=1).mean()),
        "deniedFraction": float(sim.denied.mean()),
        "wallSeconds": float(sim.wall_seconds),
    }
    reps = sum(np.nan_to_num(frame.col(c)[idx]) for c in frame.prefixed("replicas:"))
    actual = {
        "costPerHour": float(np.nanmean(actual_cost_h)),
        "totalCost": float(np.nansum(frame.col("cost")[idx])),
        "violationFraction": float(actual_violated.mean()),
        "reconfigurationFraction": float(np.nan_to_num(reconf).mean()),
        "avgReplicas": float(np.mean(reps)) if not np.isscalar(reps) else 0.0,
    }
    cx, cy = series.bucket_reduce(
        times, np.column_stack([trace, actual_cost_h, sim_cost]), COMPARE_POINTS, "mean"
    )
    return {
        "steps": n,
        "periodS": period_s,
        "from": float(times[0]) * 1000.0,
        "to": float(times[-1]) * 1000.0,
        "params": params,
        "etaV": eta_v,
        "etaR": eta_r,
        "recorded": {
            "policy": _current_policy(app),
            "rMaxMs": app.r_max_ms,
            "etaV": app.eta_v,
            "etaR": app.eta_r,
        },
        "simulated": {
            **simulated,
            "violationsMet": simulated["violationFraction"] <= eta_v + 1e-12,
            "reconfigurationsMet": simulated["reconfigurationFraction"] <= eta_r + 1e-12,
        },
        "actual": {
            **actual,
            "violationsMet": actual["violationFraction"] <= app.eta_v + 1e-12,
            "reconfigurationsMet": actual["reconfigurationFraction"] <= app.eta_r + 1e-12,
        },
        "series": {
            "x": chart_data.ms(cx),
            "rate": chart_data.clean(cy[:, 0]),
            "actualCostPerHour": chart_data.clean(cy[:, 1]),
            "simulatedCostPerHour": chart_data.clean(cy[:, 2]),
        },
    }


def _current_policy(app: Application) -> str:
    from autoscaler.control.policy_choice import DEFAULT_OM_POLICY, policy_choice

    return policy_choice(app, "om", DEFAULT_OM_POLICY)[0]
