"""The simulated engine of a stored Application (``engine: simulated``), kept in the database.

A trace-driven engine (``connectors.simulated``) whose running deployment is kept durably in the application's
``SimulatedEngine`` row (``DbEngineStore``: worker restarts and other workers see the same engine), with the fault
injection stored in that row: ``FaultInjectingMonitor`` (``collectDelayS`` in s, ``failCollect`` count,
``missingSlots``, ``speedupOverride``, ``failingOperators``, ``jobState``) and ``CountingRealizer`` (counts
applies; ``applyDelayS`` in s, ``refuseApply``). Rates of the trace in tuples/s, one per period.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from django.conf import settings as django_settings
from django.db.models import F

from autoscaler.control.models import SimulatedEngine
from autoscaler.control.topology import deployment_of
from autoscaler.models import NodeType
from connectors.base import (
    ApplyResult,
    Cause,
    ConnectorError,
    Deployment,
    OperatorMetrics,
    Period,
    PeriodMetrics,
    ScalingPlan,
    job_state_cause,
)
from connectors.simulated import (
    SIMULATED_SERVICE_MS,
    SimOperator,
    SimulatedApplication,
    SimulatedConnector,
    SimulatedMonitor,
    SimulatedRealizer,
)
from connectors.traces import TraceNotAllowed, read_rates, resolve_trace
from policies.engine_model import SETTLE_PERIODS
from policies.micro_batch_engine import MicroBatchEngine

#: service time (s) of operators the control plane does not scale (no Deployment): never a bottleneck
UNMANAGED_SERVICE_S = 1e-6


@lru_cache(maxsize=16)
def load_trace_rates(name_or_path: str, allowed_dirs: tuple[str, ...] = ()) -> tuple[float, ...]:
    """Rates (tuples/s, one per period) of a shipped trace name or of a file under ``allowed_dirs``
    (``connectors.traces``); ``ValueError`` names ``connector.trace`` and the reason."""
    try:
        return read_rates(resolve_trace(name_or_path, allowed_dirs))
    except TraceNotAllowed as exc:
        raise ValueError(f"connector.trace: {exc}") from None


def allowed_trace_dirs() -> tuple[str, ...]:
    """``settings.AUTOSCALER_TRACE_DIRS``: directories whose files simulated applications may name as trace."""
    return tuple(str(d) for d in getattr(django_settings, "AUTOSCALER_TRACE_DIRS", ()) or ())


class DbEngineStore:
    """``connectors.simulated.StateStore`` on the application's ``SimulatedEngine`` row."""

    def __init__(self, application_id: int) -> None:
        self.application_id = application_id

    def _row(self) -> SimulatedEngine:
        row, _ = SimulatedEngine.objects.get_or_create(application_id=self.application_id)
        return row

    def load(self) -> dict[str, Deployment] | None:
        if self._prefetched is not None:  # read together with the faults by the monitor
            value, self._prefetched = self._prefetched, None
            return value
        return self._row().deployments

    _prefetched: dict[str, Deployment] | None = None

    def fetch(self) -> tuple[dict[str, Deployment] | None, dict[str, Any]]:
        """Deployments and faults in one read; the next ``load()`` returns these deployments."""
        row = self._row()
        self._prefetched = row.deployments
        return row.deployments, dict(row.faults or {})

    def save(self, deployments: dict[str, Deployment]) -> None:
        self._row()
        SimulatedEngine.objects.filter(application_id=self.application_id).update(deployments=deployments)

    def faults(self) -> dict[str, Any]:
        return dict(self._row().faults or {})

    def load_queue(self) -> dict[str, Any] | None:
        return self._row().queue

    def save_queue(self, state: dict[str, Any]) -> None:
        self._row()
        SimulatedEngine.objects.filter(application_id=self.application_id).update(queue=state)


class FaultInjectingMonitor(SimulatedMonitor):
    """Reads the engine's fault settings at every collect: ``collectDelayS``, ``failCollect``, ``missingSlots``."""

    def __init__(self, app: SimulatedApplication, realizer: SimulatedRealizer, store: DbEngineStore) -> None:
        super().__init__(app, realizer)
        self.store = store

    def collect(self, period: Period) -> PeriodMetrics:
        try:
            return self._collect(period)
        finally:
            self.store._prefetched = None

    def _collect(self, period: Period) -> PeriodMetrics:
        _, faults = self.store.fetch()
        if faults.get("collectDelayS"):
            time.sleep(float(faults["collectDelayS"]))
        if int(faults.get("failCollect", 0)) > 0:
            rows = SimulatedEngine.objects.filter(
                application_id=self.store.application_id, faults__failCollect__gt=0
            )
            remaining = int(faults["failCollect"]) - 1
            rows.update(faults={**faults, "failCollect": remaining}, applies=F("applies"))
            raise ConnectorError("simulated engine unreachable (fault injection)")
        if period.slot in set(faults.get("missingSlots", [])):
            return PeriodMetrics(
                period, {}, complete=False, reason="simulated metrics outage", cause=Cause.METRICS_MISSING
            )
        base = self.__dict__.setdefault("_base_speedups", dict(self.app.speedups))
        self.app.speedups = {
            **base,
            **{t: float(v) for t, v in (faults.get("speedupOverride") or {}).items()},
        }
        metrics = super().collect(period)
        for name in faults.get("failingOperators") or []:
            if name in metrics.operators:
                m = metrics.operators[name]
                metrics.operators[name] = OperatorMetrics(
                    name,
                    m.deployment,
                    complete=False,
                    reason="operator has no running replica (job failing)",
                    cause=Cause.NO_RUNNING_REPLICA,
                )
        if faults.get("jobState"):  # the engine reports the whole job in this state (e.g. FAILED, RESTARTING)
            state = str(faults["jobState"])
            return PeriodMetrics(
                period, {}, complete=False, reason=f"job simulated is {state}", cause=job_state_cause(state)
            )
        return metrics


