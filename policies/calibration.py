"""Self-calibration of an Operator Manager (issue 20, item 1): a rate range that grows with the observed rates and
an online estimate of the operator's per-replica service time.

Rate range
----------
A policy's discretised state uses ``n`` rate levels of equal width up to ``max_rate`` (:class:`RateLevels`). When
the spec gives no range (``OperatorSpec.rate_levels = None``), or gives one with ``grow=True``, an observed rate
at or above ``max_rate`` *grows* the range instead of being read as the top level: the new range is the old one
times an integer factor ``m >= 2`` chosen so that it covers the rate times :data:`RANGE_HEADROOM`. The number of
levels stays ``n`` (bounded tables) and every new level ``j`` is exactly the union of the old levels
``j*m .. j*m + m - 1``, so whatever a policy learned per level is carried over without approximation of the
level boundaries: counts and histograms are summed, values are averaged over the old levels that had data
(:func:`merge_counts`, :func:`merge_values`). The common mechanism is :meth:`policies.base.Policy.act`, which calls
the policy's ``_remap_levels`` hook; the proposal of the step carries an ``explanation["calibration"]`` entry.

Without a range the policy starts from :data:`INITIAL_RANGE` (one tuple/s, a placeholder with no data behind it)
and the first observation grows it to cover its rate: the range is then learned from the operator's own rates.

Service time
------------
:class:`ServiceTimeEstimator`: the mean service time (s) of one replica on a speedup-1 node, from the utilisation
of the busiest replica (``rho = lambda_replica * S / speedup``, so ``S = rho * speedup / lambda_replica``) or,
when utilisation is missing, from the response time under an M/M/1 reading of one replica
(``R = S' / (1 - lambda S')`` with ``S' = S / speedup``, so ``S' = R / (1 + lambda R)``); its variance (s^2) from
the Pollaczek-Khinchine formula when both are measured. Pure numpy, exact state round trip.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from policies.operator_model import QueueModel, RateLevels

# ---- hyperparameters -------------------------------------------------------------------------------------------
RANGE_HEADROOM = 1.5  # dimensionless: a grown range reaches at least this multiple of the rate that grew it
INITIAL_LEVELS = 30  # number of rate levels when the spec gives no range (stays fixed when the range grows)
INITIAL_RANGE = 1.0  # tuples/s: the placeholder range before the first observation (grown at once by it)
SERVICE_MIN_UTILISATION = (
    0.05  # utilisation below which rho / lambda is too noisy to estimate S (dimensionless)
)
SERVICE_MAX_UTILISATION = 0.98  # at or above: the replica is saturated, lambda overstates its throughput
SERVICE_MIN_SAMPLES = 3  # observations before the learned model replaces the hint / the spec's model
SERVICE_FORGET = 0.98  # per observation weight decay of older samples (a drifting operator is followed)
MODEL_REFRESH_TOLERANCE = (
    0.02  # relative change of the learned mean service time that rebuilds a policy's plan
)
VARIANCE_MIN_UTILISATION = 0.3  # P-K inversion for the variance only at loads where queueing is visible


def initial_levels(rate_levels: RateLevels | None) -> RateLevels:
    """The range a policy starts from: the spec's, or the growing placeholder when the spec gives none."""
    if rate_levels is None:
        return RateLevels(INITIAL_LEVELS, INITIAL_RANGE, grow=True)
    return rate_levels


def levels_from_hint(expected_peak_tuples_s: float | None) -> RateLevels | None:
    """The starting range for a user's hint of the operator's peak input rate (tuples/s; e.g. a manifest field):
    :data:`INITIAL_LEVELS` levels up to the peak times :data:`RANGE_HEADROOM`, growing past it like a learned one.
    None (no hint): None, i.e. ``OperatorSpec.rate_levels = None`` -- learned from the first observation."""
    if expected_peak_tuples_s is None:
        return None
    if isinstance(expected_peak_tuples_s, bool) or not (
        isinstance(expected_peak_tuples_s, (int, float)) and 0 < expected_peak_tuples_s < math.inf
    ):
        raise ValueError(f"expected_peak_rate: must be > 0 tuples/s, got {expected_peak_tuples_s!r}")
    return RateLevels(INITIAL_LEVELS, float(expected_peak_tuples_s) * RANGE_HEADROOM, grow=True)


