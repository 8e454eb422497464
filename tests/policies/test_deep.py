"""Deep Q-learning policies (dql, dql-pds, dql-pds-plus): feasibility, known costs, explanations, durable state
with exact continuation, reconfiguration, and that learning lowers the cost on a short synthetic trace."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from policies.base import Observation, describe_action, feasible_actions
from policies.om.deep import (
    DeepQLearning,
    DeepQLearningPDS,
    DeepQLearningPDSPlus,
    StateEncoder,
    feasible_mask,
)
from policies.operator_model import CostWeights, OperatorSpec, infrastructure, infrastructure_c_max
from policies.registry import load
from policies.sim.operator import run_operator

CLASSES = [DeepQLearning, DeepQLearningPDS, DeepQLearningPDSPlus]


def _spec(k_max: int = 10, n_res: int = 3) -> OperatorSpec:
    return OperatorSpec(infrastructure("A", n_res), k_max=k_max, c_max=infrastructure_c_max("A", k_max))


def _trace(steps: int, seed: int = 0) -> np.ndarray:
    """A daily-like sinusoid between ~50 and ~550 tuples/s with noise (one value per period)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    return np.clip(300 + 250 * np.sin(2 * np.pi * t / 400) + rng.normal(0, 20, steps), 1, 640)


def _violated(spec: OperatorSpec, k: np.ndarray, rate: float) -> bool:
    return spec.model.response_time(k, spec.speedups, rate) > spec.r_max_s


def test_registry_names_resolve() -> None:
    assert load("om", "dql") is DeepQLearning
    assert load("om", "dql-pds") is DeepQLearningPDS
    assert load("om", "dql-pds-plus") is DeepQLearningPDSPlus


def test_feasible_mask_matches_feasible_actions() -> None:
    for k_max, k_min in ((4, 1), (3, 2)):
        rows = [
            np.array(k) for k in itertools.product(range(k_max + 1), repeat=3) if k_min <= sum(k) <= k_max
        ]
        mask = feasible_mask(np.array(rows), k_max, k_min)
        for k, m in zip(rows, mask, strict=True):
            assert np.flatnonzero(m).tolist() == feasible_actions(k, k_max, k_min)


@pytest.mark.parametrize("cls", CLASSES)
def test_only_feasible_actions_are_taken_or_valued(cls) -> None:
    spec = _spec(k_max=3)
    pol = cls(spec, seed=1)
    res = run_operator(_trace(1500), pol)  # K_max 3 forces the agent against both bounds
    totals = res.deployment.sum(axis=1)
    assert totals.min() >= 1 and totals.max() <= 3
    assert (res.deployment >= 0).all()
    for k in ([1, 0, 0], [3, 0, 0], [1, 1, 1], [0, 2, 0]):
        acts, values = pol.action_values(np.array(k), 400.0)
        assert acts.tolist() == feasible_actions(np.array(k), 3)
        assert np.isfinite(values).all()


def test_encoding_reduced2_layout() -> None:
    enc = StateEncoder(n_res=3, k_max=10, n_levels=30)
    assert enc.width == 30 + 7 + 30
    x = enc.encode(np.array([[2, 0, 10], [0, 1, 0]]), np.array([0, 29]))
    # row 0: type 0 count 2 -> col 1; type 2 count 10 -> col 29; set {0, 2} = 0b101 = 5 -> col 30 + 4; level 0
    assert np.flatnonzero(x[0]).tolist() == [1, 29, 34, 37]
    # row 1: type 1 count 1 -> col 10; set {1} = 0b010 -> col 31; level 29 -> col 66
    assert np.flatnonzero(x[1]).tolist() == [10, 31, 66]
    assert set(np.unique(x)) == {0.0, 1.0}


def test_pds_values_add_the_exact_known_cost() -> None:
    spec = _spec()
    pol = DeepQLearningPDS(spec, seed=0)
    pol.net.weights[-1][...] = 0.0  # network output V~ = bias for every input
    pol.net.biases[-1][...] = 0.25
    k = np.array([2, 1, 0])
    acts, values = pol.action_values(k, 200.0)
    w = spec.weights
    for a, v in zip(acts, values, strict=True):
        kk = k + pol.deltas[a]
        expected = w.res * spec.price(kk) / spec.c_max + w.rcf * (a != 0) + 0.25
        assert v == pytest.approx(expected, abs=1e-12)


