"""Monitor and realizer of the Spark connector on stored progress, without a running Spark job."""

from __future__ import annotations

import datetime as dt

import pytest

from autoscaler.ingest import store
from autoscaler.ingest.models import DesiredState
from autoscaler.ingest.serializers import ProgressPayload
from connectors.base import Period, ScalingPlan
from connectors.factory import build_connector

pytestmark = pytest.mark.django_db
T0 = 1_800_000_000.0  # period start (s since the epoch)


def progress(t: float, rows: int, duration_ms: float, e2e=None, backlog=None, run: str = "") -> dict:
    item = {
        "runId": run,
        "batchId": int(t),
        "timestamp": dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat(),
        "numInputRows": rows,
        "batchDuration": duration_ms,
        "sources": [{"description": "file", "metrics": {"backlog": str(backlog)}}]
        if backlog is not None
        else [],
    }
    if e2e is not None:
        item["observedMetrics"] = {"e2e": {"mean_s": e2e[0], "p95_s": e2e[1], "n": rows}}
    return item


def ship(op, items, executors=2, ui=""):
    driver = {
        "uiUrl": ui,
        "appId": "app-x",
        "executors": executors,
        "profile": {"name": "small", "cores": 1, "memoryMiB": 512},
    }
    store.store_progress(op, ProgressPayload.model_validate({"progress": items, "driver": driver}))


@pytest.fixture
def app(django_user_model, make_app):
    """An application whose counter query has been running for a minute (its start-up batch is older than
    every period the tests observe)."""
    app, _ = make_app(django_user_model.objects.create_user("alice"))
    ship(app.operators.get(name="counter"), [{**progress(T0 - 60, 1, 9000), "batchId": 0}])
    return app


def test_a_period_of_batches_becomes_the_observation_the_om_needs(app):
    op = app.operators.get(name="counter")
    # ten 1 s batches of 100 rows, 400 ms each, e2e mean 0.5 s (p95 0.9 s); one batch 2.0 s mean
    items = [progress(T0 + i, 100, 400, e2e=(0.5, 0.9)) for i in range(9)]
    items.append(progress(T0 + 9, 100, 400, e2e=(2.0, 3.0)))
    ship(op, items, executors=2, ui="http://127.0.0.1:9")  # nothing listens there: the agent's count is used
    m = build_connector(app).monitor.collect(Period(0, T0, T0 + 10))
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


def test_micro_batches_and_partitions_reach_the_observation(app):
    """The engine model's inputs (policies.engine_model): mean batch duration and size, the trigger interval,
    the stateful stage's partitions from the progress JSON (None when no batch reports one)."""
    op = app.operators.get(name="counter")
    state_ops = {"stateOperators": [{"numRowsTotal": 5, "numShufflePartitions": 12}]}
    items = [
        {**progress(T0 + i, 100 + 20 * i, 300 + 100 * i), **(state_ops if i == 3 else {})} for i in range(5)
    ]
    ship(op, items)
    c = build_connector(app).monitor.collect(Period(0, T0, T0 + 10)).operators["counter"]
    assert c.batch_duration_s == pytest.approx(0.5)  # (300 + 400 + ... + 700) ms / 5
    assert c.batch_records == pytest.approx(140.0)
    assert c.partitions == 12
    assert c.batch_interval_s == build_connector(app).monitor.batch_interval_s
    c = build_connector(app).monitor.collect(Period(0, T0 + 20, T0 + 30)).operators["counter"]
    assert not c.complete and c.batch_duration_s is None  # no progress: nothing invented
    ship(op, [progress(T0 + 40 + i, 100, 300) for i in range(5)])
    c = build_connector(app).monitor.collect(Period(0, T0 + 40, T0 + 50)).operators["counter"]
    assert c.partitions is None and c.batch_records == pytest.approx(100.0)


