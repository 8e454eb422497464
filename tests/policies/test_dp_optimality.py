"""dp is the yardstick: the reduced deployment space gives the full space's values where the optimum goes, and no
online policy beats dp (beyond noise) on a trace drawn from a known Markov chain of rate levels."""

from __future__ import annotations

import numpy as np
import pytest

from policies.om import mdp
from policies.om.offline import OfflineOptimum, uniform_level_rates
from policies.registry import OM_POLICIES, load
from policies.sim.operator import run_operator
from policies.sim.scenario import build_policy, initial_deployment, paper_spec
from policies.sim.trace import load_trace


def optimal_closure(
    space: mdp.DeploymentSpace, value: np.ndarray, p: np.ndarray, w_rcf: float, gamma: float, start: int
):
    """Every (deployment, level) the greedy policy of ``value`` can reach from ``start`` at any level."""
    n_levels = p.shape[0]
    policy = np.empty((space.size, n_levels), dtype=np.int64)
    for d in range(space.size):
        acts = np.flatnonzero(space.succ[d] >= 0)
        dst = space.succ[d, acts]
        q = gamma * value[dst] @ p.T + np.where(acts == 0, 0.0, w_rcf)[:, None]  # (actions, levels)
        policy[d] = dst[np.argmin(q, axis=0)]
    reached = np.zeros((space.size, n_levels), dtype=bool)
    stack = [(start, lvl) for lvl in range(n_levels)]
    for s in stack:
        reached[s] = True
    while stack:
        d, lvl = stack.pop()
        nxt = policy[d, lvl]
        for l2 in np.flatnonzero(p[lvl] > 0):
            if not reached[nxt, l2]:
                reached[nxt, l2] = True
                stack.append((nxt, l2))
    return reached


@pytest.mark.parametrize("infra,n_res,k_max", [("A", 3, 6), ("B", 3, 6), ("A", 3, 10), ("B", 4, 8)])
def test_two_type_space_has_the_full_space_values_where_the_optimum_goes(
    taxi_head, infra, n_res, k_max
) -> None:
    trace = load_trace(taxi_head)
    spec = paper_spec(infra, n_res, k_max)
    full = OfflineOptimum.from_trace(spec, trace, {"max_mixed_types": n_res})
    reduced = OfflineOptimum.from_trace(paper_spec(infra, n_res, k_max), trace, {"max_mixed_types": 2})
    assert full.space.size == mdp.count_deployments(n_res, k_max)
    assert reduced.space.size < full.space.size
    idx = np.array([full.space.lookup(k) for k in reduced.space.deployments])
    # a restriction of the actions can only cost more ...
    assert (reduced.value >= full.value[idx] - 1e-7).all()
    # ... and costs exactly the same on every state the full problem's optimal policy reaches from one replica
    start = full.space.lookup(np.eye(n_res, dtype=np.int64)[0])
    reached = optimal_closure(full.space, full.value, full.p, spec.weights.rcf, spec.gamma, start)
    reached_deps = np.flatnonzero(reached.any(axis=1))
    assert ((full.space.deployments[reached_deps] > 0).sum(axis=1) <= 2).all()
    pos = {int(d): i for i, d in enumerate(idx)}
    rows = np.array([pos[int(d)] for d in reached_deps])
    np.testing.assert_allclose(reduced.value[rows], full.value[reached_deps], atol=1e-7)
    # and both act identically along the way
    for d in reached_deps:
        for lvl in np.flatnonzero(reached[d]):
            k = full.space.deployments[d]
            assert (
                reduced._decide(k, spec.rate_levels.rate(lvl), None, False)[0]
                == full._decide(k, spec.rate_levels.rate(lvl), None, False)[0]
            )


def mean_reverting_chain(n_levels: int, centre: float, rng: np.random.Generator) -> np.ndarray:
    """A known Markov chain of rate levels: mostly stay, step +-1 towards a centre, sometimes jump 2-4."""
    p = np.zeros((n_levels, n_levels))
    for lvl in range(n_levels):
        pull = np.clip((centre - lvl) / n_levels, -0.12, 0.12)
        up, down = 0.15 + pull, 0.15 - pull
        p[lvl, lvl] += 0.62
        p[lvl, min(lvl + 1, n_levels - 1)] += up
        p[lvl, max(lvl - 1, 0)] += down
        jump = rng.integers(2, 5)
        p[lvl, min(lvl + jump, n_levels - 1)] += 0.04
        p[lvl, max(lvl - jump, 0)] += 0.04
    return p / p.sum(axis=1, keepdims=True)


def synthetic_trace(spec, p: np.ndarray, steps: int, rng: np.random.Generator) -> np.ndarray:
    """Levels drawn from ``p`` and rates uniform inside each level (tuples/s)."""
    width = spec.rate_levels.width
    levels = np.empty(steps, dtype=np.int64)
    levels[0] = 12
    cdf = np.cumsum(p, axis=1)
    u = rng.random(steps)
    for i in range(1, steps):
        levels[i] = min(int(np.searchsorted(cdf[levels[i - 1]], u[i], side="right")), p.shape[0] - 1)
    return (levels + rng.random(steps)) * width


def available(names: list[str]) -> list[str]:
    out = []
    for name in names:
        try:
            load("om", name)
        except (ImportError, AttributeError):
            continue
        out.append(name)
    return out


ONLINE = ["model-based", "threshold", "threshold-speedup", "ql-pds-plus", "ds2", "hpa"]


@pytest.mark.slow
@pytest.mark.parametrize("infra", ["A", "B"])
def test_no_online_policy_beats_dp_on_a_known_markov_chain(infra) -> None:
    rng = np.random.default_rng(11)
    spec = paper_spec(infra, 3, 10)
    p = mean_reverting_chain(spec.rate_levels.n, 16.0, rng)
    trace = synthetic_trace(spec, p, 20_000, rng)
    dp = OfflineOptimum.from_model(spec, p, uniform_level_rates(spec))
    dp_cost = run_operator(trace, dp, k0=np.array([1, 0, 0])).summary()["avg_cost"]
    names = available(ONLINE)
    assert "model-based" in names and set(names) <= set(OM_POLICIES)
    costs = {}
    for name in names:
        pol = build_policy(name, paper_spec(infra, 3, 10), seed=0)
        costs[name] = run_operator(trace, pol, spec=spec, k0=initial_deployment(spec, pol)).summary()[
            "avg_cost"
        ]
    # dp minimises the expected discounted cost; on 20,000 steps the average of an online policy can only come
    # below it by sampling noise (a few per cent at most)
    for name, cost in costs.items():
        assert dp_cost <= cost * 1.03 + 1e-4, (name, cost, dp_cost)
    # and the learning policy gets close to it
    assert costs["model-based"] <= dp_cost * 1.25
