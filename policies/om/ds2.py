"""DS2 / Flink-autoscaler style rate-based sizing (Kalavri et al., OSDI'18; ``shared/papers/002_...``).

DS2 measures each operator's *true processing rate*, the rate one replica would sustain if it were never idle:
records processed per unit of useful (busy) time. With the busiest replica receiving ``rate / k`` tuples/s
(round-robin balancing) and busy a fraction ``u`` of the time, its true rate is ``(rate / k) / u`` tuples/s. The
parallelism that processes the observed input rate at the target utilisation is

    desired = ceil(rate / (target_utilisation * true_rate_per_replica))      (= ceil(k * u / target))

Our action space changes one replica per period, so the policy moves one replica toward ``desired`` each period
(DS2 itself jumps straight there). Scale-down waits until ``desired < k`` has held for more than
``scale_down_delay_s`` seconds; the default, 1 hour, is the Flink Kubernetes operator autoscaler's scale-down
interval (DS2 itself has none: set 0 for the pure rule, which oscillates: 22% reconfigurations on the Taxi trace). Added replicas use the
``node_type`` choice; removed replicas are of that type when present, else of the slowest type in place.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from policies.om.rules import RuleBasedPolicy, check_rate_rule_params
from policies.operator_model import OperatorSpec


class DS2(RuleBasedPolicy):
    """Rate-based sizing toward ``target_utilisation`` with an optional scale-down delay."""

    name = "ds2"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "target_utilisation": 0.7,  # Flink autoscaler's default target utilisation
        "scale_down_delay_s": 3600.0,  # s that desired < k must hold before a removal (Flink autoscaler: 1 h)
        "period_s": 60.0,  # control period, seconds (one trace step)
        # cheapest | fastest | price-performance | first; price-performance: the cheapest type on a heterogeneous
        # catalogue (infrastructure B's speedup-0.05 type) cannot carry the load: 100 % violations (issue 24)
        "node_type": "price-performance",
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        check_rate_rule_params(params)
        if not params["scale_down_delay_s"] >= 0.0:
            raise ValueError(f"params.scale_down_delay_s: must be >= 0 s, got {params['scale_down_delay_s']}")

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(spec, params, seed)
        self.below_periods = 0  # consecutive periods with desired < k

    def desired_replicas(self, total: int, u: float) -> int:
        """DS2's parallelism for the observed load: ``ceil(k * u / target)``, at least 1."""
        if not u > 0.0:
            return 1
        if math.isinf(u):
            return self.spec.k_max
        # round to 1e-9 first so a load exactly at the target does not round up through float noise
        return max(1, math.ceil(round(total * u / self.params["target_utilisation"], 9)))

    def _target(self, k: np.ndarray, total: int, u: float, explain: bool) -> int:
        desired = self.desired_replicas(total, u)
        below = self.below_periods + 1 if desired < total else 0
        if not explain:
            self.below_periods = below
        if desired < total and below * self.params["period_s"] <= self.params["scale_down_delay_s"]:
            return total
        return desired

    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return {"below_periods": self.below_periods}, {}

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.below_periods = int(meta["below_periods"])
