"""Paper 000's elasticity model: centralized (one Application Manager) vs decentralized (one agent per operator).

Setting of paper 000 Sec. 4 (3-operator pipeline): M/D/1 operators with service rates ``MU`` (tuples/s), at most
``K_MAX = 5`` instances each, one decision per minute, the application input rate in tuples/min discretised with
a quantum of 20 tuples/min, cost weights w_SLA = w_util = w_rcf = 0.4 and w_res = 0.2, T_SLA = 650 ms, gamma =
0.99, alpha = 0.1. The workload is generated from the rate-level transition matrix estimated from the Taxi trace
(eq. 5), as in the paper.

Centralized state ``(l, k_1, k_2, k_3)``; joint action in ``{-1, 0, +1}^3``; cost (eq. 1)

    c = w_res * sum(k + a) / (N K_max) + w_rcf * 1[a != 0] + w_SLA * 1[T > T_SLA]

Decentralized (eq. 2): each operator's agent sees ``(l, k)`` and pays w_util * 1[U > U_bar] instead of the SLA
term, ``U = lambda / ((k + a) mu)``.

The SLA term is charged with the rate of the slot the deployment serves (the next level), so a model-based agent
uses its expectation under the (known or learned) level transitions. Paper 000 defines the response time as the
maximal source-sink latency, but with its service rates the three service times alone sum to 943 ms > T_SLA =
650 ms (never meetable); :data:`RT_MODES` gives the readings we can evaluate ("max": the slowest operator's M/D/1
response time, the default; "queueing": the sum of the queueing delays; "sum": the literal reading).

Policies (all greedy on their current Q): "mdp" (value iteration with the true transition matrix and known
cost), "rl+" (Alg. 1: learned transitions, known response-time model), "rl" (Alg. 1: learned transitions,
unknown SLA cost learned by an exponentially weighted average, eq. 6) and "decentralized" (one Alg. 1 agent per
operator with learned transitions and the known utilisation model). Alg. 1 runs one value-iteration sweep per
step; ``sweep_every`` > 1 sweeps less often (to bound the run time).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

MU = (3.7, 3.3, 2.7)  #: service rates of the 3 operators (tuples/s)
K_MAX = 5
QUANTUM = 20.0  #: rate quantum (tuples/min)
T_SLA_S = 0.650
W_RES, W_RCF, W_SLA = 0.2, 0.4, 0.4
GAMMA, ALPHA = 0.99, 0.1
RT_MODES = ("max", "queueing", "sum")
POLICIES = ("mdp", "rl+", "rl", "decentralized")


def rate_levels(rates_per_min: np.ndarray, quantum: float = QUANTUM) -> np.ndarray:
    """Levels ``round(rate / quantum)`` of a rate trace (tuples/min)."""
    if not quantum > 0:
        raise ValueError(f"quantum: must be > 0, got {quantum}")
    return np.rint(np.asarray(rates_per_min, dtype=float) / quantum).astype(int)


def transition_matrix(levels: np.ndarray, n_levels: int) -> np.ndarray:
    """Eq. 5: empirical level-transition probabilities; a level never left stays put."""
    counts = np.zeros((n_levels, n_levels))
    np.add.at(counts, (levels[:-1], levels[1:]), 1.0)
    rows = counts.sum(axis=1, keepdims=True)
    p = np.divide(counts, rows, out=np.zeros_like(counts), where=rows > 0)
    p[rows[:, 0] == 0] = np.eye(n_levels)[rows[:, 0] == 0]
    return p


def generate_levels(p: np.ndarray, start: int, steps: int, rng: np.random.Generator) -> np.ndarray:
    """A workload of ``steps`` levels drawn from the Markov chain ``p``."""
    cum = np.cumsum(p, axis=1)
    u = rng.random(steps)
    out = np.empty(steps, dtype=int)
    level = start
    for i in range(steps):
        out[i] = level
        level = min(int(np.searchsorted(cum[level], u[i], side="right")), len(p) - 1)
    return out


def md1_response_s(lam_per_s: np.ndarray, k: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """(response time s, queueing delay s) of one M/D/1 instance per replica at rate ``lam/k`` (inf if rho >= 1)."""
    rho = lam_per_s / (k * mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.where(rho < 1, rho / (2 * mu * (1 - rho)), np.inf)
    return 1.0 / mu + wait, wait


@dataclass
class Model:
    """The discretised model: levels, deployments (k_1..k_N), joint actions and the violation tables."""

    n_levels: int
    mu: tuple[float, ...] = MU
    k_max: int = K_MAX
    quantum: float = QUANTUM
    rt_mode: str = "max"
    t_sla_s: float = T_SLA_S

    def __post_init__(self) -> None:
        if self.rt_mode not in RT_MODES:
            raise ValueError(f"rt_mode: choose one of {', '.join(RT_MODES)}, got {self.rt_mode!r}")
        n = len(self.mu)
        self.deployments = np.array(list(itertools.product(range(1, self.k_max + 1), repeat=n)))
        self.actions = np.array(list(itertools.product((-1, 0, 1), repeat=n)))
        index = {tuple(d): i for i, d in enumerate(self.deployments)}
        nd = np.full((len(self.deployments), len(self.actions)), -1)
        for i, d in enumerate(self.deployments):
            for j, a in enumerate(self.actions):
                nd[i, j] = index.get(tuple(d + a), -1)
        self.next_dep = nd
        self.valid = nd >= 0
        self.next_safe = np.where(self.valid, nd, 0)
        lam = np.arange(self.n_levels) * self.quantum / 60.0  # tuples/s
        parts = [
            md1_response_s(lam[:, None], self.deployments[None, :, u].astype(float), self.mu[u])
            for u in range(n)
        ]
        if self.rt_mode == "max":
            rt = np.max([r for r, _ in parts], axis=0)
        elif self.rt_mode == "queueing":
            rt = np.sum([w for _, w in parts], axis=0)
        else:
            rt = np.sum([r for r, _ in parts], axis=0)
        self.violation = (rt > self.t_sla_s).astype(float)  # levels x deployments
        inst = self.deployments.sum(axis=1)[self.next_safe]
        self.known = W_RES * inst / (n * self.k_max) + W_RCF * (self.actions != 0).any(axis=1)[None, :]
        self.known = np.where(self.valid, self.known, np.inf)  # deployments x actions

    def expected_sla(self, p: np.ndarray) -> np.ndarray:
        """w_SLA x P[violation next slot] for every (level, deployment, action)."""
        return W_SLA * (p @ self.violation)[:, self.next_safe]

    def sweep(self, q_cost: np.ndarray, p: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One value-iteration sweep: Q = cost + gamma * E[V(next)]; returns (Q, V)."""
        q = q_cost + GAMMA * (p @ v)[:, self.next_safe]
        return q, q.min(axis=2)

    def solve(self, p: np.ndarray, tol: float = 1e-6, max_sweeps: int = 5000) -> np.ndarray:
        """Q of the optimal policy for the transition matrix ``p`` (value iteration to convergence)."""
        cost = self.known[None] + self.expected_sla(p)
        v = np.zeros((self.n_levels, len(self.deployments)))
        for _ in range(max_sweeps):
            q, v_new = self.sweep(cost, p, v)
            if np.max(np.abs(v_new - v)) < tol:
                return q
            v = v_new
        return q


