"""Flink connector pieces that need no cluster: vertex resolution, settings validation, the trace schedule."""

from __future__ import annotations

import math
import time

import pytest

from autoscaler.schemas.connectors import validate_connector
from connectors.flink.binding import BindingError, Vertex, resolve
from connectors.flink.monitor import METER_SPAN_S, FlinkMonitor, spread
from connectors.flink.pipelines.trace_source import Schedule, expected_counts, is_stop_word, sentence

VERTICES = [
    Vertex("a1", "Source: ticks[1] -> TableToDataStream -> sentences", 1),
    Vertex("b2", "splitter, filter, _stream_key_by_map_operator", 2),
    Vertex("c3", "counter", 2),
    Vertex("d4", "top, Filter -> Sink: discard", 1),
]


def test_operators_resolve_to_the_vertex_that_chains_them():
    found = resolve({"sentences": "sentences", "split": "splitter", "counter": "counter"}, VERTICES)
    assert {op: v.id for op, v in found.items()} == {"sentences": "a1", "split": "b2", "counter": "c3"}
    assert VERTICES[0].operators == ["ticks", "TableToDataStream", "sentences"]


def test_missing_vertex_is_rejected_with_the_list_of_vertices():
    with pytest.raises(BindingError) as err:
        resolve({"counter": "counter", "joiner": "joiner"}, VERTICES)
    msg = str(err.value)
    assert "operator 'joiner': no job vertex contains an operator named 'joiner'" in msg
    assert "'counter'" not in msg.split(". Vertices")[0]
    assert err.value.vertices == [v.name for v in VERTICES]
    assert "splitter, filter, _stream_key_by_map_operator" in msg


def test_operators_chained_into_one_vertex_cannot_be_scaled_apart():
    with pytest.raises(BindingError, match=r"\['filter', 'splitter'\] are chained into the same vertex"):
        resolve({"splitter": "splitter", "filter": "filter"}, VERTICES)


def test_flink_settings_validate_and_name_the_bad_field():
    settings, errors = validate_connector("flink", {"restUrl": "http://127.0.0.1:9", "jobName": "wc"})
    assert not errors and settings["applyTimeoutS"] == 60.0 and settings["vertices"] == {}
    _, errors = validate_connector("flink", {"jobId": "not-an-id", "applyTimeoutS": 0})
    locs = {e.loc for e in errors}
    assert locs == {"spec.connector.jobId", "spec.connector.applyTimeoutS"}, errors


def test_deployment_is_kept_when_parallelism_matches_else_reported_under_its_main_type():
    assert spread({"vm.small": 1, "vm.large": 2}, 3) == {"vm.small": 1, "vm.large": 2}
    assert spread({"vm.small": 1, "vm.large": 2}, 5) == {"vm.large": 5}
    assert spread({}, 2) == {"slot": 2}


def test_trace_schedule_emits_the_trace_rates_exactly_and_deterministically():
    s = Schedule([10.0, 40.0, 0.0, 25.0], step_s=2.0, rate_scale=0.5, ticks_per_s=10.0)
    per_step = [sum(s.count(i) for i in range(k * 20, (k + 1) * 20)) for k in range(4)]
    assert per_step == [10, 40, 0, 25]  # rate x scale x step_s records per step
    assert s.first_index(80) == 75 and math.isclose(s.cumulative(3.0), 10 + 20 * 1.0)
    assert sentence(7) == sentence(7) and len(sentence(7).split()) == 5
    counts = expected_counts(s, 80)
    assert sum(counts.values()) == sum(
        1 for r in range(75) for w in sentence(r).split() if not is_stop_word(w)
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--runs", "static-peak,magic"], "--runs: unknown run(s) ['magic']"),
        (["--runs", "", "--policies", ""], "--runs: nothing to run"),
        (["--runs", "ds2", "--repeat", "0"], "--repeat: must be >= 1"),
        (["--cost-ms", "0"], "--cost-ms: must be > 0"),
    ],
)
def test_bench_flink_rejects_bad_options_before_starting_anything(args, message):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError) as err:
        call_command("bench_flink", *args)
    assert message in str(err.value)


