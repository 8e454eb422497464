"""Engine faults of the Flink connector against a scripted JobManager REST endpoint on 127.0.0.1
(``fake_jobmanager``): a job cancelled or failed during a rescale, a JobManager that vanishes mid-apply or is
unreachable. The connector must never report success, never raise out of ``apply``, never report the target as
running after a failure, and an unreachable JobManager must be an incomplete period, never zero load."""

from __future__ import annotations

import threading

import pytest
from fake_jobmanager import JOB_ID, FakeJob, FakeJobManager

from connectors.base import Period, ScalingPlan
from connectors.flink.connector import build
from connectors.flink.rest import FlinkRest

OPERATORS = ["sentences", "splitter", "counter", "top"]
STREAMS = [("sentences", "splitter"), ("splitter", "counter"), ("counter", "top")]
DEPLOYMENTS = {"splitter": {"vm.small": 2}, "counter": {"vm.small": 2}}


def connector_for(url: str, timeout_s: float = 30.0):
    settings = {"restUrl": url, "jobName": "wc", "applyTimeoutS": timeout_s, "restTimeoutS": 2.0}
    return build(settings, OPERATORS, STREAMS, {k: dict(v) for k, v in DEPLOYMENTS.items()})


def test_a_job_cancelled_during_its_rescale_is_reported_gone_and_nothing_runs():
    with FakeJobManager(on_put=lambda job, n: job.end("CANCELED")) as jm:
        conn = connector_for(jm.url, timeout_s=120.0)
        result = conn.realizer.apply(ScalingPlan({"counter": {"vm.small": 3}}, slot=5))
        assert not result.ok and not result.rolled_back
        assert (
            "job gone" in result.error
            and "is CANCELED" in result.error
            and "nothing to restore" in result.error
        )
        assert "vertex 'counter': target parallelism 3" in result.error
        assert result.details["job_gone"] is True and result.details["restored"] is False
        # the job ended before the timeout (120 s): the realizer stopped waiting at the terminal state
        assert result.details["elapsed_s"] < 120.0
        assert result.deployments == {op: {} for op in OPERATORS}  # nothing runs
        assert len(jm.job.puts) == 1  # no restore sent to a cancelled job
        # the realizer (and the monitor, which shares its view) keep the previous deployment, not the target
        assert (
            conn.realizer.deployments == DEPLOYMENTS and conn.monitor.deployments is conn.realizer.deployments
        )
        metrics = conn.monitor.collect(Period(4, 0.0, 60.0))
        assert not metrics.complete and metrics.operators == {}
        assert "Flink unavailable: no running Flink job named 'wc'" in metrics.reason
        assert metrics.cause == "job_not_running"


def _restart_then(job: FakeJob, n: int) -> None:
    """First PUT: the job restarts and comes back at its old parallelism (2 slots only); second PUT (the
    restore): the job fails."""
    if n == 1:
        job.state = "RESTARTING"
        threading.Timer(0.6, lambda: setattr(job, "state", "RUNNING")).start()
    else:
        job.end("FAILED")


def test_a_restore_that_ends_in_a_failed_job_is_not_reported_as_rolled_back():
    with FakeJobManager(on_put=_restart_then) as jm:
        jm.job.slots_total = 2
        conn = connector_for(jm.url, timeout_s=120.0)
        result = conn.realizer.apply(ScalingPlan({"counter": {"vm.small": 3}}, slot=5))
        assert not result.ok and not result.rolled_back
        assert "insufficient slots: 3 needed, 2 in the cluster" in result.error
        assert "restore not verified" in result.error and "is FAILED" in result.error
        assert result.details["restored"] is False
        assert [p["v3"]["parallelism"]["upperBound"] for p in jm.job.puts] == [3, 2]  # target, then restore
        assert result.deployments == {op: {} for op in OPERATORS}
        assert conn.realizer.deployments == DEPLOYMENTS


def test_a_jobmanager_vanishing_after_the_request_fails_the_apply_without_raising():
    holder: dict[str, FakeJobManager] = {}
    jm = FakeJobManager(on_put=lambda job, n: threading.Timer(0.05, holder["jm"].stop).start())
    holder["jm"] = jm
    with jm:
        conn = connector_for(jm.url, timeout_s=2.0)
        result = conn.realizer.apply(ScalingPlan({"counter": {"vm.small": 3}}, slot=5))
    assert not result.ok and not result.rolled_back
    assert "timeout after 2 s" in result.error and "restore failed" in result.error
    assert result.details["restored"] is False
    assert len(jm.job.puts) == 1
    # what the engine ran before (the last known deployment), never the target
    assert result.deployments == DEPLOYMENTS and conn.realizer.deployments == DEPLOYMENTS


def test_an_unreachable_jobmanager_is_an_incomplete_period_and_a_failed_apply_never_zero_load():
    jm = FakeJobManager()
    jm.stop()  # the port is closed: connection refused
    conn = connector_for(jm.url)
    metrics = conn.monitor.collect(Period(7, 0.0, 60.0))
    assert not metrics.complete and metrics.operators == {} and metrics.path_response_time_s == {}
    assert metrics.reason.startswith(f"Flink unavailable: JobManager at {jm.url} not reachable")
    assert metrics.cause == "engine_unavailable"
    result = conn.realizer.apply(ScalingPlan({"counter": {"vm.small": 3}}, slot=8))
    assert not result.ok and not result.rolled_back and result.details == {"unavailable": True}
    assert result.error.startswith(f"Flink unavailable: JobManager at {jm.url} not reachable")
    assert result.deployments == DEPLOYMENTS and conn.realizer.deployments == DEPLOYMENTS


