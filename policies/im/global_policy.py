"""Infrastructure Manager global policies (paper 004 Sec. 6.3): prioritise, accept, post-reconfiguration.

1. *Prioritisation*: RM requests are ranked: releases first (they never cost anything), then acquisitions by
   the policy's criterion -- cheapest capacity first ($/h per replica slot) or a region preference list.
2. *Acceptance*: acquisitions are granted in that order while they fit the per-period acquisition budget
   (``acquisition_budget_per_period``, $/h of new capacity per period, ``None`` = unlimited) and each region's
   quota (``RegionQuota``: most nodes, most new nodes per period). A request may be granted in part.
3. *Post-reconfiguration*: when a region has partly used nodes whose replicas fit elsewhere, the IM proposes
   to the AM to consolidate (move those replicas) so the emptied nodes can be released.

Every decision carries a reason string that the dashboard shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from policies.im.infrastructure import RegionPool
from policies.operator_model import NodeType
from policies.options import defaults as option_defaults
from policies.rm.base import RegionState, RMProposal, validate_against_defaults


@dataclass(frozen=True)
class RegionQuota:
    """Limits of one region: ``max_nodes`` (active plus booting) and ``max_new_nodes_per_period``."""

    max_nodes: int = 50
    max_new_nodes_per_period: int | None = None

    def __post_init__(self) -> None:
        if self.max_nodes < 0:
            raise ValueError(f"quota.max_nodes: must be >= 0, got {self.max_nodes}")
        if self.max_new_nodes_per_period is not None and self.max_new_nodes_per_period < 0:
            raise ValueError(
                f"quota.max_new_nodes_per_period: must be >= 0, got {self.max_new_nodes_per_period}"
            )


@dataclass
class IMDecision:
    """The IM's answer to one RM proposal: ``granted`` nodes (same sign as the request, 0 = denied)."""

    proposal: RMProposal
    granted: int
    reason: str

    @property
    def accepted(self) -> bool:
        return self.granted != 0


@dataclass
class ConsolidationProposal:
    """A post-reconfiguration proposal to the AM: ``moves`` = (operator, from node, to node) in ``region``;
    applying all of them leaves ``frees`` idle so they can be released."""

    region: str
    moves: list[tuple[str, int, int]]
    frees: list[int]
    reason: str
    explanation: dict[str, Any] = field(default_factory=dict)


