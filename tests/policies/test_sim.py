"""Semantics of the paper-mode simulator (shared/design/paper-benchmark.md) on a scripted trace with a scripted
policy: cost attribution, reconfiguration charged to its step, violation evaluated before the action."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest

from policies.base import Policy, feasible_actions
from policies.operator_model import QueueModel
from policies.sim.operator import run_operator
from policies.sim.scenario import initial_deployment, paper_spec, run_paper
from policies.sim.trace import load_trace


class Scripted(Policy):
    """Plays a fixed list of actions and records what it observed."""

    name: ClassVar[str] = "scripted"

    def __init__(self, spec, actions: list[int]) -> None:  # noqa: ANN001
        super().__init__(spec)
        self.script = list(actions)
        self.seen: list[tuple[list[int], float, bool]] = []

    def act(self, k, rate, violated, obs=None):  # noqa: ANN001, ANN201
        self.seen.append((k.tolist(), rate, bool(violated)))
        return super().act(k, rate, violated, obs)

    def _decide(self, k, rate, obs, explain):  # noqa: ANN001, ANN202
        return self.script[len(self.seen) - 1], {}


class RandomWalk(Policy):
    """Picks a feasible action uniformly at random from its own seeded generator."""

    name: ClassVar[str] = "random-walk"

    def _decide(self, k, rate, obs, explain):  # noqa: ANN001, ANN202
        acts = feasible_actions(k, self.spec.k_max)
        return int(acts[self.rng.integers(len(acts))]), {}


ADD0, REMOVE0, NOTHING = 4, 1, 0  # 3 node types: 1 + t removes type t, 1 + 3 + t adds it


def test_costs_reconfigurations_and_violations_are_charged_as_in_the_paper(spec_a3):
    # A3, K_max 10: C_max = 20 ($/h), a speedup-1 replica saturates at 180 tuples/s
    trace = np.array([10.0, 10.0, 400.0, 10.0])
    pol = Scripted(spec_a3, [ADD0, NOTHING, REMOVE0, NOTHING])
    res = run_operator(trace, pol)
    # the policy saw the deployment in place and the violation of *this* step before acting
    assert pol.seen == [([1, 0, 0], 10.0, False), ([2, 0, 0], 10.0, False), ([2, 0, 0], 400.0, True),
                        ([1, 0, 0], 10.0, False)]  # fmt: skip
    assert res.deployment.tolist() == [[1, 0, 0], [2, 0, 0], [2, 0, 0], [1, 0, 0]]
    assert res.violation.tolist() == [False, False, True, False]  # 200 tuples/s per replica > 180
    assert math.isinf(res.response_time[2])
    assert res.reconfiguration.tolist() == [True, False, True, False]
    assert res.action.tolist() == [ADD0, NOTHING, REMOVE0, NOTHING]
    assert res.price.tolist() == [1.0, 2.0, 2.0, 1.0]
    expected = [0.2 * 1 / 20 + 0.2, 0.2 * 2 / 20, 0.6 + 0.2 * 2 / 20 + 0.2, 0.2 * 1 / 20]
    assert res.cost == pytest.approx(expected)
    s = res.summary()
    assert s["avg_cost"] == pytest.approx(np.mean(expected))
    assert s["violations_pct"] == pytest.approx(25.0)
    assert s["reconfigurations_pct"] == pytest.approx(50.0)
    assert s["avg_resource_cost"] == pytest.approx(1.5)  # "Res.": raw price, not normalised
    assert s["avg_replicas"] == pytest.approx(1.5)


def test_response_time_of_a_step_uses_the_replica_model(spec_a3):
    res = run_operator(np.array([90.0, 90.0]), Scripted(spec_a3, [ADD0, NOTHING]))
    # one replica at 90 tuples/s (7/720 s), then two at 45 each
    s = 1 / 180
    assert res.response_time[0] == pytest.approx(7 / 720)
    assert res.response_time[1] == pytest.approx(s + 22.5 * 1.5 * s * s / 0.75)


def test_general_models_match_the_queue_model(spec_a3):
    spec_a3.model = QueueModel(service_mean_s=1 / 180, service_var_s2=(1 / 180) ** 2 / 2, balancing="proportional",
                               aggregation="weighted")  # fmt: skip
    trace = np.array([100.0, 300.0, 150.0])
    k0 = np.array([1, 0, 1])
    res = run_operator(trace, Scripted(spec_a3, [6, 0, 0]), k0=k0)  # 6 = add type 2
    assert res.response_time[0] == pytest.approx(spec_a3.model.response_time(k0, spec_a3.speedups, 100.0))
    k1 = np.array([1, 0, 2])
    assert res.response_time[1] == pytest.approx(spec_a3.model.response_time(k1, spec_a3.speedups, 300.0))


def test_seeded_random_policy_is_reproducible(spec_a3, taxi_head):
    trace = load_trace(taxi_head, steps=500)
    a = run_operator(trace, RandomWalk(paper_spec("A", 3, 10), seed=7))
    b = run_operator(trace, RandomWalk(paper_spec("A", 3, 10), seed=7))
    c = run_operator(trace, RandomWalk(paper_spec("A", 3, 10), seed=8))
    assert np.array_equal(a.deployment, b.deployment) and np.array_equal(a.cost, b.cost)
    assert not np.array_equal(a.deployment, c.deployment)
    assert (a.replicas >= 1).all() and (a.replicas <= 10).all()


def test_initial_deployment_bad_k0_is_rejected(spec_a3):
    with pytest.raises(ValueError, match="k0"):
        run_operator(np.array([1.0]), Scripted(spec_a3, [0]), k0=np.array([0, 0, 0]))
    with pytest.raises(ValueError, match="k0"):
        run_operator(np.array([1.0]), Scripted(spec_a3, [0]), k0=np.array([11, 0, 0]))


def test_run_paper_starts_each_baseline_on_its_own_type(taxi_head):
    trace = load_trace(taxi_head, steps=50)
    assert run_paper(trace, "threshold", "A", 3, 10).deployment[0].tolist() == [0, 1, 0]  # cheapest: 0.7
    assert run_paper(trace, "threshold-speedup", "A", 3, 10).deployment[0].tolist() == [0, 0, 1]  # 1.3
    res = run_paper(trace, "hpa", "B", 3, 20, seed=3, steps=20)
    assert res.steps == 20
    meta: dict[str, Any] = res.meta
    assert (meta["infra"], meta["node_types"], meta["k_max"], meta["seed"]) == ("B", 3, 20, 3)


def test_paper_spec_defaults():
    spec = paper_spec("B", 6, 20)
    assert spec.c_max == pytest.approx(600.0)  # K_max x largest price of B's whole list (30)
    assert spec.r_max_s == pytest.approx(0.05)
    assert (spec.weights.perf, spec.weights.res, spec.weights.rcf) == (0.6, 0.2, 0.2)
    assert spec.model.service_mean_s == pytest.approx(1 / 180)
    assert spec.model.service_var_s2 == pytest.approx((1 / 180) ** 2 / 2)
    with pytest.raises(ValueError, match="k_max"):
        paper_spec("A", 3, 0)
    with pytest.raises(ValueError, match="infra"):
        paper_spec("Z", 3, 10)


def test_initial_deployment_defaults_to_type_zero(spec_a3):
    assert initial_deployment(spec_a3, Scripted(spec_a3, [])).tolist() == [1, 0, 0]


def test_trace_errors_name_file_and_line(bad_trace, tmp_path):
    with pytest.raises(ValueError, match=r"line 3: not a number: 'abc'"):
        load_trace(bad_trace)
    neg = tmp_path / "neg.txt"
    neg.write_text("1\n-5\n")
    with pytest.raises(ValueError, match="line 2: rate must be a finite number >= 0"):
        load_trace(neg)
    with pytest.raises(ValueError, match="no such file"):
        load_trace(tmp_path / "missing.txt")


def test_type0_start_variant(taxi_head):
    trace = load_trace(taxi_head, steps=50)
    res = run_paper(trace, "threshold", "A", 3, 10, start="type0")
    assert res.deployment[0].tolist() == [1, 0, 0]
    assert res.meta["start"] == "type0"
    with pytest.raises(ValueError, match="start: must be one of policy, type0"):
        run_paper(trace, "threshold", "A", 3, 10, start="cheapest")
