"""The discounted optimum of the level model [``dp-discounted``, old name ``dp``]: value iteration with the true
model.

What it is: the policy minimising the *discounted* cost (``spec.gamma``, 0.99 in the paper's benchmark) of the MDP
whose state is (deployment, rate level). The benchmark tables report the *average* cost per step, which it does not
minimise (at gamma 0.999 its average cost is up to 1.9x lower than at 0.99), and it sees rate levels, not rates: it is
no lower bound, and online policies can beat it (a rule-based one by 6 % on a weekly-pattern trace). The references
of the benchmarks are ``dp-average`` (:mod:`policies.om.average`, the level model's average-cost optimum) and
``clairvoyant`` (:mod:`policies.om.clairvoyant`, the bound no online policy can go below).

It knows everything an online policy has to learn:
- the rate-level transition matrix ``P[l, l']`` estimated from the *whole* trace (transition counts);
- the true performance model (the operator's queueing model and R_max), turned into the probability of a
  violation per performance class and rate level using the distribution of the trace's rates inside each level.

With these it solves the MDP of :mod:`policies.om.mdp` to convergence once (McQueen bounds, error < 1e-9) and
then acts greedily. When the trace is a Markov chain of rate levels with rates drawn inside each level from a fixed
distribution, this is the optimal policy of the level-observing MDP for the discounted cost; for the average cost
only as gamma -> 1. On a real trace (Taxi) the level process is only approximately Markov, and the average cost is
not what it minimises: online policies can come below it.

How to give it the model (document of the ``params``):
- ``OfflineOptimum.from_trace(spec, trace)``: estimate both from a rate array (tuples/s per step);
- ``OfflineOptimum.from_model(spec, p, level_rates)``: a known transition matrix and, per level, a sample of
  rates (or :func:`uniform_level_rates` for rates uniform inside each level);
- ``params={"trace_path": "PATH"}``: read the trace file (what the CLI uses; ``trace_steps`` limits the lines).
The space is the one of ``model-based`` (full when small, else deployments mixing at most two types: see
:mod:`policies.om.model_based` for why this is exact on the states the optimal policy visits).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from policies.base import Observation, Policy
from policies.om import mdp
from policies.om.model_based import choose_max_types, outside_space_action
from policies.operator_model import OperatorSpec

TOLERANCE = 1e-9  # value-iteration error bound (max norm)


def uniform_level_rates(spec: OperatorSpec, per_level: int = 1000, top_max_rate: float | None = None) -> list:
    """A deterministic sample of rates uniform inside each level (tuples/s); the top level runs up to
    ``top_max_rate`` (default: its nominal upper edge)."""
    from policies.calibration import initial_levels

    rl = initial_levels(spec.rate_levels)
    out = []
    for lvl in range(rl.n):
        lo = lvl * rl.width
        hi = (lvl + 1) * rl.width if (lvl < rl.n - 1 or top_max_rate is None) else top_max_rate
        out.append(lo + (np.arange(per_level) + 0.5) / per_level * (hi - lo))
    return out


class OfflineOptimum(Policy):
    """Value iteration with the true performance model and the true rate-transition matrix (offline)."""

    name: ClassVar[str] = "dp-discounted"
    _explains: ClassVar[bool] = True
    deterministic: ClassVar[bool] = True  # solved once from the known model: the seed changes nothing
    DEFAULTS: ClassVar[dict[str, Any]] = {"trace_path": "", "trace_steps": 0, "max_mixed_types": 0}
    #: count the transition from the trace's last level back to its first (a cyclic trace): no level is then
    #: absorbing, which the average-cost optimum needs; the discounted one takes the trace as it is
    wrap_transitions: ClassVar[bool] = False

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        for key in ("trace_steps", "max_mixed_types"):
            if params[key] < 0:
                raise ValueError(f"params.{key}: must be >= 0, got {params[key]}")

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(spec, params, seed)
        self.space = mdp.build_space(spec, choose_max_types(spec, self.params["max_mixed_types"]))
        self.p: np.ndarray | None = None
        self.level_rates: list[np.ndarray] | None = None
        self.value: np.ndarray | None = None
        self.sweeps = 0
        if self.params["trace_path"]:
            from policies.sim.trace import load_trace

            steps = self.params["trace_steps"] or None
            self.set_trace(load_trace(self.params["trace_path"], steps))

    # ---- the true model ------------------------------------------------------------------------------------
    @classmethod
    def from_trace(
        cls, spec: OperatorSpec, trace: np.ndarray, params: dict[str, Any] | None = None
    ) -> OfflineOptimum:
        """The optimum for ``trace`` (tuples/s per step): P and the in-level rate distribution from it."""
        policy = cls(spec, params)
        policy.set_trace(trace)
        return policy

    @classmethod
    def from_model(
        cls, spec: OperatorSpec, p: np.ndarray, level_rates: list, params: dict[str, Any] | None = None
    ) -> OfflineOptimum:
        """The optimum for a known level transition matrix ``p`` (L x L, rows sum to 1) and a sample of the
        rates (tuples/s) inside each level."""
        policy = cls(spec, params)
        policy.set_model(p, level_rates)
        return policy

    def set_trace(self, trace: np.ndarray) -> None:
        trace = np.asarray(trace, dtype=float)
        if trace.ndim != 1 or len(trace) < 2:
            raise ValueError("trace: need a 1-D array of at least 2 rates (tuples/s)")
        if self.levels.grow and trace.max() >= self.levels.max_rate:
            # a growing range: cover the whole trace at once (the offline optimum knows the future)
            from policies.calibration import grow

            self.levels, _ = grow(self.levels, float(trace.max()))
        levels = mdp.levels_of(trace, self.spec, self.levels)
        n = self.levels.n
        path = np.append(levels, levels[0]) if self.wrap_transitions else levels
        p = mdp.transition_matrix(mdp.transition_counts(path, n))
        self.set_model(p, [trace[levels == lvl] for lvl in range(n)])

    def set_model(self, p: np.ndarray, level_rates: list) -> None:
        n = self.levels.n
        p = np.asarray(p, dtype=float)
        if p.shape != (n, n):
            raise ValueError(f"p: must be {n} x {n} (rate levels), got {p.shape}")
        if (p < 0).any() or not np.allclose(p.sum(axis=1), 1.0):
            raise ValueError("p: rows must be probability distributions (>= 0, summing to 1)")
        if len(level_rates) != n:
            raise ValueError(f"level_rates: need one sample per level ({n}), got {len(level_rates)}")
        self.p = p
        self.level_rates = [np.asarray(r, dtype=float) for r in level_rates]
        self._solve()

    def _solve(self) -> None:
        """The true cost per (deployment, level), then the values and the table of greedy actions."""
        assert self.p is not None and self.level_rates is not None
        v = mdp.violation_probabilities(mdp.rate_thresholds(self.spec, self.space), self.level_rates)
        self.v_true = v
        self.cost = mdp.state_cost(self.space, v, self.spec)
        self._solved_key = self._key()
        self._solve_values()

    def _solve_values(self) -> None:
        """Discounted value iteration over ``self.cost`` and ``self.p``."""
        assert self.p is not None
        future, self.sweeps = mdp.value_iteration(
            self.space, self.cost, self.p, self.spec.weights.rcf, self.spec.gamma, tol=TOLERANCE
        )
        self.value = self.cost + future
        # decisions: a table of greedy actions per (deployment, level) from gamma * E V(next)
        self.ev = self.spec.gamma * (self.value @ self.p.T)
        self.table = mdp.greedy_table(self.space, self.ev, self.spec.weights.rcf)

    def _key(self) -> list[float]:
        w = self.spec.weights
        return [w.perf, w.res, w.rcf, self.spec.r_max_s]

    def _on_reconfigure(self) -> None:
        if self.p is not None and self._key() != getattr(self, "_solved_key", None):
            self._solve()

    # ---- self-calibration: the range grew (policies.calibration) -----------------------------------------------
    def _remap_levels(self, old: Any, factor: int) -> None:
        """The level model moved onto the new levels (samples concatenated, transition counts summed), then
        solved again."""
        if self.p is None or self.level_rates is None:
            return
        from policies.calibration import merge_counts

        n = self.levels.n
        sizes = np.array([max(len(r), 1) for r in self.level_rates], dtype=float)
        counts = merge_counts(merge_counts(self.p * sizes[:, None], factor, 0), factor, 1)
        rates = [
            np.concatenate([self.level_rates[i] for i in range(j * factor, min(n, (j + 1) * factor))])
            if j * factor < n
            else np.zeros(0)
            for j in range(n)
        ]
        self.p = mdp.transition_matrix(counts)
        self.level_rates = rates
        self._solve()

    # ---- deciding ------------------------------------------------------------------------------------------
    def _decide(
        self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool
    ) -> tuple[int, dict[int, float]]:
        if self.value is None:
            raise ValueError(
                f"{self.name}: no model: build it with OfflineOptimum.from_trace / from_model or params.trace_path"
            )
        d = self.space.lookup(k)
        if d < 0:
            return outside_space_action(self.space, k, self.spec), {}
        level = self.levels.level(rate)
        if not explain:
            return int(self.table[d, level]), {}
        acts, dst, moves = self.space.moves(d)
        q = self.ev[dst, level] + np.where(moves, self.spec.weights.rcf, 0.0)
        values = dict(zip(acts, q.tolist(), strict=True))
        return int(self.table[d, level]), values

    # ---- durable state: the model (the values are recomputed deterministically from it) ----------------------
    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        if self.p is None or self.level_rates is None:
            return {"has_model": False}, {}
        # the in-level rate samples as (value, multiplicity) pairs: a whole trace shrinks to its distinct rates
        uniq = [np.unique(r, return_counts=True) for r in self.level_rates]
        arrays = {
            "p": self.p,
            "rate_values": np.concatenate([u[0] for u in uniq]),
            "rate_counts": np.concatenate([u[1] for u in uniq]).astype(np.int64),
            "rate_offsets": np.cumsum([0] + [len(u[0]) for u in uniq]).astype(np.int64),
        }
        return {"has_model": True}, arrays

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        if meta.get("has_model"):
            off, values, counts = arrays["rate_offsets"], arrays["rate_values"], arrays["rate_counts"]
            self.p = arrays["p"].copy()
            self.level_rates = [
                np.repeat(values[off[i] : off[i + 1]], counts[off[i] : off[i + 1]])
                for i in range(len(off) - 1)
            ]
            self._solve()