class GlobalPolicy:
    """Base IM policy; subclasses define :meth:`priority` (lower = served first)."""

    name: ClassVar[str] = ""
    #: acquisition_budget_per_period ($/h per period, None = unlimited), provisioning_delay_periods, consolidate:
    #: types, bounds and defaults in :mod:`policies.options`
    DEFAULTS: ClassVar[dict[str, Any]] = option_defaults("im", "cheapest-first")

    def __init__(
        self,
        catalogs: dict[str, tuple[NodeType, ...]],
        quotas: dict[str, RegionQuota] | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        if not catalogs:
            raise ValueError("catalogs: the infrastructure has no region")
        quotas = quotas or {}
        for region in quotas:
            if region not in catalogs:
                raise ValueError(f"quotas.{region}: region referenced by no catalog")
        self.catalogs = {r: tuple(c) for r, c in catalogs.items()}
        self.quotas = {r: quotas.get(r, RegionQuota()) for r in catalogs}
        self.params = validate_against_defaults(self.name, self.DEFAULTS, params or {})
        self.check_params(self.params)

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Type and range checks that need no catalog (used by the registry to validate manifests)."""
        out = validate_against_defaults(cls.name, cls.DEFAULTS, params)
        GlobalPolicy.check_params(cls, out)  # type: ignore[arg-type]
        return out

    def check_params(self, params: dict[str, Any]) -> None:
        budget = params["acquisition_budget_per_period"]
        if budget is not None and budget < 0:
            raise ValueError(f"params.acquisition_budget_per_period: must be >= 0 or null, got {budget}")
        if params["provisioning_delay_periods"] < 0:
            raise ValueError(
                f"params.provisioning_delay_periods: must be >= 0, got {params['provisioning_delay_periods']}"
            )

    def node_type(self, proposal: RMProposal) -> tuple[int, NodeType]:
        catalog = self.catalogs.get(proposal.region)
        if catalog is None:
            raise ValueError(f"proposal.region: {proposal.region!r} is referenced by no catalog")
        for i, t in enumerate(catalog):
            if t.name == proposal.node_type:
                return i, t
        raise ValueError(f"proposal.node_type: {proposal.node_type!r} is not in region {proposal.region!r}")

    def priority(self, proposal: RMProposal) -> tuple:
        raise NotImplementedError

    def rank(self, proposals: list[RMProposal]) -> list[RMProposal]:
        """Releases first (in arrival order), then acquisitions by :meth:`priority` (stable)."""
        releases = [p for p in proposals if p.delta < 0]
        acquisitions = sorted((p for p in proposals if p.delta > 0), key=self.priority)
        return releases + acquisitions

    def decide(self, proposals: list[RMProposal], states: dict[str, RegionState]) -> list[IMDecision]:
        """Grant or deny each proposal (returned in ranked order). ``states``: the regions as the RMs saw them."""
        budget = self.params["acquisition_budget_per_period"]
        budget_left = math.inf if budget is None else float(budget)
        nodes = {r: s.n_nodes for r, s in states.items()}
        idle = {r: s.idle.copy() for r, s in states.items()}
        new_in_region = dict.fromkeys(states, 0)
        out: list[IMDecision] = []
        for p in self.rank(proposals):
            ti, t = self.node_type(p)
            if p.region not in states:
                raise ValueError(f"states: no state for region {p.region!r}")
            if p.delta == 0:
                out.append(IMDecision(p, 0, "nothing requested"))
                continue
            if p.delta < 0:
                n = min(-p.delta, int(idle[p.region][ti]))
                idle[p.region][ti] -= n
                nodes[p.region] -= n
                if n == -p.delta:
                    reason = f"release of {n} idle {t.name} accepted"
                elif n == 0:
                    reason = f"release denied: no idle {t.name} node in {p.region} (nodes host replicas)"
                else:
                    reason = f"release cut to {n}: only {n} idle {t.name} node(s) in {p.region}"
                out.append(IMDecision(p, -n, reason))
                continue
            quota = self.quotas[p.region]
            limits = {"request": p.delta, "region quota": quota.max_nodes - nodes[p.region]}
            if quota.max_new_nodes_per_period is not None:
                limits["new nodes per period"] = quota.max_new_nodes_per_period - new_in_region[p.region]
            if t.price > 0 and budget_left < math.inf:
                limits["acquisition budget"] = int(math.floor(budget_left / t.price + 1e-9))
            binding = min(limits, key=lambda k: limits[k])
            n = max(0, min(limits.values()))
            if n == p.delta:
                reason = f"acquisition of {n} {t.name} in {p.region} accepted ({self.criterion(p)})"
            elif n == 0:
                reason = f"acquisition denied: {binding} exhausted in {p.region}"
                if binding == "region quota":
                    reason += f" ({nodes[p.region]}/{quota.max_nodes} nodes)"
                elif binding == "acquisition budget":
                    reason += f" ({budget_left:.3f} $/h left this period, {t.name} costs {t.price:.3f} $/h)"
            else:
                reason = f"acquisition cut from {p.delta} to {n} {t.name} in {p.region} by the {binding}"
            nodes[p.region] += n
            new_in_region[p.region] += n
            budget_left -= n * t.price
            out.append(IMDecision(p, n, reason))
        return out

    def criterion(self, proposal: RMProposal) -> str:
        return "ranked"

    def apply(self, decisions: list[IMDecision], pools: dict[str, RegionPool], now: int) -> list[int]:
        """Carry out granted decisions on the pools; returns the deltas actually applied, in order."""
        delay = int(self.params["provisioning_delay_periods"])
        applied = []
        for d in decisions:
            pool = pools[d.proposal.region]
            ti, _ = self.node_type(d.proposal)
            if d.granted > 0:
                for _ in range(d.granted):
                    pool.acquire(ti, now, delay)
                applied.append(d.granted)
            elif d.granted < 0:
                applied.append(-pool.release_idle(ti, -d.granted, now))
            else:
                applied.append(0)
        return applied

    def propose_consolidation(self, pools: dict[str, RegionPool], now: int) -> list[ConsolidationProposal]:
        """Post-reconfiguration step: per region, the moves that free under-used nodes (empty list if none)."""
        if not self.params["consolidate"]:
            return []
        out = []
        for region, pool in pools.items():
            moves = pool.consolidation_moves(now)
            if not moves:
                continue
            frees = sorted({src for _, src, _ in moves})
            out.append(
                ConsolidationProposal(
                    region,
                    moves,
                    frees,
                    f"{len(frees)} under-used node(s) in {region} can be emptied by moving {len(moves)} replica(s)",
                    {"used_slots": pool.used_slots(), "active_nodes": len(pool.active(now))},
                )
            )
        return out


class CheapestFirst(GlobalPolicy):
    """Acquisitions of the cheapest capacity ($/h per replica slot) are served first."""

    name: ClassVar[str] = "cheapest-first"

    def priority(self, proposal: RMProposal) -> tuple:
        _, t = self.node_type(proposal)
        return (t.price / max(t.cores, 1), proposal.region)

    def criterion(self, proposal: RMProposal) -> str:
        _, t = self.node_type(proposal)
        return f"cheapest first: {t.price / max(t.cores, 1):.3f} $/h per slot"


class RegionPreference(GlobalPolicy):
    """Acquisitions in regions earlier in ``region_order`` are served first (unlisted regions last)."""

    name: ClassVar[str] = "region-preference"
    DEFAULTS: ClassVar[dict[str, Any]] = option_defaults("im", "region-preference")

    def check_params(self, params: dict[str, Any]) -> None:
        super().check_params(params)
        for r in params["region_order"]:
            if r not in self.catalogs:
                raise ValueError(f"params.region_order: region {r!r} is referenced by no catalog")

    def priority(self, proposal: RMProposal) -> tuple:
        order = list(self.params["region_order"])
        rank = order.index(proposal.region) if proposal.region in order else len(order)
        return (rank, proposal.region)

    def criterion(self, proposal: RMProposal) -> str:
        order = list(self.params["region_order"])
        if proposal.region in order:
            return f"region preference #{order.index(proposal.region) + 1}"
        return "region not in the preference list"
