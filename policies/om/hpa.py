"""The Kubernetes Horizontal Pod Autoscaler rule (``kube-controller-manager``'s replica calculator).

Every period, with ``k`` replicas and measured utilisation ``u`` (busy fraction of the busiest replica; with the
homogeneous deployments this policy builds under round-robin balancing it equals the mean the HPA uses):
- ``ratio = u / u_target``; within the tolerance (``|ratio - 1| <= tolerance``) the recommendation is ``k``,
  else ``ceil(k * ratio)``;
- scale-down stabilisation: the recommendation actually followed is the *largest* recommendation of the last
  ``stabilisation_s`` seconds (``stabilisation_s / period_s`` periods, the current one included); scale-up is
  immediate (the HPA default);
- our action space changes one replica per period: the policy moves one replica toward the stabilised
  recommendation, within ``1 .. K_max``.
Added replicas use the ``node_type`` choice; removed replicas are of that type when present, else of the slowest
type in place.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from policies.om.rules import RuleBasedPolicy, check_rate_rule_params
from policies.operator_model import OperatorSpec


class HPA(RuleBasedPolicy):
    """Kubernetes HPA: desired = ceil(k * u / u_target), tolerance 0.1, 5-minute scale-down stabilisation."""

    name = "hpa"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "target_utilisation": 0.7,  # the utilisation target u_target (as the threshold and DS2 baselines)
        "tolerance": 0.1,  # HPA --horizontal-pod-autoscaler-tolerance default
        "stabilisation_s": 300.0,  # HPA scale-down stabilisation window default (5 minutes)
        "period_s": 60.0,  # control period, seconds (one trace step)
        # cheapest | fastest | price-performance | first; price-performance: the cheapest type on a heterogeneous
        # catalogue (infrastructure B's speedup-0.05 type) cannot carry the load: 100 % violations (issue 24)
        "node_type": "price-performance",
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        check_rate_rule_params(params)
        if not 0.0 <= params["tolerance"] < 1.0:
            raise ValueError(f"params.tolerance: must be in [0, 1), got {params['tolerance']}")
        if not params["stabilisation_s"] >= 0.0:
            raise ValueError(f"params.stabilisation_s: must be >= 0 s, got {params['stabilisation_s']}")

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        self.recommendations: list[int] = []  # recommendations of the last window, most recent last
        super().__init__(spec, params, seed)

    def _derive(self) -> None:
        super()._derive()
        # periods in the stabilisation window, the current one included
        self.window_len = max(
            1, math.ceil(round(self.params["stabilisation_s"] / self.params["period_s"], 9))
        )

    def recommendation(self, total: int, u: float) -> int:
        """The HPA's raw recommendation for ``total`` replicas at utilisation ``u``, clamped to 1..K_max."""
        if math.isinf(u):
            return self.spec.k_max
        ratio = u / self.params["target_utilisation"]
        if abs(ratio - 1.0) <= self.params["tolerance"]:
            rec = total
        else:
            rec = math.ceil(round(total * ratio, 9))
        return min(max(rec, self.spec.k_min), self.spec.k_max)

    def _target(self, k: np.ndarray, total: int, u: float, explain: bool) -> int:
        rec = self.recommendation(total, u)
        window = [*self.recommendations[-(self.window_len - 1) :], rec] if self.window_len > 1 else [rec]
        if not explain:
            self.recommendations = window
        if rec >= total:
            return rec
        return min(total, max(window))

    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return {"recommendations": list(self.recommendations)}, {}

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.recommendations = [int(x) for x in meta["recommendations"]]
