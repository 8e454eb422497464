"""Observations of a Flink job from the JobManager's REST API.

Per declared operator (one job vertex, see ``binding``), at the end of the period:

- input rate (tuples/s): records the vertex's current attempt received (``read-records`` of the job details;
  ``write-records`` for a source vertex, which has no input) since the previous collect of the same attempt,
  divided by the time between the two readings (the job details' ``now``), i.e. the period's own average;
- utilisation: busy fraction over the same interval, ``accumulated-busy-time`` (ms, summed over subtasks) /
  (interval x parallelism);
- processing rate (tuples/s) = records processed per second (the input rate: Flink processes what enters or
  back-pressures it); the control plane derives the true processing rate of DS2 and the Flink autoscaler,
  processing rate / utilisation (what the vertex could process if never idle), from these two;
- service time (s per tuple per subtask) = busy fraction x parallelism / input rate;
- backlog (tuples) = the source's ``pendingRecords`` gauge where reported (the trace-driven source reports it);
- back-pressure: ``backPressuredTimeMsPerSecond / 1000`` (mean over subtasks), noted in ``reason``;
- end-to-end response time (s): mean and p95 of the sink's ``e2eLatencyMeanMs`` / ``e2eLatencyP95Ms`` gauges
  (windowed over the last seconds; records are stamped at creation), one value per source-to-sink path;
- operator response time (s): Flink reports no per-operator latency, so each path's time is split among its
  operators (``connectors.latency_share``): each gets its queueing estimate S / (1 - utilisation); the rest goes
  to a saturated operator when there is one (the bottleneck takes the blame for a violation, an idle operator on
  the same path does not), else in equal shares to the controlled operators (the path's fixed part);
- deployment: the vertex's parallelism, reported under the node types of the last known deployment.

Why counters and not Flink's per-second meters: ``numRecordsInPerSecond`` and ``busyTimeMsPerSecond`` average
the last 60 s, and right after a rescale the REST metric store still serves the previous attempt's values for
up to one fetch interval (``metrics.fetcher.update-interval``, 10 s by default; the managed cluster uses 2 s).
Scaling such a stale reading up for a fresh vertex reported 3-5x the real rate after every rescale (measured:
113 sentences/s for a real 25/s), which policies read as a load burst. The job details' counters belong to the
current attempt, so a restart can never mix attempts.

Which reading is used, per vertex (noted in ``reason``): the difference to an earlier collect of the same
attempt (same vertex start time, at least ``MIN_INTERVAL_S`` earlier; readings are kept per process) when there
is one; else, for a vertex running for ``METER_SPAN_S`` or longer, the 60-s meters (for periods of about a
minute they are the period's average); else the period is incomplete: the vertex (re)started during it, so its
counters cover only part of it and its meters have not settled. A rescale therefore costs one incomplete period
(the one in which it happened), and the next period is measured exactly.

Incomplete: the JobManager unreachable (or answering with an error) or no running job of that name/id (the
reason says which), job not RUNNING, a vertex not RUNNING (restarting) or (re)started within the period, a metric
missing/NaN, a vertex whose busy, idle and back-pressured times all stood still since the previous reading (the
metric store did not refresh: seen once on an overloaded TaskManager, it read as zero load), or a busy vertex
whose record count has not moved (e.g. while Python workers start) ->
``complete=False`` with the reason, never zeros.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from connectors.base import (
    JOB_FAILING_STATES,
    Cause,
    ConnectorError,
    Deployment,
    Monitor,
    OperatorMetrics,
    Period,
    PeriodMetrics,
    job_state_cause,
    worst_cause,
)
from connectors.flink.binding import BindingError, Vertex, resolve, vertices_of
from connectors.flink.rest import FlinkRest
from connectors.latency_share import share_path_latency

#: the cause of an operator whose metrics are not usable this period (the job runs; nothing failed)
MISSING = Cause.METRICS_MISSING
METER_SPAN_S = 60.0
#: two readings of the same attempt closer than this (s) are not differenced (stale metric store, jitter)
MIN_INTERVAL_S = 5.0
RATE_METRICS = ["numRecordsInPerSecond", "numRecordsOutPerSecond", "busyTimeMsPerSecond",
                "backPressuredTimeMsPerSecond"]  # fmt: skip
LATENCY_MEAN, LATENCY_P95, PENDING = "e2eLatencyMeanMs", "e2eLatencyP95Ms", "pendingRecords"


@dataclass(frozen=True)
class CounterSample:
    """One reading of a vertex attempt's counters: attempt start and reading time (ms since the epoch, the
    JobManager's clock), records received (sent, for a source) and busy time (ms, summed over subtasks)."""

    attempt_start_ms: float
    at_ms: float
    records: float
    busy_ms: float | None
    #: busy + idle + back-pressured time (ms, summed over subtasks): advances with the wall clock while the
    #: metric store is fresh, whatever the load
    accounted_ms: float | None = None