APP = """
apiVersion: autoscaler/v1
kind: Application
metadata: {{name: wc-flink}}
spec:
  engine: flink
  connector: {{restUrl: "{url}", jobName: wc, applyTimeoutS: 10, restTimeoutS: 2}}
  slo: {{rMaxMs: 2000, etaV: 0.05, etaR: 0.1}}
  operators:
    - {{name: sentences, kind: source}}
    - {{name: splitter, kind: operator, maxParallelism: 8}}
    - {{name: counter, kind: operator, maxParallelism: 8}}
    - {{name: top, kind: sink}}
  streams: [[sentences, splitter], [splitter, counter], [counter, top]]
  policies: {{om: threshold}}
  periods: {{omS: 10, amS: 60}}
  regions: [vm-local]
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: wc-splitter}}
spec: {{application: wc-flink, operator: splitter, region: vm-local, replicas: {{vm.small: 2}}}}
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: wc-counter}}
spec: {{application: wc-flink, operator: counter, region: vm-local, replicas: {{vm.small: 2}}}}
"""


@pytest.mark.django_db
def test_a_tick_with_the_jobmanager_unreachable_records_no_data_with_the_reason(shared, alice, settings):
    settings.AUTOSCALER_ENGINE_ENDPOINTS = ["http://127.0.0.1:1024-65535"]  # staff declared the JobManager
    from autoscaler import manifests
    from autoscaler.control.models import AgentState, Decision, Tick
    from autoscaler.control.tick import forget_definitions, run_tick
    from autoscaler.models import Application

    jm = FakeJobManager()
    jm.stop()
    manifests.apply_documents(manifests.parse_documents(APP.format(url=jm.url)), alice)
    app = Application.objects.get(name="wc-flink")
    forget_definitions(app.pk)
    outcome = run_tick(app.pk, 1000)
    assert outcome.status == Tick.Status.NO_DATA and outcome.decisions == 2 and not outcome.applied
    tick = Tick.objects.get(application=app, slot=1000)
    assert (
        tick.error.startswith(f"Flink unavailable: JobManager at {jm.url} not reachable")
        and tick.plan is None
    )
    decisions = list(Decision.objects.filter(application=app, slot=1000))
    assert sorted(d.operator.name for d in decisions) == ["counter", "splitter"]
    for d in decisions:
        assert d.outcome == Decision.Outcome.NO_DATA and d.observed == {}
        assert "no data: Flink unavailable" in d.reason and "no learning" in d.reason
    assert not AgentState.objects.filter(operator__application=app).exists()  # nothing learned


def test_a_request_the_jobmanager_refuses_is_reported_refused_not_unavailable():
    """A 4xx answer (here a bound above the job's max parallelism) is the engine refusing the request: nothing
    was applied, and the error says so (it said "Flink unavailable", as for an unreachable JobManager)."""
    with FakeJobManager() as jm:
        jm.max_parallelism = 8
        conn = connector_for(jm.url)
        result = conn.realizer.apply(ScalingPlan({"counter": {"vm.small": 40}}, slot=5))
    assert not result.ok and not result.rolled_back
    assert result.error.startswith("Flink refused the reconfiguration") and "HTTP 400" in result.error
    assert result.details == {"refused": True} and not jm.job.puts
    assert result.deployments == DEPLOYMENTS and conn.realizer.deployments == DEPLOYMENTS


def test_incomplete_operators_give_the_period_a_typed_cause():
    """The control loop acts on the period's cause: operators whose metrics are not usable make it
    ``metrics_missing`` (it was ``none``), a failed vertex in a running job makes it failing (the rollback rail's
    ``FAILING_CAUSES``)."""
    from connectors.base import FAILING_CAUSES, Cause

    with FakeJobManager() as jm:  # a running job whose vertices report no metrics at all
        conn = connector_for(jm.url)
        metrics = conn.monitor.collect(Period(1, 0.0, 60.0))
        assert not metrics.complete and metrics.cause == Cause.METRICS_MISSING, metrics.reason
        incomplete = [m for m in metrics.operators.values() if not m.complete]
        assert incomplete and all(m.cause == Cause.METRICS_MISSING for m in incomplete)
        assert metrics.cause not in FAILING_CAUSES
        jm.job.vertices["v3"]["status"] = "FAILED"  # the counter's vertex
        metrics = conn.monitor.collect(Period(2, 60.0, 120.0))
        assert metrics.operators["counter"].cause == Cause.JOB_FAILING
        assert metrics.cause == Cause.JOB_FAILING and metrics.cause in FAILING_CAUSES, metrics.reason


def test_the_failure_cause_is_the_latest_root_exception_of_the_job():
    with FakeJobManager() as jm:
        rest = FlinkRest(jm.url)
        assert rest.failure_cause(JOB_ID) == ""
        jm.job.exceptions = [
            {"exceptionName": "java.io.IOException", "stacktrace": "disk full", "timestamp": 1},
            {"exceptionName": "NoResourceAvailableException", "stacktrace": "no slot" * 1000, "timestamp": 2},
        ]
        cause = rest.failure_cause(JOB_ID, limit=60)
        assert cause.startswith("NoResourceAvailableException: no slot") and len(cause) == 60
