"""The node accounting of a region: one document (``RegionControl.capacity``) that the RM/IM step, the AMs'
grants, the API and the dashboard all read (the one source of truth), and its reservation (exact across
applications).

The document (``FORMAT`` 2; replica slots: one core hosts one replica)::

    {version, format, slot,                  # the CAS version, the slot of the RM step that wrote it
     types:   {type: {cores, ready, pending, idle}},   # NODES per type at that step (idle = ready, no replica)
     apps:    {app id: {type: replicas}},   # replicas each application runs (at the step; refreshed by its ticks)
     grants:  [{app, slot, operator, node_type, n}],   # scale-outs granted and not yet known to run
     unplaced: {type: replicas},            # replicas running beyond the slots of the ready nodes (node lost)
     nodes:   {type: {ready, pending, used, free, ready_slots, used_slots, free_slots, unplaced}}}  # derived

``used`` = what runs plus what was granted and not yet applied: ``used_slots = sum(apps) + sum(grants)``,
``free_slots = max(ready_slots - used_slots, 0)``. In nodes: ``free = min(idle at the step, free_slots // cores)``
(a grant fills a partly used node first, as the placement ledger does: best fit) and ``used = ready - free``, so
``ready = used + free`` always and a type with a free node has a free slot. Booting nodes are ``pending`` (never
capacity). Released and lost nodes are in no count: the step rebuilds the document from the active node rows.
:func:`derive` computes ``nodes`` from the rest; every writer calls it, so the counts stored are the counts shown.

Who writes it:

- the region step (``autoscaler.control.regions``) rebuilds it from the node rows, the replicas the engines run
  and the grants still being applied (their tick is ``applying``); the others are then running or failed;
- an application's tick (:meth:`Capacity.reserve`) replaces its own ``apps`` entry by the replicas it observes
  now (so its applied scale-ins free capacity for the others at once) and its grants by the net rise per type
  of the reconfiguration it just granted (a scale-in's slot may host a scale-out of the same batch), with a compare-and-set on ``version`` inside the tick's transaction (the row stays locked until the
  tick commits); when another writer came first the tick re-reads and re-arbitrates (``RETRIES`` times, then it
  grants no scale-out in managed regions: they wait). A tick whose entry did not change writes nothing.

An application's AM may grant, per node type, at most ``sum over its managed regions of (ready_slots - what the
other applications use there)`` replicas in total (its own replicas included); a region the RM has not stepped
yet is unlimited. Grants of a dry-run application are not reserved (nothing will run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import transaction

from autoscaler.control.models import RegionControl
from autoscaler.control.topology import Topology
from policies.am.arbiter import Decision as AMDecision
from policies.am.arbiter import Request

RETRIES = 3
UNLIMITED = 10**9
FORMAT = 2
NODE_COUNT_KEYS = ("ready", "pending", "used", "free", "ready_slots", "used_slots", "free_slots", "unplaced")


class _Conflict(Exception):
    pass


# ---- the document ----------------------------------------------------------------------------------------------
def used_by_type(doc: dict[str, Any], exclude_app: int | None = None) -> dict[str, int]:
    """Replica slots per node type used by the applications (running + granted), without ``exclude_app``'s."""
    out: dict[str, int] = {}
    skip = None if exclude_app is None else str(exclude_app)
    for app, per_type in (doc.get("apps") or {}).items():
        if app == skip:
            continue
        for t, n in per_type.items():
            out[t] = out.get(t, 0) + int(n)
    for g in doc.get("grants") or []:
        if skip is not None and str(g.get("app")) == skip:
            continue
        out[g["node_type"]] = out.get(g["node_type"], 0) + int(g.get("n", 1))
    return out


