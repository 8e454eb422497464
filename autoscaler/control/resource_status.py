"""The ``status`` of Deployments and Applications as the API, ``manage.py get/describe`` and the dashboard show it.

Read only: the deployment status is written by :mod:`autoscaler.control.status`; the application status is what
the control loop already keeps (``ApplicationControl``, the tick ledger). Keys are camelCase like the manifests'.
Units: costs in currency per hour (replicas x their node type's ``price_per_hour``), times ISO 8601 (UTC).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from autoscaler import models as m
from autoscaler.control.aggregates import VIOLATED
from autoscaler.control.models import ApplicationControl, Decision, Tick
from autoscaler.control.status import positive_replicas

#: Application phase by the status of the last tick (``Pending`` before the first one)
PHASES = {
    Tick.Status.RUNNING: "Deciding",
    Tick.Status.APPLYING: "Applying",
    Tick.Status.DONE: "Controlled",
    Tick.Status.NO_DATA: "NoData",
    Tick.Status.FAILED: "Failing",
    Tick.Status.MISSED: "Missed",
}


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def prices_of(region: m.Region) -> dict[str, float]:
    """Price per hour (currency/h) of each node type of the region's catalog."""
    return dict(region.catalog.node_types.values_list("name", "price_per_hour"))


def cost_per_hour(replicas: dict[str, int], prices: dict[str, float]) -> float:
    """Currency per hour of ``replicas`` (node type -> count) at ``prices`` (node type -> currency/h), rounded to
    1e-9 (no float noise such as 3.0999999999999996 in answers)."""
    return round(float(sum(n * prices.get(t, 0.0) for t, n in replicas.items())), 9)


def decision_summary(decision: Decision | None) -> dict[str, Any] | None:
    """The decision a status or history row links to: id, slot, outcome and reason."""
    if decision is None:
        return None
    return {"id": decision.pk, "slot": decision.slot, "outcome": decision.outcome, "reason": decision.reason}


def deployment_status(dep: m.Deployment, prices: dict[str, float] | None = None) -> dict[str, Any]:
    """What the engine runs for ``dep`` (``observed`` False and null fields before the loop first saw it).

    ``prices``: node type -> currency/h (default: read from the region's catalog)."""
    prices = prices_of(dep.region) if prices is None else prices
    replicas = dep.status_replicas
    return {
        "observed": replicas is not None,
        "replicas": None if replicas is None else dict(replicas),
        "totalReplicas": None if replicas is None else sum(replicas.values()),
        "since": _iso(dep.status_since),
        "source": dep.status_source or None,
        "decision": decision_summary(dep.status_decision),
        "engineIds": dict(dep.status_engine_ids or {}),
        "costPerHour": None if replicas is None else cost_per_hour(replicas, prices),
        "matchesSpec": None
        if replicas is None
        else positive_replicas(replicas) == positive_replicas(dep.replicas),
    }


def last_period_violated(control: ApplicationControl) -> bool | None:
    """Whether the last observed period violated the SLO (None before the first one)."""
    if not control.ring_fill or not control.ring_flags:
        return None
    flags = bytes(control.ring_flags)
    return bool(flags[(control.ring_pos - 1) % len(flags)] & VIOLATED)


def phase(app: m.Application, tick: Tick | None) -> str:
    """``Registered``, ``Paused`` or ``Deleted`` while the application is not running (the loop dispatches no
    tick then); else ``Pending`` before its first tick, and after it by the last tick's status (``PHASES``)."""
    if app.state != m.Application.State.RUNNING:
        return str(app.state).capitalize()
    return "Pending" if tick is None else PHASES.get(tick.status, str(tick.status))


def application_status(app: m.Application) -> dict[str, Any]:
    """What the control loop knows of ``app``: phase (see :func:`phase`), last tick, whether the last observed
    period violated the SLO, counters, and the replicas the engine runs per operator with their cost per hour
    (``costPerHour`` null while no deployment has been observed)."""
    control = ApplicationControl.objects.filter(application=app).first()
    tick = Tick.objects.filter(application=app).order_by("-slot").first()
    deps = list(
        m.Deployment.objects.filter(operator__application=app).select_related("operator", "region__catalog")
    )
    replicas: dict[str, dict[str, int] | None] = {}
    cost: float | None = None
    price_cache: dict[int, dict[str, float]] = {}
    for dep in deps:
        replicas[dep.operator.name] = None if dep.status_replicas is None else dict(dep.status_replicas)
        if dep.status_replicas is not None:
            prices = price_cache.setdefault(dep.region_id, prices_of(dep.region))
            cost = round((cost or 0.0) + cost_per_hour(dep.status_replicas, prices), 9)
    return {
        "phase": phase(app, tick),
        "lastTick": None
        if tick is None
        else {
            "slot": tick.slot,
            "status": tick.status,
            "finishedAt": _iso(tick.finished_at),
            "error": tick.error or None,
        },
        "lastTickAt": _iso(control.last_tick_at) if control else None,
        "lastPeriodViolated": last_period_violated(control) if control else None,
        "periods": control.periods if control else 0,
        "violatedPeriods": control.violated_periods if control else 0,
        "noDataPeriods": control.no_data_periods if control else 0,
        "reconfigurationsApplied": control.reconfigurations_applied_total if control else 0,
        "lastError": (control.last_error or None) if control else None,
        "replicas": replicas,
        "costPerHour": cost,
    }


def status_of(obj: Any) -> dict[str, Any] | None:
    """The status of a Deployment or an Application; None for kinds without one (catalogs, regions)."""
    if isinstance(obj, m.Deployment):
        return deployment_status(obj)
    if isinstance(obj, m.Application):
        return application_status(obj)
    return None


def with_status(doc: dict[str, Any], obj: Any) -> dict[str, Any]:
    """A resource's manifest ``doc`` with its read-only ``status`` (unchanged for kinds without one)."""
    status = status_of(obj)
    return doc if status is None else {**doc, "status": status}
