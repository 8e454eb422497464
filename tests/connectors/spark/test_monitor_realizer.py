"""Monitor and realizer of the Spark connector on an in-memory store (no database), without a running Spark
job. The store's contract with the database is ``store_contract``."""

from __future__ import annotations

import dataclasses
import time

import pytest

from connectors.base import CAUSE_SEVERITY, FAILING_CAUSES, Cause, Period, ScalingPlan, worst_cause
from connectors.spark.connector import ControlledOperator, NodeType, build
from connectors.spark.store import STAGE_TASKS_KEY, DriverState, InMemorySparkStore, ProgressRecord
from tests.connectors.spark.memory_wc import KEY, SMALL, wc_connector

T0 = 1_800_000_000.0  # period start (s since the epoch)


def progress(
    t: float, rows: int, duration_ms: float, e2e=None, backlog=None, run: str = "", raw=None
) -> ProgressRecord:
    """One micro-batch (id: the trigger's second) as the control plane stores it: the sink's e2e latency over
    all of its rows, the sources' backlog."""
    return ProgressRecord(
        run_id=run,
        batch_id=int(t),
        timestamp=t,
        num_input_rows=rows,
        batch_duration_ms=duration_ms,
        e2e_mean_s=e2e[0] if e2e else None,
        e2e_p95_s=e2e[1] if e2e else None,
        e2e_n=rows if e2e else None,
        backlog=None if backlog is None else float(backlog),
        raw=raw,
    )


def ship(store: InMemorySparkStore, items, executors=2, ui=""):
    """The agent's shipment: the batches and the driver's status, heard of now."""
    store.add_progress(KEY, *items)
    store.set_driver(KEY, DriverState(ui, "app-x", executors, SMALL, time.time()))


@pytest.fixture
def store() -> InMemorySparkStore:
    """The store of an application whose counter query has been running for a minute (its start-up batch is
    older than every period the tests observe)."""
    store = InMemorySparkStore()
    ship(store, [dataclasses.replace(progress(T0 - 60, 1, 9000), batch_id=0)])
    return store


def test_a_period_of_batches_becomes_the_observation_the_om_needs(store):
    # ten 1 s batches of 100 rows, 400 ms each, e2e mean 0.5 s (p95 0.9 s); one batch 2.0 s mean
    items = [progress(T0 + i, 100, 400, e2e=(0.5, 0.9)) for i in range(9)]
    items.append(progress(T0 + 9, 100, 400, e2e=(2.0, 3.0)))
    ship(
        store, items, executors=2, ui="http://127.0.0.1:9"
    )  # nothing listens there: the agent's count is used
    m = wc_connector(store).monitor.collect(Period(0, T0, T0 + 10))
    assert m.complete, m.reason
    c = m.operators["counter"]
    assert c.input_rate == pytest.approx(100.0) and c.processing_rate == pytest.approx(100.0)
    assert c.utilisation == pytest.approx(0.4)
    assert c.response_time_s == pytest.approx((9 * 0.5 + 2.0) / 10)
    assert c.response_time_p95_s == pytest.approx(3.0)
    assert c.deployment == {"small": 2} and "executors via agent" in c.reason
    assert c.service_time_mean_s == pytest.approx(4.0 * 2 / 1000)
    assert c.backlog == 0.0
    assert m.path_response_time_s == {"src->counter->out": pytest.approx(0.65)}


def test_micro_batches_and_partitions_reach_the_observation(store):
    """The engine model's inputs (policies.engine_model): mean batch duration and size, the trigger interval,
    the stateful stage's partitions from the progress JSON (None when no batch reports one)."""
    state_ops = {"stateOperators": [{"numRowsTotal": 5, "numShufflePartitions": 12}]}
    items = [progress(T0 + i, 100 + 20 * i, 300 + 100 * i, raw=state_ops if i == 3 else {}) for i in range(5)]
    ship(store, items)
    c = wc_connector(store).monitor.collect(Period(0, T0, T0 + 10)).operators["counter"]
    assert c.batch_duration_s == pytest.approx(0.5)  # (300 + 400 + ... + 700) ms / 5
    assert c.batch_records == pytest.approx(140.0)
    assert c.partitions == 12
    assert c.batch_interval_s == wc_connector(store).monitor.batch_interval_s
    c = wc_connector(store).monitor.collect(Period(0, T0 + 20, T0 + 30)).operators["counter"]
    assert not c.complete and c.batch_duration_s is None  # no progress: nothing invented
    ship(store, [progress(T0 + 40 + i, 100, 300) for i in range(5)])
    c = wc_connector(store).monitor.collect(Period(0, T0 + 40, T0 + 50)).operators["counter"]
    assert c.partitions is None and c.batch_records == pytest.approx(100.0)


