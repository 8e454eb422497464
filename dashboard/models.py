"""Storage of the monitoring pages: per-day rollups of the control plane's periods and what-if runs.

Units: times in seconds since the epoch, costs in currency over one period (cost per hour = cost * 3600 / period),
rates in tuples/s, response times in ms.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from autoscaler.models import Application


class SeriesChunk(models.Model):
    """One day (UTC) of an application's observed periods, one row per tick, as packed numpy arrays.

    ``times``: float64 per row, the end of the observed period (s since the epoch); ``values``: float32 matrix
    ``len(columns) x rows`` (C order: each column's values contiguous, read without a strided gather), NaN = not
    measured. Built incrementally from ``Tick``/``Decision`` by
    :mod:`dashboard.monitor.rollup`; reading a month is 30 rows instead of ~half a million decisions."""

    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="series_chunks")
    day = models.BigIntegerField(help_text="floor(time / 86400)")
    columns = models.JSONField(default=list)
    times = models.BinaryField(default=b"")
    values = models.BinaryField(default=b"")
    n_rows = models.PositiveIntegerField(default=0)
    last_time = models.FloatField(default=0.0, help_text="end of the last observed period rolled up (s)")
    events = models.JSONField(
        default=list,
        blank=True,
        help_text="scaling proposals granted or denied: [time (s), decision id, outcome, operator, action]",
    )
    gaps = models.JSONField(
        default=list,
        blank=True,
        help_text="missed slots (no decision): [end of the period (s), period (s), reason]",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["application", "day"], name="unique_series_chunk_day")]
        ordering = ["application", "day"]

    def __str__(self) -> str:
        return f"{self.application} day {self.day} ({self.n_rows} rows)"


class WhatIfRun(models.Model):
    """A simulator run over an application's recorded input rates with another policy, weights or SLO."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="whatif_runs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="whatif_runs")
    params = models.JSONField(default=dict, help_text="policy, params, weights, rMaxMs, etaV, etaR, range")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0, help_text="fraction of the trace simulated, in [0, 1]")
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"what-if #{self.pk} of {self.application} ({self.status})"
