"""``build_spark_connector(application)``: the Spark connector of a stored Application (``engine: spark``).

Controlled operators are those with a Deployment; each runs as its own Spark application (one streaming query)
whose job includes the agent (``connectors.spark.agent``) under the same application and operator names. The
node types of the deployment's region catalog are the executor profiles (cores, memoryMiB x
``executorMemoryScale``) and, when the region's workers are typed (``connectors.spark.placement``), the
custom resource the executors request so that they run only on workers of that node type. Operators without
a Deployment (sources, sinks inside a query) are not scaled. Settings: ``autoscaler.schemas.connectors.SparkSettings``.
"""

from __future__ import annotations

from connectors.base import Connector, Monitor, Realizer
from connectors.endpoints import AllowList
from connectors.spark.monitor import Binding, SparkMonitor
from connectors.spark.placement import resource_name, typed_workers
from connectors.spark.realizer import SparkRealizer


class SparkConnector(Connector):
    engine = "spark"

    def __init__(self, monitor: SparkMonitor, realizer: SparkRealizer) -> None:
        self._monitor = monitor
        self._realizer = realizer

    @property
    def monitor(self) -> Monitor:
        return self._monitor

    @property
    def realizer(self) -> Realizer:
        return self._realizer


def build_spark_connector(application, allowed: AllowList | None = None) -> SparkConnector:
    """The connector of ``application`` (an ``autoscaler.models.Application`` with ``engine == "spark"``);
    ``allowed``: the endpoints whose driver UIs the monitor may ask (none when left out)."""
    from autoscaler.schemas.connectors import SparkSettings
    from connectors.factory import deployment_of
    from policies.graph import source_to_sink_paths

    settings = SparkSettings.model_validate(application.connector or {})
    operators = list(application.operators.all().select_related("deployment__region__catalog"))
    names = [op.name for op in operators]
    streams = [(s.source.name, s.target.name) for s in application.streams.select_related("source", "target")]
    managed = {op.name: op for op in operators if deployment_of(op) is not None}
    upstream: dict[str, set[str]] = {n: set() for n in names}
    for _ in names:  # transitive closure over the DAG (small graphs)
        for a, b in streams:
            upstream[b] |= {a} | upstream[a]
    bindings: dict[str, Binding] = {}
    profiles: dict[str, dict[str, dict]] = {}
    for name, op in managed.items():
        bound = settings.operators.get(name)
        bindings[name] = Binding(
            operator=op,
            ui_url=(bound.ui_url if bound and bound.ui_url else None),
            upstream=sorted(u for u in upstream[name] if u in managed),
            fallback_ui_url=(settings.ui_url or "") if len(managed) == 1 else "",
            allowed=allowed if allowed is not None else AllowList([]),
        )
        region = op.deployment.region
        typed = typed_workers(region.provider)
        profiles[name] = {
            t.name: {
                "name": t.name,
                "cores": int(t.cores),
                "memoryMiB": max(int(t.memory_mib * settings.executor_memory_scale), 512),
                "speedup": float(t.speedup),
                **({"resource": resource_name(t.name)} if typed else {}),
            }
            for t in region.catalog.node_types.all()
        }
    paths = source_to_sink_paths(names, streams)
    monitor = SparkMonitor(bindings, paths, settings.batch_interval_s)
    realizer = SparkRealizer(bindings, profiles, settings.apply_timeout_s)
    return SparkConnector(monitor, realizer)
