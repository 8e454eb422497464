"""Payloads of the ingest endpoints, validated with pydantic; errors as ``[FieldError(loc, msg)]``.

Progress items are Spark ``StreamingQueryProgress`` JSON: only the fields the monitor needs are checked
(``batchId``, ``timestamp``, ``numInputRows``, rates, ``batchDuration``, ``observedMetrics.e2e``); the rest is
kept as raw JSON (whose depth, numbers and strings ``autoscaler.ingest.body`` has checked).

Every number is bounded so that a stored row can always be read back: integers within their column's range
(``BigIntegerField``: 2^63-1, ``IntegerField``: 2^31-1), floats finite and non-negative with sane upper bounds
(rates <= 1e12 tuples/s, batch durations <= 1e10 ms, latencies and durations <= 1e7 s); strings no longer than
their column; timestamps between 2000-01-01 and one day after now (UTC) at the endpoints (``parse``), before
the year 9000 for direct validation.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo

from autoscaler.schemas.errors import FieldError, from_pydantic

MAX_ITEMS = 1000
INT64_MAX = 2**63 - 1  # BigIntegerField
INT32_MAX = 2**31 - 1  # IntegerField, PositiveIntegerField
MAX_RATE = 1e12  # tuples/s
MAX_DURATION_MS = 1e10  # ms (about 116 days)
MAX_SECONDS = 1e7  # s (about 116 days)
MAX_BACKLOG = 1e18  # tuples
MAX_ERROR_CHARS = 10_000
EARLIEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)  # far from year 10000, which Python cannot read back
FUTURE_SLACK = dt.timedelta(days=1)

Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
Rate = Annotated[float, Field(ge=0, le=MAX_RATE, allow_inf_nan=False, description="tuples/s")]
DurationMs = Annotated[float, Field(ge=0, le=MAX_DURATION_MS, allow_inf_nan=False, description="ms")]
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False, description="s")]
Executors = Annotated[int, Field(ge=0, le=INT32_MAX)]


def latest_allowed(info: ValidationInfo) -> dt.datetime:
    """The latest timestamp accepted: one day ahead of the clock the endpoint validates with (``parse`` passes
    ``context={"now": epoch s}``); without a clock (connectors and tests validating directly), ``LATEST``."""
    now = (info.context or {}).get("now")
    return LATEST if now is None else dt.datetime.fromtimestamp(now, dt.UTC) + FUTURE_SLACK


def sane_datetime(v: dt.datetime, info: ValidationInfo) -> dt.datetime:
    """An aware datetime in UTC (naive ones are UTC) between 2000-01-01 and ``latest_allowed``."""
    v = v if v.tzinfo else v.replace(tzinfo=dt.UTC)
    if v < EARLIEST:
        raise ValueError(f"must not be before {EARLIEST.date().isoformat()}")
    if v > latest_allowed(info):
        raise ValueError(
            "must not be more than one day in the future" if v <= LATEST else "must be before the year 9000"
        )
    return v.astimezone(dt.UTC)


def sane_epoch_seconds(v: float, info: ValidationInfo) -> float:
    """Seconds since the epoch between 2000-01-01 and ``latest_allowed``."""
    if v < EARLIEST.timestamp():
        raise ValueError(f"must not be before {EARLIEST.date().isoformat()} ({EARLIEST.timestamp():.0f} s)")
    sane_datetime(dt.datetime.fromtimestamp(min(v, LATEST.timestamp() + 1), dt.UTC), info)
    return v


def web_url(v: str) -> str:
    """Empty, or an http(s) URL with a host and no whitespace."""
    if v == "":
        return v
    if any(c.isspace() for c in v):
        raise ValueError("must not contain whitespace")
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http:// or https:// URL with a host")
    return v


Timestamp = Annotated[dt.datetime, AfterValidator(sane_datetime)]
EpochSeconds = Annotated[float, Field(allow_inf_nan=False), AfterValidator(sane_epoch_seconds)]


class E2E(BaseModel):
    """Sink-side end-to-end latency of one batch: mean and p95 (s) over ``n`` records."""

    model_config = ConfigDict(extra="allow")
    mean_s: Seconds | None = None
    p95_s: Seconds | None = None
    n: Count = 0


class Observed(BaseModel):
    """``observedMetrics`` of a progress: any names; ``e2e`` must hold the latency columns."""

    model_config = ConfigDict(extra="allow")
    e2e: E2E | None = None


class ProgressItem(BaseModel):
    model_config = ConfigDict(extra="allow")
    batchId: Count
    timestamp: Timestamp
    runId: str = Field(default="", max_length=64)
    numInputRows: Count
    inputRowsPerSecond: Rate | None = None
    processedRowsPerSecond: Rate | None = None
    batchDuration: DurationMs | None = None
    sources: list[dict[str, Any]] = Field(default=[], max_length=MAX_ITEMS)
    observedMetrics: Observed = Observed()

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
                if math.isfinite(value) and 0 <= value <= MAX_BACKLOG:
                    total, seen = total + value, True
                break
        return min(total, MAX_BACKLOG) if seen else None


class LatencyItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timestamp: EpochSeconds = Field(description="s since the epoch")
    mean_s: Seconds
    p95_s: Seconds
    n: Count


class Driver(BaseModel):
    model_config = ConfigDict(extra="allow")
    uiUrl: Annotated[str, Field(max_length=255), AfterValidator(web_url)] = ""
    appId: str = Field(default="", max_length=255)
    executors: Executors | None = None
    profile: dict[str, Any] | None = None
    generation: Count = 0


class ProgressPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    progress: list[ProgressItem] = Field(default=[], max_length=MAX_ITEMS)
    latency: list[LatencyItem] = Field(default=[], max_length=MAX_ITEMS)
    dropped: Count = 0
    driver: Driver | None = None


class AppliedPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    generation: int = Field(ge=1, le=INT64_MAX)
    executors: int = Field(ge=-1, le=INT32_MAX, description="-1: unknown")
    profile: dict[str, Any] | None = None
    downtimeS: Seconds = 0.0
    durationS: Seconds = 0.0
    error: str = Field(default="", max_length=MAX_ERROR_CHARS)
    driver: Driver | None = None


def parse(
    model: type[BaseModel], data: Any, now: float | None = None
) -> tuple[BaseModel | None, list[FieldError]]:
    """``(payload, [])`` or ``(None, errors)``; a body that is not a JSON object is one error at the root.
    Timestamps may be at most one day after ``now`` (epoch s; default: the clock)."""
    if not isinstance(data, dict):
        return None, [FieldError("", "the body must be a JSON object")]
    try:
        return model.model_validate(data, context={"now": time.time() if now is None else now}), []
    except ValidationError as exc:
        return None, from_pydantic(exc)
