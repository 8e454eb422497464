"""The Application Manager's tuning step, run every AM period: recompute the OMs' response-time bounds and cost
weights (``naive``: Alg. 5 with equal weights; ``bo``: Bayesian optimisation over a simulator fitted to the
periods observed since the last tuning). The OMs pick the new configuration up at their next tick
(``AgentState.am_config_version`` differs -> ``Policy.reconfigure``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from django.db import transaction

from autoscaler.control.agents import load_policy, slo_params
from autoscaler.control.app_state import AmConfig
from autoscaler.control.locks import application_lock
from autoscaler.control.models import ApplicationControl, Decision, Tick
from autoscaler.control.om_config import naive_configuration
from autoscaler.control.policy_choice import DEFAULT_AM_POLICY, DEFAULT_OM_POLICY, policy_choice
from autoscaler.control.topology import Topology, topology
from autoscaler.models import Application
from policies import registry

#: options of the ``bo`` AM (``policies.options``, level "am") passed to ``BayesianAM`` under their own names
BO_OPTIONS = (
    "n_bo",
    "max_rounds",
    "timeout_s",
    "epsilon",
    "margin",
    "margin_r",
    "replications",
    "validation_replications",
    "validate_top",
    "validation_k",
    "validation_load",
    "validation_steps",
    "validation_phases",
    "fallback_top",
)


def managed_application(topo: Topology):
    """``policies.app_graphs.Application`` over the managed operators, edges contracted through unmanaged ones; each
    operator's service time as learned from its metrics (:mod:`autoscaler.control.calibration`, the declared
    ``serviceTimeMs`` before that). ValueError naming the operator when neither is known yet."""
    from autoscaler.control.calibration import learned_service_times
    from policies.app_graphs import Application as PolicyApplication
    from policies.app_graphs import OperatorDef

    managed = {op.name for op in topo.operators}
    succ: dict[str, list[str]] = {op.name: [] for op in topo.all_operators}
    for a, b in topo.streams:
        succ[a].append(b)

    def reach(name: str) -> set[str]:
        out, stack, seen = set(), list(succ[name]), set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in managed:
                out.add(n)
            else:
                stack.extend(succ[n])
        return out

    edges = tuple(sorted((a, b) for a in managed for b in reach(a)))
    service = learned_service_times(topo)
    unknown = [name for name, v in service.items() if v is None]
    if unknown:
        raise ValueError(
            f"operators {', '.join(unknown)}: service time not learned yet (no period with utilisation or "
            "response time measured) and no serviceTimeMs declared"
        )
    ops = tuple(
        OperatorDef(op.name, service[op.name][0], service[op.name][1], float(op.selectivity))
        for op in topo.operators
    )
    k_max = max(op.max_parallelism for op in topo.operators)
    return PolicyApplication(topo.application.name, ops, edges, topo.application.r_max_ms / 1000.0, k_max)


def simulation_models(app: Application, topo: Topology) -> list[Any]:
    """Per managed operator (``topo.operators``' order), the performance model a simulation of the application
    runs it on (the AM's BO, the what-if replay): the engine model its OM fitted from its own metrics (a
    micro-batch engine's, ``Policy.fitted_engine_model``) when there is one, else the M/G/1 queue of the service
    time the control plane learned (:func:`managed_application`)."""
    from autoscaler.control.models import AgentState
    from autoscaler.control.rails import effective_rails_data, parse_rails

    papp = managed_application(topo)
    control = ApplicationControl.objects.filter(application=app).first()
    agents = {a.operator_id: a for a in AgentState.objects.filter(operator__in=topo.operators)}
    models: list[Any] = []
    rails = parse_rails(effective_rails_data(app, control)) if control is not None else None
    for u, op in enumerate(topo.operators):
        fitted = None
        if rails is not None and op.pk in agents:
            fitted = load_policy(agents[op.pk], op, topo, control, rails).fitted_engine_model()
        models.append(fitted if fitted is not None else papp.operators[u].queue_model())
    return models


def bo_configuration(
    app: Application, topo: Topology, params: dict[str, Any], since_slot: int
) -> dict[str, Any]:
    """Run the BO AM on the periods observed after ``since_slot``, told the violation and reconfiguration
    fractions the configuration in place really had over them (:func:`observed_fractions`); returns the new
    configuration (ms) and, under ``observed``, those fractions."""
    from policies.am.bo import BayesianAM, Observations, om_factory_from_registry
    from policies.am.guard import guard_params
    from policies.am.naive import AMConfiguration
    from policies.operator_model import CostWeights
    from policies.options import resolve

    papp = managed_application(topo)
    roots = [n for n in papp.names if not any(b == n for _, b in papp.edges)]
    rates = []
    ticks = list(
        Tick.objects.filter(application=app, slot__gt=since_slot, status="done")
        .order_by("slot")
        .values_list("slot", "metrics")
    )
    for _, metrics in ticks:
        ops = (metrics or {}).get("operators", {})
        values = [ops.get(r, {}).get("input_rate") for r in roots]
        if values and all(v is not None for v in values):
            rates.append(max(values))
    if len(rates) < 5:
        raise ValueError(f"only {len(rates)} complete periods observed since the last tuning (need 5)")
    seen = observed_fractions(app, ticks)
    om_name, om_params = policy_choice(app, "om", DEFAULT_OM_POLICY)
    # the options registry: BO budget, validation, and the tick's arbitration
    opts = resolve("am", "bo", params)
    am = BayesianAM(
        papp,
        topo.node_types,
        om_factory_from_registry(om_name, slo_params(registry.load("om", om_name), om_params, topo)),
        eta_v=app.eta_v,
        eta_r=app.eta_r,
        **{name: opts[name] for name in BO_OPTIONS},
        # BO simulates the arbitration and the guard the tick runs (same bucket, reserve, batching, hold)
        bucket_capacity=opts["bucket_capacity"],
        scale_in_reserve=opts["scale_in_reserve"],
        batching=opts["batching"],
        hold_scale_ins=opts["hold_scale_ins"],
        guard=guard_params(opts),
        # its simulated OMs learn their rate range and service time as the loop's do (policies.calibration)
        self_calibrating=True,
    )
    current = ApplicationControl.objects.get(application=app).am_config
    if current.get("bounds_ms"):
        w = current["weights"]
        am.configuration = AMConfiguration(
            np.array([current["bounds_ms"][n] / 1000.0 for n in papp.names]),
            CostWeights(w["perf"], w["res"], w["rcf"]),
        )
    models = simulation_models(app, topo)
    config = am.optimise(
        Observations(
            np.array(rates),
            models,
            observed_violation_fraction=seen["violation_fraction"],
            observed_reconfiguration_fraction=seen["reconfiguration_fraction"],
        )
    )
    out = config.as_dict(papp.names)
    return {
        "policy": "bo",
        "bounds_ms": out["bounds_ms"],
        "weights": out["weights"],
        "record": am.history[-1],
        "observed": seen,
    }


def observed_fractions(app: Application, ticks: list[tuple[int, dict | None]]) -> dict[str, Any]:
    """What the current configuration really did over the observed window: of the done ticks ``ticks``
    ((slot, PeriodMetrics dict)), the fraction of periods with an application-level violation (as the tick
    records it in the aggregates: any path's response time above R_max or unmeasured, else any operator's
    decision violated) and the fraction that began with a reconfiguration (the decisions' ``reconfigured``).
    Fractions are None when no decision was recorded in the window; ``periods`` counts the periods used."""
    flags: dict[int, list[bool]] = {}  # slot -> [any operator violated, reconfigured]
    for slot, violated, reconfigured in Decision.objects.filter(
        application=app, slot__in=[slot for slot, _ in ticks]
    ).values_list("slot", "violated", "reconfigured"):
        f = flags.setdefault(slot, [False, False])
        f[0], f[1] = f[0] or violated, f[1] or reconfigured
    violated_periods = reconfigured_periods = 0
    for slot, metrics in ticks:
        if slot not in flags:
            continue
        paths = (metrics or {}).get("path_response_time_s") or {}
        if paths:
            violated = any(
                v is None or not np.isfinite(v) or v * 1000.0 > app.r_max_ms for v in paths.values()
            )
        else:
            violated = flags[slot][0]
        violated_periods += violated
        reconfigured_periods += flags[slot][1]
    n = sum(1 for slot, _ in ticks if slot in flags)
    return {
        "periods": n,
        "violation_fraction": violated_periods / n if n else None,
        "reconfiguration_fraction": reconfigured_periods / n if n else None,
    }


def tune(application_id: int, am_slot: int) -> dict[str, Any]:
    """One AM tuning step for AM slot ``am_slot`` (idempotent: a slot already tuned is skipped)."""
    app = Application.objects.get(pk=application_id)
    control, _ = ApplicationControl.objects.get_or_create(application=app)
    if control.am_tuned_slot >= am_slot:
        return {"duplicate": True}
    name, params = policy_choice(app, "am", DEFAULT_AM_POLICY)
    topo = topology(app)
    started = time.perf_counter()
    event: dict[str, Any] = {"am_slot": am_slot, "policy": name}
    try:
        if name == "bo":
            since = (
                int(control.am_tuned_slot * app.am_period_s // app.om_period_s)
                if control.am_tuned_slot >= 0
                else -1
            )
            config = bo_configuration(app, topo, params, since)
        else:
            config = naive_configuration(topo)
    except Exception as exc:  # noqa: BLE001 -- tuning must never break the control loop: keep the last config
        config = None
        event["outcome"] = f"kept the current configuration: {type(exc).__name__}: {exc}"
    event["wall_s"] = round(time.perf_counter() - started, 3)
    with application_lock(app.pk), transaction.atomic():
        control = ApplicationControl.objects.select_for_update().get(application=app)
        if control.am_tuned_slot >= am_slot:
            return {"duplicate": True}
        current = AmConfig.of(control)
        if config is not None:
            tuned = AmConfig.from_json(config)
            changed = (tuned.bounds_ms, tuned.weights) != (current.bounds_ms, current.weights)
            event["outcome"] = "changed" if changed else "unchanged"
            record = tuned.extra.pop("record", None) or {}
            if record.get(
                "outcome"
            ):  # e.g. BO timed out or failed inside and kept the last good configuration
                event["bo_outcome"] = record["outcome"]
            observed = tuned.extra.pop("observed", None)
            if observed:  # what the configuration in place did over the observed window
                event["observed"] = observed
            if record.get("kept_warm_start"):
                event["kept_warm_start"] = record["kept_warm_start"]
            tuned.history = current.history
            tuned.note(event)
            tuned.guard_scale = (
                current.guard_scale
            )  # the guard's scale outlives a tuning: it applies to the new weights
            tuned.save_to(control)
            if changed:
                control.am_config_version += 1
        else:
            current.note(event)
            current.save_to(control)
        control.am_tuned_slot = am_slot
        control.save()
    return {"duplicate": False, **event}
