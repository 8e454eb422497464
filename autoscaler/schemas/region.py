"""Region manifests: a pool of nodes of one catalog with its quotas and provisioning delay."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .common import DB_INT_MAX, Name, SpecModel

#: how a region's nodes come into being: ``bookkeeping`` (counted only: simulated engine, or nodes someone else
#: manages), ``spark-standalone`` (Spark standalone Worker processes), ``flink-taskmanagers`` (Flink TaskManager
#: processes).
PROVIDER_KINDS = ("bookkeeping", "spark-standalone", "flink-taskmanagers")


class ProviderSpec(SpecModel):
    """``spec.provider`` of a Region: the kind of node provider and its settings (free-form per kind)."""

    kind: Literal["bookkeeping", "spark-standalone", "flink-taskmanagers"] = "bookkeeping"
    settings: dict[str, Any] = Field(default_factory=dict)


class RegionSpec(SpecModel):
    """``spec`` of a Region.

    ``maxNodes``: nodes the region can hold in total; ``maxNewNodesPerPeriod``: nodes that may be started per
    control period (cloud quota); ``provisioningDelayS``: seconds from request until a new node is usable;
    ``provider``: who starts and stops the nodes (see ``PROVIDER_KINDS``; default ``bookkeeping``).
    """

    catalog: Name
    max_nodes: int = Field(ge=1, le=DB_INT_MAX)
    max_new_nodes_per_period: int = Field(ge=1, le=DB_INT_MAX)
    provisioning_delay_s: float = Field(default=0.0, ge=0)
    provider: ProviderSpec = Field(default_factory=ProviderSpec)
