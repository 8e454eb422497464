"""The offline optimum (dp): model from a trace or given, Bellman fixed point, errors, durable state."""

from __future__ import annotations

import numpy as np
import pytest

from policies.base import Observation, feasible_actions
from policies.om import mdp
from policies.om.offline import OfflineOptimum, uniform_level_rates
from policies.sim.operator import run_operator
from policies.sim.scenario import paper_spec, run_paper
from policies.sim.trace import load_trace


def test_from_trace_solves_the_bellman_equation(taxi_head) -> None:
    trace = load_trace(taxi_head)
    spec = paper_spec("A", 3, 10)
    dp = OfflineOptimum.from_trace(spec, trace)
    levels = mdp.levels_of(trace, spec)
    counts = mdp.transition_counts(levels, spec.rate_levels.n)
    np.testing.assert_allclose(dp.p, mdp.transition_matrix(counts))
    # V = cs + min_a (rcf + gamma P V(next)) within the solver's tolerance
    future = dp.value - dp.cost
    residual = mdp.sweep(dp.space, dp.cost, dp.p, future, spec.weights.rcf, spec.gamma) - future
    assert np.abs(residual).max() < 1e-7
    # the violation model is the true one: 0 for a class whose threshold is above every rate of the level
    assert dp.v_true.min() == 0.0 and dp.v_true.max() <= 1.0


def test_dp_runs_the_taxi_head_with_few_violations(taxi_head) -> None:
    trace = load_trace(taxi_head)
    result = run_paper(trace, "dp", "A", 3, 10)
    assert result.summary()["violations_pct"] < 1.0


def test_trace_path_parameter_reads_the_trace(taxi_head) -> None:
    spec = paper_spec("A", 3, 10)
    dp = OfflineOptimum(spec, {"trace_path": str(taxi_head), "trace_steps": 500})
    expected = OfflineOptimum.from_trace(paper_spec("A", 3, 10), load_trace(taxi_head)[:500])
    np.testing.assert_array_equal(dp.p, expected.p)


def test_without_a_model_it_says_so() -> None:
    dp = OfflineOptimum(paper_spec("A", 3, 10))
    with pytest.raises(ValueError, match="dp-discounted: no model"):
        dp.act(np.array([1, 0, 0]), 100.0, False)


@pytest.mark.parametrize(
    "p,rates,match",
    [
        (np.eye(5), None, "p: must be 30 x 30"),
        (np.full((30, 30), 0.5), None, "p: rows must be probability"),
        (np.eye(30), [np.ones(3)] * 4, "level_rates: need one sample per level"),
    ],
)
def test_from_model_rejects_bad_input(p, rates, match) -> None:
    spec = paper_spec("A", 3, 10)
    with pytest.raises(ValueError, match=match):
        OfflineOptimum.from_model(spec, p, rates if rates is not None else uniform_level_rates(spec, 10))


def test_bad_trace_path_names_the_file(tmp_path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        OfflineOptimum(paper_spec("A", 3, 10), {"trace_path": str(tmp_path / "missing.txt")})


def test_state_round_trip_and_explanations(taxi_head) -> None:
    trace = load_trace(taxi_head)
    spec = paper_spec("B", 3, 10)
    dp = OfflineOptimum.from_trace(spec, trace)
    run_operator(trace[:200], dp)
    data = dp.state_bytes()
    clone = OfflineOptimum.from_state(paper_spec("B", 3, 10), data)
    assert clone.state_bytes() == data
    np.testing.assert_array_equal(clone.value, dp.value)
    k = np.array([2, 0, 1])
    for rate in (50.0, 300.0, 640.0):
        assert clone._decide(k, rate, None, False) == dp._decide(k, rate, None, False)
    proposal = dp.step(Observation(deployment=k, input_rate=300.0, violated=False))
    alternatives = proposal.explanation["alternatives"]
    assert len(alternatives) == len(feasible_actions(k, 10))  # full space: every feasible action
    assert min(alternatives.values()) == alternatives[proposal.explanation["action"]]