class _MetricsOnly:
    """A REST stand-in that answers one vertex's metric query with fixed values (no cluster needed)."""

    base_url = "http://fake"

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def vertex_metrics(self, job_id: str, vertex_id: str, names: list[str]) -> dict[str, dict[str, float]]:
        return {n: {"sum": v, "avg": v} for n, v in self.values.items()}


class _Job:
    def __init__(self, values: dict[str, float]) -> None:
        self.rest = _MetricsOnly(values)


def _row(start_ms: float, records: float | None = None, busy_ms: float | None = None) -> dict:
    """A job-details vertex row: RUNNING since ``start_ms``, with the current attempt's counters if given."""
    metrics = {} if records is None else {"read-records": records, "accumulated-busy-time": busy_ms}
    return {"status": "RUNNING", "start-time": start_ms, "metrics": metrics}


# a stale metric store: the previous attempt's 60-s meters, 28 records/s and 400 ms busy per second
STALE_METERS = {
    "numRecordsInPerSecond": 28.0,
    "busyTimeMsPerSecond": 400.0,
    "backPressuredTimeMsPerSecond": 0.0,
}


def test_a_long_running_vertex_without_an_earlier_reading_is_read_from_its_meters():
    monitor = FlinkMonitor(_Job(STALE_METERS), {"splitter": {"vm.small": 2}}, [], {"sentences"})
    now_ms = 1e12
    row = _row(now_ms - (METER_SPAN_S + 5) * 1000.0, 90_000, 1e6)
    m = monitor._operator("job", "splitter", Vertex("b2", "splitter", 2), row, now_ms)
    assert m.complete and "60-s meters" in m.reason
    assert m.input_rate == pytest.approx(28.0) and m.utilisation == pytest.approx(0.4)


def test_rates_come_from_the_current_attempts_counters_not_from_stale_meters():
    """Right after a rescale the metric store still serves the previous attempt's meters (28/s here); the
    period of the restart is incomplete, the next one is the difference of the new attempt's counters."""
    monitor = FlinkMonitor(_Job(STALE_METERS), {"counter": {"vm.small": 3}}, [], {"sentences"})
    vertex, start = Vertex("c3", "counter", 3), 2e12
    first = monitor._operator("job", "counter", vertex, _row(start, 500, 6000.0), start + 20_000)
    assert not first.complete and first.input_rate is None and "(re)started 20 s ago" in first.reason
    # 2 s later: too short an interval to difference, still incomplete; the 20-s reading stays the baseline
    early = monitor._operator("job", "counter", vertex, _row(start, 560, 6600.0), start + 22_000)
    assert not early.complete
    # 30 s after the first reading: 1,400 more records (46.7/s), 3 subtasks busy 0.25 of the interval
    second = monitor._operator("job", "counter", vertex, _row(start, 1900, 6000.0 + 3 * 30_000 * 0.25),
                               start + 50_000)  # fmt: skip
    assert second.complete, second.reason
    assert second.input_rate == pytest.approx(1400 / 30) and second.utilisation == pytest.approx(0.25)
    assert "counters over the last 30 s" in second.reason
    assert second.service_time_mean_s == pytest.approx(0.25 * 3 / (1400 / 30))
    # another restart: the earlier attempt's reading is never differenced against the new attempt's counters
    third = monitor._operator("job", "counter", vertex, _row(start + 60_000, 300, 1500.0), start + 80_000)
    assert not third.complete and "(re)started 20 s ago" in third.reason
    fourth = monitor._operator("job", "counter", vertex, _row(start + 60_000, 600, 1500.0 + 3 * 20_000 * 0.1),
                               start + 100_000)  # fmt: skip
    assert fourth.input_rate == pytest.approx(15.0) and fourth.utilisation == pytest.approx(0.1)


def test_a_busy_vertex_whose_counters_did_not_move_is_incomplete():
    monitor = FlinkMonitor(_Job(STALE_METERS), {"counter": {"vm.small": 1}}, [], {"sentences"})
    vertex, start = Vertex("c5", "counter", 1), 3e12
    monitor._operator("job", "counter", vertex, _row(start, 0, 0.0), start + 10_000)
    m = monitor._operator("job", "counter", vertex, _row(start, 0, 9_000.0), start + 20_000)
    assert not m.complete and "no records counted yet" in m.reason


