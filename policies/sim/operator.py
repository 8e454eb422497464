"""Single-operator trace-driven simulation with exactly the semantics of paper 001's benchmark.

Per step t with input rate lambda_t (see ``shared/design/paper-benchmark.md``):
1. the violation and resource terms are evaluated on the deployment k_t in place, at rate lambda_t;
2. the policy observes (k_t, lambda_t, violation) and picks an action, which is applied at once;
3. the reconfiguration term of that action is charged to step t.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from policies.base import JUMP, Observation, Policy, action_delta
from policies.operator_model import OperatorSpec, QueueModel


@dataclass
class SimResult:
    """Per-step arrays of one run and their summary.

    ``rate`` (tuples/s), ``response_time`` (s, inf when unstable), ``violation`` and ``reconfiguration``
    (bool), ``price`` (deployment price, $/h), ``cost`` (weighted cost of eq. 2), ``replicas`` (total k),
    ``deployment`` (steps x N_res, replicas per type in place during the step), ``action`` (the action chosen
    at the step, applied at once; its reconfiguration term is charged to the step).
    """

    rate: np.ndarray
    response_time: np.ndarray
    violation: np.ndarray
    reconfiguration: np.ndarray
    price: np.ndarray
    cost: np.ndarray
    replicas: np.ndarray
    deployment: np.ndarray
    wall_seconds: float
    meta: dict[str, Any] = field(default_factory=dict)
    action: np.ndarray | None = None  # action index chosen at each step (0 = nothing), see policies.base

    @property
    def steps(self) -> int:
        return len(self.rate)

    def summary(self) -> dict[str, Any]:
        """avg_cost, violations_pct, reconfigurations_pct, avg_resource_cost ($/h), avg_replicas, wall_seconds."""
        return {
            "steps": self.steps,
            "avg_cost": float(self.cost.mean()),
            "violations_pct": 100.0 * float(self.violation.mean()),
            "reconfigurations_pct": 100.0 * float(self.reconfiguration.mean()),
            "avg_resource_cost": float(self.price.mean()),
            "avg_replicas": float(self.replicas.mean()),
            "wall_seconds": self.wall_seconds,
        }


class _ConfigCache:
    """Response time and price of a deployment, cached per deployment (the hot path of a simulation)."""

    def __init__(self, spec: OperatorSpec) -> None:
        self.spec = spec
        self.speedups = spec.speedups
        self.prices = spec.prices
        # the closed form below is the plain M/G/1 queue model's (an engine model subclass computes its own)
        self.fast = (
            type(spec.model) is QueueModel
            and spec.model.balancing == "round_robin"
            and spec.model.aggregation == "worst"
        )
        self._cache: dict[tuple[int, ...], tuple[int, float, float, float]] = {}

    def entry(self, key: tuple[int, ...], k: np.ndarray) -> tuple[int, float, float, float]:
        """(total replicas, mean service time of the slowest type in s, its variance in s^2, price in $/h)."""
        hit = self._cache.get(key)
        if hit is None:
            m = self.spec.model
            present = k > 0
            slowest = float(self.speedups[present].min())
            hit = (
                int(k.sum()),
                m.service_mean_s / slowest,
                m.variance / slowest**2,
                float(np.dot(k, self.prices)),
            )
            self._cache[key] = hit
        return hit

    def response_time(self, key: tuple[int, ...], k: np.ndarray, rate: float) -> tuple[float, float]:
        """(response time in s, price in $/h) of deployment k at ``rate`` tuples/s."""
        total, s, var, price = self.entry(key, k)
        if not self.fast:
            return self.spec.model.response_time(k, self.speedups, rate), price
        lam = rate / total
        rho = lam * s
        if rho >= 1.0:
            return float("inf"), price
        return s + lam / 2.0 * (var + s * s) / (1.0 - rho), price


def run_operator(
    trace: np.ndarray,
    policy: Policy,
    spec: OperatorSpec | None = None,
    k0: np.ndarray | None = None,
    steps: int | None = None,
) -> SimResult:
    """Run ``policy`` over ``trace`` (tuples/s per step) in paper mode and return per-step results.

    ``spec`` defaults to the policy's own (the true model: policies that need an approximate model perturb their
    own copy). ``k0`` defaults to one replica of type 0. The simulator draws no random numbers: every random
    choice of a run is the policy's, from its own seeded generator.
    """
    spec = spec or policy.spec
    trace = np.asarray(trace, dtype=float)
    if steps is not None:
        trace = trace[:steps]
    n = len(trace)
    n_res = spec.n_res
    k = np.zeros(n_res, dtype=np.int64) if k0 is None else np.array(k0, dtype=np.int64)
    if k0 is None:
        k[0] = 1
    if len(k) != n_res or k.min() < 0 or not spec.k_min <= int(k.sum()) <= spec.k_max:
        raise ValueError(
            f"k0: must have {n_res} non-negative entries summing to k_min..k_max, got {k.tolist()}"
        )
    cache = _ConfigCache(spec)
    model, speedups, fast = spec.model, cache.speedups, cache.fast
    r_max = spec.r_max_s
    inf = float("inf")

    # per-step records kept in Python lists (cheaper than numpy element writes in the hot loop)
    rt = [0.0] * n
    viol = [False] * n
    acts = [0] * n
    dep_idx = [0] * n
    deployments: list[np.ndarray] = []
    index_of: dict[tuple[int, ...], int] = {}

    def enter(k: np.ndarray) -> tuple[int, int, float, float]:
        key = tuple(k.tolist())
        idx = index_of.get(key)
        if idx is None:
            idx = index_of[key] = len(deployments)
            deployments.append(k.copy())
        total, s, var, _ = cache.entry(key, k)
        return idx, total, s, var

    act = policy.act
    # a policy that learns its model (spec.model_mode "hint"/"learn") is given what a real engine measures: the
    # busiest replica's utilisation and the response time, from the simulator's true model
    feed = policy.spec.model_mode != "given"
    rates = trace.tolist()
    idx, total, s, var = enter(k)
    start = time.perf_counter()
    for t in range(n):
        rate = rates[t]
        if fast:
            lam = rate / total
            rho = lam * s
            r = inf if rho >= 1.0 else s + lam / 2.0 * (var + s * s) / (1.0 - rho)
        else:
            r = model.response_time(k, speedups, rate)
        violated = r > r_max
        if feed:
            u = model.utilisation(k, speedups, rate)
            processed = min(rate, model.capacity(k, speedups))
            a = act(k, rate, violated, Observation(k, rate, r, violated, u, True, processed))
        else:
            a = act(k, rate, violated)
        rt[t] = r
        viol[t] = violated
        dep_idx[t] = idx
        if a:
            acts[t] = a
            if a == JUMP:
                k = policy.target_of(k, a)
            else:
                typ, d = action_delta(a, n_res)
                k = k.copy()
                k[typ] += d
            idx, total, s, var = enter(k)
    table = np.array(deployments, dtype=np.int64).reshape(len(deployments), n_res)
    at = np.array(dep_idx, dtype=np.int64)
    deployment = table[at].astype(np.int16)
    price = (table @ spec.prices.astype(float))[at]
    replicas = table.sum(axis=1)[at]
    violation = np.array(viol, dtype=bool)
    reconfiguration = np.array(acts, dtype=np.int64) != 0
    w = spec.weights
    cost = w.perf * violation + w.res * price / spec.cost_scale + w.rcf * reconfiguration
    wall = time.perf_counter() - start
    return SimResult(
        trace.copy(),
        np.array(rt),
        violation,
        reconfiguration,
        price,
        cost,
        replicas,
        deployment,
        wall,
        {"policy": policy.name},
        np.array(acts, dtype=np.int16),
    )
