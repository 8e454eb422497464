"""The application-level control state, typed: what the AM configured (``ApplicationControl.am_config``) and what
the tick keeps between periods (``ApplicationControl.operator_memory["__app__"]``). Both are read and written
here only, as JSON of the same shape as before they were typed (stored states load unchanged).

``am_config``::

    {policy, bounds_ms: {operator: ms}, weights: {perf, res, rcf}, guard_scale, history: [event, ...], ...}

``bounds_ms``: each operator's response-time bound (ms); ``weights``: the OMs' cost weights as tuned (the guard
scales them, :func:`autoscaler.control.om_config.guarded_weights`); ``guard_scale``: the violation-budget guard's
scale (absent = never set = 1); ``history``: the last :data:`HISTORY_KEPT` tuning and guard events. Other keys
(a tuner's own) are kept as they are.

``operator_memory["__app__"]``::

    {seen: {operator: {type: replicas}}, waiting: n, node_limited: [operator, ...], last_apply_slot: slot,
     guard: ViolationBudgetGuard.to_dict(), last_downtime_s: s, resize_downtime_s: s, swap_downtime_s: s}

(``last_downtime_s``: the downtime the connector measured for the latest applied reconfiguration, s; the OMs
see it as ``Observation.restart_s``. ``resize_downtime_s`` / ``swap_downtime_s``: the same for the latest one
that changed only replica counts / that changed a node type; ``Observation.resize_restart_s`` /
``swap_restart_s``.)

every key optional (absent = never written).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autoscaler.control.models import ApplicationControl

#: AM history events kept in ``am_config["history"]`` (tunings and guard changes)
HISTORY_KEPT = 20
APP_KEY = "__app__"


@dataclass
class AmConfig:
    """``ApplicationControl.am_config`` (see module doc)."""

    bounds_ms: dict[str, float] = field(default_factory=dict)
    weights: dict[str, float] | None = None
    guard_scale: float | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    policy: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> AmConfig:
        data = dict(data or {})
        guard = data.pop("guard_scale", None)
        # no copies of the bounds and the history: read for every operator of every tick; writers rebind them
        return cls(
            bounds_ms=data.pop("bounds_ms", None) or {},
            weights=data.pop("weights", None),
            guard_scale=None if guard is None else float(guard),
            history=data.pop("history", None) or [],
            policy=data.pop("policy", None),
            extra=data,
        )

    @classmethod
    def of(cls, control: ApplicationControl) -> AmConfig:
        return cls.from_json(control.am_config)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.policy is not None:
            out["policy"] = self.policy
        if self.bounds_ms:
            out["bounds_ms"] = dict(self.bounds_ms)
        if self.weights is not None:
            out["weights"] = dict(self.weights)
        out.update(self.extra)
        if self.guard_scale is not None:
            out["guard_scale"] = self.guard_scale
        if self.history:
            out["history"] = list(self.history)
        return out

    def save_to(self, control: ApplicationControl) -> None:
        """Write into ``control.am_config`` (the caller saves the row)."""
        control.am_config = self.to_json()

    @property
    def scale(self) -> float:
        """The guard's weight scale (1 when never set)."""
        return 1.0 if self.guard_scale is None else float(self.guard_scale)

    def note(self, event: dict[str, Any]) -> None:
        """Append ``event`` to the history, keeping the last :data:`HISTORY_KEPT`."""
        self.history = [*self.history[-(HISTORY_KEPT - 1) :], event]


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass
class AppMemory:
    """``operator_memory["__app__"]`` (see module doc); None = never written."""

    seen: dict[str, dict[str, int]] | None = None
    waiting: int | None = None
    node_limited: list[str] | None = None
    last_apply_slot: int | None = None
    guard: dict[str, Any] | None = None
    #: the connector's measured downtime of the latest applied reconfiguration (s)
    last_downtime_s: float | None = None
    #: the same for the latest reconfiguration that changed only replica counts (a resize), and for the latest
    #: that changed a node type (a swap) (s)
    resize_downtime_s: float | None = None
    swap_downtime_s: float | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> AppMemory:
        data = data or {}
        slot = data.get("last_apply_slot")
        waiting = data.get("waiting")
        limited = data.get("node_limited")
        return cls(
            seen=data.get("seen"),
            waiting=None if waiting is None else int(waiting),
            node_limited=None if limited is None else list(limited),
            last_apply_slot=None if slot is None else int(slot),
            guard=data.get("guard"),
            last_downtime_s=_seconds(data.get("last_downtime_s")),
            resize_downtime_s=_seconds(data.get("resize_downtime_s")),
            swap_downtime_s=_seconds(data.get("swap_downtime_s")),
        )

    @classmethod
    def of(cls, memory: dict[str, Any]) -> AppMemory:
        """The application entry of an ``operator_memory`` dict."""
        return cls.from_json(memory.get(APP_KEY))

    def to_json(self) -> dict[str, Any]:
        fields = {
            "seen": self.seen,
            "waiting": self.waiting,
            "node_limited": self.node_limited,
            "last_apply_slot": self.last_apply_slot,
            "guard": self.guard,
            "last_downtime_s": self.last_downtime_s,
            "resize_downtime_s": self.resize_downtime_s,
            "swap_downtime_s": self.swap_downtime_s,
        }
        return {k: v for k, v in fields.items() if v is not None}

    def store_in(self, memory: dict[str, Any]) -> None:
        """Write into an ``operator_memory`` dict (the caller assigns it to the row and saves it)."""
        memory[APP_KEY] = self.to_json()
