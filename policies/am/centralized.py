"""The "centralized" option for small applications (paper 000): one agent over the joint state of all operators.

The state is ``(k_1, ..., k_n, l)``: the number of replicas of every operator (homogeneous nodes: one node type)
and the level ``l`` of the source rate; a joint action changes every operator's parallelism by -1, 0 or +1. The
cost of a period is known up to the rate dynamics (paper 000's "RL+" with a known response-time model):

    c = w_perf * 1[end-to-end response time > R_max] + w_res * sum_u price(k_u) / C_max + w_rcf * 1[any change]

where ``C_max`` is the price of every operator at K_max. The rate-level transition matrix is learned from the
observed rates (counts with a uniform prior); the policy is recomputed every ``replan_every`` periods by value
iteration with full backups (``first_sweeps`` sweeps the first time, then ``sweeps`` warm-started ones). The joint state grows as K_max^n, so the
agent is limited to ``max_states`` deployments (3 operators at K_max = 10 is 1,000 joint deployments x 30 rate
levels): that growth is the cost the decentralized hierarchy avoids.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from policies.app_graphs import Application
from policies.operator_model import CostWeights, NodeType, RateLevels


class CentralizedAM:
    """Joint model-based agent (see module doc). Decides every operator's action itself; pass it to
    :func:`~policies.sim.application.simulate_application` as ``centralized``."""

    name = "centralized"

    def __init__(
        self,
        app: Application,
        node_types: tuple[NodeType, ...],
        weights: CostWeights | None = None,
        rate_levels: RateLevels | None = None,
        gamma: float = 0.99,
        replan_every: int = 500,
        sweeps: int = 20,
        first_sweeps: int = 150,
        max_states: int = 20_000,
        models: list[Any] | None = None,
    ) -> None:
        if len(node_types) != 1:
            raise ValueError(
                f"node_types: the centralized agent supports one node type, got {len(node_types)}"
            )
        self.app = app
        self.node_type = node_types[0]
        self.weights = weights or CostWeights()
        self.gamma = gamma
        self.replan_every = replan_every
        self.sweeps = sweeps
        self.first_sweeps = first_sweeps
        k_max, n = app.k_max, app.n
        if k_max**n > max_states:
            raise ValueError(
                f"application {app.name!r}: the joint state has {k_max}^{n} = {k_max**n} deployments, above "
                f"max_states={max_states}: use the decentralized AM for this application"
            )
        self.levels = rate_levels or RateLevels(30, 1100.0)
        n_lvl = self.levels.n
        # joint deployments: replicas 1..k_max per operator, flattened in C order
        self.shape = (k_max,) * n
        self.n_states = k_max**n
        grids = np.indices(self.shape).reshape(n, -1).T + 1  # (S, n) replicas
        self.replicas = grids
        self.actions = [np.array(a) for a in itertools.product((0, -1, 1), repeat=n)]  # (0,..,0) first
        nxt = np.full((self.n_states, len(self.actions)), -1, dtype=np.int64)
        for j, a in enumerate(self.actions):
            tgt = grids + a
            ok = ((tgt >= 1) & (tgt <= k_max)).all(axis=1)
            nxt[ok, j] = np.ravel_multi_index(tuple((tgt[ok] - 1).T), self.shape)
        self.next_state = nxt
        # known state cost per (deployment, rate level)
        models = models or [op.queue_model() for op in app.operators]
        gains = app.rate_gains()
        speed = np.array([self.node_type.speedup])
        rates = np.array([self.levels.rate(lvl) for lvl in range(n_lvl)])
        rt = np.zeros((self.n_states, n_lvl, n))
        for u in range(n):
            for kk in range(1, k_max + 1):
                rows = grids[:, u] == kk
                for lvl in range(n_lvl):
                    rt[rows, lvl, u] = models[u].response_time(np.array([kk]), speed, gains[u] * rates[lvl])
        e2e = np.max([rt[:, :, list(p)].sum(axis=2) for p in app.paths()], axis=0)
        self.violation = (e2e > app.r_max_s).astype(float)  # (S, L)
        c_max = n * k_max * self.node_type.price
        self.res_cost = grids.sum(axis=1) * self.node_type.price / c_max  # (S,)
        self.counts = np.ones((n_lvl, n_lvl))  # uniform prior on the rate transitions
        self.V = np.zeros((self.n_states, n_lvl))
        self.t = 0
        self._prev: tuple[int, int, int] | None = None  # (state, level, action index)
        self._policy: np.ndarray | None = None
        self.plans = 0

    def state_cost(self) -> np.ndarray:
        w = self.weights
        return w.perf * self.violation + w.res * self.res_cost[:, None]

    def _plan(self) -> None:
        """Value iteration (full backups) on the learned rate dynamics, warm-started."""
        p = self.counts / self.counts.sum(axis=1, keepdims=True)
        cs = self.state_cost()
        rcf = np.array([0.0] + [self.weights.rcf] * (len(self.actions) - 1))
        valid = self.next_state >= 0
        idx = np.where(valid, self.next_state, 0)
        v = self.V
        for _ in range(self.first_sweeps if self.plans == 0 else self.sweeps):
            ev = v @ p.T  # (S, L): expected next value given the current level
            q = rcf[None, :, None] + self.gamma * ev[idx]  # (S, A, L)
            q[~valid] = np.inf
            v = cs + q.min(axis=1)
        self.V = v
        ev = v @ p.T
        q = rcf[None, :, None] + self.gamma * ev[idx]
        q[~valid] = np.inf
        self._policy = q.argmin(axis=1)  # (S, L); ties -> first (do nothing first)
        self.plans += 1

    def act(self, ks: list[np.ndarray], source_rate: float, violated: bool, rates: np.ndarray) -> list[int]:
        """Learn the rate transition, replan when due, return one action per operator (``policies.base``
        encoding with one node type: 0 nothing, 1 remove, 2 add)."""
        s = int(np.ravel_multi_index(tuple(int(k[0]) - 1 for k in ks), self.shape))
        lvl = self.levels.level(source_rate)
        if self._prev is not None:
            self.counts[self._prev[1], lvl] += 1.0
        if self._policy is None or self.t % self.replan_every == 0:
            self._plan()
        assert self._policy is not None
        a = int(self._policy[s, lvl])
        self._prev = (s, lvl, a)
        self.t += 1
        return [0 if d == 0 else (1 if d < 0 else 2) for d in self.actions[a]]

    def override_last_actions(self, applied: list[int]) -> None:
        """The AM denied part of the joint action: nothing to correct (the rate model does not depend on it)."""
