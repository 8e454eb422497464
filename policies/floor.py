"""The clairvoyant floor of a run: the cheapest deployment sequence of one operator for a controller that knows
the future input rates, by backward dynamic programming (pure numpy).

Model (the same constraints as an Operator Manager, ``policies.base``):

- the state of period ``t`` is the deployment ``k_t`` (replicas per node type, ``k_min <= sum(k_t) <= k_max``);
- between two periods the deployment changes by at most ONE replica of ONE node type (the OM's action set:
  do nothing, add one replica of a type, remove one replica of a type);
- optionally at most ``max_changes`` periods begin with a change (a per-operator reconfiguration budget: the
  application's budget ``eta_R`` allows at most ``eta_R * T`` reconfigured periods, so each operator changes in at
  most that many; the floor relaxes the coupling between operators and stays a lower bound);
- period ``t`` costs ``price(k_t) * period_s / 3600`` ($; prices in $/h) and violates when the operator's mean
  response time under the true queueing model at the period's input rate exceeds its bound ``r_max_s`` (s).

The DP minimises lexicographically: first the number of violated periods (0 whenever the bound can be met in every
period given the constraints), then the cost. The initial deployment is given, or free (the cheapest start).
Region quotas and provisioning delays are not modelled (the floor of one operator alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from policies.operator_model import QueueModel

#: refuse state spaces beyond this many (states x actions x budget levels) cells: memory and time would explode
MAX_CELLS = 20_000_000


@dataclass(frozen=True)
class FloorResult:
    """The floor of one operator over ``T`` periods.

    ``cost``: total resource cost ($). ``violations``: periods above the bound (unavoidable ones only).
    ``changes``: periods that begin with a change. ``deployments``: ``T x N_res`` replica counts.
    """

    cost: float
    violations: int
    changes: int
    deployments: np.ndarray


def count_states(n_res: int, k_min: int, k_max: int) -> int:
    """Number of deployments over ``n_res`` node types with ``k_min <= total <= k_max`` replicas."""
    return math.comb(k_max + n_res, n_res) - math.comb(k_min - 1 + n_res, n_res)


def deployment_states(n_res: int, k_min: int, k_max: int) -> np.ndarray:
    """Every deployment (rows: replicas per node type) with ``k_min <= total <= k_max``, in a fixed order."""
    if n_res < 1:
        raise ValueError(f"n_res: must be >= 1, got {n_res}")
    if not 1 <= k_min <= k_max:
        raise ValueError(f"k_min/k_max: need 1 <= k_min <= k_max, got {k_min}, {k_max}")
    rows: list[tuple[int, ...]] = []

    def extend(prefix: tuple[int, ...], left: int) -> None:
        if len(prefix) == n_res - 1:
            for last in range(left + 1):
                if sum(prefix) + last >= k_min:
                    rows.append((*prefix, last))
            return
        for n in range(left + 1):
            extend((*prefix, n), left - n)

    extend((), k_max)
    return np.array(rows, dtype=np.int64).reshape(-1, n_res)


def response_times(model: QueueModel, states: np.ndarray, speedups: np.ndarray, rate: float) -> np.ndarray:
    """Mean response time (s) of every deployment row of ``states`` at input ``rate`` (tuples/s), exactly as
    :meth:`QueueModel.response_time` (inf where a replica is unstable), vectorised over the rows."""
    k = np.asarray(states, dtype=float)
    speedups = np.asarray(speedups, dtype=float)
    total = k.sum(axis=1, keepdims=True)
    present = k > 0
    if model.balancing == "round_robin":
        lam = np.broadcast_to(rate / total, k.shape)
    else:
        lam = rate * speedups[None, :] / (k * speedups[None, :]).sum(axis=1, keepdims=True)
    s = model.service_mean_s / speedups[None, :]
    var = model.variance / speedups[None, :] ** 2
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        r = s + lam / 2.0 * (var + s * s) / (1.0 - rho)
    r = np.where(rho >= 1.0, math.inf, r)
    if model.aggregation == "worst":
        return np.where(present, r, -math.inf).max(axis=1)
    flows = lam * k
    finite = np.where(present, np.isfinite(r), True).all(axis=1)
    with np.errstate(invalid="ignore"):
        weighted = np.where(present, flows * np.where(present, r, 0.0), 0.0).sum(axis=1) / np.where(
            present, flows, 0.0
        ).sum(axis=1)
    if rate <= 0:
        weighted = np.where(present, r, math.inf).min(axis=1)
    return np.where(finite, weighted, math.inf)


def neighbours(states: np.ndarray) -> np.ndarray:
    """``S x (2 N_res)`` index of the state reached by removing / adding one replica of each type (-1 when that
    deployment is outside the state set)."""
    index = {tuple(row): i for i, row in enumerate(states.tolist())}
    n_res = states.shape[1]
    out = np.full((len(states), 2 * n_res), -1, dtype=np.int64)
    for i, row in enumerate(states.tolist()):
        for t in range(n_res):
            for j, d in enumerate((-1, +1)):
                nxt = list(row)
                nxt[t] += d
                out[i, j * n_res + t] = index.get(tuple(nxt), -1)
    return out


def operator_floor(
    rates: np.ndarray,
    model: QueueModel,
    speedups: np.ndarray,
    prices_per_hour: np.ndarray,
    period_s: float,
    r_max_s: float,
    k_min: int = 1,
    k_max: int = 10,
    initial: np.ndarray | None = None,
    max_changes: int | None = None,
) -> FloorResult:
    """The clairvoyant floor of one operator (see module doc).

    ``rates``: input rate of each period (tuples/s); ``speedups`` / ``prices_per_hour`` ($/h) per node type;
    ``period_s``: period length (s); ``r_max_s``: the operator's response-time bound (s); ``initial``: the
    deployment of the first period (None: free); ``max_changes``: the reconfiguration budget (None: unlimited).
    """
    rates = np.asarray(rates, dtype=float).reshape(-1)
    speedups = np.asarray(speedups, dtype=float).reshape(-1)
    prices = np.asarray(prices_per_hour, dtype=float).reshape(-1)
    if rates.size == 0:
        raise ValueError("rates: need at least one period")
    if not np.all(np.isfinite(rates)) or np.any(rates < 0):
        raise ValueError("rates: must be finite and >= 0 tuples/s")
    if speedups.shape != prices.shape or speedups.size == 0:
        raise ValueError("speedups/prices_per_hour: one entry per node type, same length")
    if not period_s > 0:
        raise ValueError(f"period_s: must be > 0 s, got {period_s}")
    if not r_max_s > 0:
        raise ValueError(f"r_max_s: must be > 0 s, got {r_max_s}")
    if max_changes is not None and max_changes < 0:
        raise ValueError(f"max_changes: must be >= 0, got {max_changes}")
    n_states, n_periods = count_states(speedups.size, k_min, k_max), rates.size
    budget = n_periods if max_changes is None else min(int(max_changes), n_periods)
    limited = max_changes is not None
    levels = budget + 1 if limited else 1
    n_actions = 2 * speedups.size + 1
    if n_states * n_actions * levels > MAX_CELLS:
        raise ValueError(
            f"state space too large for the floor: {n_states} deployments x {n_actions} actions x "
            f"{levels} budget levels (limit {MAX_CELLS} cells)"
        )
    states = deployment_states(speedups.size, k_min, k_max)
    moves = neighbours(states)
    start = None
    if initial is not None:
        k0 = tuple(int(x) for x in np.asarray(initial).reshape(-1))
        matches = np.flatnonzero((states == np.array(k0)).all(axis=1))
        if matches.size == 0:
            raise ValueError(
                f"initial: deployment {list(k0)} is not within k_min..k_max over {speedups.size} types"
            )
        start = int(matches[0])
    period_cost = states @ prices * period_s / 3600.0  # $ per period of each state
    # lexicographic objective: violations first, then cost (cost of the whole run < 1 after scaling)
    scale = 1.0 / (float(period_cost.max()) * n_periods + 1.0)
    violated = np.empty((n_periods, n_states), dtype=bool)
    for t in range(n_periods):
        violated[t] = response_times(model, states, speedups, float(rates[t])) > r_max_s
    step_value = violated.astype(float) + period_cost[None, :] * scale  # T x S
    # V[s, r]: best value from period t on, in state s, having used r changes; backward over t
    safe_moves = np.where(moves >= 0, moves, 0)
    invalid = moves < 0
    value = np.repeat(step_value[-1][:, None], levels, axis=1)
    choice = np.zeros((n_periods - 1, n_states, levels), dtype=np.int64)  # -1 = stay, else move column
    for t in range(n_periods - 2, -1, -1):
        stay = value  # same r
        if not limited:
            moved = value[safe_moves, 0]  # S x A
            moved = np.where(invalid, math.inf, moved)[:, :, None]
        else:
            shifted = np.concatenate([value[:, 1:], np.full((n_states, 1), math.inf)], axis=1)  # r+1
            moved = shifted[safe_moves]  # S x A x L
            moved = np.where(invalid[:, :, None], math.inf, moved)
        best_move = moved.argmin(axis=1)  # S x L
        best_moved = np.take_along_axis(moved, best_move[:, None, :], axis=1)[:, 0, :]
        take = best_moved < stay - 1e-15
        choice[t] = np.where(take, best_move, -1)
        value = step_value[t][:, None] + np.where(take, best_moved, stay)
    s = start if start is not None else int(value[:, 0].argmin())
    r = 0
    path = [s]
    for t in range(n_periods - 1):
        c = int(choice[t, s, r if limited else 0])
        if c >= 0:
            s = int(moves[s, c])
            r += 1
        path.append(s)
    seq = states[path]
    return FloorResult(
        cost=float(period_cost[path].sum()),
        violations=int(violated[np.arange(n_periods), path].sum()),
        changes=r,
        deployments=seq,
    )
