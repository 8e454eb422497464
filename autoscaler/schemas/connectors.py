"""Connector settings of an application, validated per engine (``spark``, ``flink``, ``simulated``).

Every engine address (Spark ``master`` unless ``local[n]``, ``uiUrl``, ``operators.<name>.uiUrl``; Flink's
``restUrl``) must also be covered by an endpoint staff declared on one of the application's regions or in
``AUTOSCALER_ENGINE_ENDPOINTS``: checked with the references to stored resources (``.endpoints``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from connectors.simulated import SIMULATED_SERVICE_MS
from connectors.traces import TraceNotAllowed, resolve_trace
from policies.engine_model import SETTLE_PERIODS

from .common import SpecModel
from .errors import FieldError, from_pydantic


class SparkOperatorBinding(SpecModel):
    """Where one controlled operator's Spark application runs: its driver UI/REST ``uiUrl`` (when empty, the
    URL the job's agent reports is used) and its query's ``checkpointDir`` (documentation for the job)."""

    ui_url: str | None = Field(default=None, pattern=r"^https?://")
    checkpoint_dir: str | None = None


class SparkSettings(SpecModel):
    """Spark Structured Streaming (``connectors.spark``): one streaming query per controlled operator.

    ``master``: the cluster's master URL (``spark://host:7077``; ``local[n]`` for a single-process run);
    ``uiUrl``: driver UI/REST URL of a single-operator application, used only when neither
    ``operators.<name>.uiUrl`` nor the URL reported by the job's agent is known (no default); ``batchIntervalS``:
    micro-batch trigger interval (s), the denominator of the utilisation; ``checkpointDir``: default
    checkpoint root; ``executorMemoryScale``: executor memory = node type memoryMiB x this factor (at least
    512 MiB; < 1 for small local demos); ``applyTimeoutS``: how long the realizer waits for the agent's
    acknowledgement and the executor count (s) before rolling back.
    """

    master: str = "local[2]"
    ui_url: str | None = Field(default=None, pattern=r"^https?://")
    batch_interval_s: float = Field(default=1.0, gt=0)
    checkpoint_dir: str | None = None
    executor_memory_scale: float = Field(default=1.0, gt=0, le=64)
    apply_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    operators: dict[str, SparkOperatorBinding] = {}


class FlinkSettings(SpecModel):
    """Apache Flink (``connectors.flink``): one job whose vertices are the manifest's operators.

    ``restUrl``: the JobManager's REST endpoint; ``jobName``: the job to control (the newest running job of that
    name) or ``jobId``; ``vertices``: operator -> the operator name inside the Flink job when it differs from the
    manifest's (a vertex is found by any operator name chained in it); ``applyTimeoutS``: how long the realizer
    waits for the new parallelism before restoring the previous one (s); ``restTimeoutS``: per REST call (s).
    """

    rest_url: str = Field(default="http://127.0.0.1:8081", pattern=r"^https?://")
    job_name: str | None = None
    job_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{32}$")
    vertices: dict[str, str] = {}
    apply_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    rest_timeout_s: float = Field(default=5.0, gt=0, le=120)


class MicroBatchSettings(SpecModel):
    """The simulated engine's micro-batch mode (``connectors.simulated_batches``): every scaled operator runs as a
    Spark Structured Streaming query, batch by batch, its per-record cost the operator's ``serviceTimeMs``.

    ``intervalMs``: trigger interval (ms); ``overheadMs``: fixed cost of a batch (ms); ``partitions``: of the
    stateful stage (a batch runs in ceil(partitions / executors) waves; none: parallelism linear in the
    executors); ``scalingExponent``: k executors do (effective parallelism) ** this executors' work, in (0, 1];
    ``penalty`` / ``scaleInPenalty``: batch duration factor in the ``settlePeriods`` periods after a change that
    added / removed executors; ``latencyOffsetMs``: time a record spends outside its batch and the wait for it
    (ms, may be negative: the measured latency minus the formula's, as ``policies.engine_model`` learns it).
    """

    interval_ms: float = Field(gt=0, le=3_600_000.0)
    overhead_ms: float = Field(default=0.0, ge=0, le=3_600_000.0)
    partitions: int | None = Field(default=None, ge=1, le=100_000)
    scaling_exponent: float = Field(default=1.0, gt=0, le=1.0)
    penalty: float = Field(default=1.0, gt=0, le=100.0)
    scale_in_penalty: float = Field(default=1.0, gt=0, le=100.0)
    settle_periods: int = Field(default=SETTLE_PERIODS, ge=0, le=100)
    latency_offset_ms: float = Field(default=0.0, ge=-3_600_000.0, le=3_600_000.0)


class SimulatedSettings(SpecModel):
    """The built-in simulated engine (see ``connectors.simulated.settings_schema``).

    ``trace``: trace name shipped with the project, or the absolute path of a file (tuples/s per line) under a
    directory of the ``AUTOSCALER_TRACE_DIRS`` setting (any other path is refused); ``rateScale``: multiplier
    of the trace rates; ``noise``: relative std of measured rates; ``seed``; ``downtimeS``: downtime of one
    reconfiguration (s); ``serviceTimeMs``: the simulated engine's mean service time per tuple on a speedup-1 node
    (ms) for scaled operators that declare no ``serviceTimeMs`` of their own (a property of the simulated system,
    never read by the control loop, which learns service times from the metrics); ``backlog``: carry every
    operator's backlog across periods, a reconfiguration stopping the job for ``downtimeS`` (fluid queues, see
    ``connectors.simulated``); ``latencyOffsetMs``: time every source-to-sink path adds outside the operators'
    queues (ms); ``pathLatencyOnly``: report only the paths' end-to-end times, each operator getting its share of
    them as on Flink (``connectors.latency_share``); ``microBatch``: the scaled operators run as micro-batch
    queries (:class:`MicroBatchSettings`; they carry their own backlog, and executor changes are live, so neither
    ``backlog`` nor ``downtimeS`` goes with it).
    """

    trace: str = "taxi_last_month"
    rate_scale: float = Field(default=1.0, gt=0)
    noise: float = Field(default=0.0, ge=0)
    seed: int = 0
    downtime_s: float = Field(default=0.0, ge=0, alias="downtimeS")
    service_time_ms: float = Field(default=SIMULATED_SERVICE_MS, gt=0, le=60_000.0, alias="serviceTimeMs")
    backlog: bool = False
    latency_offset_ms: float = Field(default=0.0, ge=0, le=3_600_000.0, alias="latencyOffsetMs")
    path_latency_only: bool = Field(default=False, alias="pathLatencyOnly")
    micro_batch: MicroBatchSettings | None = Field(default=None, alias="microBatch")

    @model_validator(mode="after")
    def _micro_batch_alone(self) -> SimulatedSettings:
        """A micro-batch engine carries its own backlog and changes executors live."""
        if self.micro_batch is not None and self.backlog:
            raise ValueError(
                "microBatch: cannot go with backlog: true (the micro-batch queries carry their own)"
            )
        if self.micro_batch is not None and self.downtime_s > 0:
            raise ValueError(
                "microBatch: cannot go with downtimeS > 0 (micro-batch executor changes are live)"
            )
        return self

    @field_validator("trace")
    @classmethod
    def _trace_allowed(cls, trace: str) -> str:
        """A shipped trace name or a file under an allowed directory (``connectors.traces``)."""
        from django.conf import settings

        try:
            resolve_trace(trace, getattr(settings, "AUTOSCALER_TRACE_DIRS", ()) or ())
        except TraceNotAllowed as exc:
            raise ValueError(str(exc)) from None
        return trace


ENGINE_SETTINGS: dict[str, type[BaseModel]] = {
    "spark": SparkSettings,
    "flink": FlinkSettings,
    "simulated": SimulatedSettings,
}


def validate_connector(engine: str, settings: dict) -> tuple[dict, list[FieldError]]:
    """Validate ``settings`` for ``engine``; returns (canonical settings with defaults filled in, errors)."""
    model = ENGINE_SETTINGS[engine]
    try:
        parsed = model.model_validate(settings)
    except ValidationError as exc:
        return {}, from_pydantic(exc, "spec", "connector")
    return parsed.model_dump(mode="json", by_alias=True, exclude_none=True), []
