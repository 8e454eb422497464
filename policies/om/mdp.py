"""Shared MDP machinery of the model-based policies: deployment spaces, known costs, performance classes,
rate thresholds and value iteration vectorised with numpy.

The MDP (paper 001, Sec. 3-4; paper-mode timing of ``shared/design/paper-benchmark.md``): the state is
``(k, l)`` -- deployment ``k`` (replicas per node type) and input-rate level ``l``; an action adds or removes one
replica of one type or does nothing. The cost of a step is charged on the deployment in place and the step's rate
plus the reconfiguration of the action taken::

    c(k, l, a) = w_perf * v(k, l) + w_res * price(k) / C_max + w_rcf * 1[a != 0]

where ``v(k, l)`` is the probability that the operator violates R_max when the rate is in level ``l``. The next
state is ``(k + a, l')`` with ``l' ~ P[l, .]`` (the rate process does not depend on the action). With
``V(k, l)`` the optimal discounted cost *before* the step's cost is charged::

    V(k, l) = cs(k, l) + min_a [ w_rcf * 1[a != 0] + gamma * sum_l' P[l, l'] V(k + a, l') ]

with the "state cost" ``cs(k, l) = w_perf v(k, l) + w_res price(k) / C_max``. The decision at ``(k, l)`` only
needs the bracket (the step's own cost is sunk).

Performance classes (the sufficient statistic of the unknown cost). With round-robin balancing and the
worst-replica response time, every replica receives ``lambda / n`` (``n = sum(k)``) and the slowest one is the
worst, so the response time of ``k`` depends only on ``(n, speed of the slowest type present)``: 10 types and
K_max 20 give at most 200 classes instead of ~30 million deployments. Each class has a *rate threshold*
``lambda*``: the operator violates iff ``rate > lambda*`` (the response time grows with the rate). For other
queueing models every deployment is its own class.

Deployment spaces. :func:`enumerate_deployments` lists every ``k`` with ``k_min <= sum(k) <= K_max``, optionally
only those mixing at most ``max_types`` node types. See :mod:`policies.om.model_based` for why the two-type space
is enough and how it is checked against the full one.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from policies.operator_model import OperatorSpec, mg1_max_rate

# ---------------------------------------------------------------------------------------------------------------
# deployment spaces


def count_deployments(n_res: int, k_max: int, k_min: int = 1) -> int:
    """Number of deployment vectors with ``k_min <= sum(k) <= k_max`` over ``n_res`` types (the full space)."""
    return sum(math.comb(n + n_res - 1, n_res - 1) for n in range(k_min, k_max + 1))


def enumerate_deployments(n_res: int, k_max: int, k_min: int = 1, max_types: int | None = None) -> np.ndarray:
    """All deployments ``k`` (rows, int64) with ``k_min <= sum(k) <= k_max`` and at most ``max_types`` types
    present (``None``: no limit), in a deterministic order (by support, then counts)."""
    if n_res < 1:
        raise ValueError(f"n_res must be >= 1, got {n_res}")
    if k_max < k_min or k_min < 1:
        raise ValueError(f"need 1 <= k_min <= k_max, got k_min={k_min}, k_max={k_max}")
    limit = n_res if max_types is None else max(1, min(max_types, n_res))
    rows: list[np.ndarray] = []
    for m in range(1, limit + 1):
        for support in itertools.combinations(range(n_res), m):
            # compositions of n into m positive parts, m <= n <= k_max
            for n in range(max(m, k_min), k_max + 1):
                for cuts in itertools.combinations(range(1, n), m - 1):
                    parts = np.diff((0, *cuts, n))
                    k = np.zeros(n_res, dtype=np.int64)
                    k[list(support)] = parts
                    rows.append(k)
    return np.array(rows, dtype=np.int64).reshape(-1, n_res)


@dataclass
class DeploymentSpace:
    """A set of deployments with its action graph, prices and performance classes.

    ``deployments`` (D x N int64); ``succ`` (D x (2N+1) int64): index of the deployment an action leads to, -1 when
    the action is infeasible or leaves the space; ``price`` (D,) in $/h; ``cls`` (D,) performance class of each
    deployment. Classes: ``class_n``/``class_speed`` give (total replicas, slowest speedup) of each class when
    ``grid`` is True (round robin + worst replica); then class ``c = (n - 1) * n_speeds + speed_rank``.
    Edges (``edge_src``, ``edge_act``, ``edge_dst``) list the feasible in-space (deployment, action) pairs sorted
    by source, with ``edge_start`` the first edge of each source (every deployment has the do-nothing edge).
    """

    deployments: np.ndarray
    succ: np.ndarray
    price: np.ndarray
    cls: np.ndarray
    n_classes: int
    grid: bool
    grid_shape: tuple[int, int]
    class_n: np.ndarray
    class_speed: np.ndarray
    edge_src: np.ndarray
    edge_act: np.ndarray
    edge_dst: np.ndarray
    edge_start: np.ndarray
    max_types: int | None
    index: dict[tuple[int, ...], int]
    buckets: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    rank_of_type: np.ndarray
    _moves: dict[int, tuple[list[int], np.ndarray, np.ndarray]] = field(default_factory=dict)

    def moves(self, d: int) -> tuple[list[int], np.ndarray, np.ndarray]:
        """In-space actions of deployment ``d`` (ascending), their destinations and whether each one moves
        (cached)."""
        hit = self._moves.get(d)
        if hit is None:
            acts = np.flatnonzero(self.succ[d] >= 0)
            hit = (acts.tolist(), self.succ[d, acts], acts != 0)
            self._moves[d] = hit
        return hit

    @property
    def size(self) -> int:
        return len(self.deployments)

    def lookup(self, k: np.ndarray) -> int:
        """Index of deployment ``k`` or -1 when it is not in the space."""
        return self.index.get(tuple(np.asarray(k).tolist()), -1)


def classify_round_robin_worst(spec: OperatorSpec) -> bool:
    """True when performance depends only on (total replicas, slowest type): round robin + worst replica."""
    return spec.model.balancing == "round_robin" and spec.model.aggregation == "worst"


#: spaces built, by what they depend on (see :func:`build_space`); a control loop that loads an operator's policy
#: every period rebuilt the same space each time (40 % of a tick of 3 model-based operators)
_SPACES: dict[tuple, DeploymentSpace] = {}
SPACES_KEPT = 64


def build_space(spec: OperatorSpec, max_types: int | None = None) -> DeploymentSpace:
    """The deployment space of ``spec`` (all deployments, or those mixing at most ``max_types`` types).

    Shared between the policies that ask for the same one (same node types' prices and speedups, ``K_min``,
    ``K_max``, ``max_types`` and balancing model): its arrays are read-only."""
    key = (
        tuple(np.asarray(spec.prices, dtype=float).tolist()),
        tuple(np.asarray(spec.speedups, dtype=float).tolist()),
        int(spec.k_min),
        int(spec.k_max),
        max_types,
        spec.model.balancing,
        spec.model.aggregation,
    )
    space = _SPACES.get(key)
    if space is None:
        space = _build_space(spec, max_types)
        for value in vars(space).values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        if len(_SPACES) >= SPACES_KEPT:
            _SPACES.pop(next(iter(_SPACES)))
        _SPACES[key] = space
    return space


def _build_space(spec: OperatorSpec, max_types: int | None) -> DeploymentSpace:
    n_res = spec.n_res
    deps = enumerate_deployments(n_res, spec.k_max, spec.k_min, max_types)
    index = {tuple(int(x) for x in row): i for i, row in enumerate(deps)}
    n_act = 2 * n_res + 1
    succ = np.full((len(deps), n_act), -1, dtype=np.int64)
    succ[:, 0] = np.arange(len(deps))
    totals = deps.sum(axis=1)
    for i, row in enumerate(deps):
        total = int(totals[i])
        for t in range(n_res):
            if total > spec.k_min and row[t] > 0:
                row[t] -= 1
                succ[i, 1 + t] = index.get(tuple(int(x) for x in row), -1)
                row[t] += 1
            if total < spec.k_max:
                row[t] += 1
                succ[i, 1 + n_res + t] = index.get(tuple(int(x) for x in row), -1)
                row[t] -= 1
    price = deps @ spec.prices
    speeds = spec.speedups
    grid = classify_round_robin_worst(spec)
    uniq = np.unique(speeds)  # ascending: rank 0 = slowest
    rank_of_type = np.searchsorted(uniq, speeds)
    if grid:
        present = deps > 0
        slowest_rank = np.where(present, rank_of_type[None, :], len(uniq)).min(axis=1)
        cls = (totals - 1) * len(uniq) + slowest_rank
        n_classes = spec.k_max * len(uniq)
        class_n = np.repeat(np.arange(1, spec.k_max + 1), len(uniq))
        class_speed = np.tile(uniq, spec.k_max)
        grid_shape = (spec.k_max, len(uniq))
    else:
        cls = np.arange(len(deps))
        n_classes = len(deps)
        class_n = totals.copy()
        class_speed = np.array([speeds[row > 0].min() for row in deps])
        grid_shape = (len(deps), 1)
    src, act = np.nonzero(succ >= 0)  # row-major: sorted by source, then action
    dst = succ[src, act]
    start = np.searchsorted(src, np.arange(len(deps)))
    return DeploymentSpace(
        buckets=_buckets(succ),
        rank_of_type=rank_of_type,
        deployments=deps,
        succ=succ,
        price=price,
        cls=cls.astype(np.int64),
        n_classes=int(n_classes),
        grid=grid,
        grid_shape=grid_shape,
        class_n=class_n,
        class_speed=class_speed,
        edge_src=src.astype(np.int64),
        edge_act=act.astype(np.int64),
        edge_dst=dst.astype(np.int64),
        edge_start=start.astype(np.int64),
        max_types=max_types,
        index=index,
    )


def _buckets(succ: np.ndarray, pad_below: int = 2000) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Deployments grouped by their number of in-space actions: ``(rows, dst, acts)`` with ``dst`` and ``acts``
    (rows x m) the destinations and indices of each row's actions in action order (do nothing first).

    Spaces smaller than ``pad_below`` deployments use one bucket, padded with "move to itself" (which costs a
    reconfiguration more than doing nothing, so it never wins): fewer, larger numpy operations.
    """
    valid = succ >= 0
    counts = valid.sum(axis=1)
    if len(succ) < pad_below:
        m = int(counts.max())
        rows = np.arange(len(succ))
        dst = np.repeat(rows[:, None], m, axis=1)
        acts = np.zeros((len(succ), m), dtype=np.int64)
        for i in rows:
            a = np.flatnonzero(valid[i])
            dst[i, : len(a)] = succ[i, a]
            acts[i, : len(a)] = a
        return [(rows, dst, acts)]
    out = []
    for m in np.unique(counts):
        rows = np.flatnonzero(counts == m)
        acts = np.nonzero(valid[rows])[1].reshape(len(rows), m)
        out.append((rows, succ[rows[:, None], acts], acts))
    return out


