"""The micro-batch engine model an OM fitted, as the queue model a simulation runs the operator on (issue 21,
item 2: the AM's BO and the what-if replay simulate a Spark operator as its engine runs it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policies.app_graphs import Application, OperatorDef
from policies.base import Policy
from policies.engine_model import MicroBatchQueueModel
from policies.om.model_based import ModelBased
from policies.operator_model import NodeType, QueueModel
from policies.sim.application import simulate_application
from tests.policies.test_model_based_engine import (
    A_S,
    B_S,
    INTERVAL_S,
    PARTITIONS,
    MicroBatchEngine,
    _spec,
)

ONE = np.array([1.0])  # speedups of the one node type


def _fitted() -> tuple[ModelBased, MicroBatchEngine]:
    """model-based after periods of the micro-batch engine at several rates on 1, 2 and 3 executors."""
    policy, engine = ModelBased(_spec(), {"capacity_bound": True}), MicroBatchEngine()
    for k, rate in [(1, 20.0), (1, 30.0), (1, 10.0), (2, 40.0), (2, 60.0), (2, 30.0), (3, 90.0), (3, 50.0)]:
        for _ in range(3):
            policy.step(engine.period(k, rate))
    return policy, engine


def test_the_fitted_model_predicts_the_engines_steady_state():
    policy, engine = _fitted()
    qm = policy.fitted_engine_model()
    assert isinstance(qm, MicroBatchQueueModel)
    assert qm.overhead_s == pytest.approx(A_S, rel=1e-6) and qm.service_mean_s == pytest.approx(B_S, rel=1e-6)
    assert qm.interval_s == INTERVAL_S and qm.partitions == PARTITIONS
    # the engine at 2 executors and 50 records/s, settled: what the model says of the same deployment and rate
    for _ in range(4):
        obs = engine.period(2, 50.0)
    k = np.array([2])
    # the same prediction as the model the OM plans on, and that is the engine's (up to the learned offset of
    # measured to formula response times, which the transient periods after executor changes leave)
    predicted = policy.engine.predict_latency_s(50.0, 2, INTERVAL_S, PARTITIONS)
    assert qm.response_time(k, ONE, 50.0) == pytest.approx(predicted, rel=1e-9)
    assert qm.response_time(k, ONE, 50.0) == pytest.approx(
        obs.response_time_s + qm.latency_offset_s, rel=1e-6
    )
    assert abs(qm.latency_offset_s) < 0.05 * obs.response_time_s
    assert qm.utilisation(k, ONE, 50.0) == pytest.approx(obs.utilisation, rel=1e-6)
    # 12 partitions on 5 executors run in 3 waves: 4 executors' worth, as on 4 (a wave waits for its slowest task)
    assert (
        qm.capacity(np.array([5]), ONE)
        == pytest.approx(qm.capacity(np.array([4]), ONE))
        == pytest.approx(4 / B_S)
    )
    assert math.isinf(qm.response_time(np.array([1]), ONE, 1.01 / B_S))  # beyond capacity: unbounded backlog
    # the per-batch overhead is the difference from an M/G/1 queue of the same per-record cost
    mg1 = QueueModel(B_S, 0.0)
    assert qm.response_time(k, ONE, 50.0) > mg1.response_time(k, ONE, 50.0) + A_S


def test_no_model_before_the_fit_and_none_from_policies_without_one():
    policy = ModelBased(_spec(), {"capacity_bound": True})
    assert policy.fitted_engine_model() is None
    policy.step(MicroBatchEngine().period(1, 20.0))
    assert policy.fitted_engine_model() is None  # one period: nothing to separate overhead from cost with


class Hold(Policy):
    """Keeps the deployment: the simulation's response times are the model's alone."""

    deterministic = True

    def _decide(self, k, rate, obs, explain):  # noqa: ANN001, ANN202
        return 0, {}


def test_the_application_simulator_runs_the_operator_on_the_engine_model():
    qm = _fitted()[0].fitted_engine_model()
    assert qm is not None
    app = Application("one", (OperatorDef("counter", B_S, 0.0),), (), r_max_s=15.0, k_max=6)
    node_types = (NodeType("exec.small", 1.0, 0.005, 1, 512),)
    rates = np.array([20.0, 50.0, 70.0, 90.0])
    k0 = [np.array([2])]
    spec = app.operator_spec(0, node_types)
    on_engine = simulate_application(app, rates, node_types, oms=[Hold(spec)], models=[qm], k0=k0)
    on_queue = simulate_application(app, rates, node_types, oms=[Hold(spec)], k0=k0)
    expected = [qm.response_time(np.array([2]), ONE, r) for r in rates]
    assert on_engine.op_response_time[:, 0] == pytest.approx(expected)
    assert not np.allclose(on_queue.op_response_time[:, 0], expected)
    # 90 records/s on 2 executors is beyond their 80 records/s: the engine model says so, the queue did not care
    assert math.isinf(on_engine.op_response_time[3, 0]) and on_engine.op_violation[3, 0]
