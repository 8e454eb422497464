"""``flink-taskmanagers`` node provider: a node is a TaskManager process of a node type's profile.

Region ``provider.settings`` (camelCase): ``clusterDir`` (the ``FlinkCluster`` root whose JobManager the
TaskManagers join; default ``<AUTOSCALER_VAR_DIR>/flink/<region>``), ``memoryScale`` (TaskManager process memory
= node type memory MiB x this factor, at least ``MIN_TM_MEMORY_MB``; < 1 for small local demos).

Profile of a node type: task slots = cores, CPU cores = cores, memory as above. A node is busy while any of its
slots is taken (``GET /taskmanagers``: ``freeSlots < slotsNumber``); busy nodes are never released.
"""

from __future__ import annotations

import re
from pathlib import Path

from connectors.flink.cluster import FlinkCluster, FlinkClusterError, TaskManagerProfile
from connectors.flink.rest import FlinkRestError
from connectors.infrastructure import Node, NodeProvider, NodeSpec, ProviderError, state_root


def default_cluster_dir(region_name: str) -> Path:
    return state_root() / "flink" / region_name


class FlinkTaskManagerProvider(NodeProvider):
    kind = "flink-taskmanagers"

    def __init__(self, region_name: str, settings: dict) -> None:
        unknown = set(settings) - {"clusterDir", "memoryScale"}
        if unknown:
            raise ValueError(f"region {region_name!r}: provider.settings: unknown keys {sorted(unknown)}")
        self.region = region_name
        self.memory_scale = float(settings.get("memoryScale", 1.0))
        if not self.memory_scale > 0:
            raise ValueError(f"region {region_name!r}: provider.settings.memoryScale must be > 0")
        self.cluster = FlinkCluster(settings.get("clusterDir") or default_cluster_dir(region_name))

    def profile(self, spec: NodeSpec) -> TaskManagerProfile:
        """The TaskManager profile of a node type."""
        return TaskManagerProfile(
            slots=max(int(spec.cores), 1),
            memory_mb=int(spec.memory_mb * self.memory_scale),
            cpu_cores=float(spec.cores),
            node_type=spec.node_type,
        )

    def _slots(self) -> dict[str, tuple[int, int]]:
        """TaskManager id -> (free slots, slots) as the JobManager reports them."""
        try:
            tms = self.cluster.rest(3.0).get("/taskmanagers").get("taskmanagers", [])
        except FlinkRestError as exc:
            raise ProviderError(f"region {self.region!r}: JobManager unreachable: {exc}") from exc
        return {tm["id"]: (int(tm["freeSlots"]), int(tm["slotsNumber"])) for tm in tms}

    def nodes(self) -> list[Node]:
        slots = self._slots()
        out = []
        for node_id, profile in self.cluster.local_taskmanagers().items():
            free, total = slots.get(node_id, (0, 0))
            registered = node_id in slots
            out.append(
                Node(
                    node_id,
                    profile.node_type,
                    busy=registered and free < total,
                    details={"slots": total, "freeSlots": free, "registered": registered},
                )
            )
        return out

    def acquire(self, spec: NodeSpec, count: int) -> list[Node]:
        profile = self.profile(spec)
        existing = set(self.cluster.local_taskmanagers())
        base = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{self.region}-{spec.node_type}")
        started: list[Node] = []
        n = 1
        for _ in range(count):
            while f"{base}-{n}" in existing:
                n += 1
            node_id = f"{base}-{n}"
            existing.add(node_id)
            try:
                self.cluster.start_taskmanager(node_id, profile)
            except (FlinkClusterError, FlinkRestError) as exc:
                self.cluster.stop_taskmanager(node_id)
                raise ProviderError(
                    f"region {self.region!r}: TaskManager {node_id} ({spec.node_type}) did not start: {exc}; "
                    f"started before the failure: {[s.node_id for s in started]}"
                ) from exc
            started.append(Node(node_id, spec.node_type, details={"slots": profile.slots}))
        return started

    def release(self, node_ids: list[str]) -> list[str]:
        busy = {n.node_id for n in self.nodes() if n.busy}
        local = set(self.cluster.local_taskmanagers())
        stopped = []
        for node_id in node_ids:
            if node_id in local and node_id not in busy:
                self.cluster.stop_taskmanager(node_id)
                stopped.append(node_id)
        return stopped
