"""Storage of the control loop: tick ledger, agent state blobs, decision log, per-application control state.

Units: periods and delays in seconds, costs in currency (resource cost over one period), prices in currency/h.
"""

from __future__ import annotations

from django.db import models

from autoscaler.models import Application, Operator, Region

#: Version of the agent-state envelope stored in ``AgentState.blob`` (the policy's own format is inside it).
AGENT_STATE_FORMAT = 1


class ApplicationControl(models.Model):
    """Per-application control state: safety rails, AM configuration and token bucket, dispatch bookkeeping and
    the incrementally maintained aggregates (totals plus sliding windows as ring buffers, O(1) per tick)."""

    application = models.OneToOneField(Application, on_delete=models.CASCADE, related_name="control")
    rails = models.JSONField(default=dict, blank=True, help_text="safety rails, see autoscaler.control.rails")
    am_config = models.JSONField(
        default=dict, blank=True, help_text="per-operator bounds (ms) and cost weights"
    )
    am_config_version = models.PositiveIntegerField(default=0)
    am_state = models.BinaryField(null=True, blank=True, help_text="AM policy state (BO history)")
    am_tuned_slot = models.BigIntegerField(default=-1)
    am_dispatched_slot = models.BigIntegerField(default=-1)
    bucket_tokens = models.FloatField(null=True, blank=True, help_text="reconfiguration token bucket level")
    last_dispatched_slot = models.BigIntegerField(default=-1)
    last_dispatched_start_s = models.FloatField(
        null=True, blank=True, help_text="start of the last claimed slot (s since the epoch)"
    )
    last_dispatched_period_s = models.FloatField(
        null=True, blank=True, help_text="T_OM of the last claimed slot (s); its end = start + this"
    )
    running_since_s = models.FloatField(
        null=True, blank=True, help_text="start of the first slot claimed since the application last ran (s)"
    )
    paused_since_s = models.FloatField(
        null=True,
        blank=True,
        help_text="first dispatch that saw the application not running (s since the epoch)",
    )
    last_tick_slot = models.BigIntegerField(default=-1)
    pending_slots = models.JSONField(
        default=list,
        blank=True,
        help_text="claimed [slot, period (s)] pairs whose ledger row is not checked yet",
    )
    learned_slot_start_s = models.FloatField(
        default=-1.0,
        help_text="start of the newest slot the OMs decided on (s since the epoch): learning order",
    )
    last_tick_at = models.DateTimeField(null=True, blank=True, help_text="when the last tick finished")
    missed_slots = models.JSONField(
        default=dict, blank=True, help_text="missed slots by reason (worker_down, database_down, stale, ...)"
    )
    early_ticks_total = models.BigIntegerField(default=0)
    operator_memory = models.JSONField(
        default=dict, blank=True, help_text="per operator: last scale-up time, ineffective block, capacity"
    )
    # aggregates since the start
    periods = models.BigIntegerField(default=0)
    no_data_periods = models.BigIntegerField(default=0)
    violated_periods = models.BigIntegerField(default=0)
    reconfigured_periods = models.BigIntegerField(default=0)
    total_cost = models.FloatField(default=0.0, help_text="resource cost (currency) of all observed periods")
    observed_seconds = models.FloatField(default=0.0)
    # sliding windows over the last ``window`` observed periods: ring buffers + running sums
    window = models.PositiveIntegerField(default=60)
    ring_pos = models.PositiveIntegerField(default=0)
    ring_fill = models.PositiveIntegerField(default=0)
    ring_flags = models.BinaryField(
        default=b"", help_text="1 byte per period: bit0 violated, bit1 reconfigured"
    )
    ring_cost = models.BinaryField(default=b"", help_text="float64 per period: resource cost (currency)")
    ring_seconds = models.BinaryField(default=b"", help_text="float64 per period: period length (s)")
    window_violated = models.PositiveIntegerField(default=0)
    window_reconfigured = models.PositiveIntegerField(default=0)
    window_cost = models.FloatField(default=0.0)
    window_seconds = models.FloatField(default=0.0)
    # time windows (last hour / day / 7 days) as bucketed rings, see autoscaler.control.aggregates
    time_windows = models.BinaryField(default=b"", blank=True, help_text="bucketed rings (format byte first)")
    # Prometheus counters (monotonic) and the tick-latency histogram (bucket upper bound in s -> count)
    ticks_total = models.BigIntegerField(default=0)
    duplicate_ticks_total = models.BigIntegerField(default=0)
    tick_errors_total = models.BigIntegerField(default=0)
    decisions_total = models.BigIntegerField(default=0)
    reconfigurations_applied_total = models.BigIntegerField(default=0)
    denied_total = models.BigIntegerField(default=0)
    latency_sum_s = models.FloatField(default=0.0)
    latency_buckets = models.JSONField(default=dict, blank=True)
    last_error = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"control of {self.application}"


