"""The Flink connector of an application (``engine: flink``) from plain values: ``build`` and ``check_settings``.

Settings (``autoscaler.schemas.connectors.FlinkSettings``): ``restUrl`` of the JobManager, the job by ``jobName``
(newest running job with that name) or ``jobId``, ``vertices`` (operator -> operator name inside the job when it
differs from the manifest's), ``applyTimeoutS``. Every operator of the manifest is bound to a job vertex;
``check_settings`` reports the operators without a vertex of their own and lists the job's vertices. The control
plane builds and checks it from a stored Application (``autoscaler.control.connectors``).
"""

from __future__ import annotations

from connectors.base import Connector, Deployment
from connectors.flink.binding import BindingError, Vertex, resolve, vertices_of
from connectors.flink.monitor import FlinkJob, FlinkMonitor
from connectors.flink.realizer import FlinkRealizer
from connectors.flink.rest import FlinkRest


class FlinkConnector(Connector):
    engine = "flink"

    def __init__(self, job: FlinkJob, monitor: FlinkMonitor, realizer: FlinkRealizer) -> None:
        self.job = job
        self._monitor = monitor
        self._realizer = realizer

    @property
    def monitor(self) -> FlinkMonitor:
        return self._monitor

    @property
    def realizer(self) -> FlinkRealizer:
        return self._realizer


def job_of(settings: dict, operators: list[str]) -> FlinkJob:
    """The job of camelCase ``settings`` with ``operators`` bound by name (``vertices`` overrides)."""
    rest = FlinkRest(
        settings.get("restUrl", "http://127.0.0.1:8081"), float(settings.get("restTimeoutS", 5.0))
    )
    names = {op: (settings.get("vertices") or {}).get(op, op) for op in operators}
    return FlinkJob(rest, settings.get("jobName"), settings.get("jobId"), names)


def build(
    settings: dict,
    operators: list[str],
    streams: list[tuple[str, str]],
    deployments: dict[str, Deployment],
) -> FlinkConnector:
    """A connector from plain values (settings as in the manifest, camelCase)."""
    from policies.graph import source_to_sink_paths

    job = job_of(settings, operators)
    targets = {t for _, t in streams}
    sources = {op for op in operators if op not in targets}
    monitor = FlinkMonitor(job, deployments, source_to_sink_paths(operators, streams), sources)
    realizer = FlinkRealizer(job, deployments, float(settings.get("applyTimeoutS", 60.0)))
    monitor.deployments = realizer.deployments  # the monitor reports what the realizer last applied
    return FlinkConnector(job, monitor, realizer)


def check_settings(settings: dict, operators: list[str]) -> dict[str, Vertex]:
    """Resolve every operator to a vertex of the running job of camelCase ``settings`` (operator -> vertex).

    Raises ``BindingError`` (message lists the vertices that exist) for a missing or shared vertex, and
    ``ConnectorError`` when the job cannot be found or reached."""
    job = job_of(settings, operators)
    job_id = job.find()
    return resolve(job.vertex_names, vertices_of(job.rest.job(job_id)))


__all__ = [
    "BindingError",
    "FlinkConnector",
    "build",
    "check_settings",
    "job_of",
]
