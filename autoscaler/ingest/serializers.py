"""Payloads of the ingest endpoints, validated with pydantic; errors as ``[FieldError(loc, msg)]``.

Progress items are Spark ``StreamingQueryProgress`` JSON: only the fields the monitor needs are checked
(``batchId``, ``timestamp``, ``numInputRows``, rates, ``batchDuration``, ``observedMetrics.e2e``); the rest is
kept as raw JSON.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from autoscaler.schemas.errors import FieldError, from_pydantic

MAX_ITEMS = 1000


class E2E(BaseModel):
    """Sink-side end-to-end latency of one batch: mean and p95 (s) over ``n`` records."""

    model_config = ConfigDict(extra="allow")
    mean_s: float | None = Field(default=None, ge=0)
    p95_s: float | None = Field(default=None, ge=0)
    n: int = Field(default=0, ge=0)


class Observed(BaseModel):
    """``observedMetrics`` of a progress: any names; ``e2e`` must hold the latency columns."""

    model_config = ConfigDict(extra="allow")
    e2e: E2E | None = None


class ProgressItem(BaseModel):
    model_config = ConfigDict(extra="allow")
    batchId: int = Field(ge=0)
    timestamp: dt.datetime
    runId: str = ""
    numInputRows: int = Field(ge=0)
    inputRowsPerSecond: float | None = Field(default=None, ge=0)
    processedRowsPerSecond: float | None = Field(default=None, ge=0)
    batchDuration: float | None = Field(default=None, ge=0)
    sources: list[dict[str, Any]] = []
    observedMetrics: Observed = Observed()

    @field_validator("timestamp")
    @classmethod
    def aware(cls, v: dt.datetime) -> dt.datetime:
        return v if v.tzinfo else v.replace(tzinfo=dt.UTC)

    def e2e(self) -> E2E | None:
        return self.observedMetrics.e2e

    def backlog(self) -> float | None:
        """Tuples behind, when a source reports it (``metrics.backlog`` or Kafka's ``avgOffsetsBehindLatest``)."""
        total, seen = 0.0, False
        for s in self.sources:
            metrics = s.get("metrics") or {}
            for key in ("backlog", "avgOffsetsBehindLatest"):
                try:
                    value = float(metrics[key])
                except (KeyError, TypeError, ValueError):
                    continue
                if math.isfinite(value):
                    total, seen = total + value, True
                break
        return total if seen else None


class LatencyItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timestamp: float = Field(gt=0, description="s since the epoch")
    mean_s: float = Field(ge=0)
    p95_s: float = Field(ge=0)
    n: int = Field(ge=0)


class Driver(BaseModel):
    model_config = ConfigDict(extra="allow")
    uiUrl: str = ""
    appId: str = ""
    executors: int | None = Field(default=None, ge=0)
    profile: dict[str, Any] | None = None
    generation: int = Field(default=0, ge=0)


class ProgressPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    progress: list[ProgressItem] = Field(default=[], max_length=MAX_ITEMS)
    latency: list[LatencyItem] = Field(default=[], max_length=MAX_ITEMS)
    dropped: int = Field(default=0, ge=0)
    driver: Driver | None = None


class AppliedPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    generation: int = Field(ge=1)
    executors: int = Field(ge=-1, description="-1: unknown")
    profile: dict[str, Any] | None = None
    downtimeS: float = Field(default=0.0, ge=0)
    durationS: float = Field(default=0.0, ge=0)
    error: str = ""
    driver: Driver | None = None


def parse(model: type[BaseModel], data: Any) -> tuple[BaseModel | None, list[FieldError]]:
    """``(payload, [])`` or ``(None, errors)``; a body that is not a JSON object is one error at the root."""
    if not isinstance(data, dict):
        return None, [FieldError("", "the body must be a JSON object")]
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        return None, from_pydantic(exc)
