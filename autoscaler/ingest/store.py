"""Reads and writes of the ingest tables, shared by the endpoints and the Spark connector.

Everything here takes an ``autoscaler.models.Operator`` (the desired state: an Operator or its primary key); times are aware datetimes or seconds since the epoch.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from autoscaler.ingest.models import (
    AppliedAck,
    DesiredState,
    DriverStatus,
    LatencySample,
    ProgressRollup,
    ProgressSample,
)
from autoscaler.ingest.records import ack_columns, driver_columns, latency_columns, progress_columns
from autoscaler.ingest.serializers import INT64_MAX, AppliedPayload, ProgressPayload

PRUNE_EVERY_S = 600.0
_last_prune = 0.0


def raw_retention_s() -> float:
    return float(getattr(settings, "INGEST_RAW_RETENTION_S", 3600.0))


def sample_retention_s() -> float:
    return float(getattr(settings, "INGEST_SAMPLE_RETENTION_S", 7 * 86400.0))


def store_progress(operator, payload: ProgressPayload) -> int:
    """Store a validated shipment in one transaction; returns the number of progress samples received (a batch
    already stored, same run id and batch id, is not stored again)."""
    samples = [ProgressSample(operator=operator, **progress_columns(item)) for item in payload.progress]
    latencies = [LatencySample(operator=operator, **latency_columns(x)) for x in payload.latency]
    with transaction.atomic():
        ProgressSample.objects.bulk_create(samples, ignore_conflicts=True)  # retried shipments: stored once
        LatencySample.objects.bulk_create(latencies)
        d = payload.driver
        defaults: dict[str, Any] = {"last_seen": timezone.now(), "dropped": payload.dropped}
        if d is not None:
            defaults.update(driver_columns(d))
        DriverStatus.objects.update_or_create(operator=operator, defaults=defaults)
    maybe_prune()
    return len(samples)


def _operator_id(operator) -> int:
    """The primary key of ``operator`` (an Operator or its key)."""
    return operator if isinstance(operator, int) else operator.pk


def desired_of(operator) -> dict[str, Any]:
    """``{"generation", "executors", "profile"}``; generation 0 and no executors when nothing is desired yet."""
    row = DesiredState.objects.filter(operator_id=_operator_id(operator)).first()
    if row is None:
        return {"generation": 0, "executors": None, "profile": None}
    return {"generation": row.generation, "executors": row.executors, "profile": row.profile}


def set_desired(operator, executors: int, profile: dict[str, Any]) -> int:
    """Write a new desired state (a new generation); returns the generation."""
    with transaction.atomic():
        row, created = DesiredState.objects.select_for_update().get_or_create(
            operator_id=_operator_id(operator),
            defaults={"generation": 1, "executors": executors, "profile": profile},
        )
        if not created:
            row.generation = F("generation") + 1
            row.executors = executors
            row.profile = profile
            row.save()
            row.refresh_from_db()
        return int(row.generation)


def store_ack(operator, payload: AppliedPayload) -> AppliedAck:
    """Store an acknowledgement; the driver it names (a restart starts a new one) becomes the known driver."""
    d = payload.driver
    if d is not None:
        DriverStatus.objects.update_or_create(
            operator=operator,
            defaults={"last_seen": timezone.now(), **driver_columns(d)},
        )
    return AppliedAck.objects.create(operator=operator, **ack_columns(payload))


def ack_of(operator, generation: int) -> AppliedAck | None:
    return AppliedAck.objects.filter(operator=operator, generation=generation).order_by("-id").first()


def maybe_prune(now_s: float | None = None) -> None:
    """Prune at most every ``PRUNE_EVERY_S`` seconds per process."""
    global _last_prune
    now_s = time.time() if now_s is None else now_s
    if now_s - _last_prune >= PRUNE_EVERY_S:
        _last_prune = now_s
        prune(now_s)


def prune(now_s: float | None = None) -> dict[str, int]:
    """Drop raw JSON older than the raw retention; fold samples older than the sample retention into hourly
    rollups and delete them. Returns counts ``{"raw_cleared", "rolled_up"}``."""
    now = dt.datetime.fromtimestamp(time.time() if now_s is None else now_s, tz=dt.UTC)
    raw_cut = now - dt.timedelta(seconds=raw_retention_s())
    cut = now - dt.timedelta(seconds=sample_retention_s())
    cleared = ProgressSample.objects.filter(timestamp__lt=raw_cut, raw__isnull=False).update(raw=None)
    old = ProgressSample.objects.filter(timestamp__lt=cut)
    rolled = 0
    with transaction.atomic():
        buckets: dict[tuple[int, dt.datetime], dict[str, Any]] = {}
        for s in old.iterator():
            hour = s.timestamp.replace(minute=0, second=0, microsecond=0)
            b = buckets.setdefault(
                (s.operator_id, hour),
                {"batches": 0, "input_rows": 0, "busy_ms": 0.0, "e2e_n": 0, "e2e_sum_s": 0.0, "p95": None},
            )
            b["batches"] += 1
            b["input_rows"] = min(b["input_rows"] + s.num_input_rows, INT64_MAX)  # BigIntegerField saturates
            b["busy_ms"] += s.batch_duration_ms or 0.0
            if s.e2e_mean_s is not None and s.e2e_n:
                b["e2e_n"] = min(b["e2e_n"] + s.e2e_n, INT64_MAX)
                b["e2e_sum_s"] += s.e2e_mean_s * s.e2e_n
            if s.e2e_p95_s is not None:
                b["p95"] = max(b["p95"] or 0.0, s.e2e_p95_s)
            rolled += 1
        for (op_id, hour), b in buckets.items():
            row, _ = ProgressRollup.objects.select_for_update().get_or_create(operator_id=op_id, hour=hour)
            row.batches += b["batches"]
            row.input_rows = min(row.input_rows + b["input_rows"], INT64_MAX)
            row.busy_ms += b["busy_ms"]
            row.e2e_n = min(row.e2e_n + b["e2e_n"], INT64_MAX)
            row.e2e_sum_s += b["e2e_sum_s"]
            if b["p95"] is not None:
                row.e2e_p95_max_s = max(row.e2e_p95_max_s or 0.0, b["p95"])
            row.save()
        old.delete()
        LatencySample.objects.filter(timestamp__lt=cut).delete()
    return {"raw_cleared": cleared, "rolled_up": rolled}