def derive(doc: dict[str, Any]) -> dict[str, Any]:
    """Fill ``doc["nodes"]`` (and the ``ready_slots`` / ``used_slots`` shortcuts) from the rest; returns ``doc``."""
    used = used_by_type(doc)
    unplaced = doc.get("unplaced") or {}
    nodes: dict[str, dict[str, int]] = {}
    for t, info in (doc.get("types") or {}).items():
        cores = max(int(info.get("cores", 1)), 1)
        ready = int(info.get("ready", 0))
        ready_slots = ready * cores
        used_slots = int(used.get(t, 0))
        free_slots = max(ready_slots - used_slots, 0)
        free = min(int(info.get("idle", 0)), free_slots // cores, ready)
        nodes[t] = {
            "ready": ready,
            "pending": int(info.get("pending", 0)),
            "used": ready - free,
            "free": free,
            "ready_slots": ready_slots,
            "used_slots": used_slots,
            "free_slots": free_slots,
            "unplaced": int(unplaced.get(t, 0)),
        }
    doc["nodes"] = nodes
    doc["ready_slots"] = {t: c["ready_slots"] for t, c in nodes.items()}
    doc["used_slots"] = {t: c["used_slots"] for t, c in nodes.items()}
    return doc


def build(
    version: int,
    slot: int,
    types: dict[str, dict[str, int]],
    apps: dict[int, dict[str, int]],
    grants: list[dict[str, Any]],
    unplaced: dict[str, int],
) -> dict[str, Any]:
    """The document a region step writes (see module doc)."""
    return derive(
        {
            "format": FORMAT,
            "version": int(version),
            "slot": int(slot),
            "types": types,
            "apps": {str(a): {t: int(n) for t, n in per.items() if int(n) > 0} for a, per in apps.items()},
            "grants": list(grants),
            "unplaced": {t: int(n) for t, n in unplaced.items() if int(n) > 0},
        }
    )


def node_counts(doc: dict[str, Any] | None) -> dict[str, dict[str, int]]:
    """Per node type: ready / pending / used / free nodes and slots (what the API and the dashboard show)."""
    if not doc or doc.get("format") != FORMAT:
        return {}
    return {t: dict(c) for t, c in (doc.get("nodes") or derive(dict(doc))["nodes"]).items()}


def nodes_needed(doc: dict[str, Any], change: dict[str, int]) -> int:
    """Nodes the region of ``doc`` needs to host the replicas running or granted there plus ``change`` (node type
    -> replicas more, or fewer when negative): ``sum over types of ceil(max(used_slots + change, 0) / cores)``."""
    used = used_by_type(doc)
    types = doc.get("types") or {}
    needed = 0
    for t in set(used) | set(change):
        cores = max(int((types.get(t) or {}).get("cores", 1)), 1)
        slots = max(int(used.get(t, 0)) + int(change.get(t, 0)), 0)
        needed += -(-slots // cores)
    return needed


def over_node_limit(doc: dict[str, Any] | None, max_nodes: int, waiting_slots: dict[str, int]) -> bool:
    """Whether the region of ``doc`` cannot hold, within ``max_nodes`` nodes, the replicas running or granted
    there plus ``waiting_slots`` (node type -> replicas waiting for nodes; :func:`nodes_needed`). False for a
    document of another format (no accounting)."""
    if not doc or doc.get("format") != FORMAT:
        return False
    return nodes_needed(doc, {t: max(int(n), 0) for t, n in waiting_slots.items()}) > int(max_nodes)


def coming_slots(doc: dict[str, Any], names: list[str], max_nodes: int) -> np.ndarray:
    """Replica slots per node type (in ``names`` order) the region can still bring: its booting nodes of the type
    plus the nodes it may acquire within ``max_nodes`` (its ready and booting nodes counted), idle nodes of the
    other types counting as room (the RM releases them for an awaited type)."""
    types = doc.get("types") or {}
    held = sum(int(i.get("ready", 0)) + int(i.get("pending", 0)) for i in types.values())
    room = max(int(max_nodes) - held, 0)
    idle = {t: int(i.get("idle", 0)) for t, i in types.items()}
    out = []
    for n in names:
        info = types.get(n) or {}
        cores = max(int(info.get("cores", 1)), 1)
        releasable = sum(v for t, v in idle.items() if t != n)
        out.append((int(info.get("pending", 0)) + room + releasable) * cores)
    return np.array(out, dtype=np.int64)


def free_slots(doc: dict[str, Any], names: list[str]) -> np.ndarray:
    """Replica slots per node type (in ``names`` order) on the region's ready nodes that nothing runs on or is
    granted (``nodes.free_slots`` of the document)."""
    nodes = doc.get("nodes") or derive(dict(doc))["nodes"]
    return np.array([int((nodes.get(n) or {}).get("free_slots", 0)) for n in names], dtype=np.int64)


def region_node_counts(region_id: int) -> dict[str, dict[str, int]]:
    """:func:`node_counts` of the region's stored document (empty before its first step or when it publishes
    none); the API's ``node_counts`` and the dashboard's region page both come from here."""
    doc = RegionControl.objects.filter(region_id=region_id).values_list("capacity", flat=True).first()
    return node_counts(doc)


def for_viewer(doc: dict[str, Any] | None, app_ids: set[int] | None) -> dict[str, Any]:
    """The document as one user may see it: other users' applications' entries left out (``None`` = all)."""
    if not doc:
        return {}
    if app_ids is None:
        return doc
    mine = {str(a) for a in app_ids}
    out = dict(doc)
    out["apps"] = {a: v for a, v in (doc.get("apps") or {}).items() if a in mine}
    out["grants"] = [g for g in doc.get("grants") or [] if str(g.get("app")) in mine]
    return out


# ---- the AM's view ---------------------------------------------------------------------------------------------
@dataclass
class Capacity:
    """``slots``: replicas per node type the application may use (None = no managed region: unlimited);
    ``snapshots``: region id -> the capacity document read."""

    slots: np.ndarray | None
    snapshots: dict[int, dict] = field(default_factory=dict)

    def reserve(
        self, topo: Topology, requests: list[Request], granted: list[AMDecision], slot: int | None = None
    ) -> bool:
        """Record, per managed region, the application's replicas now and its granted scale-outs (of tick
        ``slot``); False when another writer changed the document meanwhile (re-read and re-arbitrate)."""
        if not self.snapshots:
            return True
        names = topo.type_names
        app_id = topo.application.pk
        key = str(app_id)
        dry_run = bool(getattr(topo.application, "dry_run", False))
        now: dict[int, dict[str, int]] = {rid: {} for rid in self.snapshots}
        net: dict[int, dict[str, int]] = {rid: {} for rid in self.snapshots}
        outs: dict[int, dict[str, list[str]]] = {rid: {} for rid in self.snapshots}
        for op, r, d in zip(topo.operators, requests, granted, strict=True):
            rid = op.deployment.region_id
            if rid not in self.snapshots:
                continue
            for t, n in zip(names, np.asarray(r.k, dtype=np.int64), strict=True):
                if n > 0:
                    now[rid][t] = now[rid].get(t, 0) + int(n)
            if d.changed and not dry_run:
                change = r.change()
                for t in np.flatnonzero(change).tolist():
                    delta = int(change[t])
                    net[rid][names[t]] = net[rid].get(names[t], 0) + delta
                    if delta > 0:
                        outs[rid].setdefault(names[t], []).extend([op.name] * delta)
        # the batch is one reconfiguration: a slot a scale-in frees may host a scale-out of the same batch. Until
        # it is applied both the replicas before and after it run or may run: reserve per type only the net rise
        # (the scale-ins leave the count when the application's next tick observes them applied)
        adds: dict[int, list[dict[str, Any]]] = {rid: [] for rid in self.snapshots}
        for rid, per_type in net.items():
            for t, n in per_type.items():
                for op_name in outs[rid].get(t, [])[: max(n, 0)]:
                    adds[rid].append(
                        {"app": app_id, "slot": slot, "operator": op_name, "node_type": t, "n": 1}
                    )
        writes: dict[int, dict[str, Any]] = {}
        for rid, snap in self.snapshots.items():
            old_grants = [g for g in snap.get("grants") or [] if str(g.get("app")) == key]
            if (snap.get("apps") or {}).get(key, {}) == now[rid] and not old_grants and not adds[rid]:
                continue  # nothing changed for this application here
            new = dict(snap)
            apps = dict(snap.get("apps") or {})
            if now[rid]:
                apps[key] = now[rid]
            else:
                apps.pop(key, None)
            new["apps"] = apps
            new["grants"] = [g for g in snap.get("grants") or [] if str(g.get("app")) != key] + adds[rid]
            new["version"] = int(snap.get("version", 0)) + 1
            writes[rid] = derive(new)
        if not writes:
            return True
        try:
            with transaction.atomic():
                for rid, new in writes.items():
                    version = int(self.snapshots[rid].get("version", 0))
                    updated = RegionControl.objects.filter(region_id=rid, capacity__version=version).update(
                        capacity=new
                    )
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
    snapshots = {
        rid: doc
        for rid, doc in RegionControl.objects.filter(region_id__in=list(own))
        .exclude(capacity={})
        .values_list("region_id", "capacity")
        if doc.get("format") == FORMAT
    }
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
        ready = np.array(
            [int((snap.get("nodes") or {}).get(n, {}).get("ready_slots", 0)) for n in names], dtype=np.int64
        )
        others = used_by_type(snap, exclude_app=topo.application.pk)
        cap += np.maximum(ready - np.array([others.get(n, 0) for n in names], dtype=np.int64), 0)
    return Capacity(cap, snapshots)
