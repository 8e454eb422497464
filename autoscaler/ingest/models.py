"""Stored telemetry of engine-side agents and the desired state they apply, per (application, operator).

Units: rates in tuples/s, durations in ms where the name says ``_ms`` and seconds where it says ``_s``.

Retention (``autoscaler.ingest.store.prune``): the raw progress JSON is kept for ``INGEST_RAW_RETENTION_S``
(default 1 h); samples older than ``INGEST_SAMPLE_RETENTION_S`` (default 7 days) are folded into hourly
``ProgressRollup`` rows and deleted, so months of 1 s micro-batches stay a few thousand rows per operator.
"""

from __future__ import annotations

from django.db import models

from autoscaler.models import Operator


class ProgressSample(models.Model):
    """One micro-batch of one operator's streaming query (a ``StreamingQueryProgress``)."""

    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="progress_samples")
    timestamp = models.DateTimeField(help_text="start of the trigger (the progress' timestamp)")
    received_at = models.DateTimeField(auto_now_add=True)
    run_id = models.CharField(max_length=64, blank=True, default="")
    batch_id = models.BigIntegerField()
    num_input_rows = models.BigIntegerField()
    input_rate = models.FloatField(null=True, help_text="tuples/s")
    processed_rate = models.FloatField(null=True, help_text="tuples/s")
    batch_duration_ms = models.FloatField(null=True)
    e2e_mean_s = models.FloatField(null=True)
    e2e_p95_s = models.FloatField(null=True)
    e2e_n = models.BigIntegerField(null=True)
    backlog = models.FloatField(null=True, help_text="tuples reported by the sources, when they do")
    raw = models.JSONField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["operator", "timestamp"])]
        ordering = ["operator", "timestamp"]
        constraints = [  # a shipment retried after a lost answer is stored once
            models.UniqueConstraint(fields=["operator", "run_id", "batch_id"], name="unique_progress_batch")
        ]


class LatencySample(models.Model):
    """End-to-end latency of records written by the sink, reported by the job (``agent.report_latency``)."""

    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="latency_samples")
    timestamp = models.DateTimeField()
    mean_s = models.FloatField()
    p95_s = models.FloatField()
    n = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["operator", "timestamp"])]


class ProgressRollup(models.Model):
    """Hourly totals of pruned samples: batches, input rows, busy time (ms), latency-weighted sums."""

    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="progress_rollups")
    hour = models.DateTimeField()
    batches = models.BigIntegerField(default=0)
    input_rows = models.BigIntegerField(default=0)
    busy_ms = models.FloatField(default=0.0)
    e2e_n = models.BigIntegerField(default=0)
    e2e_sum_s = models.FloatField(default=0.0)
    e2e_p95_max_s = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["operator", "hour"], name="unique_rollup_hour")]


class DriverStatus(models.Model):
    """What the operator's driver last said about itself (every shipment carries it)."""

    operator = models.OneToOneField(Operator, on_delete=models.CASCADE, related_name="driver_status")
    ui_url = models.CharField(max_length=255, blank=True, default="")
    app_id = models.CharField(max_length=255, blank=True, default="")
    executors = models.IntegerField(null=True)
    profile = models.JSONField(null=True, blank=True)
    generation = models.BigIntegerField(default=0)
    dropped = models.BigIntegerField(default=0, help_text="items the agent dropped (queue full), cumulative")
    last_seen = models.DateTimeField()


class DesiredState(models.Model):
    """What the agent of an operator must run: executors of one profile; a new generation per change."""

    operator = models.OneToOneField(Operator, on_delete=models.CASCADE, related_name="desired_state")
    generation = models.BigIntegerField(default=0)
    executors = models.PositiveIntegerField()
    profile = models.JSONField(help_text="{name, cores, memoryMiB}")
    updated_at = models.DateTimeField(auto_now=True)


class AppliedAck(models.Model):
    """The agent's acknowledgement of one generation: executors seen, downtime (s), error (empty = ok)."""

    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="applied_acks")
    generation = models.BigIntegerField()
    executors = models.IntegerField()
    profile = models.JSONField(null=True, blank=True)
    downtime_s = models.FloatField(default=0.0)
    duration_s = models.FloatField(default=0.0)
    error = models.TextField(blank=True, default="")
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["operator", "generation"])]
        ordering = ["operator", "-generation", "-id"]


class IngestToken(models.Model):
    """The secret an application's engine-side agents authenticate with: it writes that application's ingest
    endpoints and nothing else (``autoscaler.ingest.authentication``). Only its SHA-256 is stored; the secret
    is shown once, when ``manage.py ingest_token`` creates or rotates it."""

    application = models.OneToOneField(
        "autoscaler.Application", on_delete=models.CASCADE, related_name="ingest_token"
    )
    key_hash = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the secret, hex")
    prefix = models.CharField(max_length=12, help_text="first characters of the secret, to recognise it")
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(auto_now=True)
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="updated at most once a minute")

    def __str__(self) -> str:
        return f"ingest token {self.prefix}... of {self.application}"
