"""The simulated engine: rates through the DAG, queueing metrics, durable engine state, fault injection."""

import math

import pytest
from connector_contract import ConnectorContract, Harness

from connectors.base import Period, ScalingPlan
from connectors.simulated import (
    JsonFileStore,
    SimOperator,
    SimulatedApplication,
    SimulatedConnector,
)


def _app(**kw):
    ops = [
        SimOperator("src", kind="source", service_mean_s=0.001, service_var_s2=0.0),
        SimOperator("split", service_mean_s=0.004, service_var_s2=0.0, queue="md1", selectivity=5.0),
        SimOperator("count", service_mean_s=0.001, service_var_s2=0.0, queue="md1"),
    ]
    defaults = dict(
        operators=ops,
        streams=[("src", "split"), ("split", "count")],
        speedups={"small": 1.0, "large": 2.0},
        trace=[100.0, 200.0],
    )
    defaults.update(kw)
    return SimulatedApplication(**defaults)


INITIAL = {"src": {"small": 1}, "split": {"small": 1}, "count": {"small": 1}}


def test_rates_follow_selectivity_and_trace():
    app = _app()
    rates = app.input_rates(1)
    assert rates["src"] == 200.0
    assert rates["split"] == 200.0
    assert rates["count"] == 200.0 * 5.0  # split emits 5 tuples per input tuple
    assert app.input_rates(2)["src"] == 100.0  # the trace wraps around


def test_md1_response_time_matches_formula():
    conn = SimulatedConnector(_app(), INITIAL)
    m = conn.monitor.collect(Period(0, 0.0, 60.0))
    split = m.operators["split"]
    s, lam = 0.004, 100.0
    rho = lam * s
    expected = s + lam / 2 * (s * s) / (1 - rho)
    assert split.response_time_s == pytest.approx(expected)
    assert split.utilisation == pytest.approx(rho)
    assert m.complete
    assert m.end_to_end_response_time_s == pytest.approx(sum(o.response_time_s for o in m.operators.values()))


def test_overload_reports_backlog_and_infinite_latency():
    conn = SimulatedConnector(_app(trace=[300.0]), INITIAL)
    split = conn.monitor.collect(Period(0, 0.0, 60.0)).operators["split"]
    assert math.isinf(split.response_time_s)
    assert split.backlog == pytest.approx((300.0 - 250.0) * 60.0)
    assert split.processing_rate == pytest.approx(250.0)


def test_apply_changes_capacity_and_persists(tmp_path):
    store = JsonFileStore(tmp_path / "engine.json")
    conn = SimulatedConnector(_app(trace=[300.0], downtime_s=4.0), INITIAL, store)
    result = conn.realizer.apply(ScalingPlan({"split": {"small": 1, "large": 1}}, slot=0))
    assert result.ok and result.downtime_s == 4.0
    again = SimulatedConnector(_app(trace=[300.0]), INITIAL, JsonFileStore(tmp_path / "engine.json"))
    assert again.realizer.current()["split"] == {"small": 1, "large": 1}
    split = again.monitor.collect(Period(1, 60.0, 120.0)).operators["split"]
    assert math.isfinite(split.response_time_s)


def test_missing_metrics_are_incomplete_not_zero():
    conn = SimulatedConnector(_app(missing_slots=frozenset({3})), INITIAL)
    m = conn.monitor.collect(Period(3, 180.0, 240.0))
    assert not m.complete and m.operators == {} and "outage" in m.reason


def test_refused_apply_is_rolled_back():
    conn = SimulatedConnector(_app(refuse_apply=True), INITIAL)
    result = conn.realizer.apply(ScalingPlan({"split": {"small": 3}}, slot=0))
    assert not result.ok and result.rolled_back
    assert conn.realizer.current()["split"] == {"small": 1}


def test_unknown_operator_or_type_rejected():
    conn = SimulatedConnector(_app(), INITIAL)
    assert "unknown operator" in conn.realizer.apply(ScalingPlan({"nope": {"small": 1}}, 0)).error
    assert "unknown node type" in conn.realizer.apply(ScalingPlan({"split": {"huge": 1}}, 0)).error
    assert conn.realizer.current() == INITIAL


def test_cycle_rejected():
    with pytest.raises(ValueError, match="cycle"):
        _app(streams=[("src", "split"), ("split", "count"), ("count", "split")])


# ---- the connector contract (tests/connectors/connector_contract.py) --------------------------------------------


class TestSimulatedConnectorContract(ConnectorContract):
    @pytest.fixture
    def harness(self) -> Harness:
        slots = iter(range(1, 1000))
        outage = 999_999
        conn = SimulatedConnector(_app(missing_slots=frozenset({outage})), INITIAL)

        def scaled(current):
            return ScalingPlan({"split": {"small": current["split"].get("small", 0) + 1, "large": 1}}, 1)

        def unsatisfiable(current):
            return ScalingPlan({"split": {"no-such-type": 1}}, 1)  # a node type the engine does not have

        return Harness(
            connector=conn,
            operators=["split", "count"],
            complete_period=lambda: conn.monitor.collect(Period(next(slots), 0.0, 60.0)),
            scaled=scaled,
            unsatisfiable=unsatisfiable,
            without_data=lambda: conn.monitor.collect(Period(outage, 0.0, 60.0)),
        )