def test_pretraining_on_recorded_violations_makes_model_based_scale_out_where_a_fresh_one_does_not():
    import numpy as np

    from benchmarks.flink.runner import BenchConfig, _policy, pretrain
    from policies.base import Observation

    cfg = BenchConfig(trace="unused")

    def obs(k: int, rate: float, violated: bool) -> Observation:
        return Observation(np.array([k]), rate, 2.5 if violated else 0.5, violated, 0.5, True)

    # recorded history: one replica carries 40/s without violating and violates at 60/s and above
    history = [obs(1, r, r >= 60) for r in (20, 30, 40, 60, 70, 40, 65, 30)]
    fresh, trained = _policy("model-based", cfg, None), _policy("model-based", cfg, None)
    assert pretrain(trained, history) == len(history)
    now = obs(1, 80.0, False)
    assert int(trained.step(now).deployment.sum()) > 1  # knows one replica cannot carry 80/s
    assert int(fresh.step(now).deployment.sum()) <= 1  # optimistic until it has seen a violation


def test_counters_that_did_not_advance_at_all_are_a_stale_reading_not_zero_load():
    monitor = FlinkMonitor(_Job(STALE_METERS), {"counter": {"vm.small": 2}}, [], {"sentences"})
    vertex, start = Vertex("c7", "counter", 2), 4e12

    def row(records: float, busy: float, idle: float) -> dict:
        times = {
            "accumulated-busy-time": busy,
            "accumulated-idle-time": idle,
            "accumulated-backpressured-time": 0,
        }
        return {"status": "RUNNING", "start-time": start, "metrics": {"read-records": records, **times}}

    monitor._operator("job", "counter", vertex, row(900, 30_000.0, 90_000.0), start + 120_000)
    frozen = monitor._operator("job", "counter", vertex, row(900, 30_000.0, 90_000.0), start + 140_000)
    assert not frozen.complete and frozen.input_rate is None and "metric store not refreshed" in frozen.reason
    # an idle operator: no records, no busy time, but its idle time advances -> a real zero
    monitor._operator("job", "counter", vertex, row(900, 30_000.0, 90_000.0), start + 160_000)
    idle = monitor._operator("job", "counter", vertex, row(900, 30_000.0, 130_000.0), start + 180_000)
    assert idle.complete and idle.input_rate == 0.0 and idle.utilisation == 0.0


def test_bench_observation_charges_each_operator_its_own_share_against_its_bound():
    from benchmarks.flink.runner import _observation
    from connectors.base import OperatorMetrics
    from connectors.latency_share import share_path_latency

    path = ["sentences", "splitter", "counter", "top"]
    ops = {name: OperatorMetrics(name, {"vm.small": 1}, input_rate=20.0, utilisation=u, service_time_mean_s=0.01)
           for name, u in zip(path, (None, 0.12, 0.97, 0.05), strict=True)}  # fmt: skip
    share_path_latency(ops, [path], {"->".join(path): 2.5})  # the path violates R_max = 2 s
    splitter, counter = _observation(ops["splitter"], 1, 1.0), _observation(ops["counter"], 1, 1.0)
    assert counter.violated and not splitter.violated
    assert splitter.response_time_s + counter.response_time_s <= 2.5


class _RestartingRest:
    """A JobManager whose job restarts for ``restarting`` polls before it runs again; a PUT of resource
    requirements takes effect at once (the next poll shows the new parallelism, every vertex RUNNING)."""

    def __init__(self, restarting: int) -> None:
        self.restarting = restarting
        self.parallelism = {"v1": 2}
        self.puts: list[dict] = []
        self.base_url = "http://fake"

    def job(self, job_id: str) -> dict:
        status = "RUNNING"
        if self.restarting > 0:
            self.restarting -= 1
            status = "INITIALIZING"
        vertices = [{"id": vid, "name": "counter", "parallelism": n, "status": status}
                    for vid, n in self.parallelism.items()]  # fmt: skip
        return {"jid": job_id, "state": "RUNNING", "vertices": vertices}

    def resource_requirements(self, job_id: str) -> dict:
        return {
            vid: {"parallelism": {"lowerBound": 1, "upperBound": n}} for vid, n in self.parallelism.items()
        }

    def set_resource_requirements(self, job_id: str, wanted: dict) -> None:
        self.puts.append((self.restarting, wanted))  # polls of the restart still to come when it was PUT
        self.parallelism = {vid: int(r["parallelism"]["upperBound"]) for vid, r in wanted.items()}

    def get(self, path: str) -> dict:
        return {"slots-available": 4, "slots-total": 8}