def needs_growth(levels: RateLevels, rate: float) -> bool:
    """Whether ``rate`` (tuples/s) leaves a growing range (a fixed range clamps it to the top level)."""
    return levels.grow and rate >= levels.max_rate and math.isfinite(rate)


def grow(levels: RateLevels, rate: float, headroom: float = RANGE_HEADROOM) -> tuple[RateLevels, int]:
    """``(new levels, integer factor m)``: the range times the smallest integer ``m >= 2`` that reaches
    ``rate * headroom`` (tuples/s); new level ``j`` is the union of old levels ``j*m .. j*m+m-1``."""
    if not headroom >= 1.0:
        raise ValueError(f"headroom: must be >= 1, got {headroom}")
    m = max(2, math.ceil(rate * headroom / levels.max_rate))
    return RateLevels(levels.n, levels.max_rate * m, grow=levels.grow), m


def merge_counts(a: np.ndarray, factor: int, axis: int = -1) -> np.ndarray:
    """Counts per old level summed into the new levels along ``axis`` (same length, zeros where no old level
    maps). Exact for histograms whose bins nest (bin ``b`` -> ``b // factor``)."""
    a = np.moveaxis(np.asarray(a, dtype=float), axis, -1)
    n = a.shape[-1]
    groups = math.ceil(n / factor)
    pad = groups * factor - n
    padded = np.concatenate([a, np.zeros((*a.shape[:-1], pad))], axis=-1) if pad else a
    summed = padded.reshape(*a.shape[:-1], groups, factor).sum(axis=-1)
    out = np.zeros_like(a)
    out[..., :groups] = summed
    return np.moveaxis(out, -1, axis)


def merge_values(
    a: np.ndarray, factor: int, axis: int = -1, weights: np.ndarray | None = None, fill: float = 0.0
) -> np.ndarray:
    """Values per old level averaged into the new levels along ``axis``: the mean over the old levels of a group
    that have data, weighted by ``weights`` (same shape as ``a``, > 0 where there is data; default: 1 everywhere).
    A new level without data gets ``fill``."""
    a = np.asarray(a, dtype=float)
    w = np.ones_like(a) if weights is None else np.asarray(weights, dtype=float)
    num = merge_counts(a * w, factor, axis)
    den = merge_counts(w, factor, axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), fill)


def calibration_entry(old: RateLevels, new: RateLevels, rate: float) -> dict[str, Any]:
    """The ``explanation["calibration"]`` entry of a step in which the range grew (event "rate range set" when
    it grew from the placeholder :data:`INITIAL_RANGE`, i.e. at the first observation of a range learned from
    scratch; "rate range grown" otherwise)."""
    placeholder = old == RateLevels(INITIAL_LEVELS, INITIAL_RANGE, grow=True)
    return {
        "event": "rate range set" if placeholder else "rate range grown",
        "old_range_tuples_s": [0.0, old.max_rate],
        "new_range_tuples_s": [0.0, new.max_rate],
        "levels": new.n,
        "factor": int(round(new.max_rate / old.max_rate)),
        "reason": f"observed input rate {rate:.6g} tuples/s is outside [0, {old.max_rate:.6g}); "
        f"the learned values per level were merged onto levels {new.width:.6g} tuples/s wide",
    }


