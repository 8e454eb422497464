"""Build the ``NodeProvider`` of a stored Region from its declared ``provider: {kind, settings}``."""

from __future__ import annotations

import importlib

from connectors.infrastructure import BookkeepingProvider, NodeProvider

#: provider kind -> "module:Class" constructed as ``Class(region_name, settings)``
PROVIDERS = {
    "spark-standalone": "connectors.spark.provider:SparkWorkerProvider",
    "flink-taskmanagers": "connectors.flink.provider:FlinkTaskManagerProvider",
}


class ProviderUnavailable(ValueError):
    """The region's provider kind has no implementation in this build."""


def build_provider(region_name: str, provider: dict | None) -> NodeProvider:
    """The node provider declared for a region (``Region.provider``); empty or ``bookkeeping`` counts only."""
    provider = provider or {}
    kind = provider.get("kind", "bookkeeping")
    if kind == "bookkeeping":
        return BookkeepingProvider()
    if kind not in PROVIDERS:
        raise ProviderUnavailable(f"region {region_name!r}: unknown provider kind {kind!r}")
    module, cls = PROVIDERS[kind].split(":")
    try:
        factory = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise ProviderUnavailable(
            f"region {region_name!r}: provider {kind!r} is not available ({exc})"
        ) from exc
    return factory(region_name, dict(provider.get("settings") or {}))
