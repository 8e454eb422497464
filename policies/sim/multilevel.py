"""Multi-level (application + infrastructure) simulation of paper 004 Sec. 8.1: WordCount across regions.

The Application Control System (ACS) scales each operator with an Operator Manager (OM) policy -- paper 004's
threshold policy (Sec. 7.1) or its model-based RL policy (Sec. 7.2, from its reference [8]) implemented here --
and an AM that places replicas on the nodes of the operator's region. The Infrastructure Control System (ICS)
scales the nodes of every region with a Region Manager (static, simple provisioning or model-based RL) under an
Infrastructure Manager global policy.

One step = one control period (one minute) with source rate ``rate[t]`` (tuples/s):

1. measure, on the replicas in place: per-operator M/D/1 response time (s), the application response time
   (sum along the pipeline plus the inter-region network delays) and whether it exceeds R_max;
2. every OM observes its operator and proposes +1/-1/0 replica;
3. the AM first places scale-outs that were waiting for a node, then the new ones (most utilised operator
   first); a scale-out with no free slot in its region WAITS (it is an unsatisfied request for the RM); a
   scale-in removes a random replica (or cancels a waiting scale-out). Any change = one reconfiguration of the
   application. After a reconfiguration the IM proposes consolidation, which the AM applies in the same restart;
4. every RM observes its region (nodes, utilisation, waiting requests) and proposes; the IM grants under
   budget and quotas; acquired nodes are usable after the provisioning delay (one period: "all adaptation
   actions complete within the next minute").

Metrics per period: violation, reconfiguration, replicas in place, nodes paid for (active + booting).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from policies.im.global_policy import CheapestFirst, GlobalPolicy, RegionQuota
from policies.im.infrastructure import Placement, RegionPool
from policies.operator_model import NodeType
from policies.rm.base import RegionManager
from policies.rm.model_based import ModelBasedRM
from policies.rm.simple import SimpleProvisioning, StaticProvisioning

# ---------------------------------------------------------------------------------------------------------
# Application
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamOperator:
    """One operator of a pipeline: ``selectivity`` = output tuples per input tuple; ``service_rate`` (tuples/s
    per replica, M/D/1); ``region`` where its replicas run."""

    name: str
    region: str
    selectivity: float = 1.0
    service_rate: float = 330.0
    max_replicas: int = 20


@dataclass(frozen=True)
class PipelineApp:
    """A source feeding a chain of operators; ``network_delay_s[(a, b)]`` one-way delay between regions (s)."""

    operators: tuple[StreamOperator, ...]
    source_region: str
    network_delay_s: dict[tuple[str, str], float]
    r_max_s: float = 0.060

    def __post_init__(self) -> None:
        if not self.operators:
            raise ValueError("operators: the application has no operator")
        floor = sum(1.0 / op.service_rate for op in self.operators) + self.network_total_s()
        if self.r_max_s <= floor:
            raise ValueError(
                f"r_max_s: {self.r_max_s * 1000:.1f} ms is below the minimum possible response time "
                f"{floor * 1000:.1f} ms (sum of service times plus network): it can never be met"
            )

    def delay(self, a: str, b: str) -> float:
        if a == b:
            return 0.0
        return self.network_delay_s.get((a, b), self.network_delay_s.get((b, a), 0.0))

    def network_total_s(self) -> float:
        regions = [self.source_region] + [op.region for op in self.operators]
        return sum(self.delay(a, b) for a, b in zip(regions, regions[1:], strict=False))

    def input_rates(self, source_rate: float) -> np.ndarray:
        """Input rate of every operator (tuples/s) for a source rate."""
        out, r = np.empty(len(self.operators)), source_rate
        for i, op in enumerate(self.operators):
            out[i] = r
            r *= op.selectivity
        return out

    def operator_bounds_s(self) -> np.ndarray:
        """Per-operator bounds R_max,op: equal shares of R_max minus the network delays (equal service rates
        make the computational weights equal), in seconds."""
        n = len(self.operators)
        return np.full(n, (self.r_max_s - self.network_total_s()) / n)


def wordcount(regions: tuple[str, ...] = ("dc1", "dc2", "dc3")) -> PipelineApp:
    """Paper 004 Sec. 8.1: splitter (5 words per sentence), filter (drops 60%), counter, consumer; M/D/1 with
    mu = 330 tuples/s, up to 20 replicas, R_max = 60 ms; delays dc1-dc2 2 ms, dc1-dc3 2 ms, dc2-dc3 1 ms.

    The paper does not say where each operator runs; we put source and splitter in dc1, the filter (the
    widest operator) in dc2, counter and consumer in dc3."""
    r1, r2, r3 = regions
    ops = (
        StreamOperator("splitter", r1, 5.0),
        StreamOperator("filter", r2, 0.4),
        StreamOperator("counter", r3, 1.0),
        StreamOperator("consumer", r3, 1.0),
    )
    delays = {(r1, r2): 0.002, (r1, r3): 0.002, (r2, r3): 0.001}
    return PipelineApp(ops, r1, delays)


def md1_response_time(rate: float, replicas: int, mu: float) -> float:
    """M/D/1 response time (s) of one replica fed ``rate / replicas`` tuples/s; inf when unstable."""
    if replicas <= 0:
        return math.inf
    rho = rate / (replicas * mu)
    if rho >= 1.0:
        return math.inf
    return 1.0 / mu + rho / (2.0 * mu * (1.0 - rho))


# ---------------------------------------------------------------------------------------------------------
# Paper 004's ACS local policies (Sec. 7.1 and 7.2)
# ---------------------------------------------------------------------------------------------------------


class ThresholdOM:
    """Sec. 7.1: scale out when replica utilisation > ``u_out``; scale in when the remaining ``n - 1`` replicas
    would stay below ``c * u_out`` (paper: u_out = 0.75, c = 0.75)."""

    def __init__(self, k_max: int = 20, mu: float = 330.0, u_out: float = 0.75, c: float = 0.75) -> None:
        self.k_max, self.mu, self.u_out, self.c = k_max, mu, u_out, c

    def act(self, k: int, rate: float, violated: bool) -> int:
        load = rate / self.mu  # sum of the replicas' utilisations
        if load / k > self.u_out and k < self.k_max:
            return +1
        if k > 1 and load / (k - 1) < self.c * self.u_out:
            return -1
        return 0


class ModelBasedOM:
    """Sec. 7.2 (reference [8]): model-based RL over (replicas k, input-rate level), actions -1/0/+1.

    Cost ``w_rcf * 1[a != 0] + w_perf * 1[R_op > R_max,op] + w_res * (k + a) / K_max`` (weights 1/3 each). The
    performance penalty is the unknown cost, estimated per (k, rate level) by exponential averaging with the
    monotonicity constraints (not lower with fewer replicas or a higher rate); rate transitions are estimated
    from frequencies; k' = k + a is known. Full backup every period, greedy action.
    """

    def __init__(
        self,
        k_max: int,
        max_rate: float,
        w_rcf: float = 1 / 3,
        w_perf: float = 1 / 3,
        w_res: float = 1 / 3,
        gamma: float = 0.99,
        alpha: float = 0.1,
        levels: int = 30,
    ) -> None:
        self.k_max, self.max_rate, self.levels = k_max, max_rate, levels
        self.w_rcf, self.w_perf, self.w_res, self.gamma, self.alpha = w_rcf, w_perf, w_res, gamma, alpha
        self.rate_counts = np.zeros((levels, levels))
        self.c_perf = np.zeros((k_max + 1, levels))
        self.q = np.zeros((k_max + 1, levels, 3))
        mask = np.ones((k_max + 1, levels, 3), dtype=bool)
        mask[0] = False
        mask[1, :, 0] = False
        mask[k_max, :, 2] = False
        self.mask = mask
        self._penalty = np.where(mask, 0.0, np.inf)
        ks = np.arange(k_max + 1)[:, None] + np.array([-1, 0, 1])[None, :]
        self.known = w_res * np.clip(ks, 0, k_max) / k_max + w_rcf * (np.array([1, 0, 1])[None, :])
        self.idx = [np.clip(np.arange(k_max + 1) + d, 0, k_max) for d in (-1, 0, 1)]
        self._prev: tuple[int, int] | None = None

    def level(self, rate: float) -> int:
        return min(int(rate / self.max_rate * self.levels), self.levels - 1)

    def act(self, k: int, rate: float, violated: bool) -> int:
        lv = self.level(rate)
        if self._prev is not None:
            self.rate_counts[self._prev[1], lv] += 1
        v = self.c_perf[k, lv] = (1 - self.alpha) * self.c_perf[k, lv] + self.alpha * float(violated)
        np.maximum(self.c_perf[: k + 1, lv:], v, out=self.c_perf[: k + 1, lv:])
        np.minimum(self.c_perf[k:, : lv + 1], v, out=self.c_perf[k:, : lv + 1])
        self.backup()
        qs = self.q[k, lv]
        best, best_v = 1, qs[1] if self.mask[k, lv, 1] else np.inf
        for ai in (0, 2):
            if self.mask[k, lv, ai] and qs[ai] < best_v - 1e-12:
                best, best_v = ai, qs[ai]
        self._prev = (k, lv)
        return best - 1

    def backup(self) -> None:
        rows = self.rate_counts.sum(axis=1, keepdims=True)
        p = np.where(rows > 0, self.rate_counts / np.where(rows > 0, rows, 1.0), np.eye(self.levels))
        v = (self.q + self._penalty).min(axis=2)
        v[0] = 0.0
        w = self.w_perf * self.c_perf + self.gamma * v
        y = w @ p.T  # y[k', l] = sum_l' p[l, l'] w[k', l']
        for ai in range(3):
            self.q[:, :, ai] = self.known[:, ai, None] + y[self.idx[ai]]
        self.q[~self.mask] = 0.0


# ---------------------------------------------------------------------------------------------------------
# Simulation
# ---------------------------------------------------------------------------------------------------------


@dataclass
class MultiLevelResult:
    """Per-period arrays: ``rate`` (source, tuples/s), ``response_time`` (s), ``violation``,
    ``reconfiguration``, ``replicas`` (total in place), ``nodes`` (paid for, all regions), ``unsatisfied``
    (waiting scale-outs at the end of the period), ``rm_cost`` (mean eq.-1 cost over the RMs)."""

    rate: np.ndarray
    response_time: np.ndarray
    violation: np.ndarray
    reconfiguration: np.ndarray
    replicas: np.ndarray
    nodes: np.ndarray
    unsatisfied: np.ndarray
    rm_cost: np.ndarray
    wall_seconds: float
    meta: dict[str, Any] = field(default_factory=dict)

    def summary(self, skip: int = 0) -> dict[str, float]:
        """Table 1 metrics over periods ``skip..end``: violations %, reconfigurations %, average replicas,
        average nodes."""
        s = slice(skip, None)
        return {
            "rmax_violations_pct": 100.0 * float(np.mean(self.violation[s])),
            "reconfigurations_pct": 100.0 * float(np.mean(self.reconfiguration[s])),
            "avg_replicas": float(np.mean(self.replicas[s])),
            "avg_active_nodes": float(np.mean(self.nodes[s])),
            "unsatisfied_pct": 100.0 * float(np.mean(self.unsatisfied[s] > 0)),
        }


def make_region_manager(
    ics: str, region: str, catalog: tuple[NodeType, ...], k_max: int, params: dict[str, Any], seed: int
) -> RegionManager:
    if ics == "static":
        return StaticProvisioning(region, catalog, k_max, params, seed)
    if ics == "simple":
        return SimpleProvisioning(region, catalog, k_max, params, seed)
    if ics in ("rl", "model-based"):
        return ModelBasedRM(region, catalog, k_max, params, seed)
    raise ValueError(f"ics: unknown ICS policy {ics!r}: choose static, simple or rl")


def run_multilevel(
    rates: np.ndarray,
    ics: str = "rl",
    acs: str = "rl",
    app: PipelineApp | None = None,
    rm_params: dict[str, Any] | None = None,
    im: GlobalPolicy | None = None,
    node_type: NodeType | None = None,
    max_nodes: int = 50,
    consolidation: bool = True,
    max_source_rate: float = 600.0,
    om_levels: int = 30,
    bound_scale: float = 1.0,
    seed: int = 0,
) -> MultiLevelResult:
    """Simulate ``len(rates)`` periods. ``ics``: static | simple | rl; ``acs``: threshold | rl. ``rm_params``
    go to every RM (e.g. ``{"w_d": 0.7, "w_r": 0.3}`` or ``{"n_idle": 1}``). ``node_type``: the one node type
    of every region (paper: two cores, price 1 $/h). ``max_source_rate`` (tuples/s) sets the range of the RL
    OMs' rate levels (paper: the source emits up to 600 tuples/s); ``om_levels`` is their number.
    ``bound_scale`` multiplies the per-operator bounds R_max,op the AM gives the OMs (1 = equal shares of
    R_max minus the network delays; < 1 keeps a safety margin)."""
    app = app or wordcount()
    if acs not in ("threshold", "rl"):
        raise ValueError(f"acs: unknown ACS policy {acs!r}: choose threshold or rl")
    rates = np.asarray(rates, dtype=float)
    node_type = node_type or NodeType("vm2", 1.0, 1.0, cores=2)
    regions = sorted({op.region for op in app.operators} | {app.source_region})
    catalogs: dict[str, tuple[NodeType, ...]] = {r: (node_type,) for r in regions}
    pools = {r: RegionPool(r, catalogs[r], max_nodes) for r in regions}
    placement = Placement(pools)
    im = im or CheapestFirst(catalogs, {r: RegionQuota(max_nodes) for r in regions})
    rms = {
        r: make_region_manager(ics, r, catalogs[r], max_nodes, dict(rm_params or {}), seed + i)
        for i, r in enumerate(regions)
    }
    rng = np.random.default_rng(seed)
    n_ops = len(app.operators)
    mus = np.array([op.service_rate for op in app.operators])
    if not 0 < bound_scale <= 1:
        raise ValueError(f"bound_scale: must be in (0, 1], got {bound_scale}")
    if om_levels < 2:
        raise ValueError(f"om_levels: must be >= 2, got {om_levels}")
    bounds = app.operator_bounds_s() * bound_scale
    if not max_source_rate > 0:
        raise ValueError(f"max_source_rate: must be > 0 tuples/s, got {max_source_rate}")
    peak = app.input_rates(max_source_rate) * 1.05
    oms: list[ThresholdOM] | list[ModelBasedOM]
    if acs == "threshold":
        oms = [ThresholdOM(op.max_replicas, op.service_rate) for op in app.operators]
    else:
        oms = [
            ModelBasedOM(op.max_replicas, float(peak[i]), levels=om_levels)
            for i, op in enumerate(app.operators)
        ]
    # Initial deployment: one replica per operator on nodes acquired before the run.
    init_nodes = {r: 0 for r in regions}
    for op in app.operators:
        init_nodes[op.region] += 1
    for r in regions:
        target = StaticProvisioning.DEFAULTS["nodes"] if ics == "static" else 0
        if ics == "static" and rm_params and "nodes" in rm_params:
            target = rm_params["nodes"]
        need = max(target, math.ceil(init_nodes[r] / max(node_type.cores, 1)))
        for _ in range(need):
            pools[r].acquire(0, -1, 0)
    for op in app.operators:
        pools[op.region].place(op.name, 0)
    net = app.network_total_s()

    n = len(rates)
    out = {
        "response_time": np.empty(n),
        "violation": np.zeros(n, bool),
        "reconfiguration": np.zeros(n, bool),
        "replicas": np.zeros(n, np.int64),
        "nodes": np.zeros(n, np.int64),
        "unsatisfied": np.zeros(n, np.int64),
        "rm_cost": np.zeros(n),
    }
    replicas = np.array([pools[op.region].replicas_of(op.name) for op in app.operators])
    order_ops = list(range(n_ops))
    t0 = time.perf_counter()
    for t in range(n):
        lam = app.input_rates(rates[t])
        # 1. measure
        rt_ops = np.array([md1_response_time(lam[i], int(replicas[i]), mus[i]) for i in order_ops])
        rt = float(rt_ops.sum()) + net
        violated_app = rt > app.r_max_s
        out["response_time"][t] = rt
        out["violation"][t] = violated_app
        out["replicas"][t] = int(replicas.sum())
        out["nodes"][t] = sum(len(p.nodes) for p in pools.values())
        util = np.minimum(lam / (np.maximum(replicas, 1) * mus), 1.0)
        # 2. OM proposals
        deltas = [oms[i].act(int(replicas[i]), float(lam[i]), bool(rt_ops[i] > bounds[i])) for i in order_ops]
        # 3. AM: waiting scale-outs first, then new ones by utilisation, scale-ins
        changed = False
        for req in placement.retry_waiting(t):
            replicas[[op.name for op in app.operators].index(req.operator)] += 1
            changed = True
        for i in sorted(order_ops, key=lambda j: -util[j]):
            op = app.operators[i]
            d = deltas[i]
            if d > 0:
                if placement.waiting_for(op.name):
                    continue  # one scale-out at a time per operator: it is still waiting for a node
                if placement.scale_out(op.name, op.region, t) is not None:
                    replicas[i] += 1
                    changed = True
            elif d < 0:
                if placement.cancel(op.name):
                    continue
                pools[op.region].remove(op.name, rng)
                replicas[i] -= 1
                changed = True
        if changed and consolidation:
            for prop in im.propose_consolidation(pools, t):
                for op_name, src, dst in prop.moves:
                    pools[prop.region].apply_move(op_name, src, dst)
        out["reconfiguration"][t] = changed
        # 4. ICS
        states = {}
        for r in regions:
            in_r = [i for i in order_ops if app.operators[i].region == r]
            w = replicas[in_r]
            u_r = float(np.dot(util[in_r], w) / w.sum()) if in_r and w.sum() > 0 else 0.0
            unsat = placement.unsatisfied(r)
            states[r] = pools[r].region_state(t, u_r, unsat, unsat)
        out["unsatisfied"][t] = sum(s.unsatisfied for s in states.values())
        w_d = float((rm_params or {}).get("w_d", ModelBasedRM.DEFAULTS["w_d"]))
        out["rm_cost"][t] = float(
            np.mean([w_d * (s.unsatisfied > 0) + (1 - w_d) * s.n_nodes / max_nodes for s in states.values()])
        )
        proposals = {r: rms[r].propose(states[r]) for r in regions}
        flat = [p for r in regions for p in proposals[r]]
        if flat:
            decisions = im.decide(flat, states)
            applied = im.apply(decisions, pools, t)
            by_region: dict[str, list[int]] = {r: [] for r in regions}
            for dec, a in zip(decisions, applied, strict=True):
                by_region[dec.proposal.region].append(a)
            for r in regions:
                if proposals[r]:
                    rms[r].granted(proposals[r], by_region[r])
        else:
            for r in regions:
                rms[r].granted([], [])
    wall = time.perf_counter() - t0
    return MultiLevelResult(
        rates.copy(),
        wall_seconds=wall,
        meta={
            "ics": ics,
            "acs": acs,
            "rm_params": dict(rm_params or {}),
            "seed": seed,
            "om_levels": om_levels,
            "bound_scale": bound_scale,
        },
        **out,
    )
