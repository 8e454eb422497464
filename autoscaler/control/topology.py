"""What the control loop needs to know about a stored Application: its managed operators (those with a
Deployment) in position order, their node types, the streams and source-to-sink paths."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from django.core.exceptions import ObjectDoesNotExist

from autoscaler.models import Application, Deployment, NodeType, Operator
from policies.graph import source_to_sink_paths
from policies.operator_model import NodeType as PolicyNodeType


@dataclass
class Topology:
    """The managed operators (those with a Deployment) of an application, in position order, and its node types."""

    application: Application
    operators: list[Operator]
    node_types: tuple[PolicyNodeType, ...]
    all_operators: list[Operator]
    streams: list[tuple[str, str]]

    @property
    def type_names(self) -> list[str]:
        return [t.name for t in self.node_types]

    @property
    def prices_per_hour(self) -> np.ndarray:
        return np.array([t.price for t in self.node_types], dtype=float)

    @property
    def speedups(self) -> np.ndarray:
        """Relative speed of each node type (the reference node = 1)."""
        return np.array([t.speedup for t in self.node_types], dtype=float)

    def vector(self, deployment: dict[str, int]) -> np.ndarray:
        """A deployment dict as the replica vector over ``node_types`` (unknown types raise ValueError)."""
        k = np.zeros(len(self.node_types), dtype=np.int64)
        index = {n: i for i, n in enumerate(self.type_names)}
        for name, n in (deployment or {}).items():
            if name not in index:
                raise ValueError(f"deployment: node type {name!r} is not in the application's catalog")
            k[index[name]] = int(n)
        return k

    def as_dict(self, k: np.ndarray) -> dict[str, int]:
        return {name: int(n) for name, n in zip(self.type_names, k, strict=True) if n > 0}

    def paths(self) -> list[list[str]]:
        """Every source-to-sink path of the whole graph (operator names)."""
        return source_to_sink_paths([op.name for op in self.all_operators], self.streams)

    @cached_property
    def longest_controlled_path(self) -> int:
        """The most managed operators on one source-to-sink path (0 without a path); computed once per topology,
        which the tick caches per process (``tick.definitions``)."""
        managed = {op.name for op in self.operators}
        return max((sum(name in managed for name in path) for path in self.paths()), default=0)


def deployment_of(op: Operator) -> Deployment | None:
    """The operator's stored Deployment, or None when the control plane does not scale it."""
    try:
        return op.deployment
    except ObjectDoesNotExist:
        return None


def topology(application: Application) -> Topology:
    all_ops = list(application.operators.all().select_related("deployment__region"))
    managed = []
    region_ids = set()
    for op in all_ops:
        try:
            dep = op.deployment
        except ObjectDoesNotExist:
            continue
        managed.append(op)
        region_ids.add(dep.region.catalog_id)
    if region_ids:
        rows = NodeType.objects.filter(catalog_id__in=region_ids).order_by("catalog_id", "position")
    else:
        rows = NodeType.objects.filter(catalog__regions__applications=application).order_by("position")
    seen: dict[str, PolicyNodeType] = {}
    for t in rows:
        seen.setdefault(
            t.name, PolicyNodeType(t.name, float(t.speedup), float(t.price_per_hour), t.cores, t.memory_mib)
        )
    streams = [(s.source.name, s.target.name) for s in application.streams.select_related("source", "target")]
    return Topology(application, managed, tuple(seen.values()), all_ops, streams)
