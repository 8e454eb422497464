"""IM consolidation proposals (paper 004 Sec. 6.3) carried to the applications' AMs in the control plane.

1. :func:`propose` (end of each region step): the IM's ``propose_consolidation`` over the region's ready nodes and
   the replicas the placement ledger puts on them (``autoscaler.control.placement``). Moves stay within a node
   type, so an operator's replica counts do not change: only placement does. The proposal is split per
   application into durable ``Consolidation`` rows (one per (region, slot, application), written once: the step
   of a slot runs once); older pending rows of the region are superseded.
2. :func:`take` (an application's tick, after AM arbitration): the AM moves the replicas in the same batched
   reconfiguration as the changes granted this period (no extra token), or in its own reconfiguration when the
   token bucket holds one token; otherwise the proposal stays pending and the decision log says why. It is
   deferred while a moved operator changes its replicas this period (the moves would no longer fit).
3. :func:`finish` (after the engine applied the tick's plan): the moves enter the ledger; the emptied nodes are
   then idle, and the RM/IM releases them like any idle node (a node hosting a replica is never released).
"""

from __future__ import annotations

from typing import Any

from autoscaler.control import placement
from autoscaler.control.models import Consolidation, Decision, RegionNode, Tick
from autoscaler.models import Application, Region
from policies.im.global_policy import GlobalPolicy
from policies.im.infrastructure import Node, RegionPool
from policies.operator_model import NodeType as PolicyNodeType


def cores_of(region: Region) -> dict[str, int]:
    """Replica slots (cores) per node type of the region's catalog."""
    return {t.name: max(int(t.cores), 1) for t in region.catalog.node_types.all()}


def propose(
    region: Region,
    im: GlobalPolicy,
    catalog: tuple[PolicyNodeType, ...],
    ready: list[RegionNode],
    slot: int,
) -> list[Consolidation]:
    """Write the IM's consolidation proposal of ``slot`` for ``region`` (see module doc); returns the new rows."""
    Consolidation.objects.filter(region=region, status=Consolidation.Status.PENDING, slot__lt=slot).update(
        status=Consolidation.Status.SUPERSEDED, outcome=f"superseded by the region step of slot {slot}"
    )
    index = {t.name: i for i, t in enumerate(catalog)}
    pool = RegionPool(region.name, catalog, max_nodes=max(len(ready), 1))
    ids: list[str] = []
    for node in ready:
        if node.node_type in index:
            ti = index[node.node_type]
            pool.nodes[len(ids)] = Node(len(ids), ti, max(catalog[ti].cores, 1), 0, list(node.replicas))
            ids.append(node.node_id)
    rows: dict[int, Consolidation] = {}
    for prop in im.propose_consolidation({region.name: pool}, slot):
        frees = [ids[i] for i in prop.frees]
        for key, src, dst in prop.moves:
            app_id, operator = key.split("/", 1)
            row = rows.setdefault(
                int(app_id),
                Consolidation(
                    region=region, slot=slot, application_id=int(app_id), frees=frees, reason=prop.reason
                ),
            )
            row.moves.append(
                {
                    "operator": operator,
                    "node_type": ready_type(pool, src, catalog),
                    "from": ids[src],
                    "to": ids[dst],
                }
            )
    Consolidation.objects.bulk_create(list(rows.values()), ignore_conflicts=True)
    return list(rows.values())


def ready_type(pool: RegionPool, node: int, catalog: tuple[PolicyNodeType, ...]) -> str:
    return catalog[pool.nodes[node].type_index].name


def take(app: Application, tick: Tick, decisions: list[Decision], plan: dict, before: dict, bucket) -> None:
    """Fold the application's pending consolidation into this tick's plan, or record why not (module doc).

    ``decisions``: this tick's (unsaved) decision rows; ``plan``/``before``: operator -> deployment, extended in
    place; ``bucket``: the AM's token bucket after arbitration."""
    pending = (
        Consolidation.objects.select_for_update()
        .select_related("region")
        .filter(application=app, status=Consolidation.Status.PENDING)
        .order_by("region_id", "-slot")
    )
    latest: dict[int, Consolidation] = {}
    for row in pending:
        latest.setdefault(row.region_id, row)
    by_name = {d.operator.name: d for d in decisions}
    batched = bool(plan)
    for row in latest.values():
        ops = sorted({m["operator"] for m in row.moves})
        info: dict[str, Any] = {
            "slot": row.slot,
            "region": row.region.name,
            "frees": row.frees,
            "moves": row.moves,
        }
        if app.dry_run:
            why = "not applied: dry run (the engine is not reconfigured)"
        elif [o for o in ops if o not in by_name]:
            why = (
                f"not applied: operator(s) {', '.join(o for o in ops if o not in by_name)} no longer managed"
            )
        elif [o for o in ops if o in plan]:
            why = f"deferred: {', '.join(o for o in ops if o in plan)} changes its replicas this period"
        elif batched:
            why = ""
            how = f"in the batched reconfiguration of slot {tick.slot} (no extra token)"
        elif bucket.can_spend(1.0):
            bucket.spend(1.0)
            why = ""
            how = f"in its own reconfiguration at slot {tick.slot} (one token)"
        else:
            why = f"denied: reconfiguration budget exhausted ({bucket.tokens:.2f} tokens < 1)"
        if why:
            row.outcome = f"slot {tick.slot}: {why}"
            row.save(update_fields=["outcome", "updated_at"])
            for d in (by_name[o] for o in ops if o in by_name):
                d.proposal = {**d.proposal, "consolidation": {**info, "status": "denied", "reason": why}}
                d.reason = f"{d.reason}; consolidation {why}"
            continue
        moved = ", ".join(f"{m['operator']} {m['from']} -> {m['to']}" for m in row.moves)
        summary = (
            f"consolidation {how}: moves {moved} in region {row.region.name}, emptying node(s) "
            f"{', '.join(row.frees)} (IM: {row.reason})"
        )
        for op in ops:
            d = by_name[op]
            plan[op] = dict(d.deployment)
            before[op] = dict(d.deployment)
            d.outcome, d.applied, d.finished_at = Decision.Outcome.APPLYING, None, None
            d.proposal = {**d.proposal, "consolidation": {**info, "status": "applying", "reason": summary}}
            d.reason = f"{d.reason}; {summary}"
        row.status, row.tick, row.outcome = Consolidation.Status.APPLYING, tick, summary
        row.save(update_fields=["status", "tick", "outcome", "updated_at"])


def finish(app: Application, tick: Tick, ok: bool, error: str = "") -> None:
    """The engine applied (``ok``) or did not apply the tick's plan: update the ledger and the proposals."""
    rows = Consolidation.objects.select_for_update().select_related("region__catalog")
    for row in rows.filter(tick=tick, status=Consolidation.Status.APPLYING):
        if ok:
            done, skipped = placement.apply_moves(row.region, app.pk, row.moves, cores_of(row.region))
            row.status = Consolidation.Status.APPLIED
            row.outcome += f"; applied: {done} move(s)" + (
                f", skipped: {'; '.join(skipped)}" if skipped else ""
            )
        else:
            row.status = Consolidation.Status.FAILED
            row.outcome += f"; not applied: {error}"
        row.save(update_fields=["status", "outcome", "updated_at"])
