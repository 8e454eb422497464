"""The approximate operator model of the PDS+ policies (paper 001, Sec. 4.3 and 6.2).

QL+PDS+ and DQL+PDS+ estimate the unknown (violation) cost with a deliberately imperfect model: the service
rate is off by a random 5-10 % with a random sign, and every node type's speedup is off by up to 20 %, each drawn
once per agent from its seeded generator (the service-time variance is taken as mean^2, i.e. exponential).
"""

from __future__ import annotations

from typing import Any

import numpy as np

APPROX_SERVICE_ERROR_MIN = 0.05  # smallest relative error of the service rate
APPROX_SERVICE_ERROR_MAX = 0.10  # largest relative error of the service rate
APPROX_SPEEDUP_ERROR = 0.20  # largest relative error of a node type's speedup

APPROX_DEFAULTS: dict[str, Any] = {
    "approx_service_error_min": APPROX_SERVICE_ERROR_MIN,
    "approx_service_error_max": APPROX_SERVICE_ERROR_MAX,
    "approx_speedup_error": APPROX_SPEEDUP_ERROR,
}


def check_approx_params(params: dict[str, Any]) -> None:
    """Raise ValueError naming the parameter when the approximate-model errors are out of range."""
    lo, hi = params["approx_service_error_min"], params["approx_service_error_max"]
    if not 0 <= lo <= hi < 1:
        raise ValueError(f"params.approx_service_error_min/max: need 0 <= min <= max < 1, got {lo}, {hi}")
    if not 0 <= params["approx_speedup_error"] < 1:
        raise ValueError(
            f"params.approx_speedup_error: must be in [0, 1), got {params['approx_speedup_error']}"
        )


def draw_model_errors(
    rng: np.random.Generator, params: dict[str, Any], n_res: int
) -> tuple[float, np.ndarray]:
    """Draw ``(service_rate_factor, speedup_factors)``: approximate mu = true mu * factor, approximate speedup of
    type t = true speedup * speedup_factors[t]. Three draws from ``rng``, always in the same order."""
    magnitude = float(rng.uniform(params["approx_service_error_min"], params["approx_service_error_max"]))
    sign = 1.0 if rng.random() < 0.5 else -1.0
    e = params["approx_speedup_error"]
    return 1.0 + sign * magnitude, 1.0 + rng.uniform(-e, e, size=n_res)
