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
