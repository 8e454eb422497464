"""Node-type swaps staged under a region's node limit.

A proposal that replaces replicas of one node type by replicas of another is applied make-before-break: the new
replicas start before the old ones stop, so for one reconfiguration the region holds both. When the region cannot
hold them within its node limit (``Region.maxNodes``; :func:`autoscaler.control.capacity.nodes_needed`) while the
deployment the swap ends in would fit, the request can never be served as one step: the old replicas keep their
nodes busy, so the RM can neither release them nor acquire the nodes of the awaited type, and the request waits
forever (seen on an operator on 2 x A2 asking for 2 x A3 in a region of 2 or 3 nodes, and in bench_loop's shortage
after a different warm-up).

Such a swap is staged instead: this period's step adds the replicas of the awaited types that free slots hold now
and removes replicas of the types the swap drops, the slowest first, as many as keep the operator's capacity (its
planning model's, else the sum of the speedups; tuples/s or speedup units) at least where it is. When nothing can
be added and no replica can go without losing capacity, the step removes one replica of a dropped type
(break-before-make: the one reduction that lets the region acquire a node of the awaited type). The step goes to
the AM like any proposal (budget, node capacity); the OM plans the rest from the deployment it leads to, one
period later, and the region acquires the awaited nodes in the room the removed replicas leave. The staged step is
said in the proposal's explanation (``staged_swap``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autoscaler.control import capacity as region_capacity
from autoscaler.control.topology import Topology
from policies.base import JUMP, Observation, Policy, Proposal, describe_change

#: capacities closer than this (relative) count as equal when removing replicas "without losing capacity"
CAPACITY_TOLERANCE = 1e-9


def stage_step(
    k: np.ndarray,
    target: np.ndarray,
    free_slots: np.ndarray,
    coming_slots: np.ndarray,
    capacity_of: Callable[[np.ndarray], float],
    speed_order: Sequence[int],
    k_min: int,
    k_max: int,
) -> np.ndarray | None:
    """The first step of the swap ``k -> target`` (replicas per node type), or None while the swap need not be
    staged or should wait. ``free_slots``: replica slots per type free now; ``coming_slots``: slots per type the
    region can still bring (booting nodes and nodes it may acquire within its limit).

    None when the change is not a swap (it only adds or only removes), when the region can supply every added
    replica (free + coming: the request waits as usual), and while nothing is free but something is coming (the
    step waits for it). Otherwise: the added replicas that fit now, then removals of the types ``target`` drops in
    ``speed_order`` (slowest type first) while ``capacity_of`` stays at least ``capacity_of(k)`` and the total
    at least ``k_min``, at most ``k_max`` replicas in all; when nothing else moves, one removal
    (break-before-make)."""
    k = np.asarray(k, dtype=np.int64)
    target = np.asarray(target, dtype=np.int64)
    if not _is_swap(target - k):
        return None
    add = np.maximum(target - k, 0)
    drop = np.maximum(k - target, 0)
    free = np.maximum(np.asarray(free_slots, dtype=np.int64), 0)
    coming = np.maximum(np.asarray(coming_slots, dtype=np.int64), 0)
    if (add <= free + coming).all():
        return None
    now = np.minimum(add, free)
    if not now.any() and np.minimum(add, coming).any():
        return None
    step = k + now
    floor = capacity_of(k) * (1.0 - CAPACITY_TOLERANCE)
    lowest = max(int(k_min), 1)
    for t in speed_order:
        while drop[t] > 0 and int(step.sum()) - 1 >= lowest:
            trial = step.copy()
            trial[t] -= 1
            if int(step.sum()) <= k_max and capacity_of(trial) < floor:
                break
            step, drop[t] = trial, drop[t] - 1
    if int(step.sum()) > k_max:
        return None
    if np.array_equal(step, k):
        dropped = [t for t in speed_order if k[t] > target[t]]
        if not dropped or int(k.sum()) - 1 < lowest:
            return None
        step = k.copy()
        step[dropped[0]] -= 1  # break-before-make: free one node for the awaited type
    return step


def stage_swaps(
    topo: Topology,
    policies: list[Policy],
    proposals: list[Proposal],
    observations: list[Observation],
    snapshots: dict[int, dict[str, Any]],
    bounds: list[tuple[int, int]],
) -> dict[str, dict[str, Any]]:
    """Replace, in place, each proposal that swaps node types in a region that cannot hold the swap within its
    node limit (while it can hold the deployment the swap ends in) by the swap's first step (:func:`stage_step`;
    ``snapshots``: region id -> its capacity document; ``bounds``: per operator (min, max) replicas). Returns the
    operators staged: name -> the note written into the proposal's explanation."""
    swaps = [
        i
        for i, (proposal, obs) in enumerate(zip(proposals, observations, strict=True))
        if _is_swap(
            np.asarray(proposal.deployment, dtype=np.int64) - np.asarray(obs.deployment, dtype=np.int64)
        )
    ]
    if not swaps:  # the common case: nothing below is computed
        return {}
    names = topo.type_names
    speedups = np.asarray(topo.speedups, dtype=float)
    order = [int(t) for t in np.argsort(speedups, kind="stable")]
    regions = {op.deployment.region_id: op.deployment.region for op in topo.operators}
    # slots this period's proposals add per region: a stage uses only what none of them takes
    adding: dict[int, np.ndarray] = {}
    for op, proposal, obs in zip(topo.operators, proposals, observations, strict=True):
        rise = np.maximum(np.asarray(proposal.deployment) - np.asarray(obs.deployment), 0)
        rid = op.deployment.region_id
        adding[rid] = adding.get(rid, np.zeros(len(names), dtype=np.int64)) + rise
    staged: dict[str, dict[str, Any]] = {}
    for i in swaps:
        op, policy, proposal = topo.operators[i], policies[i], proposals[i]
        rid = op.deployment.region_id
        doc = snapshots.get(rid)
        k = np.asarray(observations[i].deployment, dtype=np.int64)
        change = np.asarray(proposal.deployment, dtype=np.int64) - k
        if doc is None:
            continue
        limit = int(regions[rid].max_nodes)
        adds = {names[t]: int(change[t]) for t in np.flatnonzero(change > 0)}
        final = {names[t]: int(change[t]) for t in np.flatnonzero(change)}
        if (
            region_capacity.nodes_needed(doc, adds) <= limit
            or region_capacity.nodes_needed(doc, final) > limit
        ):
            continue
        free = region_capacity.free_slots(doc, names) - (adding[rid] - np.maximum(change, 0))
        coming = region_capacity.coming_slots(doc, names, limit)
        model = policy.planning_model()

        def capacity_of(dep: np.ndarray, model=model) -> float:
            if model is not None:
                return float(model.capacity(dep, speedups))
            return float(np.asarray(dep, dtype=float) @ speedups)

        lo, hi = bounds[i]
        step = stage_step(k, proposal.deployment, free, coming, capacity_of, order, lo, hi)
        if step is None:
            continue
        note = {
            "reason": (
                f"region {regions[rid].name} cannot hold both the old and the new replicas within its node limit "
                f"({limit} nodes): the swap is staged"
            ),
            "swap": describe_change(change, names),
            "this_step": describe_change(step - k, names),
            "target": topo.as_dict(proposal.deployment),
        }
        explanation = {**proposal.explanation, "staged_swap": note}
        proposals[i] = Proposal(JUMP, step, explanation)
        adding[rid] = adding[rid] - np.maximum(change, 0) + np.maximum(step - k, 0)
        staged[op.name] = note
    return staged


def _is_swap(change: np.ndarray) -> bool:
    """Whether a per-type change adds replicas of some node type and removes replicas of another."""
    return bool((change > 0).any() and (change < 0).any())
