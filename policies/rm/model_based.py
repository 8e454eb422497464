"""Model-based reinforcement learning RM (paper 004 Sec. 6.2, Algorithm 2).

State ``s = (k, u, f)``: ``k`` nodes in the region (active plus booting, 0..K_max), ``u`` the mean CPU
utilisation of the region's replicas discretised with quantum ``u_quantum`` (levels 0..L_u), ``f`` whether an
idle node exists. Actions: ``-1`` release one idle node (only when ``f = 1`` and ``k > 0``), ``0``, ``+1``
acquire one node (only when ``k < K_max``).

Cost of a period (eq. 1): ``w_d * 1[unsatisfied requests] + w_r * (k + a) / K_max``. The resource term is known;
the demand term is the *unknown* cost ``c_u(s')`` estimated by exponential averaging (eq. 5) and projected on
the monotonicity constraints (never lower with fewer nodes or higher utilisation). Transitions follow eq. 3:
``k' = k + a``, ``P[u'|u]`` and ``P[f'|f, a]`` estimated from observed frequencies. Every period the whole
Q-table is backed up with the Bellman equation (full backup); the action is greedy (no exploration needed).

With several node types in the region the RM acquires the type that waiting requests need (the one most short of
nodes), else the one with the lowest price per slot, and releases the most expensive idle node; ``k`` counts nodes
of every type.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from policies.operator_model import NodeType
from policies.options import defaults as option_defaults
from policies.rm.base import RegionManager, RegionState, RMProposal

DELTAS = (-1, 0, +1)  # action index -> change in nodes


class ModelBasedRM(RegionManager):
    name: ClassVar[str] = "model-based"
    #: w_d (demand penalty, paper Table 1), w_r (resource cost, the tables' w_c), gamma, alpha (eq. 5), u_quantum,
    #: sweeps, monotone: types, bounds and defaults in :mod:`policies.options`
    DEFAULTS: ClassVar[dict[str, Any]] = option_defaults("rm", "model-based")

    def __init__(
        self,
        region: str,
        catalog: tuple[NodeType, ...],
        k_max: int = 50,
        params: dict[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(region, catalog, k_max, params, seed)
        self.n_u = int(round(1.0 / self.params["u_quantum"])) + 1
        k1, nu = self.k_max + 1, self.n_u
        self.u_counts = np.zeros((nu, nu))
        # Pseudo-counts encode the obvious prior: a new node is idle, otherwise the flag tends to persist.
        self.f_counts = np.zeros((2, 3, 2))
        self.f_counts[:, 2, 1] = 1.0
        self.f_counts[0, :2, 0] = 1.0
        self.f_counts[1, :2, 1] = 1.0
        self.c_unknown = np.zeros((k1, nu, 2))
        self.q = np.zeros((k1, nu, 2, 3))
        self.mask = self._feasibility()
        self._prev: tuple[int, int, int, int] | None = None  # (k, u, f, action index actually taken)

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        for key in ("w_d", "w_r"):
            if not 0 <= params[key] <= 1:
                raise ValueError(f"params.{key}: must be in [0, 1], got {params[key]}")
        if abs(params["w_d"] + params["w_r"] - 1) > 1e-9:
            raise ValueError(f"params.w_d: w_d + w_r must be 1, got {params['w_d'] + params['w_r']}")
        if not 0 <= params["gamma"] < 1:
            raise ValueError(f"params.gamma: must be in [0, 1), got {params['gamma']}")
        if not 0 < params["alpha"] <= 1:
            raise ValueError(f"params.alpha: must be in (0, 1], got {params['alpha']}")
        if not 0 < params["u_quantum"] <= 1:
            raise ValueError(f"params.u_quantum: must be in (0, 1], got {params['u_quantum']}")
        if params["sweeps"] < 1:
            raise ValueError(f"params.sweeps: must be >= 1, got {params['sweeps']}")

    # ---- model -----------------------------------------------------------------------------------------
    def _feasibility(self) -> np.ndarray:
        k1, nu = self.k_max + 1, self.n_u
        mask = np.ones((k1, nu, 2, 3), dtype=bool)
        mask[:, :, 0, 0] = False  # no idle node to release
        mask[0, :, :, 0] = False
        mask[self.k_max, :, :, 2] = False
        self._penalty = np.where(mask, 0.0, np.inf)
        self._known = self.known_cost()
        self._next_k = [np.clip(np.arange(k1) + d, 0, self.k_max) for d in DELTAS]
        return mask

    def discretise(self, state: RegionState) -> tuple[int, int, int]:
        k = min(state.n_nodes, self.k_max)
        u = min(int(round(min(max(state.utilisation, 0.0), 1.0) / self.params["u_quantum"])), self.n_u - 1)
        f = 1 if state.n_idle > 0 else 0
        return k, u, f

    def p_u(self) -> np.ndarray:
        """Estimated ``P[u'|u]`` (rows never seen stay put)."""
        rows = self.u_counts.sum(axis=1, keepdims=True)
        eye = np.eye(self.n_u)
        return np.where(rows > 0, self.u_counts / np.where(rows > 0, rows, 1.0), eye)

    def p_f(self) -> np.ndarray:
        """Estimated ``P[f'|f, a]`` as an array ``[f, action index, f']``."""
        return self.f_counts / self.f_counts.sum(axis=2, keepdims=True)

    def known_cost(self) -> np.ndarray:
        """``w_r * (k + a) / K_max`` for every (k, action index), shape (K_max + 1, 3)."""
        k = np.arange(self.k_max + 1)[:, None] + np.array(DELTAS)[None, :]
        return self.params["w_r"] * np.clip(k, 0, self.k_max) / self.k_max

    def update_unknown_cost(self, k: int, u: int, f: int, observed: float) -> None:
        """Eq. 5 at state (k, u, f), then the monotonicity projection around it."""
        a = self.params["alpha"]
        c = self.c_unknown
        c[k, u, f] = (1 - a) * c[k, u, f] + a * observed
        if self.params["monotone"]:
            project_monotone(c[:, :, f], k, u)

    def backup(self) -> None:
        """One full backup (Algorithm 2, lines 2-6) of every state-action pair."""
        gamma = self.params["gamma"]
        v = (self.q + self._penalty).min(axis=3)
        w = self.c_unknown + gamma * v
        y = np.matmul(self.p_u(), w)  # y[k, u, f'] = sum_u' P[u'|u] w[k, u', f']
        pf = self.p_f()
        kc = self._known
        q = self.q
        for ai in range(3):
            z = y @ pf[:, ai, :].T  # z[k', u, f] = sum_f' P[f'|f, a] y[k', u, f']
            q[:, :, :, ai] = kc[:, ai, None, None] + z[self._next_k[ai]]
        q[~self.mask] = 0.0

    def solve(self, max_sweeps: int = 10_000, tol: float = 1e-10) -> int:
        """Back up until the Q-table changes by less than ``tol``; returns the sweeps done (for tests/tools)."""
        for i in range(1, max_sweeps + 1):
            old = self.q.copy()
            self.backup()
            if np.max(np.abs(self.q - old)) < tol:
                return i
        return max_sweeps

    def greedy(self, k: int, u: int, f: int) -> int:
        """Greedy action index in state (k, u, f); ties prefer do nothing, then release, then acquire."""
        best, best_v = 1, np.inf
        for ai in (1, 0, 2):
            if self.mask[k, u, f, ai] and self.q[k, u, f, ai] < best_v - 1e-12:
                best, best_v = ai, self.q[k, u, f, ai]
        return best

    # ---- control loop ------------------------------------------------------------------------------------
    def propose(self, state: RegionState) -> list[RMProposal]:
        k, u, f = self.discretise(state)
        unsatisfied = 1.0 if state.unsatisfied > 0 else 0.0
        if self._prev is not None:
            k0, u0, f0, a0 = self._prev
            self.u_counts[u0, u] += 1
            self.f_counts[f0, a0, f] += 1
            self.update_unknown_cost(k, u, f, self.params["w_d"] * unsatisfied)
            self.t += 1
        for _ in range(int(self.params["sweeps"])):
            self.backup()
        ai = self.greedy(k, u, f)
        self._prev = (k, u, f, ai)
        values = {DELTAS[i]: float(self.q[k, u, f, i]) for i in range(3) if self.mask[k, u, f, i]}
        expl = {"state": {"k": k, "u": u, "f": f}, "q": values, "c_unknown": float(self.c_unknown[k, u, f])}
        d = DELTAS[ai]
        if d == 0:
            return []
        if d > 0:
            short = state.shortfall([max(t.cores, 1) for t in self.catalog])
            # a request waiting for a node type is served by that type only; else the cheapest per slot
            t_new = int(np.argmax(short)) if short.any() else self.cheapest_per_slot()
            reason = f"RL: acquiring one node has the lowest long-run cost in state (k={k}, u={u}, f={f})"
            if short.any():
                reason += f"; {self.catalog[t_new].name} because requests wait for it"
            return [RMProposal(self.region, self.catalog[t_new].name, 1, reason, expl)]
        idle_types = [i for i in range(len(self.catalog)) if state.idle[i] > 0]
        ti = max(idle_types, key=lambda i: self.catalog[i].price)
        reason = f"RL: releasing one idle node has the lowest long-run cost in state (k={k}, u={u}, f={f})"
        return [RMProposal(self.region, self.catalog[ti].name, -1, reason, expl)]

    def granted(self, proposals: list[RMProposal], granted_deltas: list[int]) -> None:
        if self._prev is None:
            return
        total = int(np.clip(sum(granted_deltas), -1, 1))
        k, u, f, _ = self._prev
        self._prev = (k, u, f, DELTAS.index(total))

    # ---- durable state -----------------------------------------------------------------------------------
    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {"k_max": self.k_max, "prev": None if self._prev is None else list(self._prev)}
        arrays = {
            "u_counts": self.u_counts,
            "f_counts": self.f_counts,
            "c_unknown": self.c_unknown,
            "q": self.q,
        }
        return meta, arrays

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        if int(meta["k_max"]) != self.k_max:
            raise ValueError(f"state has k_max={meta['k_max']}, this RM has k_max={self.k_max}")
        self.n_u = int(round(1.0 / self.params["u_quantum"])) + 1
        self.u_counts = arrays["u_counts"].copy()
        self.f_counts = arrays["f_counts"].copy()
        self.c_unknown = arrays["c_unknown"].copy()
        self.q = arrays["q"].copy()
        self.mask = self._feasibility()
        prev = meta["prev"]
        self._prev = None if prev is None else (int(prev[0]), int(prev[1]), int(prev[2]), int(prev[3]))


def project_monotone(c: np.ndarray, k: int, u: int) -> None:
    """Enforce, in place around the just-updated entry ``c[k, u]`` (axes: nodes, utilisation level):
    ``c[k', u'] >= c[k, u]`` for ``k' <= k, u' >= u`` and ``c[k', u'] <= c[k, u]`` for ``k' >= k, u' <= u``."""
    v = c[k, u]
    np.maximum(c[: k + 1, u:], v, out=c[: k + 1, u:])
    np.minimum(c[k:, : u + 1], v, out=c[k:, : u + 1])
