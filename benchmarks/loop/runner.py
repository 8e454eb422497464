"""Run one bench_loop scenario through the product's own path and collect what the control loop recorded.

1. The scenario's manifests are applied with ``autoscaler.manifests.apply_documents`` (what ``manage.py apply``
   does; owner ``bench-loop``): catalog, region, applications (``state: running``), deployments.
2. Each control period the Celery task functions of ``autoscaler.control.tasks`` run eagerly in this process
   (``Task.apply``: no broker, no worker), in the order one dispatch publishes them to a worker's FIFO queue:
   ``control.tick`` of every application for the slot, ``control.am_tune`` of an application whose AM slot
   (floor(slot start / T_AM)) advanced once it has a configuration (as ``control.dispatch`` does), then
   ``control.region_step`` of the scenario's region for its RM slot. Slots are synthetic (the first observes the
   scenario's first trace index: slot ``s`` observes period ``s - 1`` and the simulated engine's trace index
   ``s - 1``), so the staleness rule is off for the run (``AUTOSCALER_STALE_AFTER_PERIODS = 0``, as for
   ``bench_control`` and the worker tests) and ``AUTOSCALER_TRACE_DIRS`` includes the run's trace directory.
3. Per period and application the record is read back from the ledger (``Tick``) and the decision log
   (``Decision``): the application-level violation exactly as the tick records it (any path's response time above
   R_max, else any operator's bound), whether the period began with a reconfiguration, the resource cost ($), and
   per operator its deployment, its input rate and whether it violated its own bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.test.utils import override_settings

from autoscaler.control import tasks
from autoscaler.control.models import ApplicationControl, Decision, Tick
from autoscaler.control.om_config import naive_configuration
from autoscaler.control.regions import region_period_s
from autoscaler.control.simulated_engine import simulated_application
from autoscaler.control.tick import forget_definitions, slot_of
from autoscaler.control.topology import topology
from autoscaler.manifests import apply_documents
from autoscaler.models import Application, NodeTypeCatalog, Region
from benchmarks.loop.scenarios import CATALOG, OWNER, Scenario, documents, region_name
from policies.operator_model import QueueModel


class LoopError(RuntimeError):
    """A task of the control loop failed during a bench_loop run."""


@dataclass
class AppRecord:
    """What the control loop did to one application, one entry per period (index 0 = the run's first period).

    ``status``: ledger status of the tick; ``violated``: application-level violation; ``reconfigured``: the period
    began with a reconfiguration; ``cost``: resource cost of the period ($); ``rates`` / ``deployments`` /
    ``op_violated``: per managed operator, input rate (tuples/s: measured, or the engine's own rate when the
    period has no metrics), replicas per node type, own bound exceeded.
    """

    app_id: int
    name: str
    eta_v: float
    eta_r: float
    period_s: float
    first_slot: int
    status: list[str] = field(default_factory=list)
    violated: list[bool] = field(default_factory=list)
    reconfigured: list[bool] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    rates: dict[str, list[float]] = field(default_factory=dict)
    deployments: dict[str, list[dict[str, int]]] = field(default_factory=dict)
    op_violated: dict[str, list[bool]] = field(default_factory=dict)
    k_max: dict[str, int] = field(default_factory=dict)
    #: for the floor: per managed operator the engine's true queueing model and the AM's initial bound (s);
    #: per node type (catalog order) speedup and price ($/h)
    models: dict[str, QueueModel] = field(default_factory=dict)
    bounds_s: dict[str, float] = field(default_factory=dict)
    speedups: list[float] = field(default_factory=list)
    prices: list[float] = field(default_factory=list)


@dataclass
class ScenarioRun:
    """One run of a scenario: per-application records and the time spent in each kind of task (s)."""

    scenario: str
    periods: int
    apps: list[AppRecord]
    tick_s: float = 0.0
    am_s: float = 0.0
    region_s: float = 0.0
    ticks: int = 0
    operator_steps: int = 0
    am_tunings: int = 0
    region_steps: int = 0
    wall_s: float = 0.0


def owner():
    user, _ = get_user_model().objects.get_or_create(username=OWNER)
    return user


def cleanup(scenario_names: list[str] | None = None) -> None:
    """Delete what bench_loop created: the ``bench-loop`` user's applications (with their operators,
    deployments, ledger and decision log), the scenario regions and the bench catalog."""
    Application.objects.filter(owner__username=OWNER).delete()
    regions = Region.objects.filter(name__startswith="bench-loop-")
    if scenario_names is not None:
        regions = regions.filter(name__in=[region_name(s) for s in scenario_names])
    for region in regions:
        region.delete()
    if not Region.objects.filter(catalog__name=CATALOG).exists():
        NodeTypeCatalog.objects.filter(name=CATALOG).delete()
    forget_definitions()


def pause_all() -> None:
    """Pause the ``bench-loop`` user's applications (kept to look at: no dispatcher may tick them later)."""
    Application.objects.filter(owner__username=OWNER).update(state=Application.State.PAUSED)


def run_task(task, args: tuple) -> Any:  # noqa: ANN001 - a Celery task
    """Run a Celery task function eagerly in this process; a failure raises ``LoopError`` with its cause."""
    result = task.apply(args=args)
    if result.failed():
        raise LoopError(f"{task.name}{args}: {result.result!r}\n{result.traceback}")
    return result.result


def am_slot_due(app: Application, now_s: float, am_period_s: float, am_last: int) -> int | None:
    """The AM slot (period ``am_period_s``, s) to tune at ``now_s`` (s) when it is past ``am_last`` and the AM has
    configured the application (its first tick writes the bounds), as one dispatch publishes ``control.am_tune``;
    else None."""
    am_slot = slot_of(now_s, am_period_s)
    if am_slot <= am_last:
        return None
    configured = ApplicationControl.objects.filter(application=app).values_list("am_config", flat=True)[0]
    return am_slot if configured.get("bounds_ms") else None


