"""The clairvoyant bound [``clairvoyant``]: the cheapest action sequence over the actual trace for a controller that
knows every future rate (issue 24, item 2).

Objective: the weighted cost of paper 001 (eq. 2) with the paper-mode timing (``shared/design/paper-benchmark.md``)
of :mod:`policies.sim.operator`: at step ``t`` with rate ``lambda_t`` (tuples/s) and deployment ``k_t`` in place,
the action ``a_t`` (do nothing, or add / remove one replica of one type) costs::

    c_t = w_perf * 1[R(k_t, lambda_t) > R_max] + w_res * price(k_t) / C_max + w_rcf * 1[a_t != 0]

and ``k_{t+1} = k_t + a_t``. Backward dynamic programming over the trace (``V_T = 0``)::

    V_t(k) = w_perf * 1[R(k, lambda_t) > R_max] + w_res * price(k) / C_max
             + min_a [ w_rcf * 1[a != 0] + V_{t+1}(k + a) ]

gives the minimum total cost from every deployment. ``V_0(k_0) / T`` is the clairvoyant bound of a run that
starts in ``k_0``: no online policy with the same action set (one replica per step, the paper's) and the same start
can have a lower average cost on that trace. Policies that may reconfigure several replicas in one step
(``model-based-multistep``, :data:`policies.base.JUMP`) are not bounded by it.

The policy follows the optimal sequence. Memory: the decision table of the whole trace would be ``T x D`` entries
(525,533 steps x 1,770 deployments for 3 node types and K_max 20), so the backward pass keeps only the values at
``ceil(sqrt(T))``-step checkpoints and the decisions of one segment are recomputed from its checkpoint when the
run enters it (twice the work of one pass, ``O(sqrt(T) * D)`` memory).

The violation of a deployment at a rate uses the rate thresholds of :func:`policies.om.mdp.rate_thresholds`
(exact for the model: ``R(k, lambda) > R_max`` iff ``lambda`` exceeds the threshold of ``k``'s performance class).
The space is the full deployment space of :func:`policies.om.mdp.build_space`; spaces whose backward pass would
exceed :data:`MAX_WORK` element operations are refused with a clear error (use fewer steps or node types).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from policies.base import Observation, Policy
from policies.om import mdp
from policies.operator_model import OperatorSpec

#: refuse a backward pass beyond this many (steps x deployments x actions) element operations (~ minutes of CPU)
MAX_WORK = 3e10


class Clairvoyant(Policy):
    """Backward dynamic programming over the actual trace (offline, knows every future rate)."""

    name: ClassVar[str] = "clairvoyant"
    deterministic: ClassVar[bool] = True
    DEFAULTS: ClassVar[dict[str, Any]] = {"trace_path": "", "trace_steps": 0}

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        if params["trace_steps"] < 0:
            raise ValueError(f"params.trace_steps: must be >= 0, got {params['trace_steps']}")

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(spec, params, seed)
        self.trace: np.ndarray | None = None
        self.space: mdp.DeploymentSpace | None = None
        if self.params["trace_path"]:
            from policies.sim.trace import load_trace

            self.set_trace(load_trace(self.params["trace_path"], self.params["trace_steps"] or None))

    # ---- the backward pass ---------------------------------------------------------------------------------
    def set_trace(self, trace: np.ndarray) -> None:
        """Solve the backward DP for ``trace`` (tuples/s per step) and keep the segment checkpoints."""
        trace = np.asarray(trace, dtype=float).reshape(-1)
        if trace.size == 0 or not np.all(np.isfinite(trace)) or (trace < 0).any():
            raise ValueError("trace: need at least one finite rate >= 0 tuples/s")
        spec = self.spec
        size = mdp.count_deployments(spec.n_res, spec.k_max, spec.k_min)
        work = float(size) * (2 * spec.n_res + 1) * trace.size
        if work > MAX_WORK:
            raise ValueError(
                f"clairvoyant: {size} deployments x {2 * spec.n_res + 1} actions x {trace.size} steps is beyond "
                f"{MAX_WORK:.0e} operations: use fewer steps, node types or a smaller K_max"
            )
        if self.space is None:
            self.space = mdp.build_space(spec)
        space = self.space
        self.trace = trace
        self.thresholds = mdp.rate_thresholds(spec, space)  # per performance class, tuples/s
        w = spec.weights
        self._res = (w.res / spec.cost_scale) * space.price  # D
        rows = np.arange(space.size)
        # per action (after do nothing): destination, or the deployment itself when infeasible (a move to itself
        # costs w_rcf more than doing nothing, so it never wins a strict comparison)
        self._cols = [
            (a, np.where(space.succ[:, a] >= 0, space.succ[:, a], rows))
            for a in range(1, space.succ.shape[1])
        ]
        n = trace.size
        self.block = max(1, math.isqrt(n - 1) + 1) if n > 1 else 1
        n_seg = math.ceil(n / self.block)
        self.checkpoints = np.zeros((n_seg + 1, space.size))  # V at t = j * block (row n_seg: V_T = 0)
        v = np.zeros(space.size)
        for t in range(n - 1, -1, -1):
            v = self._backup(t, v)[0]
            if t % self.block == 0:
                self.checkpoints[t // self.block] = v
        self.value0 = v  # V_0 per deployment
        self._segment = -1
        self._choices: np.ndarray | None = None

    def _backup(self, t: int, v_next: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(V_t, decision)`` from ``V_{t+1}``: the first action (in action order) with the strictly smallest
        ``w_rcf * 1[a != 0] + V_{t+1}(k + a)``."""
        assert self.trace is not None and self.space is not None
        rcf = self.spec.weights.rcf
        best = v_next.copy()
        choice = np.zeros(v_next.size, dtype=np.int8)
        for a, col in self._cols:
            cand = v_next[col] + rcf
            better = cand < best
            best = np.where(better, cand, best)
            choice[better] = a
        violated = (self.trace[t] > self.thresholds)[self.space.cls]
        return best + self._res + self.spec.weights.perf * violated, choice

    def _load_segment(self, seg: int) -> None:
        """Recompute the decisions of segment ``seg`` backward from the checkpoint at its end."""
        assert self.trace is not None
        lo = seg * self.block
        hi = min(lo + self.block, self.trace.size)
        v = self.checkpoints[seg + 1] if hi < self.trace.size else np.zeros_like(self.value0)
        choices = np.zeros((hi - lo, v.size), dtype=np.int8)
        for t in range(hi - 1, lo - 1, -1):
            v, choices[t - lo] = self._backup(t, v)
        self._choices = choices
        self._segment = seg

    # ---- the bound -------------------------------------------------------------------------------------------
    def bound(self, k0: np.ndarray) -> float:
        """The clairvoyant bound from deployment ``k0``: minimum average weighted cost per step over the trace."""
        if self.trace is None or self.space is None:
            raise ValueError("clairvoyant: no trace: give it with set_trace() or params.trace_path")
        d = self.space.lookup(k0)
        if d < 0:
            raise ValueError(f"k0: deployment {np.asarray(k0).tolist()} is outside k_min..K_max")
        return float(self.value0[d]) / self.trace.size

    # ---- deciding --------------------------------------------------------------------------------------------
    def _decide(
        self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool
    ) -> tuple[int, dict[int, float]]:
        if self.trace is None or self.space is None:
            raise ValueError("clairvoyant: no trace: give it with set_trace() or params.trace_path")
        t = self.t
        if t >= self.trace.size:
            return 0, {}  # past the trace: nothing known
        if not math.isclose(rate, float(self.trace[t]), rel_tol=1e-12, abs_tol=1e-12):
            raise ValueError(
                f"clairvoyant: step {t} has rate {rate} tuples/s but the trace it was solved for has "
                f"{self.trace[t]}: the bound only runs on its own trace"
            )
        d = self.space.lookup(k)
        if d < 0:
            raise ValueError(f"clairvoyant: deployment {np.asarray(k).tolist()} is outside k_min..K_max")
        seg = t // self.block
        if seg != self._segment:
            self._load_segment(seg)
        assert self._choices is not None
        return int(self._choices[t - seg * self.block, d]), {}