class Tick(models.Model):
    """The ledger of ticks: one row per (application, slot). A tick observes period ``slot - 1``.

    A slot without a decision is a ``missed`` row whose ``reason`` says why (see ``autoscaler.control.slots``)."""

    class Status(models.TextChoices):
        RUNNING = "running"
        APPLYING = "applying"
        DONE = "done"
        NO_DATA = "no_data"
        FAILED = "failed"
        MISSED = "missed"

    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="ticks")
    slot = models.BigIntegerField()
    period_s = models.FloatField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    attempts = models.PositiveIntegerField(default=0)
    dry_run = models.BooleanField(default=False)
    plan = models.JSONField(null=True, blank=True, help_text="operator -> target deployment")
    before = models.JSONField(null=True, blank=True, help_text="operator -> deployment before the plan")
    result = models.JSONField(null=True, blank=True, help_text="ApplyResult of the plan")
    error = models.TextField(blank=True, default="")
    reason = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="why a missed slot has no decision (stale, worker_down, ...)",
    )
    metrics = models.JSONField(null=True, blank=True, help_text="PeriodMetrics of the observed period")
    created_at = models.DateTimeField(auto_now_add=True)
    began_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="when the tick's latest attempt got the application's lock and passed the staleness check",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    latency_s = models.FloatField(null=True, blank=True, help_text="slot start to finish (s)")

    class Meta:
        ordering = ["application", "-slot"]
        constraints = [models.UniqueConstraint(fields=["application", "slot"], name="unique_tick_per_slot")]
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"{self.application}#{self.slot} {self.status}"


class AgentState(models.Model):
    """The durable state of one operator's OM policy (``Policy.state_bytes()``), saved after every step."""

    operator = models.OneToOneField(Operator, on_delete=models.CASCADE, related_name="agent")
    policy = models.CharField(max_length=63)
    format_version = models.PositiveSmallIntegerField(default=AGENT_STATE_FORMAT)
    blob = models.BinaryField()
    steps = models.BigIntegerField(default=0, help_text="learning steps completed (policy.t)")
    last_slot = models.BigIntegerField(default=-1)
    am_config_version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"agent {self.operator} ({self.policy}, t={self.steps})"


class Decision(models.Model):
    """One operator in one tick: what was observed, proposed, granted and applied, and what the period cost."""

    class Outcome(models.TextChoices):
        NO_DATA = "no_data"
        NO_CHANGE = "no_change"
        DENIED = "denied"
        DRY_RUN = "dry_run"
        APPLYING = "applying"
        APPLIED = "applied"
        FAILED = "failed"
        ROLLED_BACK = "rolled_back"

    tick = models.ForeignKey(Tick, on_delete=models.CASCADE, related_name="decisions")
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="decisions")
    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="decisions")
    slot = models.BigIntegerField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    observed = models.JSONField(default=dict, help_text="OperatorMetrics of the observed period")
    deployment = models.JSONField(default=dict, help_text="deployment in place during the observed period")
    proposal = models.JSONField(default=dict, help_text="action, target deployment and explanation")
    granted = models.BooleanField(default=False)
    reason = models.TextField(blank=True, default="", help_text="AM / safety-rail reason")
    applied = models.JSONField(null=True, blank=True, help_text="deployment in place after the tick")
    finished_at = models.DateTimeField(null=True, blank=True)
    downtime_s = models.FloatField(default=0.0)
    resource_cost = models.FloatField(
        default=0.0, help_text="currency spent on the deployment over the period"
    )
    violated = models.BooleanField(default=False)
    reconfigured = models.BooleanField(default=False, help_text="the observed period began with a change")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["application", "-slot", "operator"]
        indexes = [models.Index(fields=["application", "slot"]), models.Index(fields=["operator", "slot"])]

    def __str__(self) -> str:
        return f"{self.operator}#{self.slot} {self.outcome}"


