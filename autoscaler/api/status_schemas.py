"""OpenAPI description of the read-only ``status`` of Deployments and Applications (see
``autoscaler.control.resource_status``, which builds it). Costs in currency per hour, times ISO 8601 (UTC)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from autoscaler.schemas.documents import MANIFEST_MODELS


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StatusDecision(_Strict):
    """The control decision whose apply brought a status or a history row."""

    id: int
    slot: int
    outcome: str
    reason: str


class DeploymentStatus(_Strict):
    """What the engine runs for the deployment (``observed`` false and null fields before the loop saw it)."""

    observed: bool
    replicas: dict[str, int] | None = Field(description="node type -> replicas the engine runs")
    totalReplicas: int | None
    since: dt.datetime | None = Field(description="when the loop applied or first saw these replicas")
    source: str | None = Field(description="control (an applied decision) or observed (first seen)")
    decision: StatusDecision | None
    engineIds: dict[str, Any] = Field(description="the engine's identifiers: Flink job, Spark generation")
    costPerHour: float | None = Field(description="currency/h of the replicas the engine runs")
    matchesSpec: bool | None = Field(description="whether the engine runs the declared replicas")


class LastTick(_Strict):
    slot: int
    status: str
    finishedAt: dt.datetime | None
    error: str | None


class ApplicationStatus(_Strict):
    """What the control loop knows of the application."""

    phase: str = Field(
        description="Registered, Paused or Deleted when not running; else Pending before the first tick, then by "
        "the last tick: Controlled, Deciding, Applying, NoData, Failing, Missed"
    )
    lastTick: LastTick | None
    lastTickAt: dt.datetime | None
    lastPeriodViolated: bool | None = Field(description="the last observed period violated the SLO")
    periods: int
    violatedPeriods: int
    noDataPeriods: int
    reconfigurationsApplied: int
    lastError: str | None
    replicas: dict[str, dict[str, int] | None] = Field(description="operator -> replicas the engine runs")
    costPerHour: float | None = Field(description="currency/h of every observed deployment")


STATUS_MODELS: dict[str, type[BaseModel]] = {"Deployment": DeploymentStatus, "Application": ApplicationStatus}


def resource_model(kind: str) -> type[BaseModel]:
    """A stored ``kind`` resource as the API answers it: its manifest, ``warnings`` when a check could not be
    made, and its read-only ``status``."""
    return create_model(
        f"{kind}Resource",
        __base__=MANIFEST_MODELS[kind],
        warnings=(list[str] | None, None),
        status=(STATUS_MODELS[kind], Field(json_schema_extra={"readOnly": True})),
    )


RESOURCE_MODELS: dict[str, type[BaseModel]] = {kind: resource_model(kind) for kind in STATUS_MODELS}