class ServiceTimeEstimator:
    """Online estimate of the per-replica service time (s) on a speedup-1 node, and of its variance (s^2).

    ``balancing``: how the engine splits the input rate over replicas ("round_robin": ``lambda / n`` each, the
    busiest being the slowest; "proportional": share proportional to speed, every replica equally busy).
    Samples are exponentially forgotten (:data:`SERVICE_FORGET` per observation).
    """

    def __init__(self, balancing: str = "round_robin") -> None:
        if balancing not in ("round_robin", "proportional"):
            raise ValueError(f"balancing: must be 'round_robin' or 'proportional', got {balancing!r}")
        self.balancing = balancing
        # [weight, weighted sum S, weighted sum S^2, samples, weight var, weighted sum var]
        self.stats = np.zeros(6)

    def observe(
        self,
        k: np.ndarray,
        speedups: np.ndarray,
        rate: float,
        utilisation: float | None,
        response_time_s: float | None,
    ) -> float | None:
        """Take one period: deployment ``k``, node speedups, input rate (tuples/s), utilisation of the busiest
        replica (busy fraction) and mean response time (s), either may be None. Returns the period's sample of
        the service time (s) or None when the period says nothing."""
        k = np.asarray(k)
        present = k > 0
        if not present.any() or not rate > 0 or not math.isfinite(rate):
            return None
        speedups = np.asarray(speedups, dtype=float)
        if self.balancing == "round_robin":
            lam, speed = rate / float(k.sum()), float(speedups[present].min())
        else:
            total = float((k * speedups).sum())
            lam, speed = rate * float(speedups[present].max()) / total, float(speedups[present].max())
        sample = None
        if utilisation is not None and SERVICE_MIN_UTILISATION <= utilisation < SERVICE_MAX_UTILISATION:
            sample = utilisation * speed / lam
        elif utilisation is None and response_time_s is not None and 0 < response_time_s < math.inf:
            sample = speed * response_time_s / (1.0 + lam * response_time_s)
        if sample is None:
            return None
        st = self.stats
        st[[0, 1, 2, 4, 5]] *= SERVICE_FORGET
        st[0] += 1.0
        st[1] += sample
        st[2] += sample * sample
        st[3] += 1.0
        if (
            utilisation is not None
            and response_time_s is not None
            and VARIANCE_MIN_UTILISATION <= utilisation < SERVICE_MAX_UTILISATION
            and 0 < response_time_s < math.inf
        ):
            # P-K for one replica of speed ``speed``: R = s + lam (v + s^2) / (2 (1 - rho)), s = S / speed
            s = sample / speed
            v = 2.0 * (1.0 - utilisation) * (response_time_s - s) / lam - s * s
            st[4] += 1.0
            st[5] += max(0.0, v) * speed * speed
        return sample

    @property
    def samples(self) -> int:
        return int(self.stats[3])

    @property
    def ready(self) -> bool:
        """Enough samples for the learned model to replace the hint."""
        return self.samples >= SERVICE_MIN_SAMPLES

    def mean_s(self) -> float | None:
        """Estimated mean service time on a speedup-1 node (s), None before any sample."""
        w = self.stats[0]
        return float(self.stats[1] / w) if w > 0 else None

    def var_s2(self) -> float | None:
        """Estimated service-time variance on a speedup-1 node (s^2): from P-K when measured, else that of an
        exponential service (mean^2) -- the assumption that needs no measurement."""
        mean = self.mean_s()
        if mean is None:
            return None
        if self.stats[4] > 0:
            return float(self.stats[5] / self.stats[4])
        return mean * mean

    def model(self, like: QueueModel | None = None) -> QueueModel | None:
        """The learned M/G/1 model (balancing and aggregation of ``like`` when given), None before any sample."""
        mean = self.mean_s()
        if mean is None or not mean > 0:
            return None
        var = self.var_s2() or 0.0
        if like is None:
            return QueueModel(mean, var, "mg1", self.balancing)
        return QueueModel(mean, var, "mg1", like.balancing, like.aggregation)

    def state(self) -> np.ndarray:
        return self.stats.copy()

    def load(self, stats: np.ndarray) -> None:
        stats = np.asarray(stats, dtype=float)
        if stats.shape != (6,):
            raise ValueError(f"state: service-time statistics must have 6 entries, got shape {stats.shape}")
        self.stats = stats.copy()


def planning_model(
    spec_model: QueueModel | None, mode: str, estimator: ServiceTimeEstimator
) -> QueueModel | None:
    """The model a policy plans on: the spec's when ``mode`` is "given" (the papers' semantics); with "hint" the
    spec's until the estimator is ready, then the learned one; with "learn" the learned one as soon as it has a
    sample (the spec's model, if any, is then the simulator's truth and never read). None: no model yet."""
    if mode == "given":
        return spec_model
    learned = estimator.model(spec_model)
    if mode == "hint":
        return learned if estimator.ready or spec_model is None else spec_model
    return learned