def test_a_stateless_querys_partitions_are_the_widest_stage_the_agent_saw(store):
    """No stateOperators (a stateless query: its aggregation in foreachBatch): the partitions are the tasks of
    the widest stage the job's agent saw each batch run; a stateful stage's partitions win when reported."""
    ship(store, [progress(T0 + i, 100, 300, raw={STAGE_TASKS_KEY: 8 if i else 3}) for i in range(5)])
    assert wc_connector(store).monitor.collect(Period(0, T0, T0 + 10)).operators["counter"].partitions == 8
    state_ops = {"stateOperators": [{"numShufflePartitions": 4}], STAGE_TASKS_KEY: 200}
    ship(store, [progress(T0 + 20 + i, 100, 300, raw=state_ops) for i in range(5)])
    assert (
        wc_connector(store).monitor.collect(Period(0, T0 + 20, T0 + 30)).operators["counter"].partitions == 4
    )
    ship(store, [progress(T0 + 40 + i, 100, 300, raw={STAGE_TASKS_KEY: True}) for i in range(5)])
    assert (
        wc_connector(store).monitor.collect(Period(0, T0 + 40, T0 + 50)).operators["counter"].partitions
        is None
    )


def test_reported_backlog_raises_the_input_rate_and_is_the_backlog(store):
    ship(store, [progress(T0 + i, 100, 900, e2e=(1.0, 2.0), backlog=50 * i) for i in range(10)])
    c = wc_connector(store).monitor.collect(Period(0, T0, T0 + 10)).operators["counter"]
    assert c.backlog == 450.0
    assert c.input_rate == pytest.approx(100.0 + 450.0 / 10)
    # one long batch in the next period: its growth counts from the backlog the batch before it reported, over
    # the time between the two batches' ends (9.9 s -> 24 s: the source reports its backlog when a batch ends)
    ship(store, [progress(T0 + 10, 1200, 14000, e2e=(8.0, 9.0), backlog=750)])
    c = wc_connector(store).monitor.collect(Period(1, T0 + 10, T0 + 20)).operators["counter"]
    assert c.backlog == 750.0
    assert c.input_rate == pytest.approx((1200 + 750 - 450) / (24.0 - 9.9))


def _back_to_back(rate: float, duration_s: float, until_s: float, backlog: bool) -> list[ProgressRecord]:
    """Batches of ``duration_s`` s run back to back from T0 - 60 (longer than the 5-s trigger interval) at a
    constant arrival ``rate`` (tuples/s): each takes what arrived since the previous trigger; with ``backlog`` the
    source reports, when a batch ends, what arrived since its trigger (not read yet)."""
    out, t = [], T0 - 60.0
    while t < T0 + until_s:
        out.append(progress(t, round(rate * duration_s), 1000 * duration_s,
                            backlog=round(rate * duration_s) if backlog else None))  # fmt: skip
        t += duration_s
    return out


@pytest.mark.parametrize("backlog", [True, False])
def test_batches_that_outlast_the_trigger_interval_read_the_arrival_rate_in_every_period(store, backlog):
    """7-s batches in 15-s periods: two batches start in some periods and three in others. Over the period's
    length the rate read 93 and 140 tuples/s for a constant 100 (bench_spark, 2 Dec: 67-193 read while 155-163
    arrived); over the time the batches' rows arrived in it reads 100 in every period."""
    ship(store, _back_to_back(100.0, 7.0, 120.0, backlog))
    monitor = wc_connector(store, batch_interval_s=5.0).monitor
    for i in range(7):
        c = monitor.collect(Period(i, T0 + 15 * i, T0 + 15 * (i + 1))).operators["counter"]
        assert c.input_rate == pytest.approx(100.0, rel=0.01), (i, c.input_rate)
        assert c.processing_rate == pytest.approx(100.0, rel=0.01), (i, c.processing_rate)


