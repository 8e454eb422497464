"""Model-based reinforcement learning with full backups [``model-based``] (paper 000, Alg. 1; paper 004, Sec. 6.2.2).

What it learns and what it knows
--------------------------------
- The rate-level transition matrix ``P[l, l']`` from counts of observed level transitions (a level never left
  is assumed to stay put). The rate process does not depend on the action, so the deployment part of the next
  state is known: ``k' = k + a``.
- The unknown cost, i.e. the probability of violating R_max, per *performance class* and rate level (its
  sufficient statistic, see below), from counts of observed violations, projected on the monotone set: more
  capacity (more replicas, or a faster slowest type) never violates more and a higher rate level never
  violates less. The projection is the smallest monotone majorant of the observed frequencies; entries never
  observed take the optimistic value it implies (0 until something easier was seen violating), which is what
  drives exploration (no epsilon-greedy).
- The known costs exactly: resource cost ``w_res price(k) / C_max`` and reconfiguration ``w_rcf 1[a != 0]``.
- Value-iteration sweeps (full backups of every state) over the learned model every ``sweep_every`` steps; the
  greedy decision re-evaluates the one-step look-ahead with the cost estimates of this very step.

Scaling to 10 node types and K_max = 20
---------------------------------------
The full space has ~30 million deployments x 30 levels; the formulation here has 8,750 deployments x 30 levels
(2.1 MB per value table) and the whole trace runs in minutes. Three observations make it exact where it matters:

1. *Sufficient statistic of the unknown cost.* With round-robin balancing and the worst-replica response time,
   each replica receives lambda/n and the slowest type is the worst, so the response time of ``k`` depends only
   on ``(n = sum k, slowest type present)``: 20 x 10 = 200 classes. The violation model is learned per
   (class, level) -- 6,000 numbers -- and every deployment shares the statistics of its class. (Other queueing
   models make every deployment its own class and need the full space, which is fine for small N_res.)
2. *Dominance of mixed deployments.* The price is additive and non-decreasing in speed on every paper
   infrastructure, so a deployment mixing types has the performance of ``n`` replicas of its slowest type and
   costs at least as much: it is only worth holding while moving from one type to another. The policy works on
   the deployments that mix at most two types (``max_mixed_types``), which contain every such move between two
   homogeneous deployments. The actions stay the paper's (add/remove one replica of one type per period); those
   that would leave the space are not proposed.
3. *Exactness check.* Restricting the actions can only raise the optimal values; if the full problem's optimal
   policy, started from one replica, never leaves the restricted space, the two problems have the same values on
   every state that policy reaches. ``tests/policies/test_dp_optimality.py`` solves both problems with the true
   model on small instances (3 types, K_max 6 and 10, infrastructures A and B) and asserts exactly this; on the
   Taxi model the optimal policy visits at most 8 deployments even with 10 types (K_max 6 and 8, checked
   offline), all within two types.

Small instances (``count_deployments <= FULL_SPACE_LIMIT``, e.g. the paper's 3 types, K_max 10: 285 deployments)
use the full space, exactly as the authors' algorithm.

Cost of a sweep is one (D x L) @ (L x L) product, one gather over the E in-space (deployment, action) edges and a
segmented minimum: O(E L) with E ~ 45,000 edges for 10 types and K_max 20. With ``sweep_every = 0`` the period
between sweeps is chosen so that at most ``SWEEP_BUDGET`` edge-level backups are done per step on average (1 for
the paper's small instance, i.e. a sweep every step as in Alg. 1).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from policies.base import Observation, Policy
from policies.model import OperatorSpec
from policies.om import mdp

# ---- hyperparameters (paper defaults; CleanRL style) ------------------------------------------------------------
SWEEP_EVERY = 0  # steps between value-iteration sweeps; 0 = automatic from the size of the space
SWEEPS_PER_UPDATE = 1  # full backups per update (Alg. 1: one)
WARMUP_STEPS = 1000  # sweep at every step during the first steps, whatever sweep_every says
SWEEP_BUDGET = 60_000  # automatic sweep_every: average (edge x level) backups per step
MAX_MIXED_TYPES = 0  # deployments mixing more node types are left out; 0 = automatic (full space when small)
FULL_SPACE_LIMIT = 5_000  # automatic: use the full deployment space up to this many deployments
RECONFIGURE_SWEEPS = 300  # sweeps run at once after new weights or a new R_max


def choose_max_types(spec: OperatorSpec, max_mixed_types: int) -> int | None:
    """The ``max_types`` of the deployment space: ``None`` (full) when small or asked for, else 2 by default."""
    if max_mixed_types > 0:
        return None if max_mixed_types >= spec.n_res else max_mixed_types
    if mdp.count_deployments(spec.n_res, spec.k_max, spec.k_min) <= FULL_SPACE_LIMIT:
        return None
    return 2


class ModelBased(Policy):
    """Model-based RL with full backups over a learned rate-transition matrix and a learned violation model."""

    name: ClassVar[str] = "model-based"
    _explains: ClassVar[bool] = True
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "sweep_every": SWEEP_EVERY,
        "sweeps_per_update": SWEEPS_PER_UPDATE,
        "warmup_steps": WARMUP_STEPS,
        "max_mixed_types": MAX_MIXED_TYPES,
        "reconfigure_sweeps": RECONFIGURE_SWEEPS,
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        for key in ("sweep_every", "warmup_steps", "max_mixed_types", "reconfigure_sweeps"):
            if params[key] < 0:
                raise ValueError(f"params.{key}: must be >= 0, got {params[key]}")
        if params["sweeps_per_update"] < 1:
            raise ValueError(f"params.sweeps_per_update: must be >= 1, got {params['sweeps_per_update']}")

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(spec, params, seed)
        self.space = mdp.build_space(spec, choose_max_types(spec, self.params["max_mixed_types"]))
        n_levels = spec.rate_levels.n
        n_edges = len(self.space.edge_src)
        every = self.params["sweep_every"]
        self.sweep_every = every if every > 0 else max(1, math.ceil(n_edges * n_levels / SWEEP_BUDGET))
        self.trans_counts = np.zeros((n_levels, n_levels))
        self.visits = np.zeros((self.space.n_classes, n_levels))
        self.violations = np.zeros((self.space.n_classes, n_levels))
        self.v_hat = np.zeros((self.space.n_classes, n_levels))
        self.future = np.zeros((self.space.size, n_levels))  # min_a [rcf + gamma E V(next)], per (d, l)
        self.sweeps_done = 0
        self._model_key = self._current_key()
        self._refresh_derived()

    # ---- model estimates -----------------------------------------------------------------------------------
    def _current_key(self) -> list[float]:
        w = self.spec.weights
        return [w.perf, w.res, w.rcf, self.spec.r_max_s]

    def _refresh_derived(self) -> None:
        """Everything computed from the counts, the weights and the space (not stored in the state)."""
        self.p_hat = mdp.transition_matrix(self.trans_counts)
        self._res_cost = (self.spec.weights.res / float(self.spec.c_max)) * self.space.price
        self._sweeper = mdp.Sweeper(self.space, self.spec.rate_levels.n)
        self._cost: np.ndarray | None = None

    def _project(self) -> None:
        """v_hat = smallest monotone majorant of the observed violation frequencies (0 where nothing forces)."""
        new = monotone_majorant(self.violations, self.visits, self.space)
        if not np.array_equal(new, self.v_hat):
            self.v_hat = new
            self._cost = None

    def _sweep(self, n: int) -> None:
        if self._cost is None:
            self._cost = self._state_cost()
        for _ in range(n):
            self.future = self._sweeper.sweep(
                self._cost, self.p_hat, self.future, self.spec.weights.rcf, self.spec.gamma
            )
        self.sweeps_done += n

    def _state_cost(self) -> np.ndarray:
        """cs[d, l] = w_perf v_hat[class(d), l] + w_res price(d) / C_max (D x L)."""
        cost = np.take(self.v_hat, self.space.cls, axis=0)
        cost *= self.spec.weights.perf
        cost += self._res_cost[:, None]
        return cost

    # ---- learning ------------------------------------------------------------------------------------------
    def _learn(
        self,
        k_prev: np.ndarray,
        rate_prev: float,
        action: int,
        cost: float,
        k_now: np.ndarray,
        rate_now: float,
        violated: bool,
        obs: Observation | None,
    ) -> None:
        levels = self.spec.rate_levels
        l_prev, l_now = levels.level(rate_prev), levels.level(rate_now)
        self.trans_counts[l_prev, l_now] += 1.0
        row = self.trans_counts[l_prev]
        self.p_hat[l_prev] = row / row.sum()
        d = self.space.lookup(k_now)
        if d >= 0:
            c = self.space.cls[d]
            old_freq = self.violations[c, l_now] / self.visits[c, l_now] if self.visits[c, l_now] else -1.0
            self.visits[c, l_now] += 1.0
            self.violations[c, l_now] += 1.0 if violated else 0.0
            new_freq = self.violations[c, l_now] / self.visits[c, l_now]
            if new_freq != old_freq:
                self._project()
        step = self.t + 1
        if step <= self.params["warmup_steps"] or step % self.sweep_every == 0:
            self._sweep(self.params["sweeps_per_update"])

    # ---- deciding ------------------------------------------------------------------------------------------
    def _q_values(self, d: int, level: int) -> dict[int, float]:
        """``rcf(a) + gamma sum_l' P[l, l'] (cs(d+a, l') + future(d+a, l'))`` with this step's estimates."""
        acts, dst, moves = self.space.moves(d)
        value = np.take(self.v_hat, self.space.cls[dst], axis=0)
        value *= self.spec.weights.perf
        value += self._res_cost[dst, None]
        value += self.future[dst]
        q = value @ self.p_hat[level]
        q *= self.spec.gamma
        q[moves] += self.spec.weights.rcf
        return dict(zip(acts, q.tolist(), strict=True))

    def _decide(
        self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool
    ) -> tuple[int, dict[int, float]]:
        d = self.space.lookup(k)
        if d < 0:
            return outside_space_action(self.space, k, self.spec), {}
        q = self._q_values(d, self.spec.rate_levels.level(rate))
        return mdp.greedy(q), (q if explain else {})

    # ---- reconfiguration -----------------------------------------------------------------------------------
    def _on_reconfigure(self) -> None:
        key = self._current_key()
        if key == self._model_key:
            return
        if key[3] != self._model_key[3]:
            # violation statistics were about the old bound: they no longer describe the unknown cost
            self.visits[:] = 0.0
            self.violations[:] = 0.0
            self._project()
        self._model_key = key
        self._refresh_derived()
        self._sweep(self.params["reconfigure_sweeps"])

    # ---- durable state -------------------------------------------------------------------------------------
    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {"sweeps_done": self.sweeps_done, "model_key": self._model_key, "space_size": self.space.size}
        arrays = {
            "trans_counts": self.trans_counts,
            "visits": self.visits,
            "violations": self.violations,
            "v_hat": self.v_hat,
            "future": self.future,
            "p_hat": self.p_hat,
        }
        return meta, arrays

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.space = mdp.build_space(self.spec, choose_max_types(self.spec, self.params["max_mixed_types"]))
        if int(meta["space_size"]) != self.space.size:
            raise ValueError(
                f"state: deployment space of {meta['space_size']} deployments does not match this operator's "
                f"({self.space.size}); node types or K_max changed"
            )
        every = self.params["sweep_every"]
        n_edges = len(self.space.edge_src)
        self.sweep_every = (
            every if every > 0 else max(1, math.ceil(n_edges * self.spec.rate_levels.n / SWEEP_BUDGET))
        )
        self.trans_counts = arrays["trans_counts"].copy()
        self.visits = arrays["visits"].copy()
        self.violations = arrays["violations"].copy()
        self.v_hat = arrays["v_hat"].copy()
        self.future = arrays["future"].copy()
        self.sweeps_done = int(meta["sweeps_done"])
        self._model_key = [float(x) for x in meta["model_key"]]
        self._refresh_derived()
        self.p_hat = arrays["p_hat"].copy()