# ---------------------------------------------------------------------------------------------------------------
# performance: rate thresholds and violation probabilities


def rate_thresholds(spec: OperatorSpec, space: DeploymentSpace) -> np.ndarray:
    """Largest input rate (tuples/s) each performance class sustains without exceeding R_max (the true model).

    Round robin + worst replica: closed form of the Pollaczek-Khinchine bound. Per replica rate ``x``, mean
    service ``S`` and variance ``Var`` on the slowest type: ``S + x (Var + S^2) / (2 (1 - x S)) <= R_max`` iff
    ``x <= (R_max - S) / ((Var + S^2) / 2 + (R_max - S) S)``; the class threshold is ``n x*``. Other models:
    bisection on :meth:`QueueModel.response_time` per deployment.
    """
    m = spec.model
    r_max = spec.r_max_s
    if space.grid:
        s = m.service_mean_s / space.class_speed
        return space.class_n * mg1_max_rate(s, m.variance / space.class_speed**2, r_max)
    out = np.empty(space.n_classes)
    speeds = spec.speedups
    for i, k in enumerate(space.deployments):
        cap = m.capacity(k, speeds)
        if m.response_time(k, speeds, 0.0) > r_max:
            out[i] = 0.0
            continue
        lo, hi = 0.0, cap
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if m.response_time(k, speeds, mid) > r_max:
                hi = mid
            else:
                lo = mid
        out[i] = lo
    return out


