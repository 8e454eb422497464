"""Observations of a Spark application from the progress its agents shipped (read from a
``connectors.spark.store.SparkStore``).

Per controlled operator (one streaming query) and period ``[start, end)``, from the micro-batches whose trigger
started in the period:

- input rate (tuples/s) = rows of the period's batches plus the growth of the backlog when the source reports one
  (rows not yet taken into a batch, reported when a batch ends), from the last batch before the period (a period
  holding a single batch shows the growth too), over the time those arrivals took: from the end of the batch
  before the period to the end of its last batch. Without a backlog, the rows over the time from the trigger of
  the batch before to that of the last one (a batch takes what arrived since its predecessor's trigger). When the
  batch before is not of the same stream of batches (an idle stretch between, or none), over the period's length
  (``_arrival_spans``: the period's length aliases when batches outlast the trigger interval);
- processing rate (tuples/s) = rows processed over the same time (from the trigger of the batch before);
- utilisation = busy fraction of the period: sum of batch durations / period length, capped at 1 (with a
  trigger interval T a query that needs D <= T per batch is D/T busy);
- response time: mean (s) = record-weighted mean of the sink's ``e2e`` observed metrics and
  ``report_latency`` samples; p95 (s) = the largest per-batch p95 (conservative). An operator whose query runs
  downstream of another controlled operator gets its own share: its end-to-end time minus the largest upstream
  one. Without sink latencies the estimate is mean batch duration + T/2 (waiting for the trigger, then
  processed), flagged in ``reason``;
- backlog (tuples) = the sources' reported backlog at the end of the period, else the estimate
  input rate x max(0, mean batch duration - T) (what piles up while the query is slower than the trigger);
- service time (s per tuple per executor) = busy time x executors / rows;
- micro-batches (for ``policies.engine_model``): mean batch duration (s), mean records per batch, the trigger
  interval (s) and the partitions of the stateful stage when the progress reports them;
- a period in which no micro-batch started because one has been running since before it (the driver's REST API
  lists a running job submitted before the period) is overload, not missing data: complete, utilisation 1, the
  input rate and a lower bound of the response time estimated from the batch before it (``_stalled``);
- deployment = active executors from the driver's REST API ``<uiUrl>/api/v1/applications/<id>/executors``
  (falling back to the count the agent last reported), under the profile's node-type name.

A period without samples, or whose samples cover less than ``MIN_COVERAGE`` of it, is ``complete=False`` with
the reason; an operator with no executor is incomplete ("operator has no running replica"), and so is a period
holding the first micro-batch of a query run (a start, or a restart from the checkpoint after a profile change:
no earlier batch of the same run id is stored; its duration is the query's start-up, not load, and taken as load
it would teach a policy that one executor violates at almost no input). Never zeros. Each incomplete operator has a
typed cause (``Cause.NO_RUNNING_REPLICA`` without an executor, ``Cause.METRICS_MISSING`` otherwise), and the
period the worst of them (``connectors.base.worst_cause``): the control loop acts on the period's cause.
Path response time (s) = the largest end-to-end mean among the controlled operators of the path (records are
stamped at creation, so the most downstream sink sees the whole path).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from connectors.base import (
    Cause,
    Deployment,
    Monitor,
    OperatorMetrics,
    Period,
    PeriodMetrics,
    worst_cause,
)
from connectors.endpoints import AllowList
from connectors.http_fetch import FetchError, fetch_json
from connectors.spark.store import STAGE_TASKS_KEY, DriverState, OperatorKey, ProgressRecord, SparkStore

MIN_COVERAGE = 0.5
REST_TIMEOUT_S = 3.0


@dataclass
class Binding:
    """One controlled operator: its key in the ``SparkStore``, driver UI override, the controlled operators
    upstream of it, the endpoints whose driver UIs may be asked (``allowed``; none by default: a URL the job's
    agent reports is contacted only when staff declared it, see ``connectors.endpoints``) and the node type its
    executors are named after when neither the driver nor the desired state names a profile (``declared_type``:
    the declared deployment's type with the most replicas)."""

    operator: OperatorKey
    ui_url: str | None
    upstream: list[str]
    fallback_ui_url: str = ""
    allowed: AllowList = field(default_factory=lambda: AllowList([]))
    declared_type: str = "executor"


def rest_executors(ui_url: str, app_id: str = "", timeout_s: float = REST_TIMEOUT_S) -> list[dict[str, Any]]:
    """Active executors (not the driver) of the application at a driver's UI URL (the first one if no id).
    ``FetchError`` when the driver cannot be asked (``connectors.http_fetch``: no redirect followed)."""
    base = ui_url.rstrip("/") + "/api/v1/applications"
    if not app_id:
        apps = fetch_json(base, timeout_s)
        if not apps:
            return []
        app_id = apps[0]["id"]
    rows = fetch_json(f"{base}/{app_id}/executors", timeout_s)
    return [r for r in rows if r.get("id") != "driver" and r.get("isActive", True)]


def driver_ui(binding: Binding, status: DriverState | None) -> tuple[str, str]:
    """(driver UI URL the monitor may ask, or "", and why a reported one is skipped) for the operator's driver
    ``status`` (None when never seen)."""
    ui = binding.ui_url or (status.ui_url if status else "") or binding.fallback_ui_url
    if ui and not binding.allowed.allows(ui):  # never a request to an address staff did not declare
        return "", f" (driver UI {ui!r} is not a declared endpoint: not contacted)"
    return ui, ""


@dataclass(frozen=True)
class RunningBatch:
    """What the driver runs now: the submission time (s since the epoch) of its oldest running job, and the
    micro-batch that job belongs to when its description says so (Structured Streaming describes a batch's jobs
    as ``id = <query id> / runId = <run id> / batch = <n>``): ``batch_id`` None and ``run_id`` "" otherwise."""

    since: float
    batch_id: int | None = None
    run_id: str = ""


def _job_batch(description: str) -> tuple[int | None, str]:
    """(micro-batch id, run id) from a streaming job's description, (None, "") when it names no batch."""
    fields = {}
    for line in description.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            fields[key.strip()] = value.strip()
    batch = fields.get("batch", "")
    return (int(batch) if batch.isdigit() else None), fields.get("runId", "")


def running_batch(ui_url: str, app_id: str = "", timeout_s: float = REST_TIMEOUT_S) -> RunningBatch | None:
    """The oldest job the driver runs now (a micro-batch in flight), None when it runs none. ``FetchError`` when
    the driver cannot be asked."""
    base = ui_url.rstrip("/") + "/api/v1/applications"
    if not app_id:
        apps = fetch_json(base, timeout_s)
        if not apps:
            return None
        app_id = apps[0]["id"]
    jobs = fetch_json(f"{base}/{app_id}/jobs?status=running", timeout_s)
    oldest: RunningBatch | None = None
    for job in jobs or []:
        text = str(job.get("submissionTime", ""))  # e.g. 2026-11-28T16:42:55.300GMT
        try:
            when = dt.datetime.strptime(text.replace("GMT", ""), "%Y-%m-%dT%H:%M:%S.%f")
        except ValueError:
            continue
        since = when.replace(tzinfo=dt.UTC).timestamp()
        if oldest is None or since < oldest.since:
            batch, run = _job_batch(str(job.get("description") or ""))
            oldest = RunningBatch(since, batch, run)
    return oldest


def running_deployment(store: SparkStore, binding: Binding) -> tuple[Deployment, str]:
    """``({node type: executors}, source)`` with source ``rest``, ``agent`` or ``none``."""
    status = store.driver(binding.operator)
    desired = store.desired(binding.operator)
    profile = (status.profile if status and status.profile else None) or desired.profile
    name = (profile or {}).get("name") or binding.declared_type
    ui, skipped = driver_ui(binding, status)
    if ui:
        try:
            n = len(rest_executors(ui, status.app_id if status and not binding.ui_url else ""))
            return ({name: n} if n else {}), "rest"
        except (FetchError, ValueError, KeyError, TypeError, AttributeError):
            pass  # the agent's own count below
    if status is not None and status.executors is not None:
        return ({name: status.executors} if status.executors else {}), "agent" + skipped
    return {}, "none" + skipped


class SparkMonitor(Monitor):
    """Builds ``PeriodMetrics`` from the progress samples in ``store`` (see module docstring)."""

    def __init__(
        self,
        bindings: dict[str, Binding],
        paths: list[list[str]],
        batch_interval_s: float,
        store: SparkStore,
    ) -> None:
        self.bindings = bindings
        self.paths = paths
        self.batch_interval_s = batch_interval_s
        self.store = store

    def collect(self, period: Period) -> PeriodMetrics:
        ops: dict[str, OperatorMetrics] = {}
        e2e: dict[str, float] = {}
        for name, binding in self.bindings.items():
            m, mean_e2e = self._operator(name, binding, period)
            ops[name] = m
            if mean_e2e is not None:
                e2e[name] = mean_e2e
        for name, binding in self.bindings.items():  # own share of the end-to-end time
            m = ops[name]
            ups = [e2e[u] for u in binding.upstream if u in e2e]
            if ups and name in e2e and m.response_time_s is not None:
                m.response_time_s = max(e2e[name] - max(ups), 0.0)
        path_rt = {}
        for path in self.paths:
            measured = [e2e[n] for n in path if n in e2e]
            if measured:
                path_rt["->".join(path)] = max(measured)
        incomplete = {n: m for n, m in ops.items() if not m.complete}
        return PeriodMetrics(
            period,
            ops,
            path_rt,
            complete=not incomplete,
            reason="; ".join(f"{n}: {m.reason}" for n, m in incomplete.items()),
            # typed like its worst operator: the control loop acts on the period's cause (an operator without
            # a running replica makes the rollback rail restore the deployment before a reconfiguration)
            cause=worst_cause(m.cause or Cause.METRICS_MISSING for m in incomplete.values()),
        )

    def _operator(self, name: str, binding: Binding, period: Period) -> tuple[OperatorMetrics, float | None]:
        """One operator's observation for the period, and its sink's end-to-end mean (s) when reported."""
        store = self.store
        deployment, source = running_deployment(store, binding)
        samples = store.progress(binding.operator, period.start, period.end)
        if not samples:
            why = "operator has no running replica"
            if deployment:
                stalled, why = _stalled(
                    store, name, binding, period, deployment, self.batch_interval_s, source
                )
                if stalled is not None:
                    return stalled, stalled.response_time_s
            return OperatorMetrics(
                name,
                deployment,
                complete=False,
                reason=f"no progress from the Spark job in this period ({why})",
                cause=Cause.METRICS_MISSING,
            ), None
        length = period.length_s
        t = self.batch_interval_s
        first = samples[0].timestamp
        last = samples[-1].timestamp + max((samples[-1].batch_duration_ms or 0) / 1000.0, t)
        coverage = (min(last, period.end) - max(first - t, period.start)) / length
        if coverage < MIN_COVERAGE:
            return OperatorMetrics(
                name,
                deployment,
                complete=False,
                reason=f"partial period: progress covers {coverage:.0%} of it",
                cause=Cause.METRICS_MISSING,
            ), None
        if not deployment:
            return OperatorMetrics(
                name,
                deployment,
                complete=False,
                reason=f"operator has no running replica (executors via {source})",
                cause=Cause.NO_RUNNING_REPLICA,
            ), None
        if _holds_a_first_batch(store, binding.operator, samples):
            return OperatorMetrics(
                name,
                deployment,
                complete=False,
                reason="query starting: the period holds its first micro-batch (start-up time, not load)",
                cause=Cause.METRICS_MISSING,
            ), None
        rows = sum(s.num_input_rows for s in samples)
        durations = [(s.batch_duration_ms or 0.0) / 1000.0 for s in samples]
        busy = sum(durations)
        backlogs = [s.backlog for s in samples if s.backlog is not None]
        prev = store.last_progress_before(binding.operator, period.start)
        spans = _arrival_spans(prev, samples, t)
        if spans is not None and prev is not None and prev.backlog is not None and backlogs:
            # arrivals between the end of the batch before the period and the end of its last batch (the source
            # reports its backlog when a batch ends): what the period's batches read plus the backlog's growth
            processing = rows / spans[0]
            input_rate = max((rows + backlogs[-1] - prev.backlog) / spans[1], 0.0)
        else:
            before = None if prev is None or prev.backlog is None or not backlogs else float(prev.backlog)
            if (
                before is not None
            ):  # from the end of the batch before the period: a single batch shows growth too
                growth = (backlogs[-1] - before) / length
            else:
                growth = (backlogs[-1] - backlogs[0]) / length if len(backlogs) >= 2 else 0.0
            processing = rows / (length if spans is None else spans[0])
            input_rate = max(processing + growth, 0.0)
        mean_d = busy / len(samples)
        backlog = backlogs[-1] if backlogs else input_rate * max(0.0, mean_d - t)
        n_lat, sum_lat, p95 = 0, 0.0, None
        for s in samples:
            if s.e2e_mean_s is not None and s.e2e_n:
                n_lat += s.e2e_n
                sum_lat += s.e2e_mean_s * s.e2e_n
            if s.e2e_p95_s is not None and s.e2e_n:
                p95 = max(p95 or 0.0, s.e2e_p95_s)
        for lat in store.latencies(binding.operator, period.start, period.end):
            if lat.n:
                n_lat += lat.n
                sum_lat += lat.mean_s * lat.n
                p95 = max(p95 or 0.0, lat.p95_s)
        reason = f"executors via {source}"
        if n_lat:
            rt = sum_lat / n_lat
            e2e = rt
        else:
            rt, e2e = mean_d + t / 2.0, None
            p95 = max(durations) + t
            reason += "; response time estimated from batch durations (no sink latency reported)"
        executors = sum(deployment.values())
        return (
            OperatorMetrics(
                operator=name,
                deployment=deployment,
                input_rate=input_rate,
                processing_rate=processing,
                utilisation=min(busy / length, 1.0),
                response_time_s=rt,
                response_time_p95_s=p95,
                service_time_mean_s=(busy * executors / rows) if rows else None,
                backlog=backlog,
                reason=reason,
                batch_duration_s=mean_d,
                batch_records=rows / len(samples),
                partitions=_partitions(samples),
                batch_interval_s=t,
            ),
            e2e,
        )


def _stalled(
    store: SparkStore,
    name: str,
    binding: Binding,
    period: Period,
    deployment: Deployment,
    interval_s: float,
    source: str,
) -> tuple[OperatorMetrics | None, str]:
    """The observation of a period in which no micro-batch started because the query was busy with batches
    triggered before it (overload: the query is slower than its input), and "". ``(None, why not)`` otherwise (an
    idle query, or one that cannot be asked: the period stays without data, and the reason says why).

    The batch in flight is the one after the last finished batch (triggered before the period) when the driver's
    running job names it (its description), or when its oldest running job was submitted within a trigger
    interval of that batch's end; it started when the last batch ended, or at the next trigger when the last
    batch took less than an interval. It holds what arrived since the last batch was triggered, so the input rate
    is estimated as the last batch's records over the time between its trigger and the one before it (the time
    its records took to arrive; at least one interval; the batch's own duration without an earlier batch of the
    same run), the response time as the in-flight time plus half the time the batch in flight took to fill (a
    lower bound: its records are not out yet; at least what the last batch's records took), utilisation 1, no
    processing rate and no micro-batch sample (nothing finished to learn from).

    When the driver already runs the batch after the next one, the next one finished before the tick and its
    progress is still on its way (the agent ships after a batch ends): that batch is the one the period held, its
    time in flight ends when the running one began, and the same estimates apply. Two or more batches without
    progress are an agent that lags, not a stall: no data."""
    status = store.driver(binding.operator)
    ui, skipped = driver_ui(binding, status)
    if status is None or not ui:
        return None, "the driver's UI is unknown" + skipped
    if status.last_seen < period.start:
        return None, "the job's agent has not reported in the period"
    try:
        running = running_batch(ui, status.app_id if not binding.ui_url else "")
    except (FetchError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"the driver could not be asked for running jobs ({exc})"
    if running is None:
        return None, "the driver runs no job (idle)"
    last = store.last_progress_before(binding.operator, period.start)
    if last is None or not last.num_input_rows:
        return None, "no earlier batch with records to estimate from"
    last_start = last.timestamp
    last_d = (last.batch_duration_ms or 0.0) / 1000.0
    last_end = last_start + last_d
    same_run = running.batch_id is not None and running.run_id in ("", last.run_id)
    ahead = (running.batch_id or 0) - last.batch_id if same_run else 0  # batches past the last one received
    named_next = ahead == 1
    # the driver runs the batch after the next: the next one finished (when the one running now began, at the
    # latest) but its progress has not reached the control plane yet; it is the batch the period held (more
    # batches without progress are an agent that lags: no data)
    unshipped = ahead == 2
    if ahead > 2:
        return None, (
            f"the driver runs batch {running.batch_id}, the progress of batches {last.batch_id + 1}.."
            f"{last.batch_id + ahead - 1} has not been received"
        )
    end = period.end
    if unshipped:
        started = last_end if last_d >= interval_s else last_start + interval_s
        busy_since, end = last_start, min(max(running.since, started), period.end)
    elif named_next or running.since - last_end <= interval_s:  # the batch in flight followed the last one
        started = last_end if last_d >= interval_s else last_start + interval_s
        started, busy_since = min(started, running.since), last_start
    else:  # the query sat idle in between: the batch in flight began with its oldest running job
        started = busy_since = running.since
    if busy_since > period.start + interval_s:
        return None, f"the running job began {busy_since - period.start:.1f} s into the period (not a stall)"
    before = store.batch(binding.operator, last.run_id, last.batch_id - 1)
    arrival_s = last_start - before.timestamp if before is not None else last_d
    arrival_s = max(arrival_s, interval_s)
    rate = last.num_input_rows / arrival_s
    # the batch in flight holds what arrived while the last one ran (over ``window``); when the last batch ran past
    # the period's end (its record came before the tick), nothing was in flight yet, and what the last batch's
    # records took (half their arrival time waiting, then the batch) bounds the response time instead
    window = max(started - last_start, interval_s)
    in_flight = max(end - started, 0.0)
    return OperatorMetrics(
        operator=name,
        deployment=deployment,
        input_rate=rate,
        processing_rate=None,
        utilisation=1.0,
        response_time_s=max(in_flight + window / 2.0, last_d + arrival_s / 2.0),
        response_time_p95_s=max(in_flight + window, last_d + arrival_s),
        backlog=rate * in_flight,
        reason=f"executors via {source}; "
        + (
            f"batch {last.batch_id + 1} ran for {in_flight:.1f} s in the period and finished (batch "
            f"{running.batch_id} runs now), its progress not received yet"
            if unshipped
            else f"no micro-batch finished or started in the period: one has run for {in_flight:.1f} s (overload)"
        )
        + "; input rate and response time estimated from the batch before it",
        batch_interval_s=interval_s,
    ), ""


def _arrival_spans(
    prev: ProgressRecord | None, samples: list[ProgressRecord], interval_s: float
) -> tuple[float, float] | None:
    """The seconds over which the period's batches took their rows, when the batch before the period (``prev``)
    ran in the same stream of batches (the first batch of the period was triggered within 1.5 trigger intervals
    of its end: no idle stretch between), else None. A batch takes what arrived since its predecessor's trigger,
    so the rows of the period's batches arrived between the trigger of ``prev`` and that of the period's last
    batch (first value); the backlog a source reports when a batch ends spans the batches' ends (second value).

    Dividing by the period's length instead aliases whenever batches outlast the trigger interval: batches of 7 s
    in 15-s periods put two batches in one period and three in the next, and the rate read swung by +-40 % around
    the true one (bench_spark, 2 Dec: 67-193 tuples/s read while 155-163 arrived), enough to scale in at a peak."""
    if prev is None or not samples:
        return None
    prev_end = prev.timestamp + (prev.batch_duration_ms or 0.0) / 1000.0
    if samples[0].timestamp - prev_end > 1.5 * interval_s:
        return None
    last = samples[-1]
    by_trigger = last.timestamp - prev.timestamp
    by_end = last.timestamp + (last.batch_duration_ms or 0.0) / 1000.0 - prev_end
    if by_trigger <= 0.0 or by_end <= 0.0:
        return None
    return by_trigger, by_end


def _partitions(samples: list[ProgressRecord]) -> int | None:
    """Partitions of the query's parallel work, the largest of the period's batches: its stateful stage's
    (``stateOperators[].numShufflePartitions`` in the progress JSON), else the tasks of the widest stage the
    job's agent saw the batch run (``STAGE_TASKS_KEY``: a stateless query reports no state operators); None when
    no kept progress reports either (raw JSON pruned, an agent without the status tracker)."""
    found = [
        int(op["numShufflePartitions"])
        for s in samples
        for op in ((s.raw or {}).get("stateOperators") or [])
        if isinstance(op, dict)
        and isinstance(op.get("numShufflePartitions"), int)
        and op["numShufflePartitions"] > 0
    ]
    if not found:
        found = [
            int(t)
            for s in samples
            if isinstance(t := (s.raw or {}).get(STAGE_TASKS_KEY), int) and not isinstance(t, bool) and t > 0
        ]
    return max(found) if found else None


def _holds_a_first_batch(store: SparkStore, operator: OperatorKey, samples: list[ProgressRecord]) -> bool:
    """Whether the period's ``samples`` hold the first micro-batch of a query run: no stored batch of the same run
    id is older. Batch ids continue across a restart from the checkpoint while the run id changes; the batch just
    before one of the period is seconds old, well within the samples' retention. One store lookup per run."""
    first: dict[str, int] = {}
    for s in samples:
        first[s.run_id] = min(first.get(s.run_id, s.batch_id), s.batch_id)
    return any(not store.has_batch_before(operator, run, batch) for run, batch in first.items())