def _realizer(rest: _RestartingRest, timeout_s: float):
    from connectors.flink.monitor import FlinkJob
    from connectors.flink.realizer import FlinkRealizer

    return FlinkRealizer(
        FlinkJob(rest, None, "j1", {"counter": "counter"}), {"counter": {"vm.small": 2}}, timeout_s
    )


def test_a_rescale_requested_while_the_job_restarts_waits_until_it_runs_again():
    from connectors.base import ScalingPlan

    rest = _RestartingRest(restarting=3)
    result = _realizer(rest, 10.0).apply(ScalingPlan({"counter": {"vm.small": 3}}, 1))
    assert result.ok, result.error
    # PUT only once the job ran again (no restart poll left), from the parallelism actually running
    assert rest.puts == [(0, {"v1": {"parallelism": {"lowerBound": 1, "upperBound": 3}}})]
    assert result.deployments["counter"] == {"vm.small": 3}


def test_a_job_that_never_runs_again_gets_nothing_applied_and_a_reason():
    from connectors.base import ScalingPlan

    rest = _RestartingRest(restarting=10**6)
    result = _realizer(rest, 0.5).apply(ScalingPlan({"counter": {"vm.small": 3}}, 1))
    assert (
        not result.ok
        and "did not return to RUNNING within" in result.error
        and "nothing applied" in result.error
    )
    assert rest.puts == []


class _CachedRest(_RestartingRest):
    """A JobManager whose cached job details never show the restart a PUT caused (it was shorter than the cache
    interval); only the job's status timestamps tell: RESTARTING at PUT + 0.1 s, RUNNING again 1.4 s later."""

    def set_resource_requirements(self, job_id: str, wanted: dict) -> None:
        super().set_resource_requirements(job_id, wanted)
        put_ms = time.time() * 1000.0
        self.stamps = {"RESTARTING": put_ms + 100.0, "RUNNING": put_ms + 1500.0}

    def job(self, job_id: str) -> dict:
        job = super().job(job_id)
        job["timestamps"] = dict(getattr(self, "stamps", {"RUNNING": 1.0}))
        return job


def test_a_restart_missed_by_the_polls_is_timed_from_the_jobs_status_timestamps():
    from connectors.base import ScalingPlan

    result = _realizer(_CachedRest(restarting=0), 10.0).apply(ScalingPlan({"counter": {"vm.small": 3}}, 1))
    assert result.ok, result.error
    assert result.downtime_s == pytest.approx(1.4, abs=0.01)


def test_restart_span_ignores_a_restart_before_the_request():
    from connectors.flink.realizer import _restart_span_s

    assert _restart_span_s({"timestamps": {"RESTARTING": 1000.0, "RUNNING": 3000.0}}, since_ms=2000.0) == 0.0
    assert _restart_span_s({"timestamps": {"RESTARTING": 2500.0, "RUNNING": 4000.0}}, since_ms=2000.0) == 1.5
    assert _restart_span_s({}, since_ms=0.0) == 0.0


def test_bench_policies_resolve_named_variants_and_ds2_keeps_its_period_parameters():
    from benchmarks.flink.runner import BenchConfig, _policy

    cfg = BenchConfig(trace="unused")
    assert _policy("model-based-capacity", cfg, None).params["capacity_bound"] is True
    assert _policy("model-based", cfg, None).params["capacity_bound"] is False
    ds2 = _policy("ds2", cfg, None)
    assert ds2.params["scale_down_delay_s"] == 2 * cfg.period_s