class RegionTick(models.Model):
    """One RM step + IM arbitration of a region (ledger and record in one row), unique on (region, slot)."""

    region = models.ForeignKey(Region, on_delete=models.CASCADE, related_name="control_ticks")
    slot = models.BigIntegerField()
    policy = models.CharField(max_length=63)
    state = models.JSONField(default=dict, help_text="nodes per type in use by the region's deployments")
    proposals = models.JSONField(default=list)
    decisions = models.JSONField(default=list)
    agent_state = models.BinaryField(null=True, blank=True)
    period_s = models.FloatField(default=0.0, help_text="the region's RM period when the step ran (s)")
    warnings = models.JSONField(default=list, blank=True, help_text="e.g. disagreeing declared policies")
    executed = models.JSONField(
        default=list, blank=True, help_text="what the node provider did: acquired/released node ids, errors"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["region", "-slot"]
        constraints = [models.UniqueConstraint(fields=["region", "slot"], name="unique_region_tick_per_slot")]


class SimulatedEngine(models.Model):
    """The durable state of a simulated engine (the deployment "running" on it) and its fault injection.

    This is the engine's storage, not the control plane's: it is written by the simulated realizer immediately
    (outside the control loop's transactions), as a real engine would be. ``applies`` counts reconfigurations
    the engine received. ``faults``: ``missingSlots`` (list), ``refuseApply`` (bool), ``applyDelayS``,
    ``collectDelayS`` (s), ``failCollect`` (count of collects that raise ConnectorError), ``speedupOverride``
    (node type -> speedup the engine really delivers), ``failingOperators`` (operators reported as down),
    ``jobState`` (the whole job reported in this engine state, e.g. FAILED or RESTARTING). ``queue``: the
    backlog per operator (records) and pending downtime (s) of an engine with ``backlog: true``
    (``connectors.simulated.FluidState``)."""

    application = models.OneToOneField(Application, on_delete=models.CASCADE, related_name="simulated_engine")
    deployments = models.JSONField(null=True, blank=True)
    queue = models.JSONField(null=True, blank=True)
    applies = models.PositiveIntegerField(default=0)
    faults = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)


class RegionControl(models.Model):
    """Per-region control settings and the policies in force (see ``autoscaler.control.regions``).

    ``rm_period_s``: the region's RM period (s); null = the shortest OM period of the applications placed in it.
    ``rm_policy``/``im_policy`` (+ params): the policies the last step used and where they came from.
    """

    region = models.OneToOneField(Region, on_delete=models.CASCADE, related_name="control")
    rm_period_s = models.FloatField(null=True, blank=True)
    rm_policy = models.CharField(max_length=63, blank=True, default="")
    rm_params = models.JSONField(default=dict, blank=True)
    im_policy = models.CharField(max_length=63, blank=True, default="")
    im_params = models.JSONField(default=dict, blank=True)
    policy_source = models.TextField(blank=True, default="", help_text="which application declared them")
    capacity = models.JSONField(
        default=dict,
        blank=True,
        help_text="snapshot of the last RM step: ready_slots / used_slots per node type, slot (for the AM)",
    )
    last_error = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"control of region {self.region}"