@dataclass
class Outcome:
    """Paper 000 Table 1 metrics of one run: average cost per step, SLA violations and reconfigurations (counts
    of steps), average number of instances."""

    policy: str
    avg_cost: float
    sla_violations: int
    reconfigurations: int
    avg_instances: float
    steps: int
    seconds: float


def run(
    policy: str,
    levels: np.ndarray,
    model: Model,
    p_true: np.ndarray | None = None,
    u_bar: float = 0.7,
    sweep_every: int = 1,
) -> Outcome:
    """Simulate ``policy`` on the level sequence ``levels`` (one per minute); see module doc."""
    if policy not in POLICIES:
        raise ValueError(f"policy: choose one of {', '.join(POLICIES)}, got {policy!r}")
    if not 0 < u_bar <= 1:
        raise ValueError(f"u_bar: must be in (0, 1], got {u_bar}")
    if isinstance(sweep_every, bool) or not isinstance(sweep_every, int) or sweep_every < 1:
        raise ValueError(f"sweep_every: must be an integer >= 1, got {sweep_every!r}")
    start = time.perf_counter()
    L, D = model.n_levels, len(model.deployments)
    n = len(model.mu)
    steps = len(levels) - 1
    dep = 0  # one instance per operator
    k = model.deployments[dep].copy()
    cost_sum = 0.0
    n_viol = n_rcf = 0
    inst_sum = 0
    counts = np.zeros((L, L))
    p_hat = np.eye(L)
    v = np.zeros((L, D))
    q = None
    if policy == "mdp":
        if p_true is None:
            raise ValueError("p_true: the MDP policy needs the true transition matrix")
        q = model.solve(p_true)
    c_u = np.zeros((L, D, len(model.actions)))
    # decentralized agents: state (level, k), actions -1/0/+1 on their own operator
    ks = np.arange(1, model.k_max + 1)
    lam = np.arange(L) * model.quantum / 60.0
    local_v = [np.zeros((L, model.k_max)) for _ in range(n)]
    local_q: list[np.ndarray | None] = [None] * n
    loc_next = ks[:, None] - 1 + np.array([-1, 0, 1])[None, :]  # index of k + a
    loc_valid = (loc_next >= 0) & (loc_next < model.k_max)
    loc_next_safe = np.clip(loc_next, 0, model.k_max - 1)
    loc_known = np.where(
        loc_valid, W_RES * (loc_next_safe + 1) / model.k_max + W_RCF * (np.array([-1, 0, 1]) != 0), np.inf
    )
    util_viol = [(lam[:, None] / (ks[None, :] * mu) > u_bar).astype(float) for mu in model.mu]
    for i in range(steps):
        level, nxt = int(levels[i]), int(levels[i + 1])
        if policy != "mdp" and (q is None or i % sweep_every == 0):
            if policy == "decentralized":
                for u in range(n):
                    qc = loc_known[None] + W_SLA * (p_hat @ util_viol[u])[:, loc_next_safe]
                    q_u = qc + GAMMA * (p_hat @ local_v[u])[:, loc_next_safe]
                    local_q[u] = q_u
                    local_v[u] = q_u.min(axis=2)
                q = local_q[0]
            else:
                cost = model.known[None] + (model.expected_sla(p_hat) if policy == "rl+" else c_u)
                q, v = model.sweep(cost, p_hat, v)
        if policy == "decentralized":
            solved = [q_u for q_u in local_q if q_u is not None]
            new_k = np.array([k[u] + (int(np.argmin(solved[u][level, k[u] - 1])) - 1) for u in range(n)])
            new_dep = int(np.ravel_multi_index(tuple(new_k - 1), (model.k_max,) * n))
            a_idx = -1
        else:
            assert q is not None  # solved before the first step (mdp) or at step 0 (the sweep)
            a_idx = int(np.argmin(q[level, dep]))
            new_dep = int(model.next_dep[dep, a_idx])
            new_k = model.deployments[new_dep]
        changed = bool((new_k != k).any())
        viol = bool(model.violation[nxt, new_dep])
        cost_sum += W_RES * new_k.sum() / (n * model.k_max) + W_RCF * changed + W_SLA * viol
        n_viol += viol
        n_rcf += changed
        inst_sum += int(new_k.sum())
        if policy == "rl":
            c_u[level, dep, a_idx] = (1 - ALPHA) * c_u[level, dep, a_idx] + ALPHA * W_SLA * viol
        counts[level, nxt] += 1
        row = counts[level]
        p_hat[level] = row / row.sum()
        dep, k = new_dep, new_k.copy()
    return Outcome(
        policy if policy != "decentralized" else f"decentralized (U={u_bar:g})",
        cost_sum / steps,
        n_viol,
        n_rcf,
        inst_sum / steps,
        steps,
        time.perf_counter() - start,
    )