def test_pds_plus_estimates_from_a_perturbed_model() -> None:
    spec = _spec()
    a = DeepQLearningPDSPlus(spec, seed=4)
    b = DeepQLearningPDSPlus(spec, seed=4)
    c = DeepQLearningPDSPlus(spec, seed=5)
    assert a.service_rate_factor == b.service_rate_factor
    assert (a.service_rate_factor, a.speedup_factors.tolist()) != (
        c.service_rate_factor,
        c.speedup_factors.tolist(),
    )
    for pol in (a, c):
        assert 0.05 <= abs(pol.service_rate_factor - 1.0) <= 0.10
        assert (np.abs(pol.speedup_factors - 1.0) <= 0.20).all()
    # the estimate flags a violation when the true model does, up to the model error: check clear-cut cases
    ks = np.array([[1, 0, 0], [10, 0, 0], [0, 0, 3]])
    rates = np.array([600.0, 100.0, 100.0])
    est = a.estimated_unknown_cost(ks, rates)
    assert est.tolist() == [spec.weights.perf, 0.0, 0.0]
    # exponential service (variance = mean^2): one replica at a moderate load matches P-K by hand
    s = a.approx_service_s / a.approx_speedups[0]
    lam = 60.0
    assert a.estimated_response_time(np.array([[1, 0, 0]]), np.array([lam]))[0] == pytest.approx(
        s + lam * s * s / (1 - lam * s)
    )


@pytest.mark.parametrize("cls", CLASSES)
def test_explain_draws_no_random_numbers_and_changes_nothing(cls) -> None:
    spec = _spec()
    pol = cls(spec, seed=2)
    run_operator(_trace(300), pol)
    before = pol.state_bytes()
    rng_state = pol.rng.bit_generator.state
    best, values = pol._decide(np.array([2, 1, 0]), 350.0, None, True)
    again = pol._decide(np.array([2, 1, 0]), 350.0, None, True)
    assert (best, values) == again
    assert pol.rng.bit_generator.state == rng_state
    assert pol.state_bytes() == before
    assert sorted(values) == feasible_actions(np.array([2, 1, 0]), spec.k_max)
    assert best == min(values, key=lambda a: (values[a], a))


@pytest.mark.parametrize("cls", CLASSES)
def test_step_explains_the_alternatives(cls) -> None:
    spec = _spec()
    pol = cls(spec, seed=0)
    k = np.array([1, 0, 0])
    for rate in (100.0, 150.0, 200.0):
        observed = k
        prop = pol.step(Observation(deployment=k, input_rate=rate, violated=_violated(spec, k, rate)))
        k = prop.deployment
    names = [t.name for t in spec.node_types]
    alts = prop.explanation["alternatives"]
    expected = {describe_action(a, names) for a in feasible_actions(observed, spec.k_max)}
    assert set(alts) == expected
    assert all(np.isfinite(v) for v in alts.values())
    assert prop.explanation["last_period_cost_terms"] is not None


@pytest.mark.parametrize("cls", CLASSES)
def test_state_round_trip_continues_bit_identically(cls) -> None:
    spec = _spec()
    trace = _trace(600, seed=3)
    pol = cls(_spec(), {"replay_size": 200}, seed=11)  # small buffer: the 300 steps wrap around it
    k = np.array([1, 0, 0])

    def drive(agent, rates, k):
        actions = []
        for rate in rates:
            a = agent.act(k, float(rate), _violated(spec, k, float(rate)))
            actions.append(a)
            k = k + agent.deltas[a]
        return actions, k

    _, k = drive(pol, trace[:300], k)
    assert pol.replay.pos != 0 and len(pol.replay) == 200
    data = pol.state_bytes()
    clone = cls.from_state(_spec(), data)
    assert clone.state_bytes() == data
    acts_a, k_a = drive(pol, trace[300:], k.copy())
    acts_b, k_b = drive(clone, trace[300:], k.copy())
    assert acts_a == acts_b
    assert np.array_equal(k_a, k_b)
    for p, q in zip(pol.net.params(), clone.net.params(), strict=True):
        assert np.array_equal(p, q)
    assert pol.net.updates == clone.net.updates > 0
    assert pol.state_bytes() == clone.state_bytes()


