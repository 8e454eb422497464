"""The engine-agnostic connector interface.

A connector is a pair (Monitor, Realizer) bound to one application running on one engine.

- ``Monitor.collect(period)`` returns what happened during one control period: per-operator input rate
  (tuples/s), processing rate (tuples/s), utilisation (busy fraction), response time (s) and backlog (tuples),
  the deployment actually in place, and the end-to-end response time per source-to-sink path (s). A period whose
  metrics are missing or partial is returned with ``complete=False``, a reason (text, for people) and a typed
  :class:`Cause` (what the control loop acts on): it must never look like zero load.
- ``Realizer.apply(plan)`` brings the engine to the target deployment of every operator in the plan, verifies it and
  returns what it did, including the measured downtime (s).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

Deployment = dict[str, int]
"""Replicas per node-type name, e.g. ``{"vm.small": 2, "vm.large": 1}``."""


class Cause(StrEnum):
    """Why a period's metrics are incomplete. Every connector sets it; the control loop reads the cause, never
    the reason text (the rollback rail once matched a Spark/simulator phrase that Flink never writes)."""

    NONE = ""
    NO_RUNNING_REPLICA = "no_running_replica"  # the operator runs no replica (executors or subtasks gone)
    JOB_FAILING = "job_failing"  # the engine reports the job failing or failed
    JOB_NOT_RUNNING = "job_not_running"  # created, initialising, restarting, cancelled, suspended ...
    ENGINE_UNAVAILABLE = "engine_unavailable"  # the engine's API could not be reached
    METRICS_MISSING = "metrics_missing"  # the engine runs but reported nothing usable for the period


#: causes that say the job is failing: right after a reconfiguration they trigger the rollback rail
FAILING_CAUSES = frozenset({Cause.NO_RUNNING_REPLICA, Cause.JOB_FAILING})
#: job states (Flink's REST ``state``, which the simulated engine's ``jobState`` fault mimics) of a failing job
JOB_FAILING_STATES = ("FAILING", "FAILED")


#: causes from the most to the least severe: a period's cause is the worst of its incomplete operators' (one
#: operator failing makes the period failing, whatever the others miss)
CAUSE_SEVERITY = (
    Cause.JOB_FAILING,
    Cause.NO_RUNNING_REPLICA,
    Cause.JOB_NOT_RUNNING,
    Cause.ENGINE_UNAVAILABLE,
    Cause.METRICS_MISSING,
)


def worst_cause(causes: Iterable[Cause]) -> Cause:
    """The most severe of ``causes`` (``CAUSE_SEVERITY``); ``Cause.NONE`` when none is typed."""
    typed = set(causes)
    return next((c for c in CAUSE_SEVERITY if c in typed), Cause.NONE)


def job_state_cause(state: str | None) -> Cause:
    """The cause of a period whose job is in ``state`` (anything but running): failing, else not running."""
    return Cause.JOB_FAILING if state in JOB_FAILING_STATES else Cause.JOB_NOT_RUNNING


@dataclass(frozen=True)
class Period:
    """Control period ``slot`` covering ``[start, end)`` (seconds since the epoch)."""

    slot: int
    start: float
    end: float

    @property
    def length_s(self) -> float:
        return self.end - self.start


@dataclass
class OperatorMetrics:
    """One operator over one period. Rates in tuples/s, times in seconds, backlog in tuples."""

    operator: str
    deployment: Deployment
    input_rate: float | None = None
    processing_rate: float | None = None
    utilisation: float | None = None
    response_time_s: float | None = None
    response_time_p95_s: float | None = None
    service_time_mean_s: float | None = None
    service_time_var_s2: float | None = None
    backlog: float | None = None
    complete: bool = True
    reason: str = ""
    cause: Cause = Cause.NONE
    #: micro-batch engines: mean batch duration (s) and records per batch, partitions, trigger interval (s)
    batch_duration_s: float | None = None
    batch_records: float | None = None
    partitions: int | None = None
    batch_interval_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class PeriodMetrics:
    """All operators of an application over one period, plus end-to-end response times per path (s)."""

    period: Period
    operators: dict[str, OperatorMetrics]
    path_response_time_s: dict[str, float] = field(default_factory=dict)
    complete: bool = True
    reason: str = ""
    cause: Cause = Cause.NONE

    @property
    def end_to_end_response_time_s(self) -> float | None:
        """Worst path's mean response time (s), None when not measured."""
        return max(self.path_response_time_s.values()) if self.path_response_time_s else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "slot": self.period.slot,
            "start": self.period.start,
            "end": self.period.end,
            "operators": {name: m.to_dict() for name, m in self.operators.items()},
            "path_response_time_s": dict(self.path_response_time_s),
            "complete": self.complete,
            "reason": self.reason,
            "cause": str(self.cause),
        }


@dataclass
class ScalingPlan:
    """Target deployment per operator for the next period (only operators that change)."""

    targets: dict[str, Deployment]
    slot: int
    reason: str = ""

    @property
    def empty(self) -> bool:
        return not self.targets


@dataclass
class ApplyResult:
    """Outcome of applying a plan: what is now in place, how long the job was down (s), and any error."""

    ok: bool
    deployments: dict[str, Deployment]
    downtime_s: float = 0.0
    error: str = ""
    rolled_back: bool = False
    details: dict[str, Any] = field(default_factory=dict)


class ConnectorError(RuntimeError):
    """The engine could not be reached or refused an operation; the control loop retries with backoff."""


class Monitor(ABC):
    @abstractmethod
    def collect(self, period: Period) -> PeriodMetrics:
        """Metrics of ``period``; incomplete periods are flagged, never zero-filled."""


class Realizer(ABC):
    @abstractmethod
    def apply(self, plan: ScalingPlan) -> ApplyResult:
        """Apply ``plan``, verify the result on the engine, roll back on failure."""

    @abstractmethod
    def current(self) -> dict[str, Deployment]:
        """The deployment of every operator as the engine reports it now."""


class Connector(ABC):
    """A monitor and a realizer for one application, built from its declared connector settings."""

    engine: str = ""

    @property
    @abstractmethod
    def monitor(self) -> Monitor: ...

    @property
    @abstractmethod
    def realizer(self) -> Realizer: ...

    def close(self) -> None:
        """Release engine clients; the default has nothing to release."""
