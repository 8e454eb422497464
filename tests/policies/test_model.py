"""The queueing formulas of policies.operator_model pinned to values computed by hand (mu = 180 tuples/s, S = 1/180 s,
Var = S^2 / 2 unless stated)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policies.operator_model import (
    CostWeights,
    OperatorSpec,
    QueueModel,
    RateLevels,
    infrastructure,
    infrastructure_c_max,
)

S = 1.0 / 180.0
MG1 = QueueModel()  # M/G/1, round robin, worst replica
ONE = np.array([1.0])


def test_mg1_pollaczek_khinchine_single_replica():
    # rho = 90/180 = 0.5; R = S + (90/2) (S^2/2 + S^2) / (1 - 0.5) = S + 135 S^2 = 4/720 + 3/720
    assert MG1.response_time(np.array([1]), ONE, 90.0) == pytest.approx(7 / 720, rel=1e-12)


def test_md1_has_no_service_variance():
    md1 = QueueModel(kind="md1")
    # R = S + 45 S^2 / 0.5 = S + 90 S^2 = 4/720 + 2/720
    assert md1.response_time(np.array([1]), ONE, 90.0) == pytest.approx(6 / 720, rel=1e-12)


def test_speedup_scales_mean_and_variance():
    # speedup 2: S' = S/2, Var' = Var/4, rho = 0.25; R = 1/360 + 45 (1.5 S^2 / 4) / 0.75 = 1/360 + 1/1440
    r = MG1.response_time(np.array([1]), np.array([2.0]), 90.0)
    assert r == pytest.approx(1 / 288, rel=1e-12)


def test_round_robin_gives_every_replica_the_same_rate():
    k, sp = np.array([1, 1]), np.array([1.0, 2.0])
    assert MG1.replica_rates(k, sp, 180.0).tolist() == [90.0, 90.0]
    per = MG1.replica_response_times(k, sp, 180.0)
    assert per == pytest.approx([7 / 720, 1 / 288], rel=1e-12)
    assert MG1.response_time(k, sp, 180.0) == pytest.approx(7 / 720, rel=1e-12)  # worst replica
    weighted = QueueModel(aggregation="weighted")
    assert weighted.response_time(k, sp, 180.0) == pytest.approx(19 / 2880, rel=1e-12)


def test_proportional_balancing_splits_by_speed():
    k, sp = np.array([1, 1]), np.array([1.0, 2.0])
    prop = QueueModel(balancing="proportional")
    assert prop.replica_rates(k, sp, 180.0) == pytest.approx([60.0, 120.0])
    # both replicas at rho = 1/3: R0 = S + 30 (1.5 S^2) / (2/3) = 11/1440, R1 = S/2 + 60 (1.5 S^2/4) / (2/3) = 11/2880
    assert prop.replica_response_times(k, sp, 180.0) == pytest.approx([11 / 1440, 11 / 2880], rel=1e-12)
    assert prop.response_time(k, sp, 180.0) == pytest.approx(11 / 1440, rel=1e-12)
    both = QueueModel(balancing="proportional", aggregation="weighted")
    assert both.response_time(k, sp, 180.0) == pytest.approx(11 / 2160, rel=1e-12)


def test_utilisation_is_the_busiest_replica():
    k, sp = np.array([1, 1]), np.array([1.0, 2.0])
    assert MG1.utilisation(k, sp, 180.0) == pytest.approx(0.5)
    assert QueueModel(balancing="proportional").utilisation(k, sp, 180.0) == pytest.approx(1 / 3)
    # replicas of an absent type do not count
    assert MG1.utilisation(np.array([0, 2]), sp, 180.0) == pytest.approx(0.25)


def test_capacity_round_robin_is_bounded_by_the_slowest_type():
    k, sp = np.array([1, 1]), np.array([1.0, 2.0])
    assert MG1.capacity(k, sp) == pytest.approx(360.0)
    assert QueueModel(balancing="proportional").capacity(k, sp) == pytest.approx(540.0)
    assert MG1.capacity(np.array([0, 0]), sp) == 0.0


@pytest.mark.parametrize("rate", [180.0, 250.0])
def test_unstable_replica_has_infinite_response_time(rate):
    assert math.isinf(MG1.response_time(np.array([1]), ONE, rate))
    assert math.isinf(
        QueueModel(aggregation="weighted").response_time(np.array([1, 1]), np.array([1.0, 0.5]), 200.0)
    )


def test_empty_deployment_is_infinite():
    assert math.isinf(MG1.response_time(np.array([0, 0]), np.array([1.0, 2.0]), 10.0))


def test_infrastructures_prices_and_c_max():
    a3 = infrastructure("A", 3)
    assert [t.speedup for t in a3] == [1.0, 0.7, 1.3]
    assert [t.price for t in a3] == [1.0, 0.7, 1.3]
    b2 = infrastructure("B2", 3)
    assert [t.price for t in b2] == pytest.approx([1.0, 0.05**1.5, 30.0**1.5])
    assert infrastructure_c_max("A", 10) == pytest.approx(20.0)
    assert infrastructure_c_max("B", 20) == pytest.approx(600.0)
    assert infrastructure_c_max("B2", 10) == pytest.approx(10 * 30.0**1.5)
    with pytest.raises(ValueError, match="node types must be in 1..10"):
        infrastructure("A", 11)
    with pytest.raises(ValueError, match="unknown infrastructure"):
        infrastructure("C", 3)


def test_rate_levels():
    rl = RateLevels()
    assert rl.width == pytest.approx(650 / 30)
    assert [rl.level(x) for x in (0.0, 21.6, 21.7, 649.9, 650.0, 5000.0)] == [0, 0, 1, 29, 29, 29]
    assert rl.rate(0) == pytest.approx(650 / 60)


def test_weights_must_be_on_the_simplex():
    with pytest.raises(ValueError, match="weights.res must be >= 0"):
        CostWeights(perf=1.0, res=-0.1, rcf=0.1)
    with pytest.raises(ValueError, match="must sum to 1"):
        CostWeights(perf=0.5, res=0.5, rcf=0.5)
    with pytest.raises(ValueError, match="weights.perf must be >= 0"):
        CostWeights(perf=float("nan"), res=0.5, rcf=0.5)


def test_c_max_must_be_positive():
    free = infrastructure("A", 1)[0].__class__("free", 1.0, 0.0)
    with pytest.raises(ValueError, match="c_max must be > 0"):
        OperatorSpec(node_types=infrastructure("A", 1), k_max=3, c_max=0.0)
    spec = OperatorSpec(node_types=(free,), k_max=3)  # free nodes: no 0/0 in the resource term
    assert spec.cost_terms(np.array([2]), violated=False, reconfigured=False)["res"] == 0.0


def test_cost_terms_normalise_by_c_max():
    spec = OperatorSpec(node_types=infrastructure("A", 3), k_max=10, c_max=20.0)
    terms = spec.cost_terms(np.array([2, 0, 1]), violated=True, reconfigured=False)
    assert terms == pytest.approx({"perf": 1.0, "res": 3.3 / 20.0, "rcf": 0.0})
    assert spec.weighted_cost(terms) == pytest.approx(0.6 + 0.2 * 3.3 / 20.0)
    # the price cache follows a change of node types
    spec.node_types = infrastructure("B", 3)
    assert spec.price(np.array([0, 0, 1])) == pytest.approx(30.0)