def violation_probabilities(thresholds: np.ndarray, level_rates: list[np.ndarray]) -> np.ndarray:
    """``v[c, l]``: fraction of the rates observed in level ``l`` (tuples/s) above class ``c``'s threshold.

    ``level_rates[l]`` is a sample of the rates falling in level ``l`` (e.g. all trace values of that level);
    an empty sample gives probability 0 for every class (the level never occurs).
    """
    out = np.zeros((len(thresholds), len(level_rates)))
    for lvl, rates in enumerate(level_rates):
        if len(rates) == 0:
            continue
        srt = np.sort(np.asarray(rates, dtype=float))
        above = len(srt) - np.searchsorted(srt, thresholds, side="right")
        out[:, lvl] = above / len(srt)
    return out


def levels_of(rates: np.ndarray, spec: OperatorSpec, levels: Any = None) -> np.ndarray:
    """Rate level of each rate (tuples/s), exactly as :meth:`RateLevels.level`, under ``levels`` (a
    :class:`policies.operator_model.RateLevels`; default the spec's)."""
    from policies.calibration import initial_levels

    rl = levels if levels is not None else initial_levels(spec.rate_levels)
    lv = np.floor(np.asarray(rates, dtype=float) / rl.width).astype(np.int64)
    return np.clip(lv, 0, rl.n - 1)


