"""Constrained Bayesian optimisation (paper 001 Alg. 3) over the two domains of the AM (Alg. 4).

Minimise ``f(x)`` subject to ``g_j(x) <= 0`` with a budget of ``n_iter`` evaluations: a Matern 5/2 GP for ``f``
and one per constraint; the next point maximises the *constrained expected improvement*
``EI_f(x) * prod_j P[g_j(x) <= 0]`` (Gardner et al. 2014) over candidate points drawn from the domain (random
points plus perturbations of the best ones); until a feasible point has been observed it maximises the
probability of feasibility. The first evaluation is the warm start (the current configuration).

Domains (points of the unit box, sampled only inside the feasible region):

* :class:`PathSumDomain` -- latency apportioning: ``x_u in (0, 1)`` and ``1 - eps <= sum_{u in pi} x_u <= 1 + eps``
  for every source-to-sink path ``pi``;
* :class:`SimplexDomain` -- objective weights: every weight in (0, 1), summing to 1.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from policies.am.gp import GaussianProcess, expected_improvement
from policies.am.naive import fill_paths


class SimplexDomain:
    """Points with every coordinate in ``[low, 1 - low]`` summing to 1 (``dim`` coordinates)."""

    def __init__(self, dim: int = 3, low: float = 0.01) -> None:
        if dim < 2:
            raise ValueError(f"dim: a simplex needs at least 2 coordinates, got {dim}")
        self.dim, self.low = dim, low

    def contains(self, x: np.ndarray) -> bool:
        x = np.asarray(x, dtype=float)
        return bool(abs(x.sum() - 1.0) <= 1e-9 and (x > 0).all() and (x < 1).all())

    def _clean(self, x: np.ndarray) -> np.ndarray:
        x = np.clip(x, self.low, None)
        return x / x.sum(axis=-1, keepdims=True)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self._clean(rng.dirichlet(np.ones(self.dim), size=n))

    def around(self, rng: np.random.Generator, center: np.ndarray, n: int, scale: float) -> np.ndarray:
        noisy = np.asarray(center) * np.exp(rng.normal(0.0, scale, size=(n, self.dim)))
        return self._clean(noisy / noisy.sum(axis=1, keepdims=True))


class PathSumDomain:
    """Latency fractions per operator: each in ``[low, high]``, every path sum in ``[1 - eps, 1 + eps]``.

    ``on_path``: boolean matrix paths x operators (:meth:`Application.path_matrix`).
    """

    def __init__(self, on_path: np.ndarray, eps: float = 0.05, low: float = 0.01, high: float = 0.99) -> None:
        if not 0.0 <= eps < 1.0:
            raise ValueError(f"epsilon: must be in [0, 1), got {eps}")
        self.on_path = np.asarray(on_path, dtype=bool)
        self.dim = self.on_path.shape[1]
        self.eps, self.low, self.high = eps, low, high

    def contains(self, x: np.ndarray) -> bool:
        x = np.asarray(x, dtype=float)
        sums = self.on_path @ x
        return bool(
            (x > 0).all()
            and (x < 1).all()
            and (sums >= 1 - self.eps - 1e-9).all()
            and (sums <= 1 + self.eps + 1e-9).all()
        )

    def _from_weights(self, rng: np.random.Generator, w: np.ndarray) -> np.ndarray:
        x = fill_paths(self.on_path, np.clip(w, 1e-6, None), 1.0)
        if self.eps > 0:
            x = x * rng.uniform(1 - self.eps, 1 + self.eps, size=(len(x), 1))
        x = np.clip(x, self.low, self.high)
        sums = x @ self.on_path.T
        ok = ((sums >= 1 - self.eps - 1e-9) & (sums <= 1 + self.eps + 1e-9)).all(axis=1)
        return x[ok]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self._from_weights(rng, rng.uniform(0.05, 1.0, size=(n, self.dim)))

    def around(self, rng: np.random.Generator, center: np.ndarray, n: int, scale: float) -> np.ndarray:
        return self._from_weights(
            rng, np.asarray(center) * np.exp(rng.normal(0.0, scale, size=(n, self.dim)))
        )


#: an objective evaluation: (value to minimise, constraint values that must be <= 0, extra info to record)
Evaluation = tuple[float, list[float], dict[str, Any]]


@dataclass
class BOResult:
    """Outcome of one optimisation: the best feasible point (or, when none was feasible, the least infeasible
    one), its value, the full history and why it stopped."""

    x: np.ndarray
    value: float
    feasible: bool
    history: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = "budget used"
    seconds: float = 0.0
    constraints: list[float] = field(default_factory=list)

    @property
    def evaluations(self) -> int:
        return len(self.history)


def _violation(cons: list[float]) -> float:
    return float(sum(max(0.0, c) for c in cons))


def minimize_constrained(
    objective: Callable[[np.ndarray], Evaluation],
    domain: SimplexDomain | PathSumDomain,
    n_iter: int = 25,
    x0: list[np.ndarray] | None = None,
    n_init: int = 4,
    seed: int = 0,
    timeout_s: float | None = None,
    n_candidates: int = 1000,
) -> BOResult:
    """Minimise ``objective`` over ``domain`` with at most ``n_iter`` evaluations (see module doc).

    ``x0``: warm-start points evaluated first; ``n_init``: random points evaluated before the GP guides the
    search (counted in ``n_iter``); ``timeout_s``: wall-clock budget, checked between evaluations.
    """
    if isinstance(n_iter, bool) or not isinstance(n_iter, int) or n_iter < 1:
        raise ValueError(f"n_bo: BO iteration count must be an integer >= 1, got {n_iter!r}")
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    xs: list[np.ndarray] = []
    fs: list[float] = []
    gs: list[list[float]] = []
    history: list[dict[str, Any]] = []
    stopped = "budget used"
    queue = [np.asarray(x, dtype=float) for x in (x0 or [])]
    init = domain.sample(rng, max(n_init, 1) * 4)[: max(0, n_init)]
    queue.extend(list(init))
    while len(xs) < n_iter:
        if timeout_s is not None and time.perf_counter() - start > timeout_s:
            stopped = f"timeout after {time.perf_counter() - start:.1f} s ({len(xs)} evaluations)"
            break
        if queue:
            x = queue.pop(0)
            how = "warm start" if len(xs) < len(x0 or []) else "initial design"
        else:
            x = _next_point(xs, fs, gs, domain, rng, n_candidates, seed + len(xs))
            how = "constrained EI"
        f, cons, info = objective(x)
        xs.append(np.asarray(x, dtype=float))
        fs.append(float(f))
        gs.append([float(c) for c in cons])
        history.append(
            {"x": [float(v) for v in x], "value": float(f), "constraints": gs[-1], "how": how, **info}
        )
    if not xs:
        raise RuntimeError(f"no evaluation completed: {stopped}")
    feasible = [i for i in range(len(xs)) if _violation(gs[i]) <= 0]
    if feasible:
        i = min(feasible, key=lambda j: fs[j])
    else:
        i = min(range(len(xs)), key=lambda j: (_violation(gs[j]), fs[j]))
    return BOResult(xs[i], fs[i], bool(feasible), history, stopped, time.perf_counter() - start, gs[i])


def _next_point(
    xs: list[np.ndarray],
    fs: list[float],
    gs: list[list[float]],
    domain: SimplexDomain | PathSumDomain,
    rng: np.random.Generator,
    n_candidates: int,
    seed: int,
) -> np.ndarray:
    x = np.array(xs)
    f = np.array(fs)
    g = np.array(gs).reshape(len(xs), -1)
    feasible = (np.maximum(g, 0).sum(axis=1) <= 0) if g.size else np.ones(len(xs), dtype=bool)
    order = np.argsort(np.where(feasible, f, np.inf) + np.maximum(g, 0).sum(axis=1) * 1e6 if g.size else f)
    parts = [domain.sample(rng, n_candidates)]
    for j in order[:3]:
        for scale in (0.05, 0.2):
            parts.append(domain.around(rng, x[j], n_candidates // 6, scale))
    cand = np.vstack([p for p in parts if len(p)])
    prob = np.ones(len(cand))
    for c in range(g.shape[1]):
        gp = GaussianProcess(seed=seed + c + 1).fit(x, g[:, c])
        mean, std = gp.predict(cand)
        prob *= norm.cdf(-mean / np.maximum(std, 1e-12))
    if feasible.any():
        gp = GaussianProcess(seed=seed).fit(x, f)
        mean, std = gp.predict(cand)
        score = expected_improvement(mean, std, float(f[feasible].min())) * prob
    else:
        score = prob
    return cand[int(np.argmax(score))]
