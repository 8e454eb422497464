"""``connectors.spark.store.SparkStore`` on the ingest tables: what the Spark connector reads and writes.

The operator key is the primary key of an ``autoscaler.models.Operator``. Reads return the connector's plain
dataclasses (times in s since the epoch; rows converted by ``autoscaler.ingest.records``, as the in-memory
ingest of the tests converts the agent's JSON), never rows; the desired state is written as
``autoscaler.ingest.store.set_desired`` does (a new generation in one transaction).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from autoscaler.ingest import models as m
from autoscaler.ingest import store
from autoscaler.ingest.records import (
    ACK_FIELDS,
    DRIVER_FIELDS,
    LATENCY_FIELDS,
    PROGRESS_FIELDS,
    acknowledgement,
    driver_state,
    latency_record,
    progress_record,
)
from connectors.spark.store import (
    Acknowledgement,
    DesiredState,
    DriverState,
    LatencyRecord,
    OperatorKey,
    ProgressRecord,
)


def _ts(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


class OrmSparkStore:
    """The Spark connector's storage in the database (``autoscaler.ingest.models``)."""

    def progress(self, operator: OperatorKey, start: float, end: float) -> list[ProgressRecord]:
        rows = m.ProgressSample.objects.filter(
            operator_id=operator, timestamp__gte=_ts(start), timestamp__lt=_ts(end)
        ).order_by("timestamp")
        return [progress_record(r) for r in rows.values(*PROGRESS_FIELDS)]

    def last_progress_before(self, operator: OperatorKey, t: float) -> ProgressRecord | None:
        row = (
            m.ProgressSample.objects.filter(operator_id=operator, timestamp__lt=_ts(t))
            .order_by("-timestamp")
            .values(*PROGRESS_FIELDS)
            .first()
        )
        return None if row is None else progress_record(row)

    def batch(self, operator: OperatorKey, run_id: str, batch_id: int) -> ProgressRecord | None:
        row = (
            m.ProgressSample.objects.filter(operator_id=operator, run_id=run_id, batch_id=batch_id)
            .values(*PROGRESS_FIELDS)
            .first()
        )
        return None if row is None else progress_record(row)

    def has_batch_before(self, operator: OperatorKey, run_id: str, batch_id: int) -> bool:
        return m.ProgressSample.objects.filter(
            operator_id=operator, run_id=run_id, batch_id__lt=batch_id
        ).exists()

    def latencies(self, operator: OperatorKey, start: float, end: float) -> list[LatencyRecord]:
        rows = m.LatencySample.objects.filter(
            operator_id=operator, timestamp__gte=_ts(start), timestamp__lt=_ts(end)
        ).values(*LATENCY_FIELDS)
        return [latency_record(r) for r in rows]

    def driver(self, operator: OperatorKey) -> DriverState | None:
        row = m.DriverStatus.objects.filter(operator_id=operator).values(*DRIVER_FIELDS, "last_seen").first()
        return None if row is None else driver_state(row, row["last_seen"])

    def desired(self, operator: OperatorKey) -> DesiredState:
        d = store.desired_of(operator)
        return DesiredState(d["generation"], d["executors"], d["profile"])

    def set_desired(self, operator: OperatorKey, executors: int, profile: dict[str, Any]) -> int:
        return store.set_desired(operator, executors, profile)

    def acknowledgement(self, operator: OperatorKey, min_generation: int) -> Acknowledgement | None:
        row = (
            m.AppliedAck.objects.filter(operator_id=operator, generation__gte=min_generation)
            .order_by("-generation", "-id")
            .values(*ACK_FIELDS)
            .first()
        )
        return None if row is None else acknowledgement(row)