def transition_counts(levels: np.ndarray, n_levels: int) -> np.ndarray:
    """Counts ``n[l, l']`` of consecutive level pairs of a level sequence."""
    counts = np.zeros((n_levels, n_levels))
    np.add.at(counts, (levels[:-1], levels[1:]), 1.0)
    return counts


def transition_matrix(counts: np.ndarray) -> np.ndarray:
    """Row-normalised transition matrix; a level never left stays where it is (identity row)."""
    rows = counts.sum(axis=1, keepdims=True)
    eye = np.eye(len(counts))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(rows > 0, counts / np.where(rows > 0, rows, 1.0), eye)
    return p


# ---------------------------------------------------------------------------------------------------------------
# value iteration


def state_cost(space: DeploymentSpace, v: np.ndarray, spec: OperatorSpec) -> np.ndarray:
    """``cs[d, l] = w_perf v[cls(d), l] + w_res price(d) / C_max`` (D x L)."""
    w = spec.weights
    return w.perf * v[space.cls] + (w.res / spec.cost_scale) * space.price[:, None]


def action_costs(space: DeploymentSpace, w_rcf: float) -> np.ndarray:
    """Known reconfiguration cost of each edge: ``w_rcf`` unless the action is do nothing."""
    return np.where(space.edge_act == 0, 0.0, w_rcf)


def matmul_rows(a: np.ndarray, b: np.ndarray, out: np.ndarray, chunk: int = 512) -> np.ndarray:
    """``a @ b`` in row blocks: each block is below OpenBLAS's multithreading threshold, which on a loaded
    machine makes the product 10-20 times faster than one threaded call."""
    for i in range(0, len(a), chunk):
        np.matmul(a[i : i + chunk], b, out=out[i : i + chunk])
    return out


