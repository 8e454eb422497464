"""The Region Manager (RM) interface of paper 004 Sec. 6: one agent per region of the infrastructure.

Once per control period the RM observes its region (:class:`RegionState`), learns from the period that just
ended, and proposes to acquire or release nodes of a node type of its catalog (:class:`RMProposal`). The
Infrastructure Manager grants or denies; the RM is told the outcome through :meth:`RegionManager.granted` so
that what it learns matches what was actually done.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from policies.base import decode_state, encode_state
from policies.operator_model import NodeType


def validate_against_defaults(owner: str, defaults: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Merge ``params`` over ``defaults``; unknown names or wrong types raise ValueError naming the field.

    A default of ``None`` accepts a number or ``None``.
    """
    out = dict(defaults)
    for key, value in params.items():
        if key not in defaults:
            known = ", ".join(sorted(defaults)) or "none"
            raise ValueError(f"params.{key}: unknown parameter for policy {owner!r} (known: {known})")
        default = defaults[key]
        if default is None:
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"params.{key}: must be a number or null, got {value!r}")
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"params.{key}: must be true or false, got {value!r}")
        elif isinstance(default, (int, float)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"params.{key}: must be a number, got {value!r}")
            if isinstance(default, int) and not isinstance(value, int):
                raise ValueError(f"params.{key}: must be an integer, got {value!r}")
        elif isinstance(default, str) and not isinstance(value, str):
            raise ValueError(f"params.{key}: must be a string, got {value!r}")
        elif isinstance(default, (list, tuple)) and not isinstance(value, (list, tuple)):
            raise ValueError(f"params.{key}: must be a list, got {value!r}")
        out[key] = value
    return out


@dataclass
class RegionState:
    """What an RM sees of its region at the end of a control period.

    ``active``: nodes per catalog type that are up (booted), idle or not; ``pending``: nodes per type acquired
    but not ready yet; ``idle``: active nodes per type hosting no replica; ``used_slots`` / ``total_slots``:
    replica slots (one core = one replica) in use / available on active nodes; ``utilisation``: mean CPU
    utilisation of the replicas running in the region, in [0, 1]; ``unsatisfied``: scale-out requests of the
    application that are waiting because no node had a free slot (M_r of eq. 1); ``waiting_slots``: slots those
    requests need; ``waiting``: those slots per node type (the type each request waits for; None = unknown);
    ``free_slots``: free replica slots per type on active nodes (None = unknown).
    """

    region: str
    active: np.ndarray
    pending: np.ndarray
    idle: np.ndarray
    used_slots: int
    total_slots: int
    utilisation: float
    unsatisfied: int = 0
    waiting_slots: int = 0
    waiting: np.ndarray | None = None
    free_slots: np.ndarray | None = None

    @property
    def n_active(self) -> int:
        return int(np.sum(self.active))

    @property
    def n_nodes(self) -> int:
        """Nodes paid for: active plus pending."""
        return int(np.sum(self.active) + np.sum(self.pending))

    @property
    def n_idle(self) -> int:
        return int(np.sum(self.idle))

    def shortfall(self, cores: list[int]) -> np.ndarray:
        """Nodes per type still to acquire for the waiting requests of that type: the slots they wait for beyond
        the free slots of the type and the slots of its booting nodes, in nodes (``cores`` slots per node).
        Zero everywhere when the state does not say which type the requests wait for."""
        n = len(self.active)
        if self.waiting is None:
            return np.zeros(n, dtype=np.int64)
        free = np.zeros(n, dtype=np.int64) if self.free_slots is None else np.asarray(self.free_slots)
        c = np.maximum(np.asarray(cores, dtype=np.int64), 1)
        missing = np.maximum(
            np.asarray(self.waiting, dtype=np.int64) - free - np.asarray(self.pending) * c, 0
        )
        return -(-missing // c)


@dataclass
class RMProposal:
    """An RM request: ``delta`` > 0 acquires, < 0 releases that many nodes of ``node_type`` (a catalog name).

    ``reason`` says why in one sentence; ``explanation`` carries numbers (estimated values, cost terms).
    """

    region: str
    node_type: str
    delta: int
    reason: str
    explanation: dict[str, Any] = field(default_factory=dict)


class RegionManager(ABC):
    """Base class of the RM local policies.

    ``catalog``: the node types available in the region; ``k_max``: the most nodes the region may run
    (K_max,r); ``slots_per_node``: replicas a node hosts when its type does not say (cores).
    """

    name: ClassVar[str] = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        region: str,
        catalog: tuple[NodeType, ...],
        k_max: int = 50,
        params: dict[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        if not region:
            raise ValueError("region: must be a non-empty name")
        if not catalog:
            raise ValueError(f"catalog: region {region!r} has no node type")
        if k_max < 1:
            raise ValueError(f"k_max: must be >= 1, got {k_max}")
        self.region = region
        self.catalog = tuple(catalog)
        self.k_max = int(k_max)
        self.params = self.validate_params(params or {})
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.t = 0

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        out = validate_against_defaults(cls.name, cls.DEFAULTS, params)
        cls.check_params(out)
        return out

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """Range checks; override and raise ValueError("params.<name>: reason")."""

    def type_index(self, name: str) -> int:
        for i, t in enumerate(self.catalog):
            if t.name == name:
                return i
        raise ValueError(f"node_type: {name!r} is not in the catalog of region {self.region!r}")

    def cheapest_per_slot(self) -> int:
        """Index of the catalog type with the lowest price per replica slot ($/h per core)."""
        return int(np.argmin([t.price / max(t.cores, 1) for t in self.catalog]))

    # ---- the control-loop calls -----------------------------------------------------------------------------
    @abstractmethod
    def propose(self, state: RegionState) -> list[RMProposal]:
        """Learn from the period that just ended, then return the requests for the next one (maybe empty)."""

    def granted(self, proposals: list[RMProposal], granted_deltas: list[int]) -> None:
        """The IM's answer to the last :meth:`propose`: nodes actually acquired (> 0) or released (< 0)."""

    # ---- durable state ------------------------------------------------------------------------------------
    def state_bytes(self) -> bytes:
        meta, arrays = self._get_state()
        meta = dict(meta)
        meta.update(
            policy=self.name,
            region=self.region,
            params=self.params,
            t=self.t,
            seed=self.seed,
            rng=self.rng.bit_generator.state,
        )
        return encode_state(meta, arrays)

    def load_state(self, data: bytes) -> None:
        meta, arrays = decode_state(data)
        if meta.get("policy") != self.name:
            raise ValueError(f"state belongs to policy {meta.get('policy')!r}, not {self.name!r}")
        if meta.get("region") != self.region:
            raise ValueError(f"state belongs to region {meta.get('region')!r}, not {self.region!r}")
        self.params = self.validate_params(dict(meta["params"]))
        self.t = int(meta["t"])
        self.seed = int(meta["seed"])
        self.rng.bit_generator.state = meta["rng"]
        self._set_state(meta, arrays)

    @classmethod
    def from_state(cls, region: str, catalog: tuple[NodeType, ...], k_max: int, data: bytes) -> RegionManager:
        meta, _ = decode_state(data)
        rm = cls(region, catalog, k_max, params=dict(meta.get("params", {})))
        rm.load_state(data)
        return rm

    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return {}, {}

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        pass
