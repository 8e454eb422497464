"""The average-cost optimum of the level model [``dp-average``]: relative value iteration (issue 24, item 2).

``dp-discounted`` (:mod:`policies.om.offline`, old name ``dp``) minimises the *discounted* cost (gamma of the spec,
0.99 in the paper's benchmark) of the MDP whose state is (deployment, rate level); the benchmark tables report the
*average* cost per step, which a discounted policy does not minimise (at gamma 0.999 it is up to 1.9x lower than at
0.99), so online policies can beat it. This policy solves the same level model (the same transition matrix and
in-level rate distribution estimated from the whole trace, the same true performance model) for the average cost::

    h(k, l) + g = cs(k, l) + min_a [ w_rcf * 1[a != 0] + sum_l' P[l, l'] h(k + a, l') ]

by relative value iteration: ``h <- T h - (T h)(ref)`` with the undiscounted Bellman operator ``T`` until the span
of ``T h - h`` (which brackets the optimal gain ``g``, cost per step) is below :data:`TOLERANCE`. For a unique gain
the level chain must be one recurrent class: the transition counts of a trace wrap around (its last level is followed
by its first, as if the trace repeated; without it the last level could be absorbing), and the span is taken over
the levels the trace visits (a level never seen keeps its identity row and is never entered). It is optimal on
average for the level model; on a real trace, where the levels are only approximately Markov and the policy sees
levels, not rates, it is a reference, not a bound (the bound is ``clairvoyant``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from policies.om import mdp
from policies.om.offline import OfflineOptimum

TOLERANCE = 1e-9  # span of T h - h (cost per step) at which the gain is known to this precision
MAX_SWEEPS = 200_000  # relative value iteration stops here (reported in ``converged``)


def relative_value_iteration(
    space: mdp.DeploymentSpace,
    cost: np.ndarray,
    p: np.ndarray,
    w_rcf: float,
    active: np.ndarray | None = None,
    tol: float = TOLERANCE,
    max_sweeps: int = MAX_SWEEPS,
) -> tuple[np.ndarray, float, int, bool]:
    """``(future, gain, sweeps, converged)``: the relative values (``h = cost + future``, normalised to 0 at the
    first deployment and first active level) and the optimal average cost per step ``gain`` of the level MDP
    (``cost``: D x L state costs, ``p``: L x L level transition matrix; ``active``: the levels of the recurrent
    class, default all)."""
    sweeper = mdp.Sweeper(space, cost.shape[1])
    cols = np.flatnonzero(np.ones(cost.shape[1], dtype=bool) if active is None else active)
    ref = int(cols[0])
    fut = np.zeros_like(cost)
    lo = hi = 0.0
    for n in range(1, max_sweeps + 1):
        new = sweeper.sweep(cost, p, fut, w_rcf, 1.0)
        # T h - h with h = cost + fut: (cost + new) - (cost + fut)
        delta = (new - fut)[:, cols]
        lo, hi = float(delta.min()), float(delta.max())
        fut = new - new[0, ref]
        if hi - lo < tol:
            return fut, 0.5 * (lo + hi), n, True
    return fut, 0.5 * (lo + hi), max_sweeps, False


class AverageCostOptimum(OfflineOptimum):
    """The level model's average-cost optimum (relative value iteration); see the module doc."""

    name: ClassVar[str] = "dp-average"
    wrap_transitions: ClassVar[bool] = True  # see the module doc

    def _solve_values(self) -> None:
        """Relative value iteration over ``self.cost`` and ``self.p`` (see the module doc)."""
        assert self.p is not None and self.level_rates is not None
        active = np.array([len(r) > 0 for r in self.level_rates])
        future, self.gain, self.sweeps, self.converged = relative_value_iteration(
            self.space, self.cost, self.p, self.spec.weights.rcf, active if active.any() else None
        )
        self.value = self.cost + future
        self.ev = self.value @ self.p.T  # sum_l' P[l, l'] h(d, l')
        self.table = mdp.greedy_table(self.space, self.ev, self.spec.weights.rcf)
