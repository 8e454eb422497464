"""Stored resources of the control plane. Validation lives in ``autoscaler.schemas``; these are only storage.

Units: memory in MiB, prices in currency per hour, periods and delays in seconds, response times in ms.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Timestamped(models.Model):
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class NodeTypeCatalog(Timestamped):
    """A named set of node types (shared by all users)."""

    name = models.CharField(max_length=63, unique=True)
    description = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class NodeType(models.Model):
    """One node type of a catalog: vCPU cores, memory (MiB), relative speedup (>0), price (currency/h, >=0)."""

    catalog = models.ForeignKey(NodeTypeCatalog, on_delete=models.CASCADE, related_name="node_types")
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=63)
    cores = models.PositiveIntegerField()
    memory_mib = models.PositiveIntegerField()
    speedup = models.FloatField()
    price_per_hour = models.FloatField()

    class Meta:
        ordering = ["catalog", "position"]
        constraints = [
            models.UniqueConstraint(fields=["catalog", "name"], name="unique_node_type_per_catalog")
        ]

    def __str__(self) -> str:
        return f"{self.catalog.name}/{self.name}"


class Region(Timestamped):
    """A pool of nodes of one catalog (shared by all users). Delay in seconds."""

    name = models.CharField(max_length=63, unique=True)
    catalog = models.ForeignKey(NodeTypeCatalog, on_delete=models.PROTECT, related_name="regions")
    max_nodes = models.PositiveIntegerField()
    max_new_nodes_per_period = models.PositiveIntegerField()
    provisioning_delay_s = models.FloatField(default=0.0)
    provider = models.JSONField(
        default=dict, blank=True, help_text="node provider: {kind, settings}; empty = bookkeeping only"
    )
    endpoints = models.JSONField(
        default=list,
        blank=True,
        help_text="engine addresses (URLs) that applications in this region may reference; staff declare them",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Application(Timestamped):
    """A stream-processing application owned by one user, with its SLO, policies and connector settings."""

    class Engine(models.TextChoices):
        SPARK = "spark"
        FLINK = "flink"
        SIMULATED = "simulated"

    class State(models.TextChoices):
        REGISTERED = "registered"
        RUNNING = "running"
        PAUSED = "paused"
        DELETED = "deleted"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="applications")
    name = models.CharField(max_length=63)
    engine = models.CharField(max_length=16, choices=Engine.choices)
    connector = models.JSONField(default=dict, blank=True)
    r_max_ms = models.FloatField(help_text="SLO: response-time bound of every source-to-sink path (ms)")
    eta_v = models.FloatField(help_text="SLO: tolerated fraction of periods violating R_max, in [0, 1)")
    eta_r = models.FloatField(
        help_text="SLO: tolerated fraction of periods with a reconfiguration, in [0, 1)"
    )
    slo_paths = models.JSONField(default=list, blank=True, help_text="per-path R_max overrides")
    policies = models.JSONField(default=dict, blank=True, help_text="level -> {name, params}")
    om_period_s = models.FloatField(default=60.0)
    am_period_s = models.FloatField(default=600.0)
    regions = models.ManyToManyField(Region, blank=True, related_name="applications")
    region_order = models.JSONField(default=list, blank=True)
    dry_run = models.BooleanField(
        default=False, help_text="decide and record scaling actions, never apply them"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.REGISTERED)
    rails = models.JSONField(
        default=dict, blank=True, help_text="safety rails (spec.rails, non-default fields only)"
    )

    class Meta:
        ordering = ["owner", "name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="unique_application_per_owner")]

    def __str__(self) -> str:
        return self.name


class Operator(models.Model):
    """An operator of an application: kind, K_max, selectivity, engine object, optional service time (ms)."""

    class Kind(models.TextChoices):
        SOURCE = "source"
        OPERATOR = "operator"
        SINK = "sink"

    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="operators")
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=63)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.OPERATOR)
    max_parallelism = models.PositiveIntegerField(default=1)
    selectivity = models.FloatField(default=1.0)
    engine_object = models.CharField(max_length=255, null=True, blank=True)
    service_time_ms = models.FloatField(null=True, blank=True)
    expected_peak_rate = models.FloatField(null=True, blank=True)  # tuples/s, a hint for the rate range

    class Meta:
        ordering = ["application", "position"]
        constraints = [
            models.UniqueConstraint(fields=["application", "name"], name="unique_operator_per_app")
        ]

    def __str__(self) -> str:
        return f"{self.application.name}/{self.name}"


class Stream(models.Model):
    """A directed edge between two operators of the same application."""

    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="streams")
    position = models.PositiveIntegerField(default=0)
    source = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="outputs")
    target = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="inputs")

    class Meta:
        ordering = ["application", "position"]

    def __str__(self) -> str:
        return f"{self.source.name} -> {self.target.name}"


class Deployment(Timestamped):
    """Replicas per node type (the vector k) of one operator in one region; one deployment per operator.

    ``replicas`` is the declared spec (written only by manifests); the ``status_*`` fields are what the engine
    runs, written by the control loop (``autoscaler.control.status``) after a verified apply and on the first
    observation. ``status_replicas`` is None until the loop has seen the engine."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="deployments")
    name = models.CharField(max_length=63)
    operator = models.OneToOneField(Operator, on_delete=models.CASCADE, related_name="deployment")
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="deployments")
    replicas = models.JSONField(help_text="spec: node-type name -> number of replicas")
    status_replicas = models.JSONField(
        null=True,
        blank=True,
        help_text="status: node-type name -> replicas the engine runs (None: not seen yet)",
    )
    status_since = models.DateTimeField(
        null=True, blank=True, help_text="status: when the loop applied or first saw them"
    )
    status_source = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="status: 'control' (an apply) or 'observed' (first seen)",
    )
    status_decision = models.ForeignKey(
        "control.Decision",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="status: the control decision whose apply brought them",
    )
    status_engine_ids = models.JSONField(
        default=dict,
        blank=True,
        help_text="status: the engine's identifiers (Flink job id, Spark generation)",
    )

    class Meta:
        ordering = ["owner", "name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="unique_deployment_per_owner")]

    def __str__(self) -> str:
        return self.name

    @property
    def total_replicas(self) -> int:
        """Declared replicas (spec)."""
        return sum(self.replicas.values())

    @property
    def running_replicas(self) -> dict[str, int]:
        """Replicas the engine runs (status), or the declared ones (spec) while the loop has not seen it."""
        return dict(self.status_replicas if self.status_replicas is not None else self.replicas)


class DeploymentHistory(models.Model):
    """One value of a deployment's replicas, appended on every change: ``source`` "manifest" (the spec was
    applied), "control" (the loop applied a decision: ``decision``) or "observed" (the engine first seen running
    other replicas than declared)."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="history")
    changed_at = models.DateTimeField(auto_now_add=True)
    region = models.CharField(max_length=63)
    replicas = models.JSONField()
    source = models.CharField(max_length=32, default="manifest", help_text="manifest, control or observed")
    decision = models.ForeignKey(
        "control.Decision",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="the control decision whose apply made the change (source 'control')",
    )

    class Meta:
        ordering = ["deployment", "-changed_at", "-id"]
        verbose_name_plural = "deployment history"