def monotone_majorant(violations: np.ndarray, visits: np.ndarray, space: mdp.DeploymentSpace) -> np.ndarray:
    """Smallest function >= the observed violation frequencies that is monotone: non-increasing in capacity
    (more replicas, faster slowest type: grid classes only) and non-decreasing in the rate level.

    ``violations``/``visits`` are (classes x levels) counts; unobserved entries only receive what monotonicity
    forces from observed ones (0 otherwise).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        freq = np.where(visits > 0, violations / np.where(visits > 0, visits, 1.0), 0.0)
    n_a, n_b = space.grid_shape
    f = freq.reshape(n_a, n_b, -1)
    f = np.maximum.accumulate(f, axis=2)  # higher level: never less
    if space.grid:
        f = np.maximum.accumulate(f[::-1], axis=0)[::-1]  # fewer replicas: never less
        f = np.maximum.accumulate(f[:, ::-1], axis=1)[:, ::-1]  # slower slowest type: never less
    return np.ascontiguousarray(f.reshape(freq.shape))


def outside_space_action(space: mdp.DeploymentSpace, k: np.ndarray, spec: OperatorSpec) -> int:
    """Action for a deployment outside the (reduced) space: remove one replica of the present type with the
    fewest replicas (first in order), which moves towards the space; do nothing when that is not allowed."""
    k = np.asarray(k)
    if int(k.sum()) > spec.k_min:
        present = np.flatnonzero(k > 0)
        t = int(present[np.argmin(k[present])])
        return 1 + t
    return 0