def run_scenario(
    scenario: Scenario, periods: int, trace_dir: Path, om_policy: str | dict[str, Any] | None = None
) -> ScenarioRun:
    """Apply the scenario's manifests and drive ``periods`` control periods of every application (see module
    doc); the applications stay in the database until :func:`cleanup`."""
    if periods < 1:
        raise ValueError(f"periods: must be >= 1, got {periods}")
    trace_dir = Path(trace_dir).resolve()
    with override_settings(AUTOSCALER_STALE_AFTER_PERIODS=0, AUTOSCALER_TRACE_DIRS=[str(trace_dir)]):
        cleanup([scenario.name])
        docs = documents(scenario, trace_dir, periods, om_policy)
        apply_documents(docs, owner())
        names = [d["metadata"]["name"] for d in docs if d["kind"] == "Application"]
        apps = list(Application.objects.filter(owner__username=OWNER, name__in=names).order_by("pk"))
        region = Region.objects.get(name=region_name(scenario.name))
        for app in apps:
            ApplicationControl.objects.get_or_create(application=app)
            forget_definitions(app.pk)
        run = ScenarioRun(scenario.name, periods, [])
        first = {app.pk: scenario.first_index + 1 for app in apps}
        am_last = {app.pk: -1 for app in apps}
        started = time.perf_counter()
        for p in range(periods):
            due_am = []
            for app in apps:
                slot = first[app.pk] + p
                am_slot = am_slot_due(app, slot * app.om_period_s, app.am_period_s, am_last[app.pk])
                t0 = time.perf_counter()
                run_task(tasks.tick, (app.pk, slot, None, float(app.om_period_s)))
                run.tick_s += time.perf_counter() - t0
                run.ticks += 1
                if am_slot is not None:
                    due_am.append((app, am_slot))
            for app, am_slot in due_am:
                t0 = time.perf_counter()
                run_task(tasks.am_tune, (app.pk, am_slot))
                run.am_s += time.perf_counter() - t0
                run.am_tunings += 1
                am_last[app.pk] = am_slot
            # the region's RM period (its own, else the shortest OM period of its running applications)
            now_s = (first[apps[0].pk] + p) * float(apps[0].om_period_s)
            t0 = time.perf_counter()
            run_task(tasks.region_step, (region.pk, slot_of(now_s, region_period_s(region))))
            run.region_s += time.perf_counter() - t0
            run.region_steps += 1
        run.wall_s = time.perf_counter() - started
        for app in apps:
            rec = collect(app, first[app.pk], periods)
            run.operator_steps += len(rec.rates) * periods
            run.apps.append(rec)
    return run


def collect(app: Application, first_slot: int, periods: int) -> AppRecord:
    """Read the record of ``periods`` periods from slot ``first_slot`` on out of the ledger and decision log."""
    app.refresh_from_db()
    rec = AppRecord(app.pk, app.name, app.eta_v, app.eta_r, float(app.om_period_s), first_slot)
    slots = range(first_slot, first_slot + periods)
    ticks = {t.slot: t for t in Tick.objects.filter(application=app, slot__in=slots)}
    decisions: dict[int, list[Decision]] = {}
    for d in Decision.objects.filter(application=app, slot__in=slots).select_related("operator"):
        decisions.setdefault(d.slot, []).append(d)
    managed = [
        op
        for op in app.operators.order_by("position").select_related("deployment")
        if hasattr(op, "deployment")
    ]
    sim, _ = simulated_application(app)
    true_models = {op.name: op.model() for op in sim.operators}
    topo = topology(app)
    bounds_ms = naive_configuration(topo)["bounds_ms"]
    rec.speedups = [t.speedup for t in topo.node_types]
    rec.prices = [t.price for t in topo.node_types]
    for op in managed:
        rec.rates[op.name], rec.deployments[op.name], rec.op_violated[op.name] = [], [], []
        rec.k_max[op.name] = int(op.max_parallelism)
        rec.models[op.name] = true_models[op.name]
        rec.bounds_s[op.name] = float(bounds_ms[op.name]) / 1000.0
    for slot in slots:
        tick = ticks.get(slot)
        rows = {d.operator.name: d for d in decisions.get(slot, [])}
        status = tick.status if tick is not None else "absent"
        rec.status.append(status)
        metrics = (tick.metrics if tick is not None else None) or {}
        paths = metrics.get("path_response_time_s") or {}
        if status != Tick.Status.DONE:
            violated = True  # a period without a decision is not a period within the SLO
        elif paths:
            violated = any(
                v is None or not np.isfinite(v) or v * 1000.0 > app.r_max_ms for v in paths.values()
            )
        else:
            violated = any(d.violated for d in rows.values())
        rec.violated.append(bool(violated))
        rec.reconfigured.append(any(d.reconfigured for d in rows.values()))
        rec.cost.append(float(sum(d.resource_cost or 0.0 for d in rows.values())))
        ops = metrics.get("operators") or {}
        for op in managed:
            rate = (ops.get(op.name) or {}).get("input_rate")
            if rate is None:  # a period without metrics: the engine's own (noise-free) rate of that period
                rate = sim.input_rates(slot - 1)[op.name]
            rec.rates[op.name].append(float(rate))
            d = rows.get(op.name)
            rec.deployments[op.name].append(dict(d.deployment) if d is not None else {})
            rec.op_violated[op.name].append(bool(d.violated) if d is not None else True)
    return rec
