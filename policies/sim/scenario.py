"""The paper-001 single-operator scenario (``shared/design/paper-benchmark.md``): operator spec, initial deployment,
policy construction and one paper-mode run.

Defaults: mu = 180 tuples/s on a speedup-1 node, service-time variance (1/mu)^2 / 2 (M/G/1), round-robin
balancing, worst-replica response time, R_max = 50 ms, weights perf 0.6 / res 0.2 / rcf 0.2,
C_max = K_max * largest price of the infrastructure's whole 10-entry list, 30 rate levels up to 650 tuples/s,
gamma = 0.99. Infrastructure B2 uses price = speedup ** 1.5 (the authors' public code; the paper text says 1.1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from policies.base import Policy
from policies.operator_model import (
    PAPER_MU,
    CostWeights,
    OperatorSpec,
    QueueModel,
    infrastructure,
    infrastructure_c_max,
)
from policies.registry import load
from policies.sim.operator import SimResult, run_operator

PAPER_R_MAX_S = 0.050  # seconds
PAPER_WEIGHTS = CostWeights(perf=0.6, res=0.2, rcf=0.2)
INFRASTRUCTURES = ("A", "B", "B2")
STARTS = ("policy", "type0")


def paper_spec(
    infra: str,
    n_res: int,
    k_max: int,
    weights: CostWeights | None = None,
    r_max_s: float = PAPER_R_MAX_S,
    mu: float = PAPER_MU,
    kind: str = "mg1",
) -> OperatorSpec:
    """An ``OperatorSpec`` for the paper's benchmark on infrastructure ``infra`` (A, B or B2) with its first
    ``n_res`` node types, at most ``k_max`` replicas, service rate ``mu`` (tuples/s) and bound ``r_max_s`` (s)."""
    if infra not in INFRASTRUCTURES:
        raise ValueError(f"infra: unknown infrastructure {infra!r}: choose A, B or B2")
    if k_max < 1:
        raise ValueError(f"k_max: must be >= 1, got {k_max}")
    if not mu > 0:
        raise ValueError(f"mu: must be > 0 tuples/s, got {mu}")
    mean = 1.0 / mu
    model = QueueModel(service_mean_s=mean, service_var_s2=mean * mean / 2.0, kind=kind)
    return OperatorSpec(
        node_types=infrastructure(infra, n_res),
        k_max=k_max,
        r_max_s=r_max_s,
        weights=weights or PAPER_WEIGHTS,
        model=model,
        c_max=infrastructure_c_max(infra, k_max),
    )


def initial_deployment(spec: OperatorSpec, policy: Policy, start: str = "policy") -> np.ndarray:
    """The deployment a run starts from: one replica.

    ``start="policy"`` (paper-benchmark.md): of the policy's own type (``policy.initial_type()``, rule-based
    baselines), else of type 0. ``start="type0"``: of type 0 whatever the policy (the authors' older simulator, in
    which the operator's first replica is always type 0; it explains the published threshold rows for 6 and 10 node
    types: see docs/benchmarks.md).
    """
    if start not in STARTS:
        raise ValueError(f"start: must be one of {', '.join(STARTS)}, got {start!r}")
    k = np.zeros(spec.n_res, dtype=np.int64)
    chooser = getattr(policy, "initial_type", None)
    k[int(chooser()) if callable(chooser) and start == "policy" else 0] = 1
    return k


def build_policy(
    name: str, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0
) -> Policy:
    """The Operator Manager policy ``name`` from the registry, built on its own copy of ``spec``."""
    cls = load("om", name)
    own = OperatorSpec(
        node_types=spec.node_types,
        k_max=spec.k_max,
        r_max_s=spec.r_max_s,
        weights=spec.weights,
        model=spec.model,
        rate_levels=spec.rate_levels,
        c_max=spec.c_max,
        gamma=spec.gamma,
        k_min=spec.k_min,
        model_mode=spec.model_mode,
    )
    return cls(own, params or {}, seed)


def self_calibrating(spec: OperatorSpec) -> OperatorSpec:
    """The OM's view of ``spec`` as the control loop builds it: no rate range (learned, growing) and no model
    (learned from the operator's measurements; ``spec.model`` stays the simulator's truth)."""
    from dataclasses import replace

    return replace(spec, rate_levels=None, model_mode="learn")


def run_paper(
    trace: np.ndarray,
    policy_name: str,
    infra: str,
    n_res: int,
    k_max: int,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    weights: CostWeights | None = None,
    steps: int | None = None,
    start: str = "policy",
    mu: float = PAPER_MU,
    calibrate: bool = False,
    spec: OperatorSpec | None = None,
) -> SimResult:
    """One paper-mode run of ``policy_name`` over ``trace`` (tuples/s per step). The policy's random choices
    are all drawn from its generator seeded with ``seed``; the simulator itself draws none. Offline policies
    (those with a ``set_trace`` method, i.e. ``dp``) are given the trace unless ``params`` name a trace file.
    ``start``: see :func:`initial_deployment`. ``mu``: service rate on a speedup-1 node (tuples/s).
    ``calibrate``: the policy sees the :func:`self_calibrating` spec (learned rate range and model) instead of
    the paper's given range (30 levels up to 650 tuples/s) and true model. ``spec``: the operator to simulate
    instead of the paper's (a user's catalogue, bound, rate levels, gamma: ``policies.simulate``); ``infra``,
    ``n_res`` and ``k_max`` then only label the result."""
    if spec is None:
        spec = paper_spec(infra, n_res, k_max, weights, mu=mu)
    policy = build_policy(policy_name, self_calibrating(spec) if calibrate else spec, params, seed)
    trace = np.asarray(trace, dtype=float)[:steps]
    set_trace = getattr(policy, "set_trace", None)
    if callable(set_trace) and not (params or {}).get("trace_path"):
        set_trace(trace)  # offline policies (dp) are given the whole trace they will run on
    result = run_operator(trace, policy, spec=spec, k0=initial_deployment(spec, policy, start), steps=steps)
    result.meta.update(
        infra=infra,
        node_types=n_res,
        k_max=k_max,
        seed=seed,
        start=start,
        calibrate=calibrate,
        rate_range_tuples_s=policy.levels.max_rate,
        rerangings=policy.rerangings,
    )
    return result
