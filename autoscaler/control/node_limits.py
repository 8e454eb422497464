"""A region's node limit as the tick sees it: proposals that add replicas in a region that cannot hold them are
decided again under the limit before the AM arbitrates (:func:`revise`); scale-outs that wait for nodes become the
RMs' waiting requests (:func:`record_waiting`), and an operator waiting in a region that cannot hold what it waits
for plans under the limit from the next period on (:func:`limited`). The node counts come from the region's
capacity document (:func:`autoscaler.control.capacity.over_node_limit`)."""

from __future__ import annotations

import numpy as np

from autoscaler.control import capacity as region_capacity
from autoscaler.control.models import WaitingRequest
from autoscaler.control.topology import Topology
from autoscaler.models import Application
from policies.base import Observation, Policy, Proposal


def revise(
    topo: Topology, policies: list[Policy], proposals: list[Proposal], observations: list[Observation]
) -> tuple[set[str], region_capacity.Capacity | None]:
    """Before the AM arbitrates: in each region that cannot hold, within its node limit, what runs or is granted
    there plus the replicas this period's proposals add (:func:`autoscaler.control.capacity.over_node_limit`),
    the operators whose proposals add replicas decide again under the node limit
    (:meth:`policies.base.Policy.revise_for_node_limit`; ``proposals`` updated in place). Without this an
    operator learned of the limit only from the denial of the request that did not fit, a period later, and the
    region spent that period provisioning for it (bench_loop's shortage). Returns the names revised and the
    capacity read for the check (None when no proposal adds replicas: nothing was read)."""
    adds: dict[int, dict[str, int]] = {}
    names = topo.type_names
    for op, proposal, obs in zip(topo.operators, proposals, observations, strict=True):
        rise = np.maximum(np.asarray(proposal.deployment) - np.asarray(obs.deployment), 0)
        for t in np.flatnonzero(rise).tolist():
            per_type = adds.setdefault(op.deployment.region_id, {})
            per_type[names[t]] = per_type.get(names[t], 0) + int(rise[t])
    if not adds:
        return set(), None
    capacity = region_capacity.read(topo, [o.deployment for o in observations])
    full = over_node_limit(topo, adds, capacity.snapshots)
    revised: set[str] = set()
    for i, (op, policy, obs) in enumerate(zip(topo.operators, policies, observations, strict=True)):
        if op.deployment.region_id not in full or not (proposals[i].deployment > obs.deployment).any():
            continue
        revision = policy.revise_for_node_limit(obs)
        if revision is not None:
            proposals[i] = revision
            revised.add(op.name)
    return revised, capacity


def limited(topo: Topology, waiting: dict, snapshots: dict[int, dict]) -> set[str]:
    """Names of the operators waiting for nodes in a region that cannot hold what runs there plus what this
    application's operators wait for (:func:`autoscaler.control.capacity.over_node_limit`)."""
    per_region: dict[int, dict[str, int]] = {}
    for region_id, node_type, slots, _ in waiting.values():
        per_type = per_region.setdefault(region_id, {})
        per_type[node_type] = per_type.get(node_type, 0) + int(slots)
    full = over_node_limit(topo, per_region, snapshots)
    return {op.name for op in topo.operators if op.pk in waiting and waiting[op.pk][0] in full}


def over_node_limit(
    topo: Topology, per_region: dict[int, dict[str, int]], snapshots: dict[int, dict]
) -> set[int]:
    """Ids of the application's regions that cannot hold, within their node limit, what runs or is granted there
    plus ``per_region`` (region id -> node type -> replicas more; :func:`autoscaler.control.capacity.over_node_limit`)."""
    regions = {op.deployment.region_id: op.deployment.region for op in topo.operators}
    return {
        rid
        for rid, per_type in per_region.items()
        if region_capacity.over_node_limit(snapshots.get(rid), regions[rid].max_nodes, per_type)
    }


def still_awaits(change: np.ndarray, names: list[str], node_type: str | None) -> bool:
    """Whether a proposal's per-type ``change`` still adds replicas of the ``node_type`` it waited for."""
    return node_type is not None and node_type in names and int(change[names.index(node_type)]) > 0


def awaited(app: Application) -> dict[int, str]:
    """The node type each of the application's operators waited for until this period (operator id -> type)."""
    return dict(WaitingRequest.objects.filter(application=app).values_list("operator_id", "node_type"))


def record_waiting(app: Application, waiting: dict[int, tuple[int, str, int, str]], slot: int) -> None:
    """Scale-outs waiting for capacity become ``WaitingRequest`` rows (the RM's unsatisfied requests; ``slots``:
    the replicas of the awaited type the step adds, several for a multi-replica step); the application's other
    operators stop waiting."""
    WaitingRequest.objects.filter(application=app).exclude(operator_id__in=list(waiting)).delete()
    for op_id, (region_id, node_type, slots, reason) in waiting.items():
        row, created = WaitingRequest.objects.get_or_create(
            operator_id=op_id,
            defaults={
                "region_id": region_id,
                "application": app,
                "node_type": node_type,
                "slots": slots,
                "since_slot": slot,
                "last_slot": slot,
                "reason": reason,
            },
        )
        if not created:
            row.region_id, row.node_type, row.last_slot, row.reason = region_id, node_type, slot, reason
            row.slots = slots
            row.save(update_fields=["region", "node_type", "slots", "last_slot", "reason"])
