"""Observations of a Flink job from the JobManager's REST API.

Per declared operator (one job vertex, see ``binding``), read at the end of the period (Flink's per-second meters
are moving averages over the last 60 s, so for periods of about a minute the reading is the period's average):

- input rate (tuples/s) = sum over subtasks of ``numRecordsInPerSecond`` (``numRecordsOutPerSecond`` for a source
  vertex, which has no input);
- utilisation = mean busy fraction of the subtasks, ``busyTimeMsPerSecond / 1000``;
- processing rate (tuples/s) = records processed per second (the input rate: Flink processes what enters or
  back-pressures it); the control plane derives the true processing rate of DS2 and the Flink autoscaler,
  processing rate / utilisation (what the vertex could process if never idle), from these two;
- service time (s per tuple per subtask) = busy fraction x parallelism / input rate;
- backlog (tuples) = the source's ``pendingRecords`` gauge where reported (the trace-driven source reports it);
- back-pressure: ``backPressuredTimeMsPerSecond / 1000`` (mean over subtasks), noted in ``reason``;
- end-to-end response time (s): mean and p95 of the sink's ``e2eLatencyMeanMs`` / ``e2eLatencyP95Ms`` gauges
  (windowed over the last seconds; records are stamped at creation), one value per source-to-sink path, and as
  every operator's response time (Flink reports no per-operator latency; the whole path is the conservative
  share, as for a Spark operator without an upstream controlled one);
- deployment: the vertex's parallelism, reported under the node types of the last known deployment.

Freshly (re)started vertices: Flink's meters divide the count of the last ``METER_SPAN_S`` seconds by that span
from the start of a task, so during its first minute they underestimate. A vertex running for less than
``SETTLE_S`` is incomplete ("metrics not settled"); up to ``METER_SPAN_S`` its rates are scaled by
``METER_SPAN_S / running time`` (noted in ``reason``).

Incomplete: job not RUNNING, a vertex not RUNNING (restarting) or not settled, a metric missing/NaN, a busy
vertex whose rate is still 0 (meters not updated yet, e.g. while Python workers start), or a vertex in its first
``METER_SPAN_S`` whose records flow but whose busy time is still exactly 0 (the gauge has not caught up) ->
``complete=False`` with the reason, never zeros.
"""

from __future__ import annotations

import math
import time
from typing import Any

from connectors.base import ConnectorError, Deployment, Monitor, OperatorMetrics, Period, PeriodMetrics
from connectors.flink.binding import Vertex, resolve, vertices_of
from connectors.flink.rest import FlinkRest

METER_SPAN_S = 60.0
SETTLE_S = 15.0
RATE_METRICS = ["numRecordsInPerSecond", "numRecordsOutPerSecond", "busyTimeMsPerSecond",
                "backPressuredTimeMsPerSecond"]  # fmt: skip
LATENCY_MEAN, LATENCY_P95, PENDING = "e2eLatencyMeanMs", "e2eLatencyP95Ms", "pendingRecords"


def spread(deployment: Deployment, parallelism: int) -> Deployment:
    """``deployment`` if its replicas add up to ``parallelism``, else ``parallelism`` under its first type."""
    if sum(deployment.values()) == parallelism:
        return dict(deployment)
    node_type = sorted(deployment)[0] if deployment else "slot"
    return {node_type: parallelism}


class FlinkJob:
    """The running job of a connector: finds it by id or by name, resolves operators to vertices."""

    def __init__(
        self, rest: FlinkRest, job_name: str | None, job_id: str | None, vertex_names: dict[str, str]
    ):
        self.rest = rest
        self.job_name = job_name
        self.job_id = job_id
        self.vertex_names = vertex_names

    def find(self) -> str:
        """The id of the job: ``job_id``, else the newest non-terminal job named ``job_name``."""
        if self.job_id:
            return self.job_id
        jobs = [j for j in self.rest.jobs() if j["state"] not in ("FINISHED", "CANCELED", "FAILED")]
        if self.job_name:
            jobs = [j for j in jobs if j["name"] == self.job_name]
        if len(jobs) != 1 and not self.job_name:
            raise ConnectorError(f"{len(jobs)} running Flink jobs and no jobName to choose one")
        if not jobs:
            raise ConnectorError(f"no running Flink job named {self.job_name!r}")
        return max(jobs, key=lambda j: j["start-time"])["jid"]

    def snapshot(self) -> tuple[str, dict[str, Any], dict[str, Vertex]]:
        """(job id, job details, operator -> vertex)."""
        job_id = self.find()
        job = self.rest.job(job_id)
        return job_id, job, resolve(self.vertex_names, vertices_of(job))


def _metric(values: dict[str, dict[str, float]], name: str, agg: str) -> float | None:
    for key, row in values.items():
        if key == name or key.endswith("." + name):
            v = row.get(agg)
            return None if v is None or math.isnan(v) else v
    return None


