"""Tabular Q-learning Operator Managers (paper 001, Sec. 4.2.1 and 4.3): ``ql``, ``ql-pds``, ``ql-pds-plus``.

State ``s = (k, l)``: deployment ``k`` (an integer id from :class:`policies.om.tabular.DeploymentIndex`) and rate
level ``l`` (``self.levels``: the spec's ``rate_levels`` -- 30 levels up to 650 tuples/s in the paper's benchmark --
or, without one, a range learned and grown from the observed rates, the tables being merged onto the new levels:
see :mod:`policies.calibration`). Actions 0..2N (do nothing, remove one of type
t, add one of type t); only feasible actions are ever chosen or evaluated; greedy selection takes the first
strictly smallest value in action order. Tables start at 0. Learning step ``t`` (from 1) uses
``alpha = max(alpha_min, alpha_decay^floor((t-1)/alpha_decay_steps))`` (paper: max(0.1, 0.98^floor((t-1)/10)));
decision ``t`` explores with probability ``epsilon = max(epsilon_min, epsilon_decay^(t-1))`` (paper: max(0.01,
0.95^(t-1))), picking uniformly among the feasible actions. ``gamma`` is ``spec.gamma`` (0.99).

Cost of the transition ``(k, l, a) -> (k', l')`` (see :mod:`policies.base`):
``c = w_perf * 1[violated with k' at rate'] + w_res * price(k') / C_max + w_rcf * 1[a != 0]``.

- ``ql`` (eq. 5): ``Q(s, a) <- (1 - alpha) Q(s, a) + alpha [c + gamma min_{a' feasible} Q(s', a')]``.
- ``ql-pds`` (eqs. 9-10): post-decision state ``s~ = (k + a, l)``; ``Q(s, a) = c_k(k, a) + V~(k + a, l)`` with the
  known cost ``c_k = w_res * price(k + a) / C_max + w_rcf * 1[a != 0]`` computed, never learned; only
  ``V~`` is learned, from the unknown cost ``c_u = w_perf * 1[violated]``:
  ``V~(k', l) <- (1 - alpha) V~(k', l) + alpha [c_u + gamma min_{a'} Q(s', a')]``.
- ``ql-pds-plus`` (eqs. 11-12): adds an estimate of the unknown cost from an approximate model,
  ``c^_u(k', l) = w_perf * 1[R^(k', midpoint rate of l) > R_max]`` (the rate assumed unchanged over the next
  period): ``Q(s, a) = c_k + c^_u(k + a, l) + V~(k + a, l)``, and ``V~`` learns only the estimation error
  ``delta = c_u - c^_u(k', l)``. The approximate model (paper 001, Sec. 6.2) is M/G/1 with exponential service
  (variance = mean^2), the service rate off by a random 5-10 % (random sign) and each node speedup off by up to
  20 %, drawn once per agent from its seeded RNG.

Fidelity options (``DEFAULTS``): the authors' public simulator selects PDS actions greedily (no exploration) and
reads the old value of the PDS update at the pre-decision state ``(k, l)`` instead of ``(k + a, l)``; ``explore``
and ``v_index`` reproduce either behaviour (see docs/benchmarks.md, section ql-family, for what each gives).

Speed: per step the hot path (:meth:`act`, overridden with exactly the semantics of :meth:`Policy.act`) does a
tuple + dict lookup for the deployment id, a handful of Python list reads and writes, and at most two RNG draws;
per-deployment data (price, feasible actions, successor ids, known-cost and estimate rows) is cached in the index
and in Python lists indexed by id. Memory: only deployments and ``(k, l)`` rows actually met are stored.

The fidelity / speed / memory benchmark: ``python -m benchmarks ql-family`` (``benchmarks/ql_family.py``).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from policies.base import Observation, Policy
from policies.calibration import MODEL_REFRESH_TOLERANCE
from policies.om.approx_model import APPROX_DEFAULTS, check_approx_params, draw_model_errors
from policies.om.tabular import DeploymentIndex
from policies.operator_model import OperatorSpec, QueueModel

# ---- hyperparameters (paper 001, Sec. 6.2; shared/design/paper-benchmark.md) ---------------------------------
ALPHA_DECAY = 0.98  # alpha(t) = max(ALPHA_MIN, ALPHA_DECAY ** floor((t - 1) / ALPHA_DECAY_STEPS))
ALPHA_DECAY_STEPS = 10
ALPHA_MIN = 0.1
EPSILON_DECAY = 0.95  # epsilon(t) = max(EPSILON_MIN, EPSILON_DECAY ** (t - 1))
EPSILON_MIN = 0.01

V_INDEX_CHOICES = ("post-decision", "pre-decision")


class _TabularBase(Policy):
    """Common machinery: deployment index, rate levels, schedules, the fast ``act`` path, durable state."""

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "alpha_decay": ALPHA_DECAY,
        "alpha_decay_steps": ALPHA_DECAY_STEPS,
        "alpha_min": ALPHA_MIN,
        "epsilon_decay": EPSILON_DECAY,
        "epsilon_min": EPSILON_MIN,
        "explore": True,  # epsilon-greedy; False: always greedy
    }
    _explains: ClassVar[bool] = True

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        for name in ("alpha_decay", "epsilon_decay"):
            if not 0 < params[name] <= 1:
                raise ValueError(f"params.{name}: must be in (0, 1], got {params[name]}")
        for name in ("alpha_min", "epsilon_min"):
            if not 0 <= params[name] <= 1:
                raise ValueError(f"params.{name}: must be in [0, 1], got {params[name]}")
        if params["alpha_decay_steps"] < 1:
            raise ValueError(f"params.alpha_decay_steps: must be >= 1, got {params['alpha_decay_steps']}")

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(spec, params, seed)
        self.n_actions = 2 * spec.n_res + 1
        self.n_levels = self.levels.n
        self._level_width = self.levels.width
        self._draw_model_errors()
        self._new_index()
        self._cur: tuple[np.ndarray, int, int] | None = None  # (k object, id, level) of the last decision
        self._on_reconfigure()

    def _new_index(self) -> None:
        spec = self.spec
        self.index = DeploymentIndex(spec.n_res, spec.k_max, spec.prices, spec.k_min)
        self._init_tables()
        self.index.add_listener(self._on_new_deployment)

    # ---- hooks for the subclasses ------------------------------------------------------------------------
    def _draw_model_errors(self) -> None:
        """ql-pds-plus draws its approximate model here (first use of ``self.rng``)."""

    def _init_tables(self) -> None:
        raise NotImplementedError

    def _on_new_deployment(self, d: int) -> None:
        """Grow the per-deployment tables for the new id ``d``."""

    def _update(
        self, d_prev: int, l_prev: int, a_prev: int, cost: float, d: int, lv: int, violated: bool
    ) -> None:
        raise NotImplementedError

    def _greedy(self, d: int, lv: int) -> int:
        raise NotImplementedError

    def _values(self, k: np.ndarray, lv: int) -> dict[int, float]:
        """Value of every feasible action at ``(k, lv)`` without assigning ids or changing any state."""
        raise NotImplementedError

    # ---- parameters and reconfiguration ----------------------------------------------------------------------
    def _on_reconfigure(self) -> None:
        spec, p = self.spec, self.params
        self._level_width = self.levels.width  # the range may have grown or been restored with the state
        w = spec.weights
        self.w_perf, self.w_res, self.w_rcf = w.perf, w.res, w.rcf
        self.c_max = spec.cost_scale
        self.gamma = float(spec.gamma)
        self._explore = bool(p["explore"])
        self._eps_decay, self._eps_min = float(p["epsilon_decay"]), float(p["epsilon_min"])
        self._alpha_decay, self._alpha_min = float(p["alpha_decay"]), float(p["alpha_min"])
        self._alpha_steps = int(p["alpha_decay_steps"])

    def level(self, rate: float) -> int:
        """Rate level of ``rate`` (tuples/s), exactly as :meth:`RateLevels.level`."""
        return min(int(rate // self._level_width), self.n_levels - 1) if rate > 0 else 0

    def alpha(self) -> float:
        """Learning rate of the learning step in progress (``self.t`` steps completed before it)."""
        return max(self._alpha_min, self._alpha_decay ** (self.t // self._alpha_steps))

    def epsilon(self) -> float:
        """Exploration probability of the decision in progress (decision number ``self.t + 1``)."""
        return max(self._eps_min, self._eps_decay**self.t)

    # ---- the fast path ---------------------------------------------------------------------------------------
    def act(self, k: np.ndarray, rate: float, violated: bool, obs: Observation | None = None) -> int:
        """:meth:`Policy.act` with integer state ids (same semantics, same cost expression)."""
        if self.levels.grow or obs is not None:
            self._calibrate(k, rate, obs)
        index = self.index
        key = tuple(k.tolist())
        d = index._ids.get(key)
        if d is None:
            d = index.id_of(key)
        w = self._level_width
        lv = min(int(rate // w), self.n_levels - 1) if rate > 0 else 0
        prev = self._prev
        if prev is not None:
            k_prev, rate_prev, a_prev = prev
            cur = self._cur
            if cur is not None and cur[0] is k_prev:
                d_prev, l_prev = cur[1], cur[2]
            else:
                d_prev, l_prev = index.id_of(tuple(k_prev.tolist())), self.level(rate_prev)
            res = index.price[d] / self.c_max
            cost = self.w_perf * violated + self.w_res * res + self.w_rcf * (a_prev != 0)
            self._last_terms = (float(violated), res, float(a_prev != 0))
            self._update(d_prev, l_prev, a_prev, cost, d, lv, violated)
            self.t += 1
        action = self._choose(d, lv)
        self._prev = (k, float(rate), action)
        self._cur = (k, d, lv)
        return action

    def _choose(self, d: int, lv: int) -> int:
        if self._explore:
            eps = self._eps_decay**self.t
            if eps < self._eps_min:
                eps = self._eps_min
            if self.rng.random() < eps:
                acts = self.index.feasible(d)
                return acts[int(self.rng.integers(len(acts)))]
        return self._greedy(d, lv)

    def _decide(
        self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool
    ) -> tuple[int, dict[int, float]]:
        lv = self.level(rate)
        if not explain:
            return self._choose(self.index.id_of(tuple(np.asarray(k).tolist())), lv), {}
        values = self._values(np.asarray(k, dtype=np.int64), lv)
        best, best_v = 0, math.inf
        for a, v in values.items():  # insertion order = action order: first strictly smallest
            if v < best_v:
                best, best_v = a, v
        return best, values

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
        """The slow-path equivalent of the update :meth:`act` performs (for callers of the base protocol)."""
        index = self.index
        self._update(
            index.id_of(tuple(np.asarray(k_prev).tolist())),
            self.level(rate_prev),
            action,
            cost,
            index.id_of(tuple(np.asarray(k_now).tolist())),
            self.level(rate_now),
            violated,
        )

    # ---- self-calibration: the range grew (policies.calibration) -----------------------------------------------
    def _remap_levels(self, old: Any, factor: int) -> None:
        self._level_width = self.levels.width
        self.n_levels = self.levels.n
        self._cur = None  # its level was on the old range
        self._remap_tables(factor)
        self._on_reconfigure()  # caches built per level (entries, estimates, level rates)

    def _remap_tables(self, factor: int) -> None:
        raise NotImplementedError

    # ---- explanation helpers -------------------------------------------------------------------------------
    def _successor(self, k: np.ndarray, action: int) -> np.ndarray:
        n = len(k)
        out = k.copy()
        if 1 <= action <= n:
            out[action - 1] -= 1
        elif action > n:
            out[action - 1 - n] += 1
        return out

    # ---- durable state -------------------------------------------------------------------------------------
    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        spec = self.spec
        meta = {"n_res": spec.n_res, "k_max": spec.k_max, "n_levels": self.n_levels}
        meta.update(self._model_meta())
        arrays = {"deployments": self.index.keys_array()}
        arrays.update(self._table_arrays())
        return meta, arrays

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        spec = self.spec
        for name, have in (("n_res", spec.n_res), ("k_max", spec.k_max), ("n_levels", self.n_levels)):
            if int(meta.get(name, -1)) != have:
                raise ValueError(f"state: {name} is {meta.get(name)!r}, this operator has {have}")
        self._load_model_meta(meta)
        self._new_index()
        self.index.load_keys(arrays["deployments"])
        self._load_tables(arrays)
        self._cur = None

    def _model_meta(self) -> dict[str, Any]:
        return {}

    def _load_model_meta(self, meta: dict[str, Any]) -> None:
        pass

    def _table_arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _load_tables(self, arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError


class QLearning(_TabularBase):
    """``ql``: tabular Q-learning (paper 001, eq. 5) over states ``(k, rate level)``."""

    name = "ql"

    def _init_tables(self) -> None:
        # q[d][l] is None (all zeros) or a list of 2N+1 floats; q[d] is None until deployment d is a state
        self.q: list[list[list[float] | None] | None] = []

    def _on_new_deployment(self, d: int) -> None:
        self.q.append(None)

    def _row(self, d: int, lv: int) -> list[float]:
        """Q row of state ``(d, lv)``, allocated on first write."""
        per_level = self.q[d]
        if per_level is None:
            per_level = self.q[d] = [None] * self.n_levels
        row = per_level[lv]
        if row is None:
            row = per_level[lv] = [0.0] * self.n_actions
        return row

    def _min_q(self, d: int, lv: int) -> float:
        per_level = self.q[d]
        row = None if per_level is None else per_level[lv]
        if row is None:
            return 0.0
        best = math.inf
        for a in self.index.feasible(d):
            v = row[a]
            if v < best:
                best = v
        return best

    def _update(
        self, d_prev: int, l_prev: int, a_prev: int, cost: float, d: int, lv: int, violated: bool
    ) -> None:
        alpha = max(self._alpha_min, self._alpha_decay ** (self.t // self._alpha_steps))
        target = cost + self.gamma * self._min_q(d, lv)
        row = self._row(d_prev, l_prev)
        row[a_prev] = (1.0 - alpha) * row[a_prev] + alpha * target

    def _greedy(self, d: int, lv: int) -> int:
        per_level = self.q[d]
        row = None if per_level is None else per_level[lv]
        if row is None:
            return 0  # all zeros: the first feasible action, do nothing
        best_a, best = 0, math.inf
        for a in self.index.feasible(d):
            v = row[a]
            if v < best:
                best_a, best = a, v
        return best_a

    def q_values(self, k: np.ndarray, lv: int) -> list[float]:
        """The Q row of state ``(k, lv)`` (zeros if never updated), without changing any state."""
        d = self.index.lookup(tuple(np.asarray(k).tolist()))
        per_level = None if d is None else self.q[d]
        row = None if per_level is None else per_level[lv]
        return list(row) if row is not None else [0.0] * self.n_actions

    def _values(self, k: np.ndarray, lv: int) -> dict[int, float]:
        from policies.base import feasible_actions

        row = self.q_values(k, lv)
        return {a: row[a] for a in feasible_actions(k, self.spec.k_max, self.spec.k_min)}

    def _table_arrays(self) -> dict[str, np.ndarray]:
        deps, levels, rows = [], [], []
        for d, per_level in enumerate(self.q):
            if per_level is None:
                continue
            for lv, row in enumerate(per_level):
                if row is not None:
                    deps.append(d)
                    levels.append(lv)
                    rows.append(row)
        return {
            "q_deployment": np.array(deps, dtype=np.int64),
            "q_level": np.array(levels, dtype=np.int16),
            "q": np.array(rows, dtype=np.float64).reshape(len(rows), self.n_actions),
        }

    def _load_tables(self, arrays: dict[str, np.ndarray]) -> None:
        q = arrays["q"]
        if q.ndim != 2 or q.shape[1] != self.n_actions:
            raise ValueError(f"state: q table must have {self.n_actions} columns, got shape {q.shape}")
        n = len(self.index)
        for d, lv, row in zip(
            arrays["q_deployment"].tolist(), arrays["q_level"].tolist(), q.tolist(), strict=True
        ):
            if not (0 <= d < n and 0 <= lv < self.n_levels):
                raise ValueError(f"state: q row for deployment id {d}, level {lv} out of range")
            self._row(d, lv)[:] = row

    def _remap_tables(self, factor: int) -> None:
        """Each new level's Q row = the mean of the rows of its old levels that were ever updated (the others are
        the initial zeros, not learned values); a new level no old row maps to stays unallocated."""
        from policies.calibration import merge_values

        n, na = self.n_levels, self.n_actions
        for d, per_level in enumerate(self.q):
            if per_level is None:
                continue
            have = np.array([r is not None for r in per_level], dtype=float)
            rows = np.array([r if r is not None else [0.0] * na for r in per_level], dtype=float)
            merged = merge_values(rows, factor, axis=0, weights=np.repeat(have[:, None], na, axis=1))
            groups_seen = np.zeros(n, dtype=bool)
            groups_seen[np.flatnonzero(have) // factor] = True
            self.q[d] = [merged[lv].tolist() if groups_seen[lv] else None for lv in range(n)]

    def table_size(self) -> int:
        """Number of ``(k, level)`` rows stored."""
        return sum(sum(r is not None for r in pl) for pl in self.q if pl is not None)


class QLearningPDS(_TabularBase):
    """``ql-pds``: Q-learning with post-decision states (paper 001, eqs. 9-10)."""

    name = "ql-pds"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        **_TabularBase.DEFAULTS,
        # index of the old value in the V~ update: "post-decision" (k + a, l) as eq. 10, or "pre-decision"
        # (k, l) as the authors' public simulator reads it
        "v_index": "post-decision",
    }
    _estimates: ClassVar[bool] = False

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        super().check_params(params)
        if params["v_index"] not in V_INDEX_CHOICES:
            raise ValueError(
                f"params.v_index: must be one of {', '.join(V_INDEX_CHOICES)}, got {params['v_index']!r}"
            )

    def _init_tables(self) -> None:
        self.v: list[list[float]] = []  # V~[d][l] for every deployment with an id
        self._entries_cache: list[Any] = []  # per id: None or the cached (action, successor, cost) entries

    def _on_new_deployment(self, d: int) -> None:
        self.v.append([0.0] * self.n_levels)
        self._entries_cache.append(None)
        self._on_new_estimate_row()

    def _on_new_estimate_row(self) -> None:
        pass

    def _on_reconfigure(self) -> None:
        super()._on_reconfigure()
        self._read_pre = self.params["v_index"] == "pre-decision"
        # known costs (and estimates) depend on the weights and R_max: rebuild lazily
        self._entries_cache = [None] * len(self.index)

    def known_cost(self, price: float, action: int) -> float:
        """``c_k = w_res * price(k + a) / C_max + w_rcf * 1[a != 0]`` (``price`` of k + a in $/h)."""
        return self.w_res * (price / self.c_max) + self.w_rcf * (action != 0)

    def _entries(self, d: int, lv: int) -> list[tuple[int, int, float]]:
        """``(action, successor id, known cost)`` of every feasible action of deployment ``d``."""
        e = self._entries_cache[d]
        if e is None:
            index = self.index
            succ = index.successors(d)
            price = index.price
            e = self._entries_cache[d] = [
                (a, succ[a], self.known_cost(price[succ[a]], a)) for a in index.feasible(d)
            ]
        return e

    def _min_q(self, d: int, lv: int) -> float:
        v = self.v
        best = math.inf
        for _, s, c in self._entries(d, lv):
            q = c + v[s][lv]
            if q < best:
                best = q
        return best

    def _greedy(self, d: int, lv: int) -> int:
        v = self.v
        best_a, best = 0, math.inf
        for a, s, c in self._entries(d, lv):
            q = c + v[s][lv]
            if q < best:
                best_a, best = a, q
        return best_a

    def _unknown_cost_target(self, violated: bool, d: int, l_prev: int) -> float:
        """What V~ learns of the unknown cost: ``c_u`` (ql-pds) or ``c_u - c^_u`` (ql-pds-plus)."""
        return self.w_perf * violated

    def _update(
        self, d_prev: int, l_prev: int, a_prev: int, cost: float, d: int, lv: int, violated: bool
    ) -> None:
        alpha = max(self._alpha_min, self._alpha_decay ** (self.t // self._alpha_steps))
        target = self._unknown_cost_target(violated, d, l_prev) + self.gamma * self._min_q(d, lv)
        v = self.v
        old = v[d_prev][l_prev] if self._read_pre else v[d][l_prev]
        v[d][l_prev] = (1.0 - alpha) * old + alpha * target

    def _estimate_slow(self, k: np.ndarray, lv: int) -> float:
        return 0.0

    def _cached_entries(self, d: int, lv: int) -> list[tuple[int, int, float]] | None:
        """The entries of ``(d, lv)`` if already built (no state change), else None."""
        return self._entries_cache[d]

    def _values(self, k: np.ndarray, lv: int) -> dict[int, float]:
        from policies.base import feasible_actions

        index, spec = self.index, self.spec
        d = index.lookup(tuple(k.tolist()))
        entries = None if d is None else self._cached_entries(d, lv)
        if entries is not None:  # the usual case in step(): act() has just built them
            return {a: c + self.v[s][lv] for a, s, c in entries}
        out: dict[int, float] = {}
        for a in feasible_actions(k, spec.k_max, spec.k_min):
            k2 = self._successor(k, a)
            s = index.lookup(tuple(k2.tolist()))
            v = 0.0 if s is None else self.v[s][lv]
            out[a] = self.known_cost(spec.price(k2), a) + self._estimate_slow(k2, lv) + v
        return out

    def _table_arrays(self) -> dict[str, np.ndarray]:
        return {"v": np.array(self.v, dtype=np.float64).reshape(len(self.v), self.n_levels)}

    def _load_tables(self, arrays: dict[str, np.ndarray]) -> None:
        v = arrays["v"]
        if v.shape != (len(self.index), self.n_levels):
            raise ValueError(
                f"state: v table must have shape ({len(self.index)}, {self.n_levels}), got {v.shape}"
            )
        self.v = v.tolist()

    def _remap_tables(self, factor: int) -> None:
        """Each new level's V~ = the mean of its old levels' values that were ever updated (a value still exactly
        0.0 is the initial one, never learned), 0 where none was."""
        from policies.calibration import merge_values

        if not self.v:
            return
        v = np.array(self.v, dtype=float)
        self.v = merge_values(v, factor, axis=1, weights=(v != 0.0).astype(float)).tolist()

    def table_size(self) -> int:
        return len(self.v) * self.n_levels


class QLearningPDSPlus(QLearningPDS):
    """``ql-pds-plus``: QL+PDS with unknown-cost estimates from an approximate model (paper 001, eqs. 11-12)."""

    _est_rows: list[list[float | None] | None]  # per deployment, the estimates c^_u per level (lazily)

    name = "ql-pds-plus"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        **QLearningPDS.DEFAULTS,
        **APPROX_DEFAULTS,
    }
    _estimates = True

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        super().check_params(params)
        check_approx_params(params)

    # ---- the approximate model -----------------------------------------------------------------------------
    def _draw_model_errors(self) -> None:
        self.service_rate_factor, factors = draw_model_errors(self.rng, self.params, self.spec.n_res)
        self.speedup_factors = [float(x) for x in factors]

    def _model_meta(self) -> dict[str, Any]:
        return {
            "service_rate_factor": self.service_rate_factor,
            "speedup_factors": list(self.speedup_factors),
        }

    def _load_model_meta(self, meta: dict[str, Any]) -> None:
        factors = [float(x) for x in meta["speedup_factors"]]
        if len(factors) != self.spec.n_res:
            raise ValueError(
                f"state: speedup_factors must have {self.spec.n_res} entries, got {len(factors)}"
            )
        self.service_rate_factor = float(meta["service_rate_factor"])
        self.speedup_factors = factors

    def approx_model(self) -> QueueModel | None:
        """The approximate performance model: exponential service with the perturbed service rate (paper 001,
        ``spec.model_mode`` "given"); with a learned model (modes "hint" / "learn") its mean service time
        unperturbed -- the estimation error is then the real one. None: nothing known yet (no estimate)."""
        m = self.planning_model()
        if m is None:
            return None
        factor = self.service_rate_factor if self.spec.model_mode == "given" else 1.0
        s = m.service_mean_s / factor
        return QueueModel(s, s * s, "mg1", m.balancing, m.aggregation)

    @property
    def approx_speedups(self) -> np.ndarray:
        if self.spec.model_mode != "given":
            return self.spec.speedups  # the node types' declared speedups
        return self.spec.speedups * np.array(self.speedup_factors)

    def _calibrate(self, k: np.ndarray, rate: float, obs: Observation | None) -> None:
        super()._calibrate(k, rate, obs)
        if self.spec.model_mode != "given":
            m = self.planning_model()
            used = self._approx
            if m is not None and (
                used is None
                or abs(m.service_mean_s / self.service_rate_factor_used - used.service_mean_s)
                > MODEL_REFRESH_TOLERANCE * used.service_mean_s
            ):
                self._on_reconfigure()  # the estimates c^_u are rebuilt lazily from the new model

    def estimated_response_time(self, k: np.ndarray, rate: float) -> float:
        """Response time (s) of deployment ``k`` at ``rate`` (tuples/s) under the approximate model (0 s when
        there is none yet)."""
        m = self.approx_model()
        return 0.0 if m is None else m.response_time(np.asarray(k), self.approx_speedups, rate)

    def _on_reconfigure(self) -> None:
        super()._on_reconfigure()
        self._est_rows = [None] * len(self.index)
        self._approx = self.approx_model()
        self.service_rate_factor_used = 1.0 if self.spec.model_mode != "given" else self.service_rate_factor
        self._approx_speedups = self.approx_speedups
        self._approx_speedups_list = self._approx_speedups.tolist()
        m = self._approx
        self._rr_worst = m is None or (m.balancing == "round_robin" and m.aggregation == "worst")
        self._level_rates = [self.levels.rate(lv) for lv in range(self.n_levels)]

    def _init_tables(self) -> None:
        super()._init_tables()
        self._est_rows = []

    def _on_new_estimate_row(self) -> None:
        self._est_rows.append(None)

    def _estimate(self, d: int, lv: int) -> float:
        """``c^_u(d, lv) = w_perf * 1[R^(k_d, midpoint of lv) > R_max]``, computed once per (deployment, level)."""
        row = self._est_rows[d]
        if row is None:
            fresh: list[float | None] = [None] * self.n_levels
            row = self._est_rows[d] = fresh
        c = row[lv]
        if c is None:
            c = row[lv] = self._compute_estimate(self.index.keys[d], lv)
        return c

    def _estimate_row(self, d: int) -> list[float]:
        """``c^_u(d, l)`` for every level ``l``."""
        return [self._estimate(d, lv) for lv in range(self.n_levels)]

    def _compute_estimate(self, key: tuple[int, ...], lv: int) -> float:
        if self._approx is None:
            return 0.0  # no model yet (model_mode "learn" before the first observation)
        rate = self._level_rates[lv]
        if self._rr_worst:
            # round robin + worst replica: the slowest type present decides (M/M/1 as variance = mean^2)
            slowest = min(sp for sp, n in zip(self._approx_speedups_list, key, strict=True) if n > 0)
            s = self._approx.service_mean_s / slowest
            var = self._approx.variance / slowest**2
            lam = rate / sum(key)
            rho = lam * s
            r = math.inf if rho >= 1.0 else s + lam / 2.0 * (var + s * s) / (1.0 - rho)
        else:
            r = self._approx.response_time(np.array(key, dtype=np.int64), self._approx_speedups, rate)
        return self.w_perf if r > self.spec.r_max_s else 0.0

    def _estimate_slow(self, k: np.ndarray, lv: int) -> float:
        return self._compute_estimate(tuple(k.tolist()), lv)

    def _cached_entries(self, d: int, lv: int) -> list[tuple[int, int, float]] | None:
        per_level = self._entries_cache[d]
        return None if per_level is None else per_level[lv]

    def _entries(self, d: int, lv: int) -> list[tuple[int, int, float]]:
        """``(action, successor id, known cost + estimate at level lv)`` of every feasible action of ``d``."""
        per_level = self._entries_cache[d]
        if per_level is None:
            per_level = self._entries_cache[d] = [None] * self.n_levels
        e = per_level[lv]
        if e is None:
            index = self.index
            succ = index.successors(d)
            price = index.price
            e = per_level[lv] = [
                (a, succ[a], self.known_cost(price[succ[a]], a) + self._estimate(succ[a], lv))
                for a in index.feasible(d)
            ]
        return e

    def _unknown_cost_target(self, violated: bool, d: int, l_prev: int) -> float:
        return self.w_perf * violated - self._estimate(d, l_prev)