#: last reading per (REST URL, job id, vertex id); per process, because the control plane builds a connector
#: per tick. Bounded: the oldest entries go first.
_SAMPLES: dict[tuple[str, str, str], CounterSample] = {}
_MAX_SAMPLES = 4096


class _Stale(Exception):
    """The counters of a vertex did not advance at all between two readings (not even its idle time)."""


def _number(value: Any) -> float | None:
    return None if value is None or math.isnan(float(value)) else float(value)


def _remember(key: tuple[str, str, str], sample: CounterSample) -> CounterSample | None:
    """The previous reading of the same attempt at least ``MIN_INTERVAL_S`` older than ``sample``, if any.
    ``sample`` becomes the new baseline unless the previous one is of the same attempt and younger than that
    (so frequent collects difference over a long enough interval)."""
    previous = _SAMPLES.get(key)
    if previous is not None and previous.attempt_start_ms == sample.attempt_start_ms:
        if (sample.at_ms - previous.at_ms) / 1000.0 < MIN_INTERVAL_S:
            return None
    else:
        previous = None
    _SAMPLES.pop(key, None)
    _SAMPLES[key] = sample
    while len(_SAMPLES) > _MAX_SAMPLES:
        _SAMPLES.pop(next(iter(_SAMPLES)))
    return previous


def spread(deployment: Deployment, parallelism: int) -> Deployment:
    """``deployment`` if its replicas add up to ``parallelism``, else ``parallelism`` under its first type."""
    if sum(deployment.values()) == parallelism:
        return dict(deployment)
    node_type = sorted(deployment)[0] if deployment else "slot"
    return {node_type: parallelism}


