"""Region manifests: a pool of nodes of one catalog with its quotas and provisioning delay."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from connectors.endpoints import EndpointError, parse_endpoint

from .common import DB_INT_MAX, Name, SpecModel

#: how a region's nodes come into being: ``bookkeeping`` (counted only: simulated engine, or nodes someone else
#: manages), ``spark-standalone`` (Spark standalone Worker processes), ``flink-taskmanagers`` (Flink TaskManager
#: processes).
PROVIDER_KINDS = ("bookkeeping", "spark-standalone", "flink-taskmanagers")


class ProviderSpec(SpecModel):
    """``spec.provider`` of a Region: the kind of node provider and its settings (free-form per kind)."""

    kind: Literal["bookkeeping", "spark-standalone", "flink-taskmanagers"] = "bookkeeping"
    settings: dict[str, Any] = Field(default_factory=dict)


def _endpoint(text: str) -> str:
    """A well-formed endpoint declaration (``connectors.endpoints``), kept as written."""
    try:
        parse_endpoint(text)
    except EndpointError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    return text


#: one engine address staff declare: ``scheme://host[:port or LOW-HIGH][/path]``, scheme http, https or spark
EndpointText = Annotated[str, Field(max_length=2048), AfterValidator(_endpoint)]


class RegionSpec(SpecModel):
    """``spec`` of a Region.

    ``maxNodes``: nodes the region can hold in total; ``maxNewNodesPerPeriod``: nodes that may be started per
    control period (cloud quota); ``provisioningDelayS``: seconds from request until a new node is usable;
    ``provider``: who starts and stops the nodes (see ``PROVIDER_KINDS``; default ``bookkeeping``);
    ``endpoints``: the engine addresses (Flink REST URLs, Spark master URLs ``spark://host:port``, Spark driver
    UIs, e.g. ``http://127.0.0.1:4040-4099``) that applications in this region may reference and the control
    plane may contact (see ``connectors.endpoints``; only staff write regions).
    """

    catalog: Name
    max_nodes: int = Field(ge=1, le=DB_INT_MAX)
    max_new_nodes_per_period: int = Field(ge=1, le=DB_INT_MAX)
    provisioning_delay_s: float = Field(default=0.0, ge=0)
    provider: ProviderSpec = Field(default_factory=ProviderSpec)
    endpoints: list[EndpointText] = Field(default_factory=list, max_length=256)

    def to_manifest_dict(self) -> dict:
        """The canonical manifest form; ``endpoints`` left out when there is none (as regions were before)."""
        out = super().to_manifest_dict()
        if not out.get("endpoints"):
            out.pop("endpoints", None)
        return out
