"""The naive Application Manager (paper 001 Appendix A, Alg. 5): equal weights and equal latency shares.

Per-operator bounds: every operator on a source-to-sink path ``pi`` gets ``R_max / |pi|``; an operator on several
paths keeps the smallest share. Paths left with spare latency (sum of bounds below R_max) have it redistributed to
their operators proportionally to their current allocation ("allocateSpareLatency"): an operator is scaled up by
the smallest ratio ``(R_max - frozen part of pi) / (free part of pi)`` over its paths; operators on a path that is
already tight are frozen; repeated until every operator lies on a tight path. Every path sum stays <= R_max and
every path through a non-frozen operator ends up exactly at R_max.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from policies.am.arbiter import Arbiter, check_budget
from policies.app_graphs import Application
from policies.operator_model import CostWeights, NodeType
from policies.options import defaults as option_defaults
from policies.options import validate as validate_options

EQUAL_WEIGHTS = CostWeights(1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0)


@dataclass
class AMConfiguration:
    """What the AM applies to its OMs: per-operator response-time bounds (s) and the OMs' cost weights."""

    bounds_s: np.ndarray
    weights: CostWeights

    def as_dict(self, names: list[str] | None = None) -> dict[str, Any]:
        names = names or [str(i) for i in range(len(self.bounds_s))]
        return {
            "bounds_ms": {n: round(float(b) * 1000.0, 3) for n, b in zip(names, self.bounds_s, strict=True)},
            "weights": {"perf": self.weights.perf, "res": self.weights.res, "rcf": self.weights.rcf},
        }


def naive_bounds(app: Application, r_max_s: float | None = None) -> np.ndarray:
    """Alg. 5: per-operator response-time bounds (s) from equal shares of ``r_max_s`` along every path, spare
    latency redistributed proportionally to the current allocation (see module doc)."""
    r_max = app.r_max_s if r_max_s is None else float(r_max_s)
    if not r_max > 0:
        raise ValueError(f"r_max_s: must be > 0, got {r_max}")
    on_path = app.path_matrix()  # paths x operators
    lengths = on_path.sum(axis=1)
    rho = np.full(app.n, np.inf)
    for p in range(on_path.shape[0]):
        rho[on_path[p]] = np.minimum(rho[on_path[p]], r_max / lengths[p])
    return fill_paths(on_path, rho, r_max)


def fill_paths(on_path: np.ndarray, alloc: np.ndarray, total: float) -> np.ndarray:
    """allocateSpareLatency: scale a positive allocation (one value per operator) so that no path sum exceeds
    ``total`` and every path through an operator that can still grow reaches it, distributing each path's spare
    proportionally to the current allocation (water filling, see module doc). ``on_path``: paths x operators.
    ``alloc`` may also be a batch (rows of allocations); the result has its shape."""
    rho = np.array(alloc, dtype=float)
    single = rho.ndim == 1
    rho = np.atleast_2d(rho)
    if not (rho > 0).all():
        raise ValueError("alloc: every operator needs a positive allocation")
    on = np.asarray(on_path, dtype=bool)
    on_f = on.T.astype(float)  # operators x paths
    n = on.shape[1]
    # first make every path feasible: shrink each operator by the worst over-full path through it
    sums = rho @ on_f
    over = np.where(sums > total, total / sums, 1.0)
    rho *= np.where(on[None], over[:, :, None], 1.0).min(axis=1)
    frozen = np.zeros(rho.shape, dtype=bool)
    tol = 1e-12 * total
    for _ in range(n + 1):
        sums = rho @ on_f
        tight = sums >= total - tol
        frozen |= (tight[:, :, None] & on[None]).any(axis=1)
        if frozen.all():
            break
        fixed = (rho * frozen) @ on_f
        free = (rho * ~frozen) @ on_f
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(~tight & (free > 0), (total - fixed) / free, np.inf)
        factor = np.where(on[None] & ~frozen[:, None, :], ratio[:, :, None], np.inf).min(axis=1)
        grow = ~frozen & np.isfinite(factor)
        if not grow.any():
            break
        rho = np.where(grow, rho * factor, rho)
    return rho[0] if single else rho


def bounds_to_fractions(app: Application, bounds_s: np.ndarray, r_max_s: float | None = None) -> np.ndarray:
    """x_u = R_u_max / R_max (the variables of BO latency apportioning)."""
    return np.asarray(bounds_s, dtype=float) / (app.r_max_s if r_max_s is None else r_max_s)


class NaiveAM:
    """Naive AM: equal weights (1/3 each), Alg. 5 bounds, token-bucket arbitration of the OMs' proposals.

    ``eta_v``/``eta_r``: budgets (fractions in [0, 1)) of violated and reconfigured periods; the naive AM does
    not use eta_v (it is "not sensitive to the requirements", paper 001 Sec. 6.3) but records it.
    """

    name = "naive"
    #: manifest parameters (``spec.policies.am.params``) of the control loop's AM: the per-period arbitration
    #: (token bucket, reserve, batching, ``hold_scale_ins``) and the violation-budget guard
    #: (:mod:`policies.am.guard`); types, bounds and defaults in :mod:`policies.options` (level ``loop``)
    DEFAULTS: ClassVar[dict[str, Any]] = option_defaults("am", "naive")

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Merge manifest ``params`` over :data:`DEFAULTS`; raise ValueError("params.<name>: reason")."""
        return validate_options("am", cls.name, params)

    def __init__(
        self,
        app: Application,
        eta_v: float = 0.05,
        eta_r: float = 0.10,
        bucket_capacity: float = 1.0,
        batching: bool = True,
        node_capacity: list[int] | None = None,
        node_type_names: list[str] | None = None,
        scale_in_reserve: float = 0.0,
        node_types: tuple[NodeType, ...] | None = None,
        hold_scale_ins: bool = False,
    ) -> None:
        self.app = app
        if node_types is not None:
            app.check_feasible(tuple(node_types))
        self.eta_v = check_budget("eta_v", eta_v)
        self.eta_r = check_budget("eta_r", eta_r)
        self.arbiter = Arbiter(
            self.eta_r,
            bucket_capacity,
            k_max=app.k_max,
            node_capacity=node_capacity,
            node_type_names=node_type_names,
            batching=batching,
            scale_in_reserve=scale_in_reserve,
            hold_scale_ins=hold_scale_ins,
        )
        self.configuration = AMConfiguration(naive_bounds(app), EQUAL_WEIGHTS)
        self.history: list[dict[str, Any]] = [{"event": "initial", "how": "naive Alg. 5, equal weights"}]
