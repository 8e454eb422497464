"""Threshold-based baselines (paper 001, Sec. 6.2.1; paper 004, Sec. 7.1; the authors' public simulator).

Every period, with ``u`` the utilisation of the busiest replica and ``k`` the number of replicas:
- scale out (add one replica of the policy's type) when ``u > threshold`` and ``k < K_max``;
- else scale in when ``k > 1`` and ``u * k / (k - 1) < scale_in_fraction * threshold`` (the utilisation the
  remaining replicas would have is well below the threshold);
- else do nothing.

The replica removed is one of the policy's own type (the authors' simulator); if the deployment has none (it was
not built by this policy), one of the slowest type in place. Paper 004 removes a random replica; with the
homogeneous deployments these policies build both rules coincide.

Variants: ``threshold`` adds the cheapest type (TB-C), ``threshold-speedup`` the fastest (TB-S),
``threshold-first`` type 0 (the paper's "-O" variant). A run starts with one replica of that type.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from policies.om.rules import RuleBasedPolicy


class _Threshold(RuleBasedPolicy):
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "threshold": 0.7,  # scale-out utilisation threshold U-bar (paper 001: 0.7)
        "scale_in_fraction": 0.75,  # beta of the scale-in rule (paper 001: 0.75)
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        if not 0.0 < params["threshold"] <= 1.0:
            raise ValueError(f"params.threshold: must be in (0, 1], got {params['threshold']}")
        if not 0.0 < params["scale_in_fraction"] < 1.0:
            raise ValueError(
                f"params.scale_in_fraction: must be in (0, 1), got {params['scale_in_fraction']}"
            )

    def _target(self, k: np.ndarray, total: int, u: float, explain: bool) -> int:
        thr = self.params["threshold"]
        if u > thr:
            return total + 1
        if total > 1 and u * total / (total - 1) < self.params["scale_in_fraction"] * thr:
            return total - 1
        return total


class ThresholdCheapest(_Threshold):
    """TB-C: scale with the cheapest node type."""

    name = "threshold"
    NODE_CHOICE = "cheapest"


class ThresholdFastest(_Threshold):
    """TB-S: scale with the fastest node type (largest speedup)."""

    name = "threshold-speedup"
    NODE_CHOICE = "fastest"


class ThresholdFirst(_Threshold):
    """Threshold policy that always scales with node type 0."""

    name = "threshold-first"
    NODE_CHOICE = "first"