def test_after_an_idle_stretch_the_rate_is_over_the_period(store):
    """No batch for 20 s (nothing arrived) before the period: the rows are not spread back over the idle time."""
    ship(
        store,
        [progress(T0 - 21, 10, 500, backlog=0)] + [progress(T0 + i, 100, 400, backlog=0) for i in range(10)],
    )
    c = wc_connector(store).monitor.collect(Period(0, T0, T0 + 10)).operators["counter"]
    assert c.input_rate == pytest.approx(100.0) and c.processing_rate == pytest.approx(100.0)


def test_without_sink_latency_the_response_time_is_estimated_and_said_so(store):
    ship(store, [progress(T0 + i, 10, 1500) for i in range(10)])
    c = wc_connector(store).monitor.collect(Period(0, T0, T0 + 10)).operators["counter"]
    assert c.response_time_s == pytest.approx(1.5 + 0.5)
    assert c.backlog == pytest.approx(10.0 * 0.5)  # 10 tuples/s x (1.5 s batches - 1 s trigger)
    assert "estimated from batch durations" in c.reason


def test_missing_and_partial_periods_are_incomplete_never_zero(store):
    monitor = wc_connector(store).monitor
    m = monitor.collect(Period(0, T0, T0 + 10))
    assert not m.complete and "no progress from the Spark job" in m.reason
    assert m.operators["counter"].input_rate is None
    ship(store, [progress(T0 + 8, 100, 400), progress(T0 + 9, 100, 400)])
    m = monitor.collect(Period(0, T0, T0 + 10))
    assert not m.complete and "partial period" in m.reason and m.operators["counter"].input_rate is None
    ship(store, [progress(T0 + 10 + i, 100, 400) for i in range(10)], executors=0)
    m = monitor.collect(Period(1, T0 + 10, T0 + 20))
    assert not m.complete and "no running replica" in m.reason


def test_the_period_of_a_query_runs_first_micro_batch_is_incomplete(store):
    # the query restarts from its checkpoint (a new run id, batch ids continue): 9 s for 2 records
    restarted = progress(T0 + 1, 2, 9000, e2e=(20.0, 20.0), run="run-2")
    ship(
        store,
        [restarted] + [progress(T0 + 1 + i, 100, 400, e2e=(0.5, 0.9), run="run-2") for i in range(1, 9)],
    )
    monitor = wc_connector(store).monitor
    m = monitor.collect(Period(0, T0, T0 + 10))
    assert not m.complete and "first micro-batch" in m.reason
    ship(store, [progress(T0 + 10 + i, 100, 400, e2e=(0.5, 0.9), run="run-2") for i in range(10)])
    assert monitor.collect(Period(1, T0 + 10, T0 + 20)).complete


def test_an_incomplete_period_is_typed_like_its_worst_operator(store):
    """The period's cause is what the control loop acts on (its rollback rail restores the deployment before a
    reconfiguration on a failing cause): an incomplete period is never ``Cause.NONE``, and one whose query has
    no executor is failing."""
    monitor = wc_connector(store).monitor
    m = monitor.collect(Period(0, T0, T0 + 10))  # nothing shipped for the period
    assert not m.complete and m.cause == Cause.METRICS_MISSING
    assert m.operators["counter"].cause == Cause.METRICS_MISSING
    ship(store, [progress(T0 + 8, 100, 400), progress(T0 + 9, 100, 400)])  # a partial period
    m = monitor.collect(Period(0, T0, T0 + 10))
    assert "partial period" in m.reason and m.cause == m.operators["counter"].cause == Cause.METRICS_MISSING
    ship(store, [progress(T0 + 10 + i, 100, 400) for i in range(10)], executors=0)
    m = monitor.collect(Period(1, T0 + 10, T0 + 20))
    assert "no running replica" in m.reason and m.cause == Cause.NO_RUNNING_REPLICA
    ship(store, [progress(T0 + 21 + i, 100, 400, run="run-2") for i in range(9)])  # a restart's first batch
    m = monitor.collect(Period(2, T0 + 20, T0 + 30))
    assert "first micro-batch" in m.reason and m.cause == Cause.METRICS_MISSING
    ship(store, [progress(T0 + 30 + i, 100, 400, run="run-2") for i in range(10)])
    m = monitor.collect(Period(3, T0 + 30, T0 + 40))
    assert m.complete and m.cause == Cause.NONE