class _StateRest:
    """A JobManager whose job is in ``state`` (or unreachable when ``state`` is None)."""

    def __init__(self, state: str | None) -> None:
        self.state = state

    def job(self, job_id: str) -> dict:
        from connectors.base import ConnectorError

        if self.state is None:
            raise ConnectorError("connection refused")
        return {"jid": job_id, "state": self.state, "vertices": []}

    def jobs(self) -> list[dict]:  # looked up by name: only terminal jobs of that name
        return [{"jid": "old", "name": "wordcount", "state": "CANCELED", "start-time": 0}]


@pytest.mark.parametrize(
    "state,cause",
    [("FAILED", "job_failing"), ("FAILING", "job_failing"), ("RESTARTING", "job_not_running"),
     ("INITIALIZING", "job_not_running"), (None, "engine_unavailable")],
)  # fmt: skip
def test_an_incomplete_period_carries_a_typed_cause(state, cause):
    """The rollback rail acts on the cause (``FAILING_CAUSES``), which Flink's reason text never matched."""
    from connectors.base import FAILING_CAUSES, Cause, Period
    from connectors.flink.monitor import FlinkJob, FlinkMonitor

    monitor = FlinkMonitor(FlinkJob(_StateRest(state), None, "j1", {}), {}, [], set())
    m = monitor.collect(Period(1, 0.0, 60.0))
    assert not m.complete and m.cause == Cause(cause)
    assert (m.cause in FAILING_CAUSES) is (cause == "job_failing")


def test_a_job_looked_up_by_name_that_runs_no_more_is_not_running_not_unreachable():
    from connectors.base import Cause, Period
    from connectors.flink.monitor import FlinkJob, FlinkMonitor

    monitor = FlinkMonitor(FlinkJob(_StateRest("RUNNING"), "wordcount", None, {}), {}, [], set())
    m = monitor.collect(Period(1, 0.0, 60.0))
    assert not m.complete and m.cause == Cause.JOB_NOT_RUNNING
    assert "Flink unavailable: no running Flink job named 'wordcount'" in m.reason


def test_stop_causes_name_the_signal_or_fatal_error_not_the_shutdown_sequence(tmp_path):
    from connectors.flink.cluster import stop_causes

    log = tmp_path / "log"
    log.mkdir()
    assert stop_causes(tmp_path) == ""  # no log line says why
    (log / "flink--taskexecutor-0-vm.log").write_text(
        "INFO Task switched from RUNNING to CANCELING\n"
        "ERROR org.apache.flink.runtime.taskexecutor.TaskManagerRunner - Fatal error occurred while executing "
        "the TaskManager. Shutting it down...\n"
        "INFO Shutting down TaskExecutorFileMergingManager.\n"
    )
    (log / "flink--taskexecutor-0-vm.out").write_text("RECEIVED SIGNAL 15 in the .out file is not read\n")
    causes = stop_causes(tmp_path)
    assert "Fatal error occurred" in causes and "CANCELING" not in causes and "FileMerging" not in causes
    assert "RECEIVED SIGNAL" not in causes


def test_a_starting_daemon_missed_by_a_poll_or_two_is_not_taken_for_one_that_exited(tmp_path, monkeypatch):
    """A daemon being exec'd reads an empty command line for a moment; CI once failed a JobManager that was
    starting as "exited before it was ready". Only DAEMON_GONE_POLLS polls in a row without it fail the wait (a
    fault this host cannot provoke on purpose: the poll is replaced)."""
    from connectors.flink import cluster as fc

    monkeypatch.setattr(fc.time, "sleep", lambda s: None)
    seen = iter([[], [], [4321], [], [4321]])  # missed twice, found, missed once, found
    monkeypatch.setattr(fc, "daemon_pids", lambda d: next(seen, [4321]))
    answers = iter([False] * 5 + [True])
    c = fc.FlinkCluster(tmp_path)
    assert c._wait(lambda: next(answers), "JobManager", tmp_path, timeout_s=60) is True
    monkeypatch.setattr(fc, "daemon_pids", lambda d: [])
    polls = []
    with pytest.raises(fc.FlinkClusterError, match="exited before it was ready"):
        c._wait(lambda: polls.append(1), "JobManager", tmp_path, timeout_s=60)
    assert len(polls) == fc.DAEMON_GONE_POLLS
