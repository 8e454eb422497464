"""Nodes of each region and where replicas run on them: the state the IM, RMs and the AM share.

A node of type ``t`` hosts ``t.cores`` replicas (one per core). Acquired nodes become usable after the
provisioning delay; only idle nodes (no replica) can be released.

The placement rule of issue 4: a scale-out that finds no free slot on an active node of its region does not
fail, it *waits* (:class:`Placement`) until the RM/IM provisions a node; waiting requests are the unsatisfied
requests ``M_r`` of the RM cost (paper 004 eq. 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from policies.operator_model import NodeType
from policies.rm.base import RegionState


@dataclass
class Node:
    """One node: ``type_index`` into its region's catalog, ``slots`` replicas it can host, ``ready_at`` the
    first period it can host replicas, ``replicas`` the operator names placed on it (one entry per replica)."""

    node_id: int
    type_index: int
    slots: int
    ready_at: int
    replicas: list[str] = field(default_factory=list)

    @property
    def free(self) -> int:
        return self.slots - len(self.replicas)

    @property
    def is_idle(self) -> bool:
        return not self.replicas


class RegionPool:
    """The nodes of one region (``catalog``: its node types; ``max_nodes``: K_max,r, active plus pending)."""

    def __init__(self, name: str, catalog: tuple[NodeType, ...], max_nodes: int = 50) -> None:
        if not catalog:
            raise ValueError(f"catalog: region {name!r} has no node type")
        if max_nodes < 0:
            raise ValueError(f"max_nodes: must be >= 0, got {max_nodes}")
        self.name = name
        self.catalog = tuple(catalog)
        self.max_nodes = max_nodes
        self.nodes: dict[int, Node] = {}
        self._next_id = 0

    # ---- nodes -------------------------------------------------------------------------------------------
    def acquire(self, type_index: int, now: int, delay: int = 1) -> Node:
        if len(self.nodes) >= self.max_nodes:
            raise ValueError(
                f"region {self.name!r}: already {len(self.nodes)} nodes (max_nodes={self.max_nodes})"
            )
        t = self.catalog[type_index]
        node = Node(self._next_id, type_index, max(t.cores, 1), now + delay)
        self.nodes[node.node_id] = node
        self._next_id += 1
        return node

    def release(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if not node.is_idle:
            raise ValueError(f"region {self.name!r}: node {node_id} hosts {node.replicas}, cannot release it")
        del self.nodes[node_id]

    def release_idle(self, type_index: int, n: int, now: int) -> int:
        """Release up to ``n`` idle active nodes of a type; returns how many were released."""
        ids = [
            x.node_id
            for x in self.nodes.values()
            if x.type_index == type_index and x.is_idle and x.ready_at <= now
        ]
        for node_id in ids[:n]:
            self.release(node_id)
        return min(n, len(ids))

    def active(self, now: int) -> list[Node]:
        return [x for x in self.nodes.values() if x.ready_at <= now]

    def counts(self, now: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(active, pending, idle) node counts per catalog type."""
        n = len(self.catalog)
        active, pending, idle = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        for x in self.nodes.values():
            if x.ready_at <= now:
                active[x.type_index] += 1
                idle[x.type_index] += x.is_idle
            else:
                pending[x.type_index] += 1
        return active, pending, idle

    # ---- replicas ----------------------------------------------------------------------------------------
    def place(self, operator: str, now: int) -> int | None:
        """Put one replica on the active node with the fewest free slots that still has one (best fit, which
        keeps idle nodes idle); returns the node id, or None when every active node is full."""
        best: Node | None = None
        for x in self.nodes.values():
            if x.ready_at <= now and x.free > 0 and (best is None or x.free < best.free):
                best = x
        if best is None:
            return None
        best.replicas.append(operator)
        return best.node_id

    def remove(self, operator: str, rng: np.random.Generator) -> int:
        """Remove one randomly chosen replica of ``operator`` (paper 004 Sec. 7); returns its node id."""
        hosts = [x for x in self.nodes.values() for r in x.replicas if r == operator]
        if not hosts:
            raise ValueError(f"region {self.name!r}: operator {operator!r} has no replica to remove")
        node = hosts[int(rng.integers(len(hosts)))]
        node.replicas.remove(operator)
        return node.node_id

    def replicas_of(self, operator: str) -> int:
        return sum(r == operator for x in self.nodes.values() for r in x.replicas)

    def used_slots(self) -> int:
        return sum(len(x.replicas) for x in self.nodes.values())

    def region_state(
        self, now: int, utilisation: float, unsatisfied: int = 0, waiting_slots: int = 0
    ) -> RegionState:
        active, pending, idle = self.counts(now)
        total = sum(x.slots for x in self.nodes.values() if x.ready_at <= now)
        return RegionState(
            self.name,
            active,
            pending,
            idle,
            self.used_slots(),
            total,
            utilisation,
            unsatisfied,
            waiting_slots,
        )

    # ---- consolidation -----------------------------------------------------------------------------------
    def consolidation_moves(self, now: int) -> list[tuple[str, int, int]]:
        """Moves ``(operator, from node, to node)`` that empty partly used nodes into other partly used nodes of
        the same type (an operator's replicas per node type do not change: only placement does), so that the
        emptied nodes can be released. Only complete evacuations are proposed."""
        free = {x.node_id: x.free for x in self.active(now) if x.replicas and x.free > 0}
        used = {x.node_id: len(self.nodes[x.node_id].replicas) for x in self.active(now) if x.node_id in free}
        moves: list[tuple[str, int, int]] = []
        emptied: set[int] = set()
        for donor in sorted(free, key=lambda i: (used[i], i)):
            if donor in emptied:
                continue
            kind = self.nodes[donor].type_index
            receivers = [
                i
                for i in free
                if i != donor and i not in emptied and free[i] > 0 and self.nodes[i].type_index == kind
            ]
            receivers.sort(key=lambda i: (free[i], i))
            if sum(free[i] for i in receivers) < used[donor]:
                continue
            plan = []
            for op in list(self.nodes[donor].replicas):
                to = receivers[0]
                plan.append((op, donor, to))
                free[to] -= 1
                used[to] += 1
                if free[to] == 0:
                    receivers.pop(0)
            emptied.add(donor)
            free.pop(donor)
            moves.extend(plan)
        return moves

    def apply_move(self, operator: str, src: int, dst: int) -> None:
        s, d = self.nodes[src], self.nodes[dst]
        if d.free <= 0:
            raise ValueError(f"region {self.name!r}: node {dst} has no free slot")
        s.replicas.remove(operator)
        d.replicas.append(operator)


