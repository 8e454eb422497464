"""Shared pieces of the rule-based Operator Manager baselines (threshold, DS2, HPA).

- node-type choice: which type a rule-based policy adds (``cheapest``, ``fastest``, ``price-performance``,
  ``first``);
- which replica to remove: one of the policy's own type if present, else one of the slowest type in place (under
  round-robin balancing the slowest replica bounds the operator's utilisation);
- utilisation: measured (``Observation.utilisation``, busy fraction of the busiest replica) when the observation
  carries it, else computed from the operator model (``QueueModel.utilisation``), cached per deployment.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from policies.base import Observation, Policy, Proposal
from policies.operator_model import OperatorSpec

NODE_CHOICES: tuple[str, ...] = ("cheapest", "fastest", "price-performance", "first")


def choose_node_type(spec: OperatorSpec, choice: str) -> int:
    """Index of the node type a rule-based policy scales with.

    ``cheapest``: lowest price; ``fastest``: largest speedup; ``price-performance``: largest speedup per unit of
    price among the types whose ``K_max`` replicas can carry the top of the spec's rate range (tuples/s) under its
    model (:func:`sufficient_types`; all types when the spec gives no range or no model); ``first``: type 0.
    Ties go to the lowest index (the order of ``spec.node_types``).
    """
    if choice == "first":
        return 0
    speed = spec.speedups
    price = spec.prices
    if choice == "cheapest":
        return int(np.argmin(price))
    if choice == "fastest":
        return int(np.argmax(speed))
    if choice == "price-performance":
        with np.errstate(divide="ignore"):
            ratio = np.where(price > 0, speed / np.where(price > 0, price, 1.0), np.inf)
        ratio = np.where(sufficient_types(spec), ratio, -np.inf)
        return int(np.argmax(ratio))
    raise ValueError(f"node_type must be one of {', '.join(NODE_CHOICES)}, got {choice!r}")


def sufficient_types(spec: OperatorSpec) -> np.ndarray:
    """Boolean mask of the node types whose ``K_max`` replicas (alone) can sustain the top of the spec's rate range
    (``rate_levels.max_rate``, tuples/s) under the spec's model. Without a fixed range (learned or growing) or a
    given model (``model_mode`` other than "given") nothing is known: every type. If no type suffices: only the
    fastest (the closest to sufficient), so a cheap slow type (speedup 0.05 on infrastructure B2) is never the
    default choice of a load it cannot carry."""
    n = spec.n_res
    if spec.rate_levels is None or spec.rate_levels.grow or spec.model_mode != "given":
        return np.ones(n, dtype=bool)
    top = spec.rate_levels.max_rate
    ok = np.zeros(n, dtype=bool)
    for t in range(n):
        k = np.zeros(n, dtype=np.int64)
        k[t] = spec.k_max
        ok[t] = spec.model.capacity(k, spec.speedups) >= top
    if not ok.any():
        ok[int(np.argmax(spec.speedups))] = True
    return ok


def removal_type(k: np.ndarray, speedups: np.ndarray, preferred: int) -> int:
    """Type of the replica to remove: ``preferred`` if it has a replica, else the slowest type in place
    (lowest index among equals)."""
    if k[preferred] > 0:
        return preferred
    present = np.flatnonzero(k > 0)
    return int(present[np.argmin(speedups[present])])


class RuleBasedPolicy(Policy):
    """Base of the rule-based baselines: no learning, one replica added or removed per period.

    Subclasses implement ``_target(k, total, u)`` returning the desired total number of replicas (before the
    ``k_min``/``K_max`` clamp) and may keep state across periods (windows, counters) in ``_get_state``.
    """

    #: no random choices: one run per configuration is enough (benchmarks do not average over seeds).
    deterministic: ClassVar[bool] = True
    #: node-type choice when the policy has no ``node_type`` parameter.
    NODE_CHOICE: ClassVar[str] = "cheapest"

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(spec, params, seed)
        # deployment bytes -> (total replicas, utilisation per tuple/s of input rate)
        self._ucache: dict[bytes, tuple[int, float]] = {}
        self._last_reason: dict[str, Any] = {}
        self._derive()

    def _derive(self) -> None:
        """Quantities derived from the spec and the parameters (recomputed after ``load_state``)."""
        self._scale_type = choose_node_type(self.spec, self.params.get("node_type", self.NODE_CHOICE))
        self._speedups = self.spec.speedups
        self._n = self.spec.n_res
        self._ucache.clear()

    def _on_reconfigure(self) -> None:
        self._derive()

    def initial_type(self) -> int:
        """Node type of the single replica a run starts with (paper 001: the policy's own type)."""
        return self._scale_type

    def _deployment_info(self, k: np.ndarray) -> tuple[int, float]:
        if self.spec.model_mode != "given":
            # the learned model moves with every observation: no cache; none yet = no utilisation estimate
            m = self.planning_model()
            return int(k.sum()), (0.0 if m is None else m.utilisation(k, self._speedups, 1.0))
        key = k.tobytes()
        hit = self._ucache.get(key)
        if hit is None:
            hit = (int(k.sum()), self.spec.model.utilisation(k, self._speedups, 1.0))
            self._ucache[key] = hit
        return hit

    def act(self, k: np.ndarray, rate: float, violated: bool, obs: Observation | None = None) -> int:
        """The simulator's fast path: nothing to learn, so skip the cost bookkeeping of ``Policy.act`` unless
        the control loop's ``step()`` (with an observation) needs it for its explanation."""
        if obs is not None:
            return super().act(k, rate, violated, obs)
        self._calibrate(k, rate, obs)
        if self._prev is not None:
            self.t += 1
        action = self._decide(k, rate, None, False)[0]
        self._prev = (k, float(rate), action)
        return action

    def _decide(
        self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool
    ) -> tuple[int, dict[int, float]]:
        total, per_rate = self._deployment_info(k)
        # busy fraction of the busiest replica: measured when the observation has it, else from the model
        u = float(obs.utilisation) if obs is not None and obs.utilisation is not None else rate * per_rate
        if not u >= 0.0:  # NaN or negative: a broken measurement is no reason to scale (nor to count periods)
            if explain or obs is not None:
                self._last_reason = {"utilisation": u, "replicas": total, "desired_replicas": total}
            return 0, {}
        target = self._target(k, total, u, explain)
        spec = self.spec
        if target > total and total < spec.k_max:
            action = 1 + self._n + self._scale_type
        elif target < total and total > spec.k_min:
            action = 1 + removal_type(k, self._speedups, self._scale_type)
        else:
            action = 0
        if explain or obs is not None:
            self._last_reason = {"utilisation": u, "replicas": total, "desired_replicas": int(target)}
        return action, {}

    def _target(self, k: np.ndarray, total: int, u: float, explain: bool) -> int:
        """Desired total replicas; with ``explain`` it must not change any state."""
        raise NotImplementedError

    def step(self, obs: Observation) -> Proposal:
        """The control loop's call; the explanation adds the utilisation used and the desired replicas."""
        self._last_reason = {}
        proposal = super().step(obs)
        if self._last_reason:
            proposal.explanation["rule"] = dict(self._last_reason)
        return proposal


def check_rate_rule_params(params: dict[str, Any]) -> None:
    """Range checks shared by the utilisation-based rules (ds2, hpa): ``target_utilisation`` in (0, 1],
    ``period_s`` > 0 s, ``node_type`` one of NODE_CHOICES. Raise ValueError naming the parameter."""
    if not 0.0 < params["target_utilisation"] <= 1.0:
        raise ValueError(f"params.target_utilisation: must be in (0, 1], got {params['target_utilisation']}")
    if not params["period_s"] > 0.0:
        raise ValueError(f"params.period_s: must be > 0 s, got {params['period_s']}")
    if params["node_type"] not in NODE_CHOICES:
        raise ValueError(
            f"params.node_type: must be one of {', '.join(NODE_CHOICES)}, got {params['node_type']!r}"
        )
