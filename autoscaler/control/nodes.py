"""The durable record of a region's nodes (``RegionNode``) and the node provider that realises the IM's grants.

``region_provider(region, rows)`` builds the Region's declared provider (``connectors.providers.build_provider``).
For ``bookkeeping`` regions the provider's own memory does not survive a worker restart, so the control plane
uses :class:`LedgerProvider` instead: the same semantics (nodes are only counted, busy nodes are never released)
over the durable ``RegionNode`` rows.
"""

from __future__ import annotations

from autoscaler.control.models import RegionNode
from autoscaler.models import Region
from connectors.infrastructure import BookkeepingProvider, Node, NodeProvider, NodeSpec
from connectors.providers import build_provider

ACTIVE_STATES = (RegionNode.State.BOOTING, RegionNode.State.READY)


class LedgerProvider(BookkeepingProvider):
    """Bookkeeping over the durable node rows: ``acquire`` mints ids ``<type>-s<slot>-<n>`` (unique in the region:
    one step per (region, slot)), ``release`` stops the idle nodes it is given (``busy`` ids are refused)."""

    def __init__(
        self, region: Region, rows: list[RegionNode], slot: int, busy: set[str] | None = None
    ) -> None:
        super().__init__()
        self.region = region
        self.slot = slot
        self._nodes = {r.node_id: Node(r.node_id, r.node_type, r.node_id in (busy or set())) for r in rows}

    def new_node_id(self, spec: NodeSpec) -> str:
        return f"{spec.node_type}-s{self.slot}-{next(self._ids)}"

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
    return list(
        RegionNode.objects.filter(region=region, state__in=ACTIVE_STATES).order_by("acquired_at_s", "id")
    )
