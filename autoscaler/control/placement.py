"""Where the replicas of a region's applications run: the durable placement ledger ``RegionNode.replicas``.

Engines report how many replicas of each operator run per node type, not on which node; the control plane keeps
the placement itself, one ``'<application id>/<operator>'`` entry per replica (one replica per core). Each region
step reconciles the ledger with what runs (:func:`reconcile`):

- a replica that no longer runs (scale-in) is removed from the node hosting the most replicas of its operator
  (ties: the newest node), so scale-ins can leave nodes partly used: the IM's consolidation then proposes moves;
- a new replica (scale-out) goes on the ready node of its type with the fewest free slots that still has one
  (best fit, as ``policies.im.infrastructure.RegionPool.place``), oldest first on ties;
- a replica that finds no slot stays unplaced: every ready node of its type then counts as busy (the region
  cannot tell which one hosts it, so it releases none of them).

Only nodes with no entry are idle; a consolidation applied by an AM moves entries (:func:`apply_moves`).
"""

from __future__ import annotations

from collections import Counter

from autoscaler.control.models import RegionNode, SimulatedEngine
from autoscaler.models import Deployment, Region


def replica_key(application_id: int, operator: str) -> str:
    return f"{application_id}/{operator}"


def running_replicas(region: Region) -> dict[str, dict[str, int]]:
    """Replicas per node type of every operator deployed in ``region``, keyed by :func:`replica_key` (the
    simulated engine's deployment when there is one, else the stored Deployment)."""
    deps = list(Deployment.objects.filter(region=region).select_related("operator"))
    app_ids = {d.operator.application_id for d in deps}
    engines = {
        e.application_id: e.deployments or {}
        for e in SimulatedEngine.objects.filter(application_id__in=app_ids).only(
            "application_id", "deployments"
        )
    }
    out: dict[str, dict[str, int]] = {}
    for dep in deps:
        running = engines.get(dep.operator.application_id, {}).get(dep.operator.name, dep.replicas)
        out[replica_key(dep.operator.application_id, dep.operator.name)] = {
            t: int(n) for t, n in running.items() if int(n) > 0
        }
    return out


def with_grants(running: dict[str, dict[str, int]], grants: list[dict]) -> dict[str, dict[str, int]]:
    """``running`` plus the granted scale-outs not applied yet (``autoscaler.control.capacity`` grants): they
    hold a slot in the ledger as a running replica does, so the node they will run on is not idle."""
    out = {k: dict(v) for k, v in running.items()}
    for g in grants:
        key = replica_key(int(g["app"]), str(g.get("operator", "")))
        per = out.setdefault(key, {})
        per[g["node_type"]] = per.get(g["node_type"], 0) + int(g.get("n", 1))
    return out


def replicas_by_application(
    running: dict[str, dict[str, int]], names: list[str]
) -> dict[int, dict[str, int]]:
    """Replicas per node type of the catalog (``names``) per application id."""
    out: dict[int, dict[str, int]] = {}
    for key, per_type in running.items():
        app = int(key.partition("/")[0])
        for t, n in per_type.items():
            if t in names and int(n) > 0:
                out.setdefault(app, {})
                out[app][t] = out[app].get(t, 0) + int(n)
    return out


def reconcile(
    ready: list[RegionNode], running: dict[str, dict[str, int]], cores: dict[str, int]
) -> dict[str, int]:
    """Bring the ledger of the ``ready`` nodes (oldest first) in line with ``running``; saves changed rows.

    ``cores``: slots per node type of the catalog (types outside it are not placed). Returns the replicas per
    node type that found no slot."""
    changed: set[int] = set()
    for node in ready:
        keep = [k for k in node.replicas or [] if node.node_type in cores]
        if keep != list(node.replicas or []):
            node.replicas = keep
            changed.add(node.pk)
    unplaced: dict[str, int] = {}
    for key in sorted({k for n in ready for k in n.replicas} | set(running)):
        for t in sorted(set(cores) & ({n.node_type for n in ready} | set(running.get(key, {})))):
            hosts = [n for n in ready if n.node_type == t]
            placed = sum(n.replicas.count(key) for n in hosts)
            want = int(running.get(key, {}).get(t, 0))
            for _ in range(placed - want):  # scale-in: from the node with the most replicas of the operator
                node = max(reversed(hosts), key=lambda n: n.replicas.count(key))
                node.replicas.remove(key)
                changed.add(node.pk)
            for _ in range(want - placed):  # scale-out: best fit
                free = [n for n in hosts if len(n.replicas) < cores[t]]
                if not free:
                    unplaced[t] = unplaced.get(t, 0) + 1
                    continue
                node = min(free, key=lambda n: cores[t] - len(n.replicas))
                node.replicas.append(key)
                changed.add(node.pk)
    rows = [n for n in ready if n.pk in changed]
    RegionNode.objects.bulk_update(rows, ["replicas"])
    return unplaced


def busy_nodes(ready: list[RegionNode], unplaced: dict[str, int]) -> set[str]:
    """Ready nodes that may host replicas: those with ledger entries, and every node of a type with unplaced
    replicas."""
    return {n.node_id for n in ready if n.replicas or unplaced.get(n.node_type, 0) > 0}


def apply_moves(
    region: Region, application_id: int, moves: list[dict], cores: dict[str, int]
) -> tuple[int, list[str]]:
    """Move the application's ledger entries as its applied consolidation did: ``moves`` = [{operator,
    node_type, from, to}] (node ids). A move that no longer fits the ledger (source without the replica, target full or
    gone) is skipped. Returns (moves applied, reasons of the skipped ones)."""
    rows = {
        r.node_id: r
        for r in RegionNode.objects.select_for_update().filter(region=region, state=RegionNode.State.READY)
    }
    done, skipped = 0, []
    for m in moves:
        src, dst = rows.get(m["from"]), rows.get(m["to"])
        key = replica_key(application_id, m["operator"])
        if src is None or dst is None or key not in src.replicas:
            skipped.append(f"{m['operator']} {m['from']}->{m['to']}: the source no longer hosts it")
            continue
        if len(dst.replicas) >= cores.get(dst.node_type, 0):
            skipped.append(f"{m['operator']} {m['from']}->{m['to']}: the target is full")
            continue
        src.replicas.remove(key)
        dst.replicas.append(key)
        done += 1
    RegionNode.objects.bulk_update(list(rows.values()), ["replicas"])
    return done, skipped


def layout(ready: list[RegionNode]) -> dict[str, dict[str, int]]:
    """node id -> operator key -> replicas (for records and tests)."""
    return {n.node_id: dict(Counter(n.replicas)) for n in ready}