def test_adam_state_round_trip() -> None:
    spec = _spec()
    pol = DeepQLearningPDS(spec, {"optimizer": "adam", "lr": 0.001}, seed=1)
    run_operator(_trace(400), pol)
    clone = DeepQLearningPDS.from_state(_spec(), pol.state_bytes())
    for m, n in zip(pol.net.m, clone.net.m, strict=True):
        assert np.array_equal(m, n)
    r1 = run_operator(_trace(300, seed=9), pol, k0=np.array([2, 0, 0]))
    r2 = run_operator(_trace(300, seed=9), clone, k0=np.array([2, 0, 0]))
    assert np.array_equal(r1.deployment, r2.deployment)


@pytest.mark.parametrize("cls", CLASSES)
def test_reconfigure_keeps_the_network(cls) -> None:
    spec = _spec()
    pol = cls(spec, seed=0)
    run_operator(_trace(300), pol)
    weights = [p.copy() for p in pol.net.params()]
    _, before = pol.action_values(np.array([2, 0, 0]), 300.0)
    pol.reconfigure(CostWeights(perf=0.2, res=0.6, rcf=0.2), r_max_s=0.1)
    for p, q in zip(pol.net.params(), weights, strict=True):
        assert np.array_equal(p, q)
    _, after = pol.action_values(np.array([2, 0, 0]), 300.0)
    if cls is DeepQLearning:
        assert np.array_equal(before, after)  # model-free: the same network gives the same values
    else:
        assert not np.allclose(before, after)  # the known cost follows the new weights at once
    data = pol.state_bytes()
    clone = cls.from_state(_spec(), data)
    assert clone.spec.r_max_s == 0.1 and clone.spec.weights.res == 0.6


def test_bad_params_name_the_field() -> None:
    spec = _spec()
    with pytest.raises(ValueError, match="params.lr"):
        DeepQLearning(spec, {"lr": -1.0})
    with pytest.raises(ValueError, match="params.optimizer"):
        DeepQLearning(spec, {"optimizer": "rmsprop"})
    with pytest.raises(ValueError, match="params.encoding"):
        DeepQLearningPDS(spec, {"encoding": "huge"})
    with pytest.raises(ValueError, match="params.approx_speedup_error"):
        DeepQLearningPDSPlus(spec, {"approx_speedup_error": 1.5})
    with pytest.raises(ValueError, match="params.nope"):
        DeepQLearning(spec, {"nope": 1})


def _greedy_cost(pol, trace: np.ndarray) -> float:
    """Average cost of the agent's current greedy policy over ``trace`` (no learning, no exploration)."""
    spec = pol.spec
    w = spec.weights
    k = np.array([1, 0, 0])
    total = 0.0
    for rate in trace:
        rate = float(rate)
        viol = _violated(spec, k, rate)
        acts, values = pol.action_values(k, rate)
        a = int(acts[int(np.argmin(values))])
        total += w.perf * viol + w.res * spec.price(k) / spec.c_max + w.rcf * (a != 0)
        k = k + pol.deltas[a]
    return total / len(trace)


@pytest.mark.parametrize("cls", [DeepQLearning, DeepQLearningPDS])
def test_learning_lowers_the_cost_of_the_greedy_policy(cls) -> None:
    """Averaged over three seeds (one untrained random network can be lucky), 8,000 periods of learning on a
    synthetic daily-like trace cut the greedy policy's cost on a held-out trace well below the untrained one's."""
    evaluation = _trace(800, seed=42)
    untrained, trained = [], []
    for seed in (5, 6, 7):
        untrained.append(_greedy_cost(cls(_spec(k_max=6), seed=seed), evaluation))
        pol = cls(_spec(k_max=6), seed=seed)
        run_operator(_trace(8000, seed=1), pol)
        trained.append(_greedy_cost(pol, evaluation))
    assert np.mean(trained) < 0.8 * np.mean(untrained)
