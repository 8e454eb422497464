"""The operator model of paper 001 (Sec. 3-4): node types, deployments, queueing performance, cost.

Units used throughout ``policies``:
- rates in tuples per second (tuples/s);
- times in seconds (s);
- prices in currency per hour ($/h) -- the paper's "price" of a node type;
- speedups are dimensionless (1.0 = reference node).

A deployment is the vector ``k`` (replicas per node type, ``numpy`` int array of length N_res).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

# Table 1 of paper 001: node speedups of infrastructures A and B (10 entries each).
INFRA_SPEEDUPS: dict[str, tuple[float, ...]] = {
    "A": (1.0, 0.7, 1.3, 0.9, 1.7, 0.8, 1.8, 2.0, 1.65, 1.5),
    "B": (1.0, 0.05, 30.0, 0.1, 0.2, 0.4, 0.8, 2.0, 5.0, 7.0),
}


@dataclass(frozen=True)
class NodeType:
    """A kind of computing node.

    ``speedup`` is relative to the reference node (> 0); ``price`` is currency per hour (>= 0).
    """

    name: str
    speedup: float
    price: float
    cores: int = 1
    memory_mib: int = 1024

    def __post_init__(self) -> None:
        if not self.speedup > 0:
            raise ValueError(f"node type {self.name!r}: speedup must be > 0, got {self.speedup}")
        if self.price < 0:
            raise ValueError(f"node type {self.name!r}: price must be >= 0, got {self.price}")


def infrastructure(name: str, n_res: int) -> tuple[NodeType, ...]:
    """The first ``n_res`` node types of the paper's infrastructure ``A``, ``B`` or ``B2``.

    A and B: price = speedup. B2: price = speedup ** 1.5 (the authors' public code; the paper text says 1.1).
    """
    key = "B" if name == "B2" else name
    if key not in INFRA_SPEEDUPS:
        raise ValueError(f"unknown infrastructure {name!r}: choose A, B or B2")
    speeds = INFRA_SPEEDUPS[key]
    if not 1 <= n_res <= len(speeds):
        raise ValueError(f"node types must be in 1..{len(speeds)}, got {n_res}")
    exponent = 1.5 if name == "B2" else 1.0
    return tuple(NodeType(f"{name}{i}", s, s**exponent) for i, s in enumerate(speeds[:n_res]))


def infrastructure_c_max(name: str, k_max: int) -> float:
    """The paper's normalisation C_max = K_max * largest price of the whole 10-entry list ($/h)."""
    key = "B" if name == "B2" else name
    exponent = 1.5 if name == "B2" else 1.0
    return k_max * max(s**exponent for s in INFRA_SPEEDUPS[key])


@dataclass(frozen=True)
class CostWeights:
    """Weights of eq. 2 on the simplex: performance violation, resource cost, reconfiguration."""

    perf: float = 0.6
    res: float = 0.2
    rcf: float = 0.2

    def __post_init__(self) -> None:
        for name in ("perf", "res", "rcf"):
            if not getattr(self, name) >= 0:  # also rejects NaN
                raise ValueError(f"weights.{name} must be >= 0, got {getattr(self, name)}")
        total = self.perf + self.res + self.rcf
        if not abs(total - 1.0) <= 1e-6:
            raise ValueError(f"weights must sum to 1 (perf + res + rcf), got {total:.6f}")


def mg1_max_rate(service_s: np.ndarray, variance_s2: np.ndarray, r_max_s: float) -> np.ndarray:
    """Largest per-replica arrival rate (tuples/s) at which an M/G/1 replica of mean service time ``service_s``
    (s) and service-time variance ``variance_s2`` (s^2) stays within ``r_max_s`` (s), the closed form of the
    Pollaczek-Khinchine bound: ``S + x (Var + S^2) / (2 (1 - x S)) <= R_max`` iff ``x <= (R_max - S) / ((Var +
    S^2) / 2 + (R_max - S) S)``; 0 where one service time alone exceeds ``R_max``."""
    s = np.asarray(service_s, dtype=float)
    var = np.asarray(variance_s2, dtype=float)
    slack = r_max_s - s
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(slack > 0, slack / ((var + s * s) / 2.0 + slack * s), 0.0)


#: service rate (tuples/s on a speedup-1 node) of paper 001's simulation: the placeholder of an unparameterised
#: QueueModel and the simulator's default (``policies.sim.scenario``). The control loop never plans on it: an
#: operator's service time is learned from its own metrics or declared (``serviceTimeMs``)
PAPER_MU = 180.0


@dataclass(frozen=True)
class QueueModel:
    """Per-replica queueing model of an operator.

    ``service_mean_s``: mean service time on a node of speedup 1 (seconds per tuple), i.e. 1/mu.
    ``service_var_s2``: variance of the service time on a speedup-1 node (s^2). ``kind`` "mg1" uses it
    (Pollaczek-Khinchine); "md1" forces a deterministic service (variance 0).
    ``balancing``: "round_robin" (each replica gets lambda/k) or "proportional" (share proportional to speed).
    ``aggregation``: "worst" (operator time = slowest replica) or "weighted" (rate-weighted mean).
    On a node of speedup s the mean is service_mean_s / s and the variance service_var_s2 / s^2.
    """

    service_mean_s: float = 1.0 / PAPER_MU
    service_var_s2: float = (1.0 / PAPER_MU) ** 2 / 2.0
    kind: str = "mg1"
    balancing: str = "round_robin"
    aggregation: str = "worst"

    def __post_init__(self) -> None:
        if not self.service_mean_s > 0:
            raise ValueError(f"service_mean_s must be > 0, got {self.service_mean_s}")
        if self.service_var_s2 < 0:
            raise ValueError(f"service_var_s2 must be >= 0, got {self.service_var_s2}")
        if self.kind not in ("mg1", "md1"):
            raise ValueError(f"kind must be 'mg1' or 'md1', got {self.kind!r}")
        if self.balancing not in ("round_robin", "proportional"):
            raise ValueError(f"balancing must be 'round_robin' or 'proportional', got {self.balancing!r}")
        if self.aggregation not in ("worst", "weighted"):
            raise ValueError(f"aggregation must be 'worst' or 'weighted', got {self.aggregation!r}")

    @property
    def variance(self) -> float:
        return 0.0 if self.kind == "md1" else self.service_var_s2

    def replica_rates(self, k: np.ndarray, speedups: np.ndarray, rate: float) -> np.ndarray:
        """Arrival rate (tuples/s) at one replica of each node type."""
        k = np.asarray(k)
        total = int(k.sum())
        if total == 0:
            return np.full(len(k), math.inf)
        if self.balancing == "round_robin":
            return np.full(len(k), rate / total)
        capacity = float((k * speedups).sum())
        return rate * speedups / capacity

    def replica_response_times(self, k: np.ndarray, speedups: np.ndarray, rate: float) -> np.ndarray:
        """Mean response time (s) of one replica of each node type (inf where unstable)."""
        lam = self.replica_rates(k, speedups, rate)
        s = self.service_mean_s / speedups
        var = self.variance / speedups**2
        rho = lam * s
        with np.errstate(divide="ignore", invalid="ignore"):
            r = s + lam / 2.0 * (var + s * s) / (1.0 - rho)
        return np.where(rho >= 1.0, math.inf, r)

    def response_time(self, k: np.ndarray, speedups: np.ndarray, rate: float) -> float:
        """Operator mean response time (s) for deployment ``k`` at input ``rate`` (tuples/s)."""
        k = np.asarray(k)
        present = k > 0
        if not present.any():
            return math.inf
        r = self.replica_response_times(k, speedups, rate)
        if self.aggregation == "worst":
            return float(r[present].max())
        lam = self.replica_rates(k, speedups, rate) * k
        if not np.isfinite(r[present]).all():
            return math.inf
        return (
            float((lam[present] * r[present]).sum() / lam[present].sum())
            if rate > 0
            else float(r[present].min())
        )

    def utilisation(self, k: np.ndarray, speedups: np.ndarray, rate: float) -> float:
        """Utilisation of the busiest replica (rho = lambda_replica * S), may exceed 1."""
        k = np.asarray(k)
        present = k > 0
        rho = self.replica_rates(k, speedups, rate) * self.service_mean_s / speedups
        return float(rho[present].max()) if present.any() else math.inf

    def capacity(self, k: np.ndarray, speedups: np.ndarray) -> float:
        """Largest input rate (tuples/s) the deployment can sustain (rho < 1 on every replica)."""
        k = np.asarray(k)
        present = k > 0
        if not present.any():
            return 0.0
        if self.balancing == "round_robin":
            return float(k.sum() * speedups[present].min() / self.service_mean_s)
        return float((k * speedups).sum() / self.service_mean_s)


@dataclass(frozen=True)
class RateLevels:
    """Discretisation of the input rate: ``n`` levels of width ``max_rate / n`` up to ``max_rate`` (tuples/s).

    ``grow``: False (the papers' semantics) reads a rate at or above ``max_rate`` as the top level; True lets a
    policy grow the range when a rate leaves it (:mod:`policies.calibration`). The defaults (30 levels up to
    650 tuples/s) are paper 001's benchmark values; the product gives no range (``OperatorSpec.rate_levels =
    None``) and learns it.
    """

    n: int = 30
    max_rate: float = 650.0
    grow: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"rate_levels.n: must be an integer >= 1, got {self.n!r}")
        if not (self.max_rate > 0 and math.isfinite(self.max_rate)):
            raise ValueError(f"rate_levels.max_rate: must be > 0 tuples/s, got {self.max_rate!r}")

    @property
    def width(self) -> float:
        return self.max_rate / self.n

    def level(self, rate: float) -> int:
        return min(int(rate // self.width), self.n - 1) if rate > 0 else 0

    def rate(self, level: int) -> float:
        """Midpoint rate of a level (tuples/s)."""
        return (level + 0.5) * self.width


MODEL_MODES = ("given", "hint", "learn")


@dataclass
class OperatorSpec:
    """What an Operator Manager knows about its operator: the context every policy is built with.

    ``r_max_s``: the operator's response-time bound R_u_max (seconds).
    ``c_max``: normalisation of the resource cost ($/h); defaults to K_max * max price.
    ``model``: the performance model used by model-aware policies (the true one in simulations unless
    a policy perturbs it, as QL+PDS+ does).
    ``model_mode``: how policies may use ``model``: "given" (the papers' semantics: the model is known),
    "hint" (plan on it until the operator's own observations have estimated the service time, then on the learned
    model), "learn" (never read it for planning -- in a simulation it is then only the simulator's truth -- and
    plan on the learned model from the first observation on). See :mod:`policies.calibration`.
    ``rate_levels``: the discretisation of the input rate; None = learn it from the observed rates (a range that
    grows, :mod:`policies.calibration`).
    """

    node_types: tuple[NodeType, ...]
    k_max: int = 10
    r_max_s: float = 0.050
    weights: CostWeights = field(default_factory=CostWeights)
    model: QueueModel = field(default_factory=QueueModel)
    rate_levels: RateLevels | None = field(default_factory=RateLevels)
    c_max: float | None = None
    gamma: float = 0.99
    k_min: int = 1
    model_mode: str = "given"

    def __post_init__(self) -> None:
        if not self.node_types:
            raise ValueError("node_types must not be empty")
        if self.k_max < 1:
            raise ValueError(f"k_max must be >= 1, got {self.k_max}")
        if not 1 <= self.k_min <= self.k_max:
            raise ValueError(f"k_min must be in 1..k_max, got {self.k_min}")
        if not self.r_max_s > 0:
            raise ValueError(f"r_max_s must be > 0, got {self.r_max_s}")
        if self.model_mode not in MODEL_MODES:
            raise ValueError(f"model_mode: must be one of {', '.join(MODEL_MODES)}, got {self.model_mode!r}")
        if self.c_max is None:
            # all node types free: the resource term is 0 whatever C_max, 1 avoids 0/0
            self.c_max = self.k_max * max(t.price for t in self.node_types) or 1.0
        if not self.c_max > 0:
            raise ValueError(f"c_max must be > 0 $/h, got {self.c_max}")

    @property
    def cost_scale(self) -> float:
        """C_max ($/h), the resource cost's normalisation, with its default applied (``c_max`` is never None
        after construction)."""
        assert self.c_max is not None
        return float(self.c_max)

    @property
    def n_res(self) -> int:
        return len(self.node_types)

    @property
    def speedups(self) -> np.ndarray:
        return np.array([t.speedup for t in self.node_types], dtype=float)

    @property
    def prices(self) -> np.ndarray:
        return np.array([t.price for t in self.node_types], dtype=float)

    def price(self, k: np.ndarray) -> float:
        """Price of deployment ``k`` ($/h)."""
        cached = self.__dict__.get("_price_vector")
        if cached is None or cached[0] is not self.node_types:
            # the hot path of every simulated step: build the price vector once per node-type tuple
            cached = (self.node_types, np.array([t.price for t in self.node_types], dtype=float))
            self.__dict__["_price_vector"] = cached
        return float(np.dot(k, cached[1]))

    def cost_terms(self, k: np.ndarray, violated: bool, reconfigured: bool) -> dict[str, float]:
        """The three unweighted terms of eq. 2 for one period: violation indicator, resource cost of the
        deployment ``k`` in place normalised by C_max, reconfiguration indicator."""
        return {
            "perf": 1.0 if violated else 0.0,
            "res": self.price(k) / self.cost_scale,
            "rcf": 1.0 if reconfigured else 0.0,
        }

    def weighted_cost(self, terms: dict[str, float]) -> float:
        w = self.weights
        return w.perf * terms["perf"] + w.res * terms["res"] + w.rcf * terms["rcf"]