class RegionNode(models.Model):
    """One node of a region as acquired through its NodeProvider (durable record; released nodes are kept).

    Times are seconds since the epoch: a node can host replicas from ``ready_at_s`` (acquisition + the region's
    provisioning delay)."""

    class State(models.TextChoices):
        BOOTING = "booting"
        READY = "ready"
        RELEASED = "released"
        LOST = "lost"

    region = models.ForeignKey(Region, on_delete=models.CASCADE, related_name="control_nodes")
    node_id = models.CharField(max_length=255)
    node_type = models.CharField(max_length=63)
    state = models.CharField(max_length=16, choices=State.choices, default=State.BOOTING)
    provider = models.CharField(max_length=63, default="bookkeeping")
    acquired_slot = models.BigIntegerField(default=-1)
    acquired_at_s = models.FloatField(default=0.0)
    ready_at_s = models.FloatField(default=0.0)
    released_slot = models.BigIntegerField(null=True, blank=True)
    released_at_s = models.FloatField(null=True, blank=True)
    reason = models.TextField(
        blank=True, default="", help_text="the RM/IM decision that acquired/released it"
    )
    details = models.JSONField(default=dict, blank=True)
    replicas = models.JSONField(
        default=list,
        blank=True,
        help_text="replicas placed on it, one '<application id>/<operator>' entry each (one per core)",
    )

    class Meta:
        ordering = ["region", "acquired_at_s", "id"]
        indexes = [models.Index(fields=["region", "state"])]

    def __str__(self) -> str:
        return f"{self.region}/{self.node_id} ({self.node_type}, {self.state})"


class WaitingRequest(models.Model):
    """An OM scale-out the AM could not place because the region has no free provisioned slot of the node type:
    it waits for the RM/IM (an unsatisfied request M_r of the RM cost), one row per operator."""

    region = models.ForeignKey(Region, on_delete=models.CASCADE, related_name="waiting_requests")
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="waiting_requests")
    operator = models.OneToOneField(Operator, on_delete=models.CASCADE, related_name="waiting_request")
    node_type = models.CharField(max_length=63)
    slots = models.PositiveIntegerField(default=1, help_text="replica slots (cores) the request needs")
    since_slot = models.BigIntegerField()
    last_slot = models.BigIntegerField()
    reason = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return f"{self.operator} waits for {self.slots} {self.node_type} slot(s) in {self.region}"


class Consolidation(models.Model):
    """An IM consolidation proposal to one application's AM (paper 004 Sec. 6.3): ``moves`` of its replicas
    between ready nodes of the same type (replica counts per operator unchanged) so that the region's nodes
    ``frees`` become empty and the RM/IM can release them. One row per (region, slot, application): the region
    step of ``slot`` writes it once; a later step supersedes what is still pending.

    ``status``: pending -> applying (in the plan of ``tick``) -> applied / failed; pending -> superseded.
    ``outcome``: the AM's last word on it (applied, or why it was denied or deferred)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        APPLYING = "applying"
        APPLIED = "applied"
        FAILED = "failed"
        SUPERSEDED = "superseded"

    region = models.ForeignKey(Region, on_delete=models.CASCADE, related_name="consolidations")
    slot = models.BigIntegerField(help_text="the region step (RM slot) that proposed it")
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="consolidations")
    moves = models.JSONField(default=list, help_text="[{operator, node_type, from, to}] (node ids)")
    frees = models.JSONField(
        default=list, help_text="node ids left empty once every move of the slot is applied"
    )
    reason = models.TextField(blank=True, default="", help_text="the IM's reason")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    outcome = models.TextField(blank=True, default="", help_text="the AM's decision and its reason")
    tick = models.ForeignKey(
        Tick, null=True, blank=True, on_delete=models.SET_NULL, related_name="consolidations"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["region", "-slot", "application"]
        constraints = [
            models.UniqueConstraint(
                fields=["region", "slot", "application"], name="unique_consolidation_per_region_slot_app"
            )
        ]
        indexes = [models.Index(fields=["application", "status"])]

    def __str__(self) -> str:
        return f"consolidation {self.region}#{self.slot} for {self.application} ({self.status})"