# ---- carry_backlog: fluid queues across periods ---------------------------------------------------------------
def test_a_backlog_engine_carries_an_overload_into_the_next_periods_and_drains_it_after_a_scale_out(tmp_path):
    """split serves 250 tuples/s on one small replica; 300 tuples/s for a 60-s period leave 3,000 records queued,
    which the next period still shows (a stationary engine forgets them), and two replicas drain them."""
    store = JsonFileStore(tmp_path / "engine.json")
    conn = SimulatedConnector(_app(trace=[300.0], carry_backlog=True), INITIAL, store)
    first = conn.monitor.collect(Period(1, 0.0, 60.0)).operators["split"]
    assert first.backlog == pytest.approx(3000.0)
    assert first.processing_rate == pytest.approx(250.0)
    assert math.isfinite(first.response_time_s) and first.response_time_s > 1500.0 / 250.0
    # the same slot observed again (a retried tick) does not queue twice
    again = conn.monitor.collect(Period(1, 0.0, 60.0)).operators["split"]
    assert again.backlog == pytest.approx(3000.0)
    # a new engine object on the same store (a worker restart) sees the queue
    conn = SimulatedConnector(_app(trace=[300.0], carry_backlog=True), INITIAL, store)
    second = conn.monitor.collect(Period(2, 60.0, 120.0)).operators["split"]
    assert second.backlog == pytest.approx(6000.0)
    conn.realizer.apply(ScalingPlan({"split": {"small": 2}}, 2))
    third = conn.monitor.collect(Period(3, 120.0, 180.0)).operators["split"]
    assert third.processing_rate == pytest.approx(
        400.0
    )  # 500/s of capacity, 400/s of queue + inflow to serve
    assert third.backlog == pytest.approx(0.0)
    # downstream receives what split served, not what arrived
    assert conn.monitor.collect(Period(4, 180.0, 240.0)).operators["count"].input_rate == pytest.approx(
        1500.0
    )


def test_a_reconfiguration_downtime_stops_the_next_period_and_the_job_catches_up_after_it():
    app = _app(trace=[100.0], carry_backlog=True, downtime_s=90.0, latency_offset_s=0.5)
    conn = SimulatedConnector(app, INITIAL)
    steady = conn.monitor.collect(Period(1, 0.0, 60.0))
    assert steady.complete and steady.operators["split"].backlog == pytest.approx(0.0)
    assert steady.end_to_end_response_time_s == pytest.approx(
        0.5 + sum(m.response_time_s for m in steady.operators.values())
    )
    assert conn.realizer.apply(ScalingPlan({"split": {"small": 2}}, 1)).downtime_s == 90.0
    down = conn.monitor.collect(Period(2, 60.0, 120.0))
    assert not down.complete and down.cause == "job_not_running"
    assert down.operators == {}
    partly = conn.monitor.collect(Period(3, 120.0, 180.0)).operators["split"]
    # 30 s of downtime left: the 6,000 records of the stopped period and 6,000 new ones, served within the last
    # 30 s at up to 500/s: the catch-up runs at twice the arrival rate
    assert partly.processing_rate == pytest.approx(12000.0 / 60.0)
    assert partly.utilisation == pytest.approx(12000.0 / 15000.0)
    assert partly.backlog == pytest.approx(0.0)
    after = conn.monitor.collect(Period(4, 180.0, 240.0)).operators["split"]
    assert after.processing_rate == pytest.approx(100.0)


def test_a_stationary_engine_is_unchanged_by_the_backlog_option_being_off():
    """Without ``carry_backlog`` an overload is forgotten in the next period (the stationary engine)."""
    conn = SimulatedConnector(_app(trace=[300.0]), INITIAL)
    assert math.isinf(conn.monitor.collect(Period(1, 0.0, 60.0)).operators["split"].response_time_s)
    assert conn.monitor.collect(Period(2, 60.0, 120.0)).operators["split"].backlog == pytest.approx(3000.0)


def test_path_latency_only_gives_each_operator_the_flink_monitors_share_of_the_path():
    """``pathLatencyOnly``: the engine reports what Flink does, and each operator's response time is its share of
    the path's end-to-end time, computed by ``connectors.latency_share`` as the Flink monitor computes it."""
    from connectors.latency_share import queueing_estimate_s

    own = SimulatedConnector(_app(trace=[100.0], latency_offset_s=0.9), INITIAL).monitor.collect(
        Period(1, 0, 60)
    )
    app = _app(
        trace=[100.0], latency_offset_s=0.9, path_latency_only=True, controlled=frozenset({"split", "count"})
    )
    shared = SimulatedConnector(app, INITIAL).monitor.collect(Period(1, 0.0, 60.0))
    path = "src->split->count"
    assert shared.path_response_time_s[path] == pytest.approx(own.path_response_time_s[path])
    ops = shared.operators
    est = {n: queueing_estimate_s(m) for n, m in ops.items()}
    rest = shared.path_response_time_s[path] - sum(est.values())
    assert 0.85 < rest < 0.9  # the offset, less what the M/M/1 estimates add to the M/D/1 queues
    assert ops["src"].response_time_s == pytest.approx(est["src"])  # not controlled
    assert ops["split"].response_time_s == pytest.approx(est["split"] + rest / 2)
    assert ops["count"].response_time_s == pytest.approx(est["count"] + rest / 2)
    assert ops["split"].response_time_s > own.operators["split"].response_time_s + 0.4
