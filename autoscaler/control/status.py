"""The observed status of deployments, written by the control loop (the declared ``replicas`` are never touched).

- :func:`observe` (every tick, after the monitor's collect): a deployment whose status is still empty gets the
  deployment the engine reported for the period (``status_source`` "observed");
- :func:`drifted` (every tick whose observed period began without a change): an operator the engine reports
  running other replicas than in the previous period gets them (``status_source`` "observed"), e.g. after an
  executor was lost or the job was scaled by hand;
- :func:`record_apply` (every apply result the tick records, rollbacks and reconciliations included): each
  operator whose engine-reported deployment differs from its status gets the new one, since now, with the tick's
  decision about it and the engine's identifiers (``status_source`` "control").

Every status change appends a ``DeploymentHistory`` row (``manifests.record_history``): source "control" with its
decision, or "observed" when the engine is first seen running other replicas than declared. Both run inside the
tick's transaction.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from autoscaler.control.app_state import AppMemory
from autoscaler.control.models import Decision, Tick
from autoscaler.control.topology import Topology
from autoscaler.manifests import record_history
from autoscaler.models import Application, Deployment
from connectors.base import ApplyResult, PeriodMetrics


def observe(app: Application, metrics: PeriodMetrics) -> int:
    """Give every deployment of ``app`` without a status the engine's deployment of ``metrics`` (operators
    the period reports no deployment for are left for a later period). Returns the number written."""
    written = 0
    pending = Deployment.objects.filter(operator__application=app, status_replicas__isnull=True)
    for dep in pending.select_related("operator", "region"):
        m = metrics.operators.get(dep.operator.name)
        if m is None or not m.deployment:
            continue
        _set_status(dep, m.deployment, source="observed", decision=None, engine_ids={})
        written += 1
    return written


def drifted(app: Application, deployments: dict[str, dict[str, int]]) -> int:
    """The engine runs ``deployments`` (operator -> replicas per node type) for operators whose deployment changed
    without an apply (an executor lost, a job scaled by hand): write each one that differs from its status
    (``status_source`` "observed", no decision) and append it to the history. Returns the number written."""
    written = 0
    deps = Deployment.objects.filter(operator__application=app, operator__name__in=list(deployments))
    for dep in deps.select_related("operator", "region"):
        replicas = positive_replicas(deployments[dep.operator.name])
        if dep.status_replicas is not None and replicas == positive_replicas(dep.status_replicas):
            continue
        _set_status(dep, replicas, source="observed", decision=None, engine_ids=dep.status_engine_ids or {})
        written += 1
    return written


def record_apply(app: Application, tick: Tick, result: ApplyResult) -> int:
    """Write the status of every operator of ``result`` whose deployment changed on the engine.

    Only verified states are written: an applied plan (``ok``), a verified rollback (``rolled_back``) or a job
    the engine reports gone (nothing runs); an unreachable engine's cached deployment is not. Returns the
    number of deployments whose status changed."""
    verified = result.ok or result.rolled_back or bool(result.details.get("job_gone"))
    if not verified:
        return 0
    names = list(result.deployments)
    deps = Deployment.objects.filter(operator__application=app, operator__name__in=names)
    decisions = {d.operator_id: d for d in Decision.objects.filter(tick=tick).order_by("id")}
    changed = 0
    for dep in deps.select_related("operator", "region"):
        replicas = positive_replicas(result.deployments[dep.operator.name])
        ids = engine_ids(result.details, dep.operator.name)
        if dep.status_replicas is not None and replicas == positive_replicas(dep.status_replicas):
            if ids and ids != dep.status_engine_ids:  # same replicas, e.g. a new Flink job id
                dep.status_engine_ids = ids
                dep.save(update_fields=["status_engine_ids"])
            continue
        _set_status(dep, replicas, source="control", decision=decisions.get(dep.operator_id), engine_ids=ids)
        changed += 1
    return changed


def engine_ids(details: dict[str, Any], operator: str) -> dict[str, Any]:
    """The engine's identifiers of ``operator`` in an apply's details: Flink's ``job`` id, Spark's desired-state
    ``generation`` (after a rollback the generation that restored the previous executors, the one that runs;
    the simulated engine has none)."""
    ids: dict[str, Any] = {}
    if isinstance(details.get("job"), str):
        ids["job"] = details["job"]
    own = details.get(operator)
    if isinstance(own, dict):
        for key in ("rollback_generation", "generation"):
            if isinstance(own.get(key), int):
                ids["generation"] = own[key]
                break
    return ids


def positive_replicas(deployment: dict[str, int]) -> dict[str, int]:
    """``deployment`` without the node types it runs no replica of (counts as ints)."""
    return {t: int(n) for t, n in deployment.items() if int(n) > 0}


def _set_status(
    dep: Deployment,
    replicas: dict[str, int],
    *,
    source: str,
    decision: Decision | None,
    engine_ids: dict[str, Any],
) -> None:
    """Store a new status and append it to the history when it differs from the last known replicas (the
    previous status, or the spec before the first one)."""
    replicas = positive_replicas(replicas)
    known = dep.status_replicas if dep.status_replicas is not None else dep.replicas
    dep.status_replicas = replicas
    dep.status_since = timezone.now()
    dep.status_source = source
    dep.status_decision = decision
    dep.status_engine_ids = engine_ids
    dep.save(
        update_fields=[
            "status_replicas",
            "status_since",
            "status_source",
            "status_decision",
            "status_engine_ids",
        ]
    )
    if replicas != positive_replicas(known):
        record_history(dep, source, replicas=replicas, decision=decision)


def record_drift(
    app: Application, topo: Topology, metrics: PeriodMetrics, app_mem: AppMemory, reconfigured: bool
) -> None:
    """The engine's deployments that changed since the previous period without an apply between them (the
    observed period did not begin with a change) become the deployments' status (``status.drifted``); what was
    seen is kept in ``AppMemory.seen`` for the next period. Costs a query only when something drifted."""
    seen = app_mem.seen or {}
    now = {
        op.name: positive_replicas(metrics.operators[op.name].deployment)
        for op in topo.operators
        if metrics.operators[op.name].deployment
    }
    if not reconfigured:
        changed = {name: dep for name, dep in now.items() if name in seen and dep != seen[name]}
        if changed:
            drifted(app, changed)
    app_mem.seen = now
