"""Node providers: who starts and stops the nodes of a region (the RM/IM's "acquire" and "release").

A Region declares ``provider: {kind, settings}`` (``autoscaler.schemas.region.PROVIDER_KINDS``). The region step
of the control plane asks the region's provider to realise what the IM granted:

- ``bookkeeping``: nodes are only counted (the simulated engine, or a pool someone else manages);
- ``spark-standalone``: a node is a Spark standalone Worker process of the node type's cores and memory;
- ``flink-taskmanagers``: a node is a Flink TaskManager process with the node type's slots, memory and CPU.

A node is released only when nothing runs on it (``Node.busy``); providers report that, the caller decides.
"""

from __future__ import annotations

import itertools
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def state_root() -> Path:
    """Where providers keep their state by default: ``AUTOSCALER_VAR_DIR``, else the project's ``var/`` (the
    control plane's own default; providers read no Django settings)."""
    return Path(os.environ.get("AUTOSCALER_VAR_DIR") or Path(__file__).resolve().parents[1] / "var")


@dataclass
class NodeSpec:
    """What a node of one type offers: cores, memory (MiB), relative speed, price ($/h)."""

    node_type: str
    cores: int
    memory_mb: int
    speedup: float = 1.0
    price_per_hour: float = 0.0


@dataclass
class Node:
    """One node of a region: its provider-side id, type, and whether something still runs on it."""

    node_id: str
    node_type: str
    busy: bool = False
    details: dict[str, Any] = field(default_factory=dict)


class ProviderError(RuntimeError):
    """The provider could not start or stop a node; nothing was changed for the failed node."""


class NodeProvider(ABC):
    """Starts and stops the nodes of one region."""

    kind: str = ""

    @abstractmethod
    def nodes(self) -> list[Node]:
        """Every node of the region as the provider sees it now."""

    @abstractmethod
    def acquire(self, spec: NodeSpec, count: int) -> list[Node]:
        """Start ``count`` nodes of ``spec``; returns the nodes started (raises ``ProviderError`` on failure)."""

    @abstractmethod
    def release(self, node_ids: list[str]) -> list[str]:
        """Stop the given idle nodes; returns the ids stopped. Busy nodes are refused (not stopped)."""

    def close(self) -> None:
        """Release clients; the default has nothing to release."""


class BookkeepingProvider(NodeProvider):
    """Counts nodes in memory (the simulated engine's pool, or nodes managed elsewhere)."""

    kind = "bookkeeping"

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._ids = itertools.count(1)

    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def new_node_id(self, spec: NodeSpec) -> str:
        """Id of the next node of ``spec``'s type: ``<type>-<n>``."""
        return f"{spec.node_type}-{next(self._ids)}"

    def acquire(self, spec: NodeSpec, count: int) -> list[Node]:
        started = [Node(self.new_node_id(spec), spec.node_type) for _ in range(count)]
        self._nodes.update({n.node_id: n for n in started})
        return started

    def release(self, node_ids: list[str]) -> list[str]:
        stopped = [i for i in node_ids if i in self._nodes and not self._nodes[i].busy]
        for i in stopped:
            del self._nodes[i]
        return stopped
