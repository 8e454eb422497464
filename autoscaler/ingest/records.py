"""The agent's validated ingest payloads (``autoscaler.ingest.serializers``) as stored columns, and stored columns
as the Spark connector's records (``connectors.spark.store``). Pure Python, no Django.

One conversion for every store of the agent's telemetry: the control plane writes these columns into the ingest
tables (``autoscaler.ingest.store``) and reads them back as records (``autoscaler.ingest.spark_store``); an
in-memory ingest endpoint (the Spark connector's contract tests) goes through the same two steps, so both see
the agent's JSON alike. Columns are dicts named after the model fields; times are aware datetimes (UTC), as a
``DateTimeField`` holds them, and become seconds since the epoch in records.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from autoscaler.ingest.serializers import AppliedPayload, Driver, LatencyItem, ProgressItem
from connectors.spark.store import Acknowledgement, DriverState, LatencyRecord, ProgressRecord

#: the ``ProgressSample`` columns a ``ProgressRecord`` holds
PROGRESS_FIELDS = (
    "run_id",
    "batch_id",
    "timestamp",
    "num_input_rows",
    "batch_duration_ms",
    "e2e_mean_s",
    "e2e_p95_s",
    "e2e_n",
    "backlog",
    "raw",
)
#: the ``LatencySample`` columns a ``LatencyRecord`` holds
LATENCY_FIELDS = ("timestamp", "mean_s", "p95_s", "n")
#: the ``DriverStatus`` columns a driver block sets
DRIVER_FIELDS = ("ui_url", "app_id", "executors", "profile", "generation")
#: the ``AppliedAck`` columns an ``Acknowledgement`` holds
ACK_FIELDS = ("generation", "executors", "downtime_s", "duration_s", "error")


def progress_columns(item: ProgressItem) -> dict[str, Any]:
    """The ``ProgressSample`` columns of one progress item (the raw JSON kept whole)."""
    e2e = item.e2e()
    return {
        "timestamp": item.timestamp,
        "run_id": item.runId,
        "batch_id": item.batchId,
        "num_input_rows": item.numInputRows,
        "input_rate": item.inputRowsPerSecond,
        "processed_rate": item.processedRowsPerSecond,
        "batch_duration_ms": item.batchDuration,
        "e2e_mean_s": e2e.mean_s if e2e else None,
        "e2e_p95_s": e2e.p95_s if e2e else None,
        "e2e_n": e2e.n if e2e else None,
        "backlog": item.backlog(),
        "raw": item.model_dump(mode="json"),
    }


def latency_columns(item: LatencyItem) -> dict[str, Any]:
    """The ``LatencySample`` columns of one sink latency report."""
    return {
        "timestamp": dt.datetime.fromtimestamp(item.timestamp, tz=dt.UTC),
        "mean_s": item.mean_s,
        "p95_s": item.p95_s,
        "n": item.n,
    }


def driver_columns(driver: Driver) -> dict[str, Any]:
    """The ``DriverStatus`` columns a driver block sets (``last_seen`` is the time it arrived)."""
    return {
        "ui_url": driver.uiUrl,
        "app_id": driver.appId,
        "executors": driver.executors,
        "profile": driver.profile,
        "generation": driver.generation,
    }


def ack_columns(payload: AppliedPayload) -> dict[str, Any]:
    """The ``AppliedAck`` columns of an acknowledgement."""
    return {
        "generation": payload.generation,
        "executors": payload.executors,
        "profile": payload.profile,
        "downtime_s": payload.downtimeS,
        "duration_s": payload.durationS,
        "error": payload.error,
    }


def progress_record(columns: Mapping[str, Any]) -> ProgressRecord:
    """A stored micro-batch (at least ``PROGRESS_FIELDS``) as the connector reads it."""
    values = {k: columns[k] for k in PROGRESS_FIELDS}
    return ProgressRecord(**{**values, "timestamp": values["timestamp"].timestamp()})


def latency_record(columns: Mapping[str, Any]) -> LatencyRecord:
    """A stored sink latency report (``LATENCY_FIELDS``) as the connector reads it."""
    return LatencyRecord(columns["timestamp"].timestamp(), columns["mean_s"], columns["p95_s"], columns["n"])


def driver_state(columns: Mapping[str, Any], last_seen: dt.datetime) -> DriverState:
    """A stored driver status (``DRIVER_FIELDS``), last heard of at ``last_seen``, as the connector reads it."""
    return DriverState(
        columns["ui_url"], columns["app_id"], columns["executors"], columns["profile"], last_seen.timestamp()
    )


def acknowledgement(columns: Mapping[str, Any]) -> Acknowledgement:
    """A stored acknowledgement (``ACK_FIELDS``) as the connector reads it."""
    return Acknowledgement(*(columns[k] for k in ACK_FIELDS))
