"""The simulated engine's micro-batch mode (``microBatch``): scaled operators as Spark queries, batch by batch,
reporting what the Spark monitor reports."""

from __future__ import annotations

import math

import pytest

from connectors.base import Period, ScalingPlan
from connectors.simulated import JsonFileStore, SimOperator, SimulatedApplication, SimulatedConnector
from policies.micro_batch_engine import MicroBatchEngine

#: 1 s per batch plus 10 ms per record on one executor (100 records/s), 5-s trigger, 0.5 s outside the batches
ENGINE = MicroBatchEngine(overhead_s=1.0, cost_s_per_record=0.5, interval_s=5.0, latency_offset_s=0.5)
INITIAL = {"src": {"exec": 1}, "taxi": {"exec": 1}, "sink": {"exec": 1}}


def _app(rates: list[float], **engine) -> SimulatedApplication:
    return SimulatedApplication(
        operators=[
            SimOperator("src", kind="source", service_mean_s=1e-6, service_var_s2=0.0),
            SimOperator("taxi", service_mean_s=0.01, service_var_s2=0.0),  # the query's cost per record
            SimOperator("sink", kind="sink", service_mean_s=1e-6, service_var_s2=0.0),
        ],
        streams=[("src", "taxi"), ("taxi", "sink")],
        speedups={"exec": 1.0},
        trace=rates,
        micro_batch=MicroBatchEngine(**{**ENGINE.__dict__, **engine}),
        controlled=frozenset({"taxi"}),
    )


def _period(slot: int) -> Period:
    return Period(slot, 60.0 * (slot - 1), 60.0 * slot)


def test_a_steady_query_reports_the_spark_monitors_metrics_from_its_batches():
    conn = SimulatedConnector(_app([50.0]), INITIAL)
    conn.monitor.collect(_period(1))
    period = conn.monitor.collect(_period(2))
    taxi = period.operators["taxi"]
    assert taxi.complete
    assert taxi.batch_records == pytest.approx(
        250.0
    )  # the operator's 10 ms per record, not the engine's 0.5 s
    assert taxi.batch_duration_s == pytest.approx(3.5)
    assert taxi.batch_interval_s == 5.0 and taxi.partitions is None
    assert taxi.input_rate == pytest.approx(50.0) and taxi.processing_rate == pytest.approx(50.0)
    assert taxi.utilisation == pytest.approx(12 * 3.5 / 60.0)
    assert taxi.response_time_s == pytest.approx(2.5 + 3.5 + 0.5)
    assert taxi.service_time_mean_s == pytest.approx(12 * 3.5 * 1 / 3000.0)  # busy s x executors / records
    assert taxi.backlog == pytest.approx(250.0)
    assert period.operators["sink"].input_rate == pytest.approx(50.0)
    assert period.end_to_end_response_time_s == pytest.approx(6.5, abs=1e-3)


def test_an_overload_carries_its_backlog_across_periods_and_executors_added_live_drain_it(tmp_path):
    store = JsonFileStore(tmp_path / "engine.json")
    conn = SimulatedConnector(_app([150.0]), INITIAL, store)
    first = conn.monitor.collect(_period(1)).operators["taxi"]
    assert first.utilisation == 1.0 and first.processing_rate < 150.0
    again = conn.monitor.collect(_period(1)).operators[
        "taxi"
    ]  # a retried tick does not run the batches twice
    assert again == first
    conn = SimulatedConnector(_app([150.0]), INITIAL, store)  # a worker restart sees the queue
    second = conn.monitor.collect(_period(2)).operators["taxi"]
    assert second.response_time_s > first.response_time_s and second.batch_records > first.batch_records
    assert conn.realizer.apply(ScalingPlan({"taxi": {"exec": 3}}, 2)).downtime_s == 0.0  # live
    for slot in (3, 4, 5):
        conn.monitor.collect(_period(slot))
    settled = conn.monitor.collect(_period(6)).operators["taxi"]
    assert settled.batch_duration_s == pytest.approx(1.0 + 0.01 * 150.0 * 5.0 / 3.0)
    assert settled.response_time_s < 10.0 < second.response_time_s