class CountingRealizer(SimulatedRealizer):
    """Counts the reconfigurations the engine receives; honours ``applyDelayS`` and ``refuseApply``."""

    def __init__(
        self, app: SimulatedApplication, store: DbEngineStore, initial: dict[str, Deployment]
    ) -> None:
        super().__init__(app, store, initial)
        self.db_store = store

    def apply(self, plan: ScalingPlan) -> ApplyResult:
        faults = self.db_store.faults()
        if faults.get("applyDelayS"):
            time.sleep(float(faults["applyDelayS"]))
        self.app.refuse_apply = bool(faults.get("refuseApply", False))
        result = super().apply(plan)
        SimulatedEngine.objects.filter(application_id=self.db_store.application_id).update(
            applies=F("applies") + 1
        )
        return result


def simulated_application(application) -> tuple[SimulatedApplication, dict[str, Deployment]]:
    """The simulated engine's view of a stored Application and the initial deployment of every operator."""
    settings = application.connector or {}
    operators = list(application.operators.all().select_related("deployment"))
    deployments: dict[str, Deployment] = {}
    for op in operators:
        dep = deployment_of(op)
        if dep is not None:
            deployments[op.name] = {t: int(n) for t, n in dep.replicas.items() if n > 0}
    types = list(
        NodeType.objects.filter(catalog__regions__deployments__operator__application=application).distinct()
    )
    if not types:
        types = list(NodeType.objects.filter(catalog__regions__applications=application).distinct())
    if not types:
        raise ValueError(f"application {application.name!r}: no region/catalog to run operators on")
    speedups = {t.name: float(t.speedup) for t in types}
    first_type = sorted(types, key=lambda t: (t.catalog_id, t.position))[0].name
    sim_ops = []
    default_ms = float(settings.get("serviceTimeMs", SIMULATED_SERVICE_MS))
    initial: dict[str, Deployment] = {}
    for op in operators:
        managed = op.name in deployments
        mean = (op.service_time_ms or default_ms) / 1000.0 if managed else None
        mean = mean if mean is not None else UNMANAGED_SERVICE_S
        sim_ops.append(SimOperator(op.name, op.kind, mean, mean * mean / 2.0, "mg1", float(op.selectivity)))
        initial[op.name] = deployments.get(op.name, {first_type: 1})
    streams = [(s.source.name, s.target.name) for s in application.streams.select_related("source", "target")]
    app = SimulatedApplication(
        operators=sim_ops,
        streams=streams,
        speedups=speedups,
        trace=load_trace_rates(str(settings.get("trace", "taxi_last_month")), allowed_trace_dirs()),
        rate_scale=float(settings.get("rateScale", 1.0)),
        noise=float(settings.get("noise", 0.0)),
        seed=int(settings.get("seed", 0)),
        downtime_s=float(settings.get("downtimeS", 0.0)),
        carry_backlog=bool(settings.get("backlog", False)),
        latency_offset_s=float(settings.get("latencyOffsetMs", 0.0)) / 1000.0,
        path_latency_only=bool(settings.get("pathLatencyOnly", False)),
        controlled=frozenset(deployments),
        micro_batch=micro_batch_engine(settings.get("microBatch"), default_ms / 1000.0),
    )
    return app, initial


def micro_batch_engine(settings: dict | None, cost_s_per_record: float) -> MicroBatchEngine | None:
    """The ``microBatch`` connector setting (``autoscaler.schemas.connectors.MicroBatchSettings``, validated
    when applied) as the engine's parameters, at ``cost_s_per_record`` (s; each operator runs at its own service
    time, ``SimulatedMonitor._micro_batches``); None without it."""
    if not settings:
        return None
    return MicroBatchEngine(
        overhead_s=float(settings.get("overheadMs", 0.0)) / 1000.0,
        cost_s_per_record=cost_s_per_record,
        interval_s=float(settings["intervalMs"]) / 1000.0,
        partitions=settings.get("partitions"),
        scaling_exponent=float(settings.get("scalingExponent", 1.0)),
        penalty=float(settings.get("penalty", 1.0)),
        scale_in_penalty=float(settings.get("scaleInPenalty", 1.0)),
        settle_periods=int(settings.get("settlePeriods", SETTLE_PERIODS)),
        latency_offset_s=float(settings.get("latencyOffsetMs", 0.0)) / 1000.0,
    )


def build_simulated_connector(application) -> SimulatedConnector:
    """The simulated engine's connector of ``application``: its state and faults in the ``SimulatedEngine`` row."""
    app, initial = simulated_application(application)
    store = DbEngineStore(application.pk)
    connector = SimulatedConnector(app, initial, store)
    realizer = CountingRealizer(app, store, initial)
    connector._realizer = realizer
    connector._monitor = FaultInjectingMonitor(app, realizer, store)
    return connector