@dataclass
class WaitingRequest:
    """A scale-out of ``operator`` in ``region`` that found no free slot, waiting since period ``since``."""

    operator: str
    region: str
    since: int


class Placement:
    """Places replicas on the regions' nodes and keeps the scale-outs that must wait for a node."""

    def __init__(self, pools: dict[str, RegionPool]) -> None:
        self.pools = pools
        self.waiting: list[WaitingRequest] = []

    def scale_out(self, operator: str, region: str, now: int) -> int | None:
        """Place one replica now, or queue the request (returns None) when the region has no free slot."""
        node = self.pools[region].place(operator, now)
        if node is None:
            self.waiting.append(WaitingRequest(operator, region, now))
        return node

    def retry_waiting(self, now: int) -> list[WaitingRequest]:
        """Place the waiting requests that now fit, oldest first; returns those placed."""
        placed, still = [], []
        for req in self.waiting:
            if self.pools[req.region].place(req.operator, now) is not None:
                placed.append(req)
            else:
                still.append(req)
        self.waiting = still
        return placed

    def cancel(self, operator: str) -> int:
        """Drop the waiting requests of ``operator`` (e.g. it now asks to scale in); returns how many."""
        before = len(self.waiting)
        self.waiting = [r for r in self.waiting if r.operator != operator]
        return before - len(self.waiting)

    def waiting_for(self, operator: str) -> int:
        return sum(r.operator == operator for r in self.waiting)

    def unsatisfied(self, region: str) -> int:
        return sum(r.region == region for r in self.waiting)
