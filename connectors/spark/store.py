"""Storage the Spark monitor and realizer read and write, behind a protocol owned by the connector.

The job's agent ships its micro-batch progress, sink latencies, driver status and acknowledgements to the control
plane; the realizer writes the desired state the agent applies. ``SparkStore`` is everything the connector needs
of that storage, keyed by an opaque, hashable operator key (the control plane's ORM store,
``autoscaler.ingest.spark_store``, uses the Operator's primary key). Values are plain frozen dataclasses, never
storage rows.

Units: times are seconds since the epoch (UTC), durations in ms where the name says ``_ms`` and seconds where it
says ``_s``, rows and backlog in tuples. ``InMemorySparkStore`` keeps everything in a process (tests, research
without the control plane); it is thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

#: a store's key of one controlled operator (hashable, opaque to the connector)
OperatorKey = Hashable


#: the key the job's agent adds to a progress JSON: tasks of the widest stage the micro-batch ran (the waves of its
#: parallel work; ``connectors.spark.agent.SparkAgent.batch_stage_tasks``)
STAGE_TASKS_KEY = "maxStageTasks"


@dataclass(frozen=True)
class ProgressRecord:
    """One micro-batch of an operator's streaming query (a ``StreamingQueryProgress``, as the agent shipped it).

    ``timestamp``: start of the trigger (s since the epoch); ``e2e_*``: the sink's end-to-end latency of the
    batch (mean and p95 in s over ``e2e_n`` records) when observed; ``backlog``: tuples the sources reported
    behind; ``raw``: the progress JSON, None once the store pruned it."""

    run_id: str
    batch_id: int
    timestamp: float
    num_input_rows: int
    batch_duration_ms: float | None = None
    e2e_mean_s: float | None = None
    e2e_p95_s: float | None = None
    e2e_n: int | None = None
    backlog: float | None = None
    raw: dict[str, Any] | None = None


@dataclass(frozen=True)
class LatencyRecord:
    """End-to-end latency of ``n`` records written by the sink (``agent.report_latency``): mean and p95 (s)."""

    timestamp: float
    mean_s: float
    p95_s: float
    n: int


@dataclass(frozen=True)
class DriverState:
    """What the operator's driver last said about itself: its UI URL and application id ("" when unknown), the
    executors it counts (None: unknown), its executor profile, and when its agent was last heard of (s)."""

    ui_url: str
    app_id: str
    executors: int | None
    profile: dict[str, Any] | None
    last_seen: float


@dataclass(frozen=True)
class DesiredState:
    """What the operator's agent must run: ``executors`` of ``profile`` (``{name, cores, memoryMiB}``) at
    ``generation``; generation 0 with no executors and no profile when nothing was desired yet."""

    generation: int = 0
    executors: int | None = None
    profile: dict[str, Any] | None = None


@dataclass(frozen=True)
class Acknowledgement:
    """The agent's acknowledgement of one generation: executors seen (-1: unknown), downtime and duration (s),
    ``error`` empty when it applied."""

    generation: int
    executors: int
    downtime_s: float = 0.0
    duration_s: float = 0.0
    error: str = ""


class SparkStore(Protocol):
    """What the Spark connector reads (progress, latency, driver status, desired state, acknowledgements) and
    writes (desired state) per operator key."""

    def progress(self, operator: OperatorKey, start: float, end: float) -> list[ProgressRecord]:
        """Batches triggered in ``[start, end)``, oldest first."""
        ...

    def last_progress_before(self, operator: OperatorKey, t: float) -> ProgressRecord | None:
        """The newest batch triggered before ``t``, None when there is none."""
        ...

    def batch(self, operator: OperatorKey, run_id: str, batch_id: int) -> ProgressRecord | None:
        """Batch ``batch_id`` of query run ``run_id``, None when not stored."""
        ...

    def has_batch_before(self, operator: OperatorKey, run_id: str, batch_id: int) -> bool:
        """Whether a batch of run ``run_id`` with an id below ``batch_id`` is stored."""
        ...

    def latencies(self, operator: OperatorKey, start: float, end: float) -> list[LatencyRecord]:
        """Sink latency samples stamped in ``[start, end)``."""
        ...

    def driver(self, operator: OperatorKey) -> DriverState | None:
        """The driver's last status, None when its agent was never heard of."""
        ...

    def desired(self, operator: OperatorKey) -> DesiredState:
        """The current desired state (generation 0 when none)."""
        ...

    def set_desired(self, operator: OperatorKey, executors: int, profile: dict[str, Any]) -> int:
        """Write a new desired state (the next generation, 1 for the first); returns its generation."""
        ...

    def acknowledgement(self, operator: OperatorKey, min_generation: int) -> Acknowledgement | None:
        """The acknowledgement of the highest generation >= ``min_generation`` (the newest of that generation),
        None when there is none yet."""
        ...


