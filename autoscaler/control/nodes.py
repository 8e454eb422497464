"""The durable record of a region's nodes (``RegionNode``) and the node provider that realises the IM's grants.

``region_provider(region, rows)`` builds the Region's declared provider (``connectors.providers.build_provider``).
For ``bookkeeping`` regions the provider's own memory does not survive a worker restart, so the control plane
uses :class:`LedgerProvider` instead: the same semantics (nodes are only counted, busy nodes are never released)
over the durable ``RegionNode`` rows.
"""

from __future__ import annotations

import itertools

from autoscaler.control.models import RegionNode
from autoscaler.models import Region
from connectors.infrastructure import Node, NodeProvider, NodeSpec
from connectors.providers import build_provider

ACTIVE_STATES = (RegionNode.State.BOOTING, RegionNode.State.READY)


class LedgerProvider(NodeProvider):
    """Bookkeeping over the durable node rows: ``acquire`` mints ids ``<type>-s<slot>-<n>`` (unique in the region:
    one step per (region, slot)), ``release`` stops the idle nodes it is given (``busy`` ids are refused)."""

    kind = "bookkeeping"

    def __init__(self, region: Region, rows: list[RegionNode], slot: int, busy: set[str] | None = None) -> None:
        self.region = region
        self.slot = slot
        self._nodes = {r.node_id: Node(r.node_id, r.node_type, r.node_id in (busy or set())) for r in rows}
        self._ids = itertools.count(1)

    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def acquire(self, spec: NodeSpec, count: int) -> list[Node]:
        started = [Node(f"{spec.node_type}-s{self.slot}-{next(self._ids)}", spec.node_type) for _ in range(count)]
        self._nodes.update({n.node_id: n for n in started})
        return started

    def release(self, node_ids: list[str]) -> list[str]:
        stopped = [i for i in node_ids if i in self._nodes and not self._nodes[i].busy]
        for i in stopped:
            del self._nodes[i]
        return stopped

    def mark_busy(self, node_ids: set[str]) -> None:
        for i, node in self._nodes.items():
            node.busy = i in node_ids


def region_provider(region: Region, rows: list[RegionNode], slot: int) -> NodeProvider:
    """The NodeProvider of ``region`` (ProviderUnavailable when its declared kind is not built in)."""
    kind = (region.provider or {}).get("kind", "bookkeeping")
    if kind == "bookkeeping":
        return LedgerProvider(region, rows, slot)
    return build_provider(region.name, region.provider)


def active_nodes(region: Region) -> list[RegionNode]:
    """Booting and ready nodes of the region, oldest first."""
    return list(RegionNode.objects.filter(region=region, state__in=ACTIVE_STATES).order_by("acquired_at_s", "id"))
