"""OpenAPI descriptions (pydantic models, never used to validate) of the answers of ``/api/v1/control/``.

Field names are those of the JSON answers (snake_case, as the views write them); free-form parts (policy
parameters, step state, agent documents) are objects of any shape. Times in seconds, costs in currency.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, RootModel


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class Fractions(_Answer):
    """Counts and fractions of one window (``None`` = no period observed yet)."""

    periods: int
    cost_per_hour: float | None = None
    violation_fraction: float | None = None
    reconfiguration_fraction: float | None = None


class Aggregates(_Answer):
    """All-time and windowed counts of the application's periods (see ``autoscaler.control.aggregates``)."""

    periods: int
    no_data_periods: int
    cost_per_hour: float | None = None
    violation_fraction: float | None = None
    reconfiguration_fraction: float | None = None
    window: dict[str, Any]
    eta_v: float
    eta_r: float
    within_eta_v: bool | None = None
    within_eta_r: bool | None = None
    windows: dict[str, Any]


class ControlSummary(_Answer):
    """``GET .../applications/<name>/summary/``."""

    application: str
    state: str
    dry_run: bool
    last_tick_slot: int
    am_config: Any = None
    aggregates: Aggregates
    last_error: str


class DecisionEntry(_Answer):
    """One OM decision of ``GET .../applications/<name>/decisions/`` (newest slot first)."""

    operator: str
    slot: int
    outcome: str
    observed: Any = None
    deployment: Any = None
    proposal: Any = None
    granted: Any = None
    reason: str
    applied: Any = None
    finished_at: str | None = None
    downtime_s: float | None = None
    resource_cost: float | None = None
    violated: bool | None = None
    reconfigured: bool | None = None


class DecisionList(RootModel[list[DecisionEntry]]):
    """``GET .../applications/<name>/decisions/``: newest slot first."""


class RailsAnswer(_Answer):
    """``GET/PUT .../applications/<name>/rails/``: the rails in force (``spec.rails`` of the manifest)."""

    minReplicas: dict[str, int]
    maxReplicas: dict[str, int]
    scaleDownDelayS: float
    freezeWindows: list[dict[str, str]]
    ineffectiveScaleUpRatio: float
    ineffectiveBlockS: float
    rollbackOnFailure: bool


class AgentsExport(_Answer):
    """``GET .../applications/<name>/agents/`` (and the body of its PUT): the OM agents' learned state."""

    format: int
    application: str
    agents: dict[str, dict[str, Any]]


class AgentsImported(_Answer):
    imported: int


class AgentsReset(_Answer):
    reset: int


class PolicyInForce(_Answer):
    policy: str
    params: dict[str, Any]


class RegionNodeEntry(_Answer):
    node_id: str
    node_type: str
    state: str
    provider: str
    acquired_slot: int
    ready_at_s: float
    reason: str
    replicas: list[str]


class ConsolidationEntry(_Answer):
    slot: int
    application: str
    moves: list[Any]
    frees: list[Any]
    reason: str
    status: str
    outcome: str


class WaitingEntry(_Answer):
    application: str
    operator: str
    node_type: str
    slots: int
    since_slot: int
    reason: str


class RegionStep(_Answer):
    slot: int
    period_s: float
    policy: str
    state: dict[str, Any]
    proposals: list[Any]
    decisions: list[Any]
    warnings: list[Any]
    executed: list[Any]


class NodeCounts(_Answer):
    """Nodes and replica slots of one node type (``autoscaler.control.capacity``): ``ready = used + free``
    (``used``: hosting or reserved for a replica), ``pending`` booting apart; ``used_slots`` = replicas running plus
    scale-outs granted and not yet applied; ``unplaced`` = replicas running without a slot (a lost node)."""

    ready: int
    pending: int
    used: int
    free: int
    ready_slots: int
    used_slots: int
    free_slots: int
    unplaced: int


class RegionControlAnswer(_Answer):
    """``GET/PUT .../regions/<name>/``. ``capacity`` is the region's node-accounting document and ``node_counts``
    its counts per node type (empty before the first RM step). For a non-staff user the other users' applications
    are left out (nodes list only the user's replicas; the capacity document only the user's applications'
    entries and grants, its counts stay whole; waiting scale-outs, consolidations and step details only the
    user's applications; other applications' names in texts read ``another user's application``)."""

    region: str
    rm_period_s: float | None = None
    rm_period_s_set: float | None = None
    rm: PolicyInForce | None = None
    im: PolicyInForce | None = None
    policy_source: str
    capacity: dict[str, Any]
    node_counts: dict[str, NodeCounts]
    last_error: str
    nodes: list[RegionNodeEntry]
    consolidations: list[ConsolidationEntry]
    waiting: list[WaitingEntry]
    steps: list[RegionStep]


class RegionPeriodRequest(BaseModel):
    """``PUT .../regions/<name>/`` (staff): the region's RM period in seconds (> 0), null = automatic."""

    model_config = ConfigDict(extra="forbid")

    rmPeriodS: float | None
