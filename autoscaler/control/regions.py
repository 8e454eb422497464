"""RM step + IM arbitration of one region per RM period (paper 004), recorded in ``RegionTick``.

The region's node pool is bookkept by the control plane: ``active`` nodes per type carried from the previous
region tick (initially the nodes the running deployments need), ``used`` = replicas the engines currently run in
the region (one replica per core), ``idle`` = active nodes hosting no replica. The RM policy (``simple`` unless
``AUTOSCALER_RM_POLICY`` says otherwise) proposes acquisitions/releases and the IM (``cheapest-first``) grants them
within the region's quota (``maxNodes``, ``maxNewNodesPerPeriod``); granted deltas update the pool.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction

from autoscaler.control.models import RegionTick, SimulatedEngine
from autoscaler.models import Deployment, Region
from policies import registry
from policies.im.global_policy import RegionQuota
from policies.model import NodeType as PolicyNodeType
from policies.rm.base import RegionState

DEFAULT_RM_PERIOD_S = 60.0


def rm_period_s() -> float:
    return float(getattr(settings, "AUTOSCALER_RM_PERIOD_S", DEFAULT_RM_PERIOD_S))


def _catalog(region: Region) -> tuple[PolicyNodeType, ...]:
    return tuple(
        PolicyNodeType(t.name, float(t.speedup), float(t.price_per_hour), t.cores, t.memory_mib)
        for t in region.catalog.node_types.order_by("position")
    )


def _used_replicas(region: Region, names: list[str]) -> np.ndarray:
    used = np.zeros(len(names), dtype=np.int64)
    index = {n: i for i, n in enumerate(names)}
    engines = {e.application_id: e.deployments or {} for e in SimulatedEngine.objects.all()}
    for dep in Deployment.objects.filter(region=region).select_related("operator"):
        running = engines.get(dep.operator.application_id, {}).get(dep.operator.name, dep.replicas)
        for t, n in running.items():
            if t in index:
                used[index[t]] += int(n)
    return used


def region_step(region_id: int, slot: int) -> dict[str, Any]:
    """Run the RM step and IM arbitration of ``region`` for ``slot`` once (a duplicate returns the record)."""
    region = Region.objects.select_related("catalog").get(pk=region_id)
    with transaction.atomic():
        try:
            row, _ = RegionTick.objects.select_for_update().get_or_create(region=region, slot=slot)
        except IntegrityError:
            row = RegionTick.objects.select_for_update().get(region=region, slot=slot)
        if row.policy:
            return {"duplicate": True, "decisions": row.decisions}
        catalog = _catalog(region)
        names = [t.name for t in catalog]
        cores = np.array([max(t.cores, 1) for t in catalog], dtype=np.int64)
        used_replicas = _used_replicas(region, names)
        needed = np.ceil(used_replicas / cores).astype(np.int64)
        prev = (
            RegionTick.objects.filter(region=region, slot__lt=slot)
            .exclude(policy="")
            .order_by("-slot")
            .first()
        )
        active = (
            np.array(prev.state.get("active", needed.tolist()), dtype=np.int64) if prev else needed.copy()
        )
        active = np.maximum(active, needed)
        idle = active - needed
        state = RegionState(
            region.name,
            active,
            np.zeros(len(names), dtype=np.int64),
            idle,
            int(used_replicas.sum()),
            int((active * cores).sum()),
            0.0,
        )
        name = getattr(settings, "AUTOSCALER_RM_POLICY", "simple")
        rm = registry.load("rm", name)(region.name, catalog, k_max=region.max_nodes)
        if prev is not None and prev.agent_state and prev.policy == name:
            rm.load_state(bytes(prev.agent_state))
        proposals = rm.propose(state)
        im = registry.load("im", "cheapest-first")(
            {region.name: catalog},
            {region.name: RegionQuota(region.max_nodes, region.max_new_nodes_per_period)},
        )
        decisions = im.decide(proposals, {region.name: state}) if proposals else []
        deltas = []
        for d in decisions:
            ti = names.index(d.proposal.node_type)
            active[ti] = max(active[ti] + d.granted, needed[ti])
            deltas.append(d.granted)
        if proposals:
            by_id = {id(d.proposal): d.granted for d in decisions}
            rm.granted(proposals, [by_id.get(id(p), 0) for p in proposals])
        row.policy = name
        row.state = {
            "active": active.tolist(),
            "used_replicas": used_replicas.tolist(),
            "idle": (active - needed).tolist(),
            "node_types": names,
        }
        row.proposals = [
            {
                "node_type": p.node_type,
                "delta": p.delta,
                "reason": p.reason,
                "explanation": _finite(p.explanation),
            }
            for p in proposals
        ]
        row.decisions = [
            {
                "node_type": d.proposal.node_type,
                "requested": d.proposal.delta,
                "granted": d.granted,
                "reason": d.reason,
            }
            for d in decisions
        ]
        row.agent_state = rm.state_bytes()
        row.save()
        return {"duplicate": False, "decisions": row.decisions}


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return value