def test_one_operator_without_a_replica_makes_the_period_failing():
    """Two queries: one without an executor, one that shipped nothing; the failing cause wins."""
    store = InMemorySparkStore()
    nodes = [NodeType("small", 1, 512, 1.0)]
    controlled = {name: ControlledOperator(name, {"small": 1}, nodes) for name in ("split", "count")}
    conn = build(store, ["split", "count"], [("split", "count")], controlled, ui_url=None,
                 executor_memory_scale=1.0, batch_interval_s=1.0, apply_timeout_s=1.0)  # fmt: skip
    store.add_progress("split", *[progress(T0 + i, 100, 400) for i in range(-1, 10)])
    store.set_driver("split", DriverState("", "app-split", 0, SMALL, time.time()))
    store.set_driver("count", DriverState("", "app-count", 1, SMALL, time.time()))
    m = conn.monitor.collect(Period(0, T0, T0 + 10))
    assert m.operators["split"].cause == Cause.NO_RUNNING_REPLICA
    assert m.operators["count"].cause == Cause.METRICS_MISSING
    assert not m.complete and m.cause == Cause.NO_RUNNING_REPLICA and m.cause in FAILING_CAUSES


def test_the_worst_cause_is_the_most_severe():
    assert worst_cause([]) == Cause.NONE
    assert worst_cause([Cause.METRICS_MISSING, Cause.JOB_NOT_RUNNING]) == Cause.JOB_NOT_RUNNING
    assert worst_cause([Cause.NONE, Cause.METRICS_MISSING, Cause.JOB_FAILING]) == Cause.JOB_FAILING
    assert set(CAUSE_SEVERITY) == set(Cause) - {Cause.NONE}  # every typed cause is ranked


def test_a_mixed_target_is_realised_on_the_majority_type():
    from connectors.spark.realizer import SparkRealizer

    profiles = {"op": {"small": {"cores": 1, "speedup": 1.0}, "large": {"cores": 2, "speedup": 2.0}}}
    r = SparkRealizer({}, profiles, InMemorySparkStore())
    assert r.single_type("op", {"small": 2, "large": 1}) == ("small", 3)
    assert r.single_type("op", {"small": 1, "large": 1}) == ("large", 2)
    with pytest.raises(ValueError, match="unknown node type"):
        r.single_type("op", {"huge": 1})


def test_an_unacknowledged_apply_is_rolled_back_and_surfaced(store):
    store.set_desired(KEY, 1, {"name": "small", "cores": 1, "memoryMiB": 512})
    result = wc_connector(store, apply_timeout_s=0.5).realizer.apply(
        ScalingPlan({"counter": {"large": 2}}, slot=3)
    )
    assert not result.ok and result.rolled_back
    assert "no acknowledgement from the Spark job" in result.error
    d = result.details["counter"]
    assert d["generation"] == 2 and d["rollback_generation"] == 3 and d["node_type"] == "large"
    row = store.desired(KEY)
    assert (row.generation, row.executors, row.profile["name"]) == (3, 1, "small")


def test_a_restart_is_verified_only_once_the_executor_count_holds(store, monkeypatch):
    """After a restart (an acknowledgement with downtime) a surplus executor granted to the new application can
    register after the first: the realizer's verification waits for the count to hold (CI saw ``large: 2``)."""
    from connectors.spark import realizer as realizer_mod
    from connectors.spark.store import Acknowledgement

    monkeypatch.setattr(realizer_mod, "POLL_S", 0.01)
    monkeypatch.setattr(realizer_mod, "RESTART_SETTLE_S", 0.2)
    store.set_desired(KEY, 1, {"name": "small", "cores": 1, "memoryMiB": 512})
    store.add_acknowledgement(KEY, Acknowledgement(generation=2, executors=1, downtime_s=4.0))
    reads = [{"large": 1}, {"large": 2}, {"large": 2}]
    counts = iter(reads)
    monkeypatch.setattr(realizer_mod, "running_deployment", lambda s, b: (next(counts, {"large": 1}), "rest"))
    r = wc_connector(store, apply_timeout_s=5.0).realizer
    assert r._await(r.bindings["counter"], 2, 1, "large")[0]
    assert next(counts, None) is None  # it read past the surplus before it called the change verified