def test_reported_backlog_raises_the_input_rate_and_is_the_backlog(app):
    op = app.operators.get(name="counter")
    ship(op, [progress(T0 + i, 100, 900, e2e=(1.0, 2.0), backlog=50 * i) for i in range(10)])
    c = build_connector(app).monitor.collect(Period(0, T0, T0 + 10)).operators["counter"]
    assert c.backlog == 450.0
    assert c.input_rate == pytest.approx(100.0 + 450.0 / 10)
    # one long batch in the next period: its growth counts from the backlog the batch before it reported
    ship(op, [progress(T0 + 10, 1200, 14000, e2e=(8.0, 9.0), backlog=750)])
    c = build_connector(app).monitor.collect(Period(1, T0 + 10, T0 + 20)).operators["counter"]
    assert c.backlog == 750.0
    assert c.input_rate == pytest.approx(1200 / 10 + (750 - 450) / 10)


def test_without_sink_latency_the_response_time_is_estimated_and_said_so(app):
    op = app.operators.get(name="counter")
    ship(op, [progress(T0 + i, 10, 1500) for i in range(10)])
    c = build_connector(app).monitor.collect(Period(0, T0, T0 + 10)).operators["counter"]
    assert c.response_time_s == pytest.approx(1.5 + 0.5)
    assert c.backlog == pytest.approx(10.0 * 0.5)  # 10 tuples/s x (1.5 s batches - 1 s trigger)
    assert "estimated from batch durations" in c.reason


def test_missing_and_partial_periods_are_incomplete_never_zero(app):
    op = app.operators.get(name="counter")
    monitor = build_connector(app).monitor
    m = monitor.collect(Period(0, T0, T0 + 10))
    assert not m.complete and "no progress from the Spark job" in m.reason
    assert m.operators["counter"].input_rate is None
    ship(op, [progress(T0 + 8, 100, 400), progress(T0 + 9, 100, 400)])
    m = monitor.collect(Period(0, T0, T0 + 10))
    assert not m.complete and "partial period" in m.reason and m.operators["counter"].input_rate is None
    ship(op, [progress(T0 + 10 + i, 100, 400) for i in range(10)], executors=0)
    m = monitor.collect(Period(1, T0 + 10, T0 + 20))
    assert not m.complete and "no running replica" in m.reason


def test_the_period_of_a_query_runs_first_micro_batch_is_incomplete(app):
    op = app.operators.get(name="counter")
    # the query restarts from its checkpoint (a new run id, batch ids continue): 9 s for 2 records
    restarted = progress(T0 + 1, 2, 9000, e2e=(20.0, 20.0), run="run-2")
    ship(op, [restarted] + [progress(T0 + 1 + i, 100, 400, e2e=(0.5, 0.9), run="run-2") for i in range(1, 9)])
    monitor = build_connector(app).monitor
    m = monitor.collect(Period(0, T0, T0 + 10))
    assert not m.complete and "first micro-batch" in m.reason
    ship(op, [progress(T0 + 10 + i, 100, 400, e2e=(0.5, 0.9), run="run-2") for i in range(10)])
    assert monitor.collect(Period(1, T0 + 10, T0 + 20)).complete


def test_a_mixed_target_is_realised_on_the_majority_type():
    from connectors.spark.realizer import SparkRealizer

    profiles = {"op": {"small": {"cores": 1, "speedup": 1.0}, "large": {"cores": 2, "speedup": 2.0}}}
    r = SparkRealizer({}, profiles)
    assert r.single_type("op", {"small": 2, "large": 1}) == ("small", 3)
    assert r.single_type("op", {"small": 1, "large": 1}) == ("large", 2)
    with pytest.raises(ValueError, match="unknown node type"):
        r.single_type("op", {"huge": 1})


def test_an_unacknowledged_apply_is_rolled_back_and_surfaced(app):
    app.connector = {**app.connector, "applyTimeoutS": 0.5}
    app.save()
    op = app.operators.get(name="counter")
    store.set_desired(op, 1, {"name": "small", "cores": 1, "memoryMiB": 512})
    result = build_connector(app).realizer.apply(ScalingPlan({"counter": {"large": 2}}, slot=3))
    assert not result.ok and result.rolled_back
    assert "no acknowledgement from the Spark job" in result.error
    d = result.details["counter"]
    assert d["generation"] == 2 and d["rollback_generation"] == 3 and d["node_type"] == "large"
    row = DesiredState.objects.get(operator=op)
    assert (row.generation, row.executors, row.profile["name"]) == (3, 1, "small")
