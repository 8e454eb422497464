"""Agent inspector ``/applications/<name>/agents/``: per OM its learned policy (tabular agents: best action per
deployment x rate level), learning curve and fitted engine model (micro-batch engines); the AM's weights,
per-operator bounds and BO history; and what an OM learned from busy time (processing rate per busy replica, as on
Flink)."""

from __future__ import annotations

import numpy as np
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from autoscaler.control.models import AgentState, ApplicationControl
from autoscaler.control.om_config import operator_spec
from autoscaler.control.rails import parse_rails
from autoscaler.control.topology import topology
from dashboard.monitor import chart_data, rollup, series
from dashboard.monitor.views.common import owned_application
from policies import agent_inspection, registry

CURVE_POINTS = 1000


def _agent_view(agent: AgentState | None, op, topo, control) -> dict:
    """Heatmap data of a tabular agent (or why there is none)."""
    if agent is None:
        return {"note": "no agent state yet (the first tick creates it)"}
    try:
        cls = registry.load("om", agent.policy)
        rails = parse_rails(control.rails if control else {}, [o.name for o in topo.all_operators])
        lo, hi = rails.bounds(op.name, op.max_parallelism)
        spec = operator_spec(topo, op, control.am_config if control else {}, k_min=lo, k_max=hi)
        policy = cls(spec, {}, seed=op.pk)
        policy.load_state(bytes(agent.blob))
    except (ValueError, KeyError, ImportError, OSError) as exc:
        return {"note": f"state could not be read: {exc}"}
    fit = agent_inspection.engine_fit(policy)
    extra = {} if fit is None else {"engine_fit": fit}
    capacity = agent_inspection.capacity_fit(policy)
    if capacity is not None:
        names: dict[float, list[str]] = {}
        for t in spec.node_types:  # the statistics are per speed: node types of one speed share them
            names.setdefault(float(t.speedup), []).append(t.name)
        for row in capacity["types"]:
            row["node_type"] = ", ".join(names.get(row["speed"], [f"speed {row['speed']:g}"]))
        extra["capacity_fit"] = capacity
    if not agent_inspection.is_tabular(policy):
        return {"note": f"{agent.policy} is not tabular: no learned table to show", **extra}
    return {"map": agent_inspection.greedy_map(policy), **extra}


@login_required
def agents_page(request, name: str):
    app = owned_application(request, name)
    topo = topology(app)
    control = ApplicationControl.objects.filter(application=app).first()
    agents = {a.operator_id: a for a in AgentState.objects.filter(operator__in=topo.operators)}
    frame = rollup.load(app)
    rows, charts = [], {}
    for op in topo.operators:
        agent = agents.get(op.pk)
        view = _agent_view(agent, op, topo, control)
        engine_fit = view.pop("engine_fit", None)  # tables of the page, not chart data
        capacity_fit = view.pop("capacity_fit", None)
        curve = (
            agent_inspection.learning_curve(frame.col(f"agent_cost:{op.name}")) if len(frame) else np.zeros(0)
        )
        if len(curve):
            cx, cy = series.bucket_reduce(frame.times, curve, CURVE_POINTS, "last")
            view["curve"] = {"x": chart_data.ms(cx), "y": chart_data.clean(cy[:, 0])}
        charts[op.name] = view
        rows.append(
            {
                "op": op,
                "agent": agent,
                "note": view.get("note"),
                "has_map": "map" in view,
                "has_curve": "curve" in view,
                "engine_fit": engine_fit,
                "capacity_fit": capacity_fit,
            }
        )
    am = (control.am_config if control else {}) or {}
    rails = parse_rails(control.rails if control else {}, [o.name for o in topo.all_operators])
    bounds = [
        {
            "operator": op.name,
            "bound_ms": (am.get("bounds_ms") or {}).get(op.name),
            "k": rails.bounds(op.name, op.max_parallelism),
        }
        for op in topo.operators
    ]
    history = list(reversed(am.get("history") or []))
    return render(
        request,
        "dashboard/monitor/agents.html",
        {
            "app": app,
            "rows": rows,
            "charts": charts,
            "am": am,
            "am_policy": (app.policies or {}).get("am") or "naive",
            "bounds": bounds,
            "history": history,
            "tab": "agents",
            "nav_active": "fleet",
        },
    )