def test_the_periods_after_an_executor_change_run_at_the_penalty():
    conn = SimulatedConnector(_app([50.0], penalty=2.0, settle_periods=1), INITIAL)
    conn.monitor.collect(_period(1))
    conn.realizer.apply(ScalingPlan({"taxi": {"exec": 2}}, 1))
    after = conn.monitor.collect(_period(2)).operators["taxi"]
    settled = conn.monitor.collect(_period(3)).operators["taxi"]
    assert settled.batch_duration_s == pytest.approx(1.0 + 0.01 * 250.0 / 2)
    assert after.batch_duration_s == pytest.approx(2.0 * settled.batch_duration_s)


def test_a_batch_longer_than_the_period_is_overload_not_missing_data():
    conn = SimulatedConnector(_app([50.0], overhead_s=150.0), INITIAL)
    conn.monitor.collect(_period(1))  # a batch starts at 5 s and runs for 152.5 s
    stalled = conn.monitor.collect(_period(2)).operators["taxi"]
    assert stalled.complete and stalled.utilisation == 1.0 and stalled.batch_duration_s is None
    assert math.isfinite(stalled.response_time_s) and stalled.response_time_s > 150.0


def test_a_period_with_nothing_to_read_is_incomplete_not_overload():
    """The rate falls to 0 after a steady period: no batch starts, none runs; the Spark monitor reports no
    progress, not a stalled query."""
    conn = SimulatedConnector(_app([50.0, 0.0]), INITIAL)
    conn.monitor.collect(_period(0))  # slot 0, [-60, 0) s: 50 records/s
    conn.monitor.collect(_period(1))  # slot 1, [0, 60) s: no arrival; only slot 0's last 5 s run, at 0 s
    idle = conn.monitor.collect(_period(3)).operators["taxi"]  # slot 3 (trace index 1): nothing to read
    assert not idle.complete and idle.cause == "metrics_missing" and idle.utilisation is None


@pytest.mark.django_db
def test_the_manifest_setting_runs_the_query_and_refuses_what_cannot_go_with_it():
    from autoscaler.schemas.connectors import validate_connector

    good = {"microBatch": {"intervalMs": 5000, "overheadMs": 800, "partitions": 8, "latencyOffsetMs": -300}}
    settings, errors = validate_connector("simulated", good)
    assert errors == [] and settings["microBatch"]["partitions"] == 8
    for bad, field, reason in (
        ({"microBatch": {"intervalMs": 5000}, "backlog": True}, "spec.connector", "cannot go with backlog"),
        ({"microBatch": {"intervalMs": 5000}, "downtimeS": 5}, "spec.connector", "cannot go with downtimeS"),
        ({"microBatch": {"overheadMs": 5}}, "spec.connector.microBatch.intervalMs", "required"),
        ({"microBatch": {"intervalMs": 5000, "scalingExponent": 2}}, "microBatch.scalingExponent", "1"),
        ({"microBatch": {"intervalMs": 5000, "waves": 2}}, "microBatch.waves", "xtra"),
    ):
        _, errors = validate_connector("simulated", bad)
        assert errors, bad
        text = " ".join(str(e) for e in errors)
        assert field in text and reason in text, text


def test_switching_between_the_micro_batch_and_the_fluid_mode_starts_from_empty_queues(tmp_path):
    """The state store keeps one mode's state; the other mode reads it as empty queues, never fails."""
    store = JsonFileStore(tmp_path / "engine.json")
    SimulatedConnector(_app([150.0]), INITIAL, store).monitor.collect(_period(1))
    fluid = _app([50.0])
    fluid.micro_batch, fluid.carry_backlog = None, True
    period = SimulatedConnector(fluid, INITIAL, store).monitor.collect(_period(2))
    assert period.complete and period.operators["taxi"].backlog == pytest.approx(0.0)
    again = SimulatedConnector(_app([50.0]), INITIAL, store).monitor.collect(_period(3))
    assert again.operators["taxi"].complete