class FlinkMonitor(Monitor):
    def __init__(
        self,
        job: FlinkJob,
        deployments: dict[str, Deployment],
        paths: list[list[str]],
        sources: set[str],
    ) -> None:
        self.job = job
        self.deployments = deployments
        self.paths = paths
        self.sources = sources

    def collect(self, period: Period) -> PeriodMetrics:
        job_id, job, bound = self.job.snapshot()
        if job.get("state") != "RUNNING":
            return PeriodMetrics(period, {}, complete=False, reason=f"job {job_id} is {job.get('state')}")
        status = {v["id"]: v.get("status") for v in job.get("vertices", [])}
        now_ms = float(job.get("now") or time.time() * 1000)
        running_s = {
            v["id"]: (now_ms - float(v.get("start-time") or now_ms)) / 1000.0 for v in job["vertices"]
        }
        ops: dict[str, OperatorMetrics] = {}
        latency: dict[str, tuple[float, float]] = {}
        for op, vertex in bound.items():
            ops[op] = self._operator(
                job_id, op, vertex, status.get(vertex.id, ""), running_s.get(vertex.id, 0.0)
            )
        for v in {v.id: v for v in vertices_of(job)}.values():
            values = self.job.rest.vertex_metrics(job_id, v.id, self._latency_names(job_id, v.id))
            mean, p95 = _metric(values, LATENCY_MEAN, "max"), _metric(values, LATENCY_P95, "max")
            if mean is not None and mean >= 0:
                latency[v.name] = (mean / 1000.0, (p95 if p95 is not None else mean) / 1000.0)
        path_rt: dict[str, float] = {}
        if latency:
            worst = max(latency.values())
            for path in self.paths:
                path_rt["->".join(path)] = worst[0]
            for m in ops.values():
                if m.complete:
                    m.response_time_s, m.response_time_p95_s = worst
        incomplete = [f"{n}: {m.reason}" for n, m in ops.items() if not m.complete]
        reason = "; ".join(incomplete)
        if not latency:
            reason = (reason + "; " if reason else "") + "no end-to-end latency reported by the sink"
        return PeriodMetrics(period, ops, path_rt, complete=not incomplete and bool(latency), reason=reason)

    def _latency_names(self, job_id: str, vertex_id: str) -> list[str]:
        names = self.job.rest.vertex_metric_names(job_id, vertex_id)
        return [n for n in names if n.endswith((LATENCY_MEAN, LATENCY_P95))] or [LATENCY_MEAN]

    def _operator(
        self, job_id: str, op: str, vertex: Vertex, status: str, running_s: float
    ) -> OperatorMetrics:
        dep = spread(self.deployments.get(op, {}), vertex.parallelism)
        if status != "RUNNING":
            return OperatorMetrics(op, dep, complete=False, reason=f"vertex {vertex.name!r} is {status}")
        if running_s < SETTLE_S:
            why = f"vertex {vertex.name!r} running for {running_s:.0f} s: metrics not settled"
            return OperatorMetrics(op, dep, complete=False, reason=why)
        scale = METER_SPAN_S / running_s if running_s < METER_SPAN_S else 1.0
        names = list(RATE_METRICS)
        if op in self.sources:
            names += [n for n in self.job.rest.vertex_metric_names(job_id, vertex.id) if n.endswith(PENDING)]
        values = self.job.rest.vertex_metrics(job_id, vertex.id, names)
        rate_name = "numRecordsOutPerSecond" if op in self.sources else "numRecordsInPerSecond"
        rate = _metric(values, rate_name, "sum")
        busy_ms = _metric(values, "busyTimeMsPerSecond", "avg")
        if rate is None:
            return OperatorMetrics(op, dep, complete=False, reason=f"vertex {vertex.name!r}: no {rate_name}")
        backlog = _metric(values, PENDING, "sum")
        if busy_ms is None:
            if op not in self.sources:
                return OperatorMetrics(
                    op, dep, complete=False, reason=f"vertex {vertex.name!r}: no busy time"
                )
            busy = None  # legacy sources report no busy time
        else:
            busy = min(max(busy_ms / 1000.0, 0.0), 1.0)
        if busy == 0.0 and rate > 0 and op not in self.sources and running_s < METER_SPAN_S:
            # records flow but no busy time yet: the busy-time gauge has not caught up with a fresh vertex
            why = f"vertex {vertex.name!r}: no busy time measured yet ({running_s:.0f} s after start)"
            return OperatorMetrics(op, dep, complete=False, reason=why)
        if rate <= 0 and (busy or 0) > 0.05:
            # busy but no record counted: the meters have not caught up (e.g. Python workers starting)
            why = f"vertex {vertex.name!r}: busy {busy:.2f} but no {rate_name} yet (meters not updated)"
            return OperatorMetrics(op, dep, complete=False, reason=why)
        rate *= scale
        m = OperatorMetrics(
            operator=op,
            deployment=dep,
            input_rate=rate,
            processing_rate=rate,
            utilisation=busy,
            backlog=backlog,
            service_time_mean_s=(busy * vertex.parallelism / rate) if busy is not None and rate > 0 else None,
        )
        bp = _metric(values, "backPressuredTimeMsPerSecond", "avg")
        notes = [f"backPressured={bp / 1000.0:.3f}"] if bp is not None else []
        if scale != 1.0:
            notes.append(f"rates x{scale:.2f} (vertex running for {running_s:.0f} s)")
        m.reason = "; ".join(notes)
        return m