class Sweeper:
    """Full backups over a :class:`DeploymentSpace` with preallocated buffers (one sweep: a D x L product with
    the L x L transition matrix, one gather per in-space action and an elementwise minimum)."""

    def __init__(self, space: DeploymentSpace, n_levels: int) -> None:
        self.space = space
        self._hood: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        shape = (space.size, n_levels)
        self.value = np.empty(shape)
        self.ev = np.empty(shape)
        self.move = np.empty(shape)
        # per bucket: contiguous destination columns of the moves and a scratch buffer
        self.plan = []
        for rows, dst, _ in space.buckets:
            cols = [np.ascontiguousarray(dst[:, j]) for j in range(1, dst.shape[1])]
            full = len(rows) == space.size
            self.plan.append(
                (rows, full, cols, np.empty((len(rows), n_levels)), np.empty((len(rows), n_levels)))
            )

    def sweep(
        self, cost: np.ndarray, p: np.ndarray, future: np.ndarray, w_rcf: float, gamma: float
    ) -> np.ndarray:
        """One full backup of every state: the new ``future[d, l] = min_a (rcf(a) + gamma E V(d+a, l'))`` with
        ``V = cost + future`` (the previous values) and ``p`` the L x L rate-level transition matrix."""
        np.add(cost, future, out=self.value)
        matmul_rows(self.value, gamma * p.T, self.ev)  # ev[d, l] = gamma sum_l' P[l, l'] V[d, l']
        np.add(self.ev, w_rcf, out=self.move)
        out = np.empty_like(future)
        for rows, full, cols, best, tmp in self.plan:
            # do nothing is always the first action; every other action costs w_rcf
            if full:
                best[:] = self.ev
            else:
                np.take(self.ev, rows, axis=0, out=best)
            for col in cols:
                np.take(self.move, col, axis=0, out=tmp)
                np.minimum(best, tmp, out=best)
            if full:
                out[:] = best
            else:
                out[rows] = best
        return out

    def neighbourhood(self, d: int, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Deployments within ``radius`` in-space actions of ``d`` (sorted), cached."""
        key = (d, radius)
        hit = self._hood.get(key)
        if hit is None:
            ring = {d}
            seen = {d}
            for _ in range(radius):
                nxt = {int(x) for r in ring for x in self.space.succ[r] if x >= 0} - seen
                seen |= nxt
                ring = nxt
            rows = np.array(sorted(seen), dtype=np.int64)
            dst = self.space.succ[rows]
            dst = np.where(
                dst >= 0, dst, rows[:, None]
            )  # infeasible: "move to itself", never better than noop
            needed = np.unique(dst)
            pos = np.searchsorted(needed, dst)
            hit = (rows, needed, np.ascontiguousarray(pos[:, 0]), np.ascontiguousarray(pos[:, 1:]))
            self._hood[key] = hit
        return hit

    def sweep_local(
        self,
        d: int,
        radius: int,
        cost: np.ndarray,
        p: np.ndarray,
        future: np.ndarray,
        w_rcf: float,
        gamma: float,
    ) -> None:
        """Back up, in place, only the deployments within ``radius`` actions of ``d`` (asynchronous value
        iteration: with full sweeps from time to time it converges to the same fixed point)."""
        rows, needed, stay, moves = self.neighbourhood(d, radius)
        value = cost[needed] + future[needed]
        ev = value @ (gamma * p.T)
        best = ev[stay]
        if moves.shape[1]:
            np.minimum(best, (ev + w_rcf)[moves].min(axis=1), out=best)
        future[rows] = best


def sweep(
    space: DeploymentSpace,
    cost: np.ndarray,
    p: np.ndarray,
    future: np.ndarray,
    w_rcf: float,
    gamma: float,
) -> np.ndarray:
    """One full backup of every state (see :meth:`Sweeper.sweep`)."""
    return Sweeper(space, cost.shape[1]).sweep(cost, p, future, w_rcf, gamma)


def value_iteration(
    space: DeploymentSpace,
    cost: np.ndarray,
    p: np.ndarray,
    w_rcf: float,
    gamma: float,
    future: np.ndarray | None = None,
    tol: float = 1e-9,
    max_sweeps: int = 100_000,
) -> tuple[np.ndarray, int]:
    """Value iteration to convergence: returns ``(future, sweeps)`` with ``V = cost + future``.

    Stops when the span of the change bounds the error of the (McQueen-corrected) values below ``tol``:
    ``gamma / (1 - gamma) * span(delta) < tol``; the returned table includes the correction (midpoint of
    the bounds), so it is within ``tol`` of the fixed point in the max norm.
    """
    fut = np.zeros_like(cost) if future is None else future.copy()
    factor = gamma / (1.0 - gamma) if gamma < 1 else math.inf
    sweeper = Sweeper(space, cost.shape[1])
    for n in range(1, max_sweeps + 1):
        new = sweeper.sweep(cost, p, fut, w_rcf, gamma)
        delta = new - fut
        lo, hi = float(delta.min()), float(delta.max())
        fut = new
        if (hi - lo) * factor < tol:
            return fut + 0.5 * (lo + hi) * factor, n
    return fut, max_sweeps


def q_values(
    space: DeploymentSpace,
    d: int,
    level: int,
    value: np.ndarray,
    p: np.ndarray,
    w_rcf: float,
    gamma: float,
) -> dict[int, float]:
    """Values ``rcf(a) + gamma sum_l' P[level, l'] V(d + a, l')`` of the in-space actions of deployment ``d``;
    ``value`` is ``V`` (D x L) or only its rows needed."""
    acts = np.nonzero(space.succ[d] >= 0)[0]
    dst = space.succ[d, acts]
    ev = value[dst] @ p[level]
    q = gamma * ev + np.where(acts == 0, 0.0, w_rcf)
    return {int(a): float(x) for a, x in zip(acts, q, strict=True)}


def greedy_table(space: DeploymentSpace, ev: np.ndarray, w_rcf: float) -> np.ndarray:
    """Greedy action per (deployment, level) given ``ev[d, l] = gamma sum_l' P[l, l'] V(d, l')``: the first
    action (in action order) with the strictly smallest ``rcf(a) + ev[d + a, l]``."""
    n_act = space.succ.shape[1]
    q = np.full((space.size, n_act, ev.shape[1]), np.inf)
    for a in range(n_act):
        ok = space.succ[:, a] >= 0
        q[ok, a] = ev[space.succ[ok, a]] + (0.0 if a == 0 else w_rcf)
    return np.argmin(q, axis=1).astype(np.int16)


def greedy(q: dict[int, float]) -> int:
    """The first action (in action order) with the strictly smallest value."""
    best_a, best_v = -1, math.inf
    for a in sorted(q):
        if q[a] < best_v:
            best_a, best_v = a, q[a]
    return best_a
