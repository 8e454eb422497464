"""The Spark connector (``engine: spark``) and ``build``: the connector of an application from plain values.

Controlled operators are those the control plane scales (with a declared deployment); each runs as its own
Spark application (one streaming query) whose job includes the agent (``connectors.spark.agent``) under the same
application and operator names. The node types of the operator's region are its executor profiles (cores,
memoryMiB x ``executor_memory_scale``, at least 512 MiB) and, when the region's workers are typed
(``connectors.spark.placement``), the custom resource the executors request so that they run only on workers of
that node type. Operators without a deployment (sources, sinks inside a query) are not scaled. The control plane
builds it from a stored Application (``autoscaler.control.connectors``; settings:
``autoscaler.schemas.connectors.SparkSettings``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from connectors.base import Connector, Deployment, Monitor, Realizer
from connectors.endpoints import AllowList
from connectors.spark.monitor import Binding, SparkMonitor
from connectors.spark.placement import resource_name, typed_workers
from connectors.spark.realizer import SparkRealizer
from connectors.spark.store import OperatorKey, SparkStore


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


@dataclass(frozen=True)
class NodeType:
    """A node type of the operator's region: vCPU cores, memory (MiB), relative speedup (1.0 = reference)."""

    name: str
    cores: int
    memory_mib: float
    speedup: float


@dataclass(frozen=True)
class ControlledOperator:
    """An operator the control plane scales: its key in the ``SparkStore``, its declared deployment
    ``{node type: replicas}``, the node types of its region, its region's node provider (``{kind, settings}``:
    typed workers make executors request their node type's resource) and its driver UI override."""

    key: OperatorKey
    declared: Deployment
    node_types: list[NodeType]
    provider: dict[str, Any] = field(default_factory=dict)
    ui_url: str | None = None


def build(
    store: SparkStore,
    operators: list[str],
    streams: list[tuple[str, str]],
    controlled: dict[str, ControlledOperator],
    *,
    ui_url: str | None,
    executor_memory_scale: float,
    batch_interval_s: float,
    apply_timeout_s: float,
    allowed: AllowList | None = None,
) -> SparkConnector:
    """The connector of an application with ``operators`` (names) and ``streams`` (name pairs), scaling
    ``controlled`` (name -> operator) through ``store``. ``ui_url``: the driver UI of a single-operator application
    (used when neither the operator's override nor its agent's report is known); ``batch_interval_s``: the
    micro-batch trigger interval (s); ``apply_timeout_s``: how long an apply waits (s); ``allowed``: the
    endpoints whose driver UIs the monitor may ask (none when left out)."""
    from policies.graph import source_to_sink_paths

    upstream: dict[str, set[str]] = {n: set() for n in operators}
    for _ in operators:  # transitive closure over the DAG (small graphs)
        for a, b in streams:
            upstream[b] |= {a} | upstream[a]
    bindings: dict[str, Binding] = {}
    profiles: dict[str, dict[str, dict]] = {}
    for name, op in controlled.items():
        declared = dict(op.declared)
        bindings[name] = Binding(
            operator=op.key,
            ui_url=op.ui_url or None,
            upstream=sorted(u for u in upstream[name] if u in controlled),
            fallback_ui_url=(ui_url or "") if len(controlled) == 1 else "",
            allowed=allowed if allowed is not None else AllowList([]),
            declared_type=max(declared, key=lambda t: declared[t]) if declared else "executor",
        )
        typed = typed_workers(op.provider)
        profiles[name] = {
            t.name: {
                "name": t.name,
                "cores": int(t.cores),
                "memoryMiB": max(int(t.memory_mib * executor_memory_scale), 512),
                "speedup": float(t.speedup),
                **({"resource": resource_name(t.name)} if typed else {}),
            }
            for t in op.node_types
        }
    paths = source_to_sink_paths(operators, streams)
    monitor = SparkMonitor(bindings, paths, batch_interval_s, store)
    realizer = SparkRealizer(bindings, profiles, store, apply_timeout_s)
    return SparkConnector(monitor, realizer)