@dataclass
class _Operator:
    progress: dict[tuple[str, int], ProgressRecord] = field(default_factory=dict)
    latencies: list[LatencyRecord] = field(default_factory=list)
    driver: DriverState | None = None
    desired: DesiredState = field(default_factory=DesiredState)
    acks: list[Acknowledgement] = field(default_factory=list)


class InMemorySparkStore:
    """``SparkStore`` in memory. The agent's side is written with ``add_progress``, ``add_latency``,
    ``set_driver`` and ``add_acknowledgement``; a batch already stored (same run id and batch id) is kept once,
    as the control plane does with a retried shipment."""

    def __init__(self) -> None:
        self._ops: dict[OperatorKey, _Operator] = {}
        self._lock = threading.Lock()

    def _op(self, operator: OperatorKey) -> _Operator:
        return self._ops.setdefault(operator, _Operator())

    # the agent's side

    def add_progress(self, operator: OperatorKey, *records: ProgressRecord) -> None:
        with self._lock:
            stored = self._op(operator).progress
            for r in records:
                stored.setdefault((r.run_id, r.batch_id), r)

    def add_latency(self, operator: OperatorKey, *records: LatencyRecord) -> None:
        with self._lock:
            self._op(operator).latencies.extend(records)

    def set_driver(self, operator: OperatorKey, state: DriverState | None) -> None:
        with self._lock:
            self._op(operator).driver = state

    def add_acknowledgement(self, operator: OperatorKey, ack: Acknowledgement) -> None:
        with self._lock:
            self._op(operator).acks.append(ack)

    def clear_desired(self, operator: OperatorKey) -> None:
        """Forget the desired state (as for a driver started from its own settings)."""
        with self._lock:
            self._op(operator).desired = DesiredState()

    # SparkStore

    def _sorted(self, operator: OperatorKey) -> list[ProgressRecord]:
        return sorted(self._op(operator).progress.values(), key=lambda r: r.timestamp)

    def progress(self, operator: OperatorKey, start: float, end: float) -> list[ProgressRecord]:
        with self._lock:
            return [r for r in self._sorted(operator) if start <= r.timestamp < end]

    def last_progress_before(self, operator: OperatorKey, t: float) -> ProgressRecord | None:
        with self._lock:
            before = [r for r in self._sorted(operator) if r.timestamp < t]
        return before[-1] if before else None

    def batch(self, operator: OperatorKey, run_id: str, batch_id: int) -> ProgressRecord | None:
        with self._lock:
            return self._op(operator).progress.get((run_id, batch_id))

    def has_batch_before(self, operator: OperatorKey, run_id: str, batch_id: int) -> bool:
        with self._lock:
            return any(r == run_id and b < batch_id for r, b in self._op(operator).progress)

    def latencies(self, operator: OperatorKey, start: float, end: float) -> list[LatencyRecord]:
        with self._lock:
            return [r for r in self._op(operator).latencies if start <= r.timestamp < end]

    def driver(self, operator: OperatorKey) -> DriverState | None:
        with self._lock:
            return self._op(operator).driver

    def desired(self, operator: OperatorKey) -> DesiredState:
        with self._lock:
            return self._op(operator).desired

    def set_desired(self, operator: OperatorKey, executors: int, profile: dict[str, Any]) -> int:
        with self._lock:
            op = self._op(operator)
            op.desired = DesiredState(op.desired.generation + 1, executors, dict(profile))
            return op.desired.generation

    def acknowledgement(self, operator: OperatorKey, min_generation: int) -> Acknowledgement | None:
        with self._lock:
            acks = [(a.generation, i, a) for i, a in enumerate(self._op(operator).acks)]
        found = [x for x in acks if x[0] >= min_generation]
        return max(found, key=lambda x: (x[0], x[1]))[2] if found else None
