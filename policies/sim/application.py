"""Trace-driven simulation of a whole application (a DAG of operators), one OM policy per operator, the AM in
the loop.

Per control period ``t`` with source rate ``lambda_t`` (tuples/s), the paper-mode timing of
:mod:`policies.sim.operator` applied to every operator:

1. each operator ``u`` receives ``gain_u * lambda_t`` (selectivities, :meth:`Application.rate_gains`); its mean
   response time is evaluated on the deployment ``k_u`` in place (its true queue model), and it violates its own
   bound if that time exceeds the bound the AM gave it;
2. the end-to-end response time is the maximum over source-to-sink paths of the sum of the operators' response
   times; the application violates in ``t`` when it exceeds R_max;
3. every OM observes ``(k_u, rate_u, violated_u)`` and proposes an action (or a centralized agent proposes the
   joint action); the AM's arbiter grants or denies each proposal; a denied OM is told the applied action was a
   no-op (``Policy.override_last_action(0)``) so it learns from what really happened;
4. the granted changes are applied at once; the period counts as one application-level reconfiguration when any
   operator changed (changes batched in one period count once).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from policies.am.arbiter import Arbiter, Request
from policies.am.guard import ViolationBudgetGuard
from policies.app_graphs import Application
from policies.base import JUMP, Observation, Policy, action_delta
from policies.operator_model import NodeType
from policies.sim.operator import _ConfigCache


class JointController(Protocol):
    """A centralized agent: one action per operator from the joint state."""

    name: str

    def act(
        self, ks: list[np.ndarray], source_rate: float, violated: bool, rates: np.ndarray
    ) -> list[int]: ...  # pragma: no cover

    def override_last_actions(self, applied: list[int]) -> None: ...  # pragma: no cover


@dataclass
class AppSimResult:
    """Per-step arrays of one application run and their summary.

    ``rate``: source rate (tuples/s); ``response_time``: end-to-end (s, inf when an operator is unstable);
    ``violation``/``reconfiguration``: application-level booleans; ``price``: sum of the deployments' prices
    ($/h); ``op_response_time``, ``op_violation``, ``replicas``, ``denied`` (steps x operators): per operator.
    """

    rate: np.ndarray
    response_time: np.ndarray
    violation: np.ndarray
    reconfiguration: np.ndarray
    price: np.ndarray
    op_response_time: np.ndarray
    op_violation: np.ndarray
    replicas: np.ndarray
    denied: np.ndarray
    wall_seconds: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return len(self.rate)

    def summary(self, eta_v: float | None = None, eta_r: float | None = None) -> dict[str, Any]:
        """avg_resource_cost ($/h per period), total_resource_cost ($/h summed over periods), violations_pct,
        reconfigurations_pct, avg_replicas (total over operators), denied_pct (of operator-periods),
        wall_seconds and, when budgets are given, whether each is met."""
        out: dict[str, Any] = {
            "steps": self.steps,
            "avg_resource_cost": float(self.price.mean()),
            "total_resource_cost": float(self.price.sum()),
            "violations_pct": 100.0 * float(self.violation.mean()),
            "reconfigurations_pct": 100.0 * float(self.reconfiguration.mean()),
            "avg_replicas": float(self.replicas.sum(axis=1).mean()),
            "denied_pct": 100.0 * float(self.denied.mean()),
            "wall_seconds": self.wall_seconds,
        }
        if eta_v is not None:
            out["violations_met"] = bool(self.violation.mean() <= eta_v + 1e-12)
        if eta_r is not None:
            out["reconfigurations_met"] = bool(self.reconfiguration.mean() <= eta_r + 1e-12)
        return out


def simulate_application(
    app: Application,
    trace: np.ndarray,
    node_types: tuple[NodeType, ...],
    oms: list[Policy] | None = None,
    arbiter: Arbiter | None = None,
    bounds_s: np.ndarray | None = None,
    centralized: JointController | None = None,
    models: list[Any] | None = None,
    k0: list[np.ndarray] | None = None,
    steps: int | None = None,
    am_hook: Callable[[int, np.ndarray], Any] | None = None,
    hook_every: int = 0,
    guard: ViolationBudgetGuard | None = None,
) -> AppSimResult:
    """Run ``app`` over ``trace`` (source tuples/s per period).

    ``oms``: one policy per operator (decentralized), or ``centralized``: one joint agent. ``arbiter``: the AM's
    arbitration (None = every proposal granted). ``bounds_s``: per-operator bounds (s) used for the operators'
    violation flags; defaults to the OMs' own ``spec.r_max_s`` (or R_max / number of operators on the longest
    path for a centralized run). ``models``: per-operator queue models of the simulated system (default: the
    application's true ones; the AM's BO passes fitted ones). ``k0``: initial deployments (default one replica
    of node type 0 per operator). ``am_hook``: the AM at run time: every ``hook_every`` periods it is called with
    the period index and the source rates observed so far; when it returns a configuration (``bounds_s`` and
    ``weights``) it is applied to the running OMs with ``Policy.reconfigure`` (they keep what they learned).
    ``guard``: the AM's violation-budget guard; it sees every period's application violation and, when it
    changes its scale, the OMs' cost weights become the tuned weights under that scale
    (:meth:`ViolationBudgetGuard.weights`) from the next period on.
    """
    if (oms is None) == (centralized is None):
        raise ValueError("oms/centralized: give exactly one of them")
    if guard is not None and oms is None:
        raise ValueError("guard: scales the OMs' cost weights, so it needs oms")
    if oms is not None and len(oms) != app.n:
        raise ValueError(f"oms: need one policy per operator ({app.n}), got {len(oms)}")
    trace = np.asarray(trace, dtype=float)
    if steps is not None:
        trace = trace[:steps]
    n_steps, n_ops, n_res = len(trace), app.n, len(node_types)
    specs = [app.operator_spec(u, node_types) for u in range(n_ops)]
    if models is not None:
        for u, m in enumerate(models):
            specs[u].model = m
    caches = [_ConfigCache(s) for s in specs]
    if bounds_s is None:
        if oms is not None:
            bounds = np.array([om.spec.r_max_s for om in oms], dtype=float)
        else:
            longest = max(len(p) for p in app.paths())
            bounds = np.full(n_ops, app.r_max_s / longest)
    else:
        bounds = np.asarray(bounds_s, dtype=float)
    gains = app.rate_gains()
    paths = [list(p) for p in app.paths()]
    r_max = app.r_max_s

    ks = []
    for u in range(n_ops):
        k = np.zeros(n_res, dtype=np.int64)
        if k0 is None:
            k[0] = 1
        else:
            k[:] = k0[u]
        ks.append(k)
    keys = [tuple(k.tolist()) for k in ks]

    e2e = np.empty(n_steps)
    viol = np.zeros(n_steps, dtype=bool)
    rcf = np.zeros(n_steps, dtype=bool)
    price = np.empty(n_steps)
    op_rt = np.empty((n_steps, n_ops))
    op_viol = np.zeros((n_steps, n_ops), dtype=bool)
    replicas = np.empty((n_steps, n_ops), dtype=np.int16)
    denied = np.zeros((n_steps, n_ops), dtype=bool)

    acts = [om.act for om in oms] if oms is not None else []
    # OMs that learn their model (spec.model_mode hint/learn) are given the measured utilisation and response time
    feeds = [om.spec.model_mode != "given" for om in oms] if oms is not None else []
    start = time.perf_counter()
    r = [0.0] * n_ops
    reconfigured_at: list[int] = []
    guard_changes: list[tuple[int, float]] = []
    tuned_weights = [om.spec.weights for om in oms or []]
    for t in range(n_steps):
        if am_hook is not None and hook_every > 0 and t > 0 and t % hook_every == 0:
            cfg = am_hook(t, trace[:t])
            if cfg is not None:
                bounds = np.asarray(cfg.bounds_s, dtype=float)
                tuned_weights = [cfg.weights] * n_ops
                for u, om in enumerate(oms or []):
                    om.reconfigure(
                        cfg.weights if guard is None else guard.weights(cfg.weights), float(bounds[u])
                    )
                reconfigured_at.append(t)
        src = float(trace[t])
        rates = gains * src
        total_price = 0.0
        for u in range(n_ops):
            r[u], p = caches[u].response_time(keys[u], ks[u], float(rates[u]))
            total_price += p
        worst = max(sum(r[u] for u in path) for path in paths)
        app_violated = worst > r_max
        e2e[t] = worst
        viol[t] = app_violated
        price[t] = total_price
        op_rt[t] = r
        for u in range(n_ops):
            op_viol[t, u] = r[u] > bounds[u]
            replicas[t, u] = caches[u].entry(keys[u], ks[u])[0]

        if oms is not None:
            proposed = [
                acts[u](ks[u], float(rates[u]), bool(op_viol[t, u]))
                if not feeds[u]
                else acts[u](
                    ks[u],
                    float(rates[u]),
                    bool(op_viol[t, u]),
                    Observation(
                        ks[u],
                        float(rates[u]),
                        r[u],
                        bool(op_viol[t, u]),
                        specs[u].model.utilisation(ks[u], caches[u].speedups, float(rates[u])),
                        True,
                        min(float(rates[u]), specs[u].model.capacity(ks[u], caches[u].speedups)),
                        0.0 if arbiter is None else arbiter.bucket.wait_after_one(),
                    ),
                )
                for u in range(n_ops)
            ]
        else:
            assert centralized is not None
            proposed = list(centralized.act(ks, src, app_violated, rates))
        if arbiter is not None and any(proposed):
            requests = []
            for u in range(n_ops):
                total, s_slow, _, _ = caches[u].entry(keys[u], ks[u])
                target = oms[u].target_of(ks[u], JUMP) if oms is not None and proposed[u] == JUMP else None
                requests.append(
                    Request(u, ks[u], proposed[u], bool(op_viol[t, u]), rates[u] / total * s_slow, target)
                )
            applied = [d.applied for d in arbiter.arbitrate(requests)]
        else:
            if arbiter is not None:
                arbiter.arbitrate([])
            applied = proposed
        if applied != proposed:
            if oms is not None:
                for u in range(n_ops):
                    if applied[u] != proposed[u]:
                        oms[u].override_last_action(applied[u])
                        denied[t, u] = True
            else:
                assert centralized is not None
                centralized.override_last_actions(applied)
                denied[t] = [a != b for a, b in zip(applied, proposed, strict=True)]
        changed = False
        for u in range(n_ops):
            a = applied[u]
            if a:
                changed = True
                if a == JUMP:
                    assert oms is not None
                    k = oms[u].target_of(ks[u], a)
                else:
                    typ, d = action_delta(a, n_res)
                    k = ks[u].copy()
                    k[typ] += d
                ks[u] = k
                keys[u] = tuple(k.tolist())
        rcf[t] = changed
        if guard is not None and (change := guard.update(app_violated)) is not None:
            for u, om in enumerate(oms or []):
                om.reconfigure(guard.weights(tuned_weights[u]))
            guard_changes.append((t, change[0]))
    wall = time.perf_counter() - start
    name = centralized.name if centralized is not None else ",".join(sorted({om.name for om in oms or []}))
    return AppSimResult(
        trace.copy(),
        e2e,
        viol,
        rcf,
        price,
        op_rt,
        op_viol,
        replicas,
        denied,
        wall,
        {
            "application": app.name,
            "controller": name,
            "am_reconfigured_at": reconfigured_at,
            "guard_changes": guard_changes,
        },
    )
