"""Region manifests: a pool of nodes of one catalog with its quotas and provisioning delay."""

from __future__ import annotations

from pydantic import Field

from .common import Name, SpecModel


class RegionSpec(SpecModel):
    """``spec`` of a Region.

    ``maxNodes``: nodes the region can hold in total; ``maxNewNodesPerPeriod``: nodes that may be started per
    control period (cloud quota); ``provisioningDelayS``: seconds from request until a new node is usable.
    """

    catalog: Name
    max_nodes: int = Field(ge=1)
    max_new_nodes_per_period: int = Field(ge=1)
    provisioning_delay_s: float = Field(default=0.0, ge=0)