class JobNotRunning(ConnectorError):
    """The JobManager answered and runs no (non-terminal) job of that name: nothing of the application runs."""


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
        if not jobs:
            raise JobNotRunning(
                f"no running Flink job named {self.job_name!r}" if self.job_name else "no running Flink job"
            )
        if len(jobs) != 1 and not self.job_name:
            raise ConnectorError(f"{len(jobs)} running Flink jobs and no jobName to choose one")
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
        """The period's observation; the JobManager unreachable or the job gone make it incomplete with the
        reason (no operator metrics at all, never zeros). A binding error (a declared operator without a vertex
        of its own) is a configuration error and is raised."""
        try:
            return self._collect(period)
        except BindingError:
            raise
        except JobNotRunning as exc:  # the JobManager answered: no job of that name runs (nor fails)
            return PeriodMetrics(
                period, {}, complete=False, reason=f"Flink unavailable: {exc}", cause=Cause.JOB_NOT_RUNNING
            )
        except ConnectorError as exc:
            return PeriodMetrics(
                period, {}, complete=False, reason=f"Flink unavailable: {exc}", cause=Cause.ENGINE_UNAVAILABLE
            )

    def _collect(self, period: Period) -> PeriodMetrics:
        job_id, job, bound = self.job.snapshot()
        if job.get("state") != "RUNNING":
            state = job.get("state")
            return PeriodMetrics(
                period, {}, complete=False, reason=f"job {job_id} is {state}", cause=job_state_cause(state)
            )
        rows = {v["id"]: v for v in job.get("vertices", [])}
        now_ms = float(job.get("now") or time.time() * 1000)
        ops: dict[str, OperatorMetrics] = {}
        latency: dict[str, tuple[float, float]] = {}
        for op, vertex in bound.items():
            ops[op] = self._operator(job_id, op, vertex, rows.get(vertex.id, {}), now_ms)
        for v in {v.id: v for v in vertices_of(job)}.values():
            values = self.job.rest.vertex_metrics(job_id, v.id, self._latency_names(job_id, v.id))
            mean, p95 = _metric(values, LATENCY_MEAN, "max"), _metric(values, LATENCY_P95, "max")
            if mean is not None and mean >= 0:
                latency[v.name] = (mean / 1000.0, (p95 if p95 is not None else mean) / 1000.0)
        path_rt: dict[str, float] = {}
        if latency:
            worst = max(latency.values())
            path_p95: dict[str, float] = {}
            for path in self.paths:
                path_rt["->".join(path)], path_p95["->".join(path)] = worst
            fractions = share_path_latency(ops, self.paths, path_rt, path_p95, controlled=self.deployments)
            for name, frac in fractions.items():
                note = f"response time = {frac:.0%} of the path's (queueing estimate and fixed part)"
                ops[name].reason = f"{ops[name].reason}; {note}" if ops[name].reason else note
        incomplete = {n: m for n, m in ops.items() if not m.complete}
        reason = "; ".join(f"{n}: {m.reason}" for n, m in incomplete.items())
        if not latency:
            reason = (reason + "; " if reason else "") + "no end-to-end latency reported by the sink"
        complete = not incomplete and bool(latency)
        # typed like its worst operator (a failed vertex makes the period failing); metrics missing otherwise
        causes = [m.cause for m in incomplete.values()] + ([] if latency else [Cause.METRICS_MISSING])
        cause = Cause.NONE if complete else worst_cause(causes)
        return PeriodMetrics(period, ops, path_rt, complete=complete, reason=reason, cause=cause)

    def _latency_names(self, job_id: str, vertex_id: str) -> list[str]:
        names = self.job.rest.vertex_metric_names(job_id, vertex_id)
        return [n for n in names if n.endswith((LATENCY_MEAN, LATENCY_P95))] or [LATENCY_MEAN]

    def _counter_rates(
        self, job_id: str, vertex: Vertex, row: dict[str, Any], is_source: bool, now_ms: float
    ) -> tuple[float, float | None, float] | None:
        """(records/s, busy fraction or None, interval s) from the difference of the current attempt's counters
        (job details) to an earlier reading of the same attempt, or None without such a reading."""
        counters = row.get("metrics") or {}
        records = counters.get("write-records" if is_source else "read-records")
        start_ms = float(row.get("start-time") or -1)
        if records is None or start_ms <= 0:
            return None
        busy_total = _number(counters.get("accumulated-busy-time"))
        parts = [_number(counters.get(f"accumulated-{k}-time")) for k in ("busy", "idle", "backpressured")]
        accounted = None if None in parts else sum(p for p in parts if p is not None)
        key = (self.job.rest.base_url, job_id, vertex.id)
        previous = _remember(key, CounterSample(start_ms, now_ms, float(records), busy_total, accounted))
        if previous is None:
            return None
        span_s, done = (now_ms - previous.at_ms) / 1000.0, float(records) - previous.records
        if done < 0:
            return None
        if accounted is not None and previous.accounted_ms is not None and accounted == previous.accounted_ms:
            raise _Stale(
                f"vertex {vertex.name!r}: no time accounted (busy, idle, back-pressured) in {span_s:.0f} s"
            )
        busy = None
        if busy_total is not None and previous.busy_ms is not None and busy_total >= previous.busy_ms:
            busy = min((busy_total - previous.busy_ms) / (span_s * 1000.0 * max(vertex.parallelism, 1)), 1.0)
        return done / span_s, busy, span_s

    def _operator(
        self, job_id: str, op: str, vertex: Vertex, row: dict[str, Any], now_ms: float
    ) -> OperatorMetrics:
        dep = spread(self.deployments.get(op, {}), vertex.parallelism)
        status = row.get("status", "")
        running_s = (now_ms - float(row.get("start-time") or now_ms)) / 1000.0
        if status != "RUNNING":  # failing or failed: the job's failure; otherwise (re)starting, no data yet
            cause = Cause.JOB_FAILING if status in JOB_FAILING_STATES else Cause.METRICS_MISSING
            return OperatorMetrics(
                op, dep, complete=False, reason=f"vertex {vertex.name!r} is {status}", cause=cause
            )
        is_source = op in self.sources
        try:
            counted = self._counter_rates(job_id, vertex, row, is_source, now_ms)
        except _Stale as stale:  # the REST metric store did not refresh: the counters say nothing
            return OperatorMetrics(
                op, dep, complete=False, reason=f"{stale}: metric store not refreshed", cause=MISSING
            )
        if counted is None and running_s < METER_SPAN_S:
            why = (
                f"vertex {vertex.name!r} (re)started {running_s:.0f} s ago: its counters cover only part of "
                "the period and its meters are not settled"
            )
            return OperatorMetrics(op, dep, complete=False, reason=why, cause=MISSING)
        names = list(RATE_METRICS)
        if is_source:
            names += [n for n in self.job.rest.vertex_metric_names(job_id, vertex.id) if n.endswith(PENDING)]
        values = self.job.rest.vertex_metrics(job_id, vertex.id, names)
        rate_name = "numRecordsOutPerSecond" if is_source else "numRecordsInPerSecond"
        backlog = _metric(values, PENDING, "sum")
        if counted is not None:
            rate, busy, span_s = counted
            how = f"counters over the last {span_s:.0f} s"
        else:
            rate = _metric(values, rate_name, "sum")
            if rate is None:
                why = f"vertex {vertex.name!r}: no {rate_name}"
                return OperatorMetrics(op, dep, complete=False, reason=why, cause=MISSING)
            busy_ms = _metric(values, "busyTimeMsPerSecond", "avg")
            busy = None if busy_ms is None else min(max(busy_ms / 1000.0, 0.0), 1.0)
            how = "60-s meters"
        if busy is None and not is_source:  # legacy sources report no busy time
            return OperatorMetrics(
                op, dep, complete=False, reason=f"vertex {vertex.name!r}: no busy time", cause=MISSING
            )
        if rate <= 0 and (busy or 0) > 0.05:
            # busy but no record counted: the counters have not caught up (e.g. Python workers starting)
            why = f"vertex {vertex.name!r}: busy {busy:.2f} but no records counted yet"
            return OperatorMetrics(op, dep, complete=False, reason=why, cause=MISSING)
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
        notes = [f"rates from {how}"]
        if bp is not None:
            notes.append(f"backPressured={bp / 1000.0:.3f}")
        m.reason = "; ".join(notes)
        return m
