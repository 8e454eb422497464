"""The provisioned capacity an application's AM may grant from, and its reservation (exact across applications).

Each RM step stores per region ``RegionControl.capacity`` = ``{version, slot, ready_slots, used_slots, granted}``
(replica slots per node type: on ready nodes / used by the region's applications at the step / granted as
scale-outs by application ticks since the step). An application's tick lets its AM grant, per node type,
at most ``sum over its managed regions of (ready - used - granted + its own replicas there)`` replicas
(a region the RM has not stepped yet is unlimited). After arbitration the tick reserves its granted scale-outs
with a compare-and-set on ``version`` (inside the tick's transaction, so the row stays locked until the tick
commits); when another application reserved meanwhile, the tick re-reads and re-arbitrates (``RETRIES`` times,
then it grants no scale-out in managed regions: they wait). Ticks that grant no scale-out write nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from django.db import transaction

from autoscaler.control.models import RegionControl
from autoscaler.control.topology import Topology
from policies.am.arbiter import Decision as AMDecision
from policies.am.arbiter import Request
from policies.base import action_delta

RETRIES = 3
UNLIMITED = 10**9


class _Conflict(Exception):
    pass


@dataclass
class Capacity:
    """``slots``: replicas per node type the application may use (None = no managed region: unlimited);
    ``snapshots``: region id -> the capacity document read."""

    slots: np.ndarray | None
    snapshots: dict[int, dict] = field(default_factory=dict)

    def reserve(self, topo: Topology, requests: list[Request], granted: list[AMDecision]) -> bool:
        """Record the granted scale-outs in managed regions; False when another tick reserved meanwhile."""
        names = topo.type_names
        adds: dict[int, dict[str, int]] = {}
        for op, d in zip(topo.operators, granted, strict=True):
            if not d.changed:
                continue
            t, delta = action_delta(d.applied, len(names))
            rid = op.deployment.region_id
            if delta > 0 and rid in self.snapshots:
                adds.setdefault(rid, {})
                adds[rid][names[t]] = adds[rid].get(names[t], 0) + 1
        if not adds:
            return True
        try:
            with transaction.atomic():
                for rid, add in adds.items():
                    snap = self.snapshots[rid]
                    new = dict(snap)
                    got = dict(snap.get("granted") or {})
                    for t, n in add.items():
                        got[t] = got.get(t, 0) + n
                    new["granted"], new["version"] = got, int(snap.get("version", 0)) + 1
                    updated = RegionControl.objects.filter(
                        region_id=rid, capacity__version=int(snap.get("version", 0))
                    ).update(capacity=new)
                    if not updated:
                        raise _Conflict
        except _Conflict:
            return False
        return True


def read(topo: Topology, ks: list[np.ndarray], freeze: bool = False) -> Capacity:
    """The capacity of the application's regions (see module doc); ``freeze``: no scale-out in managed regions."""
    if not topo.operators:
        return Capacity(None)
    names = topo.type_names
    own: dict[int, np.ndarray] = {}
    for op, k in zip(topo.operators, ks, strict=True):
        rid = op.deployment.region_id
        own[rid] = own.get(rid, np.zeros(len(names), dtype=np.int64)) + np.asarray(k, dtype=np.int64)
    snapshots = dict(
        RegionControl.objects.filter(region_id__in=list(own))
        .exclude(capacity={})
        .values_list("region_id", "capacity")
    )
    if not snapshots:
        return Capacity(None)
    cap = np.zeros(len(names), dtype=np.int64)
    for rid, mine in own.items():
        snap = snapshots.get(rid)
        if snap is None:
            cap += UNLIMITED
            continue
        if freeze:
            cap += mine
            continue

        def vec(key: str, snap: dict = snap) -> np.ndarray:
            return np.array([int((snap.get(key) or {}).get(n, 0)) for n in names], dtype=np.int64)

        free = vec("ready_slots") - vec("used_slots") - vec("granted")
        cap += np.maximum(free + mine, 0)
    return Capacity(cap, snapshots)
