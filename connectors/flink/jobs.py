"""Submitting the shipped PyFlink pipelines to a ``FlinkCluster`` (used by the demo, the benchmark and tests).

``start_local_cluster(root, taskmanagers)`` starts a JobManager and TaskManagers; ``submit_wordcount(cluster,
...)`` submits the WordCount of paper 004 driven by the Taxi trace and returns its job id.
"""

from __future__ import annotations

from pathlib import Path

from connectors.flink.cluster import FlinkCluster, TaskManagerProfile
from connectors.flink.pipelines import PIPELINES_DIR, TAXI, WORDCOUNT

PYFILES = [PIPELINES_DIR / "trace_source.py", PIPELINES_DIR / "common.py"]


def start_local_cluster(
    root: str | Path,
    taskmanagers: dict[str, TaskManagerProfile] | None = None,
    rest_port: int | None = None,
) -> FlinkCluster:
    """Start a JobManager under ``root`` and the given TaskManagers (id -> profile; default one with 4 slots)."""
    cluster = FlinkCluster(root, rest_port=rest_port).start()
    for node_id, profile in (taskmanagers or {"tm-1": TaskManagerProfile(slots=4, memory_mb=1536)}).items():
        cluster.start_taskmanager(node_id, profile)
    return cluster


def pipeline_args(
    trace: str | Path,
    *,
    trace_start: int = 0,
    steps: int = 0,
    step_s: float = 1.0,
    rate_scale: float = 1.0,
    duration_s: float = 0.0,
    cost_ms: float = 0.0,
    cost_kind: str = "sleep",
    parallelism: int = 1,
    counts_dir: str | Path = "",
    job_name: str = "",
    ticks_per_s: float = 50.0,
) -> list[str]:
    """Command-line options of the pipelines (see ``pipelines/common.py``): trace slice ``trace_start`` ..
    ``+steps`` replayed at ``step_s`` seconds per trace line, rates x ``rate_scale``, per-record cost (ms)."""
    args = [
        "--trace", str(trace), "--trace-start", str(trace_start), "--steps", str(steps), "--step-s", str(step_s),
        "--rate-scale", str(rate_scale), "--duration-s", str(duration_s), "--cost-ms", str(cost_ms),
        "--cost-kind", cost_kind, "--parallelism", str(parallelism), "--ticks-per-s", str(ticks_per_s),
    ]  # fmt: skip
    if counts_dir:
        args += ["--counts-dir", str(counts_dir)]
    if job_name:
        args += ["--job-name", job_name]
    return args


def submit_wordcount(cluster: FlinkCluster, trace: str | Path, **options) -> str:
    """Submit WordCount (vertices ``sentences``, ``splitter``, ``counter``, ``top``); returns the job id."""
    options.setdefault("job_name", "wordcount")
    return cluster.submit_python(WORDCOUNT, pipeline_args(trace, **options), pyfiles=PYFILES)


def submit_taxi(cluster: FlinkCluster, trace: str | Path, **options) -> str:
    """Submit the taxi analytics job (vertices ``trips``, ``enrich``, ``aggregate``, ``report``)."""
    options.setdefault("job_name", "taxi")
    return cluster.submit_python(TAXI, pipeline_args(trace, **options), pyfiles=PYFILES)
