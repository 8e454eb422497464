"""Read-only views of an OM agent's learned state for inspection (pure numpy; nothing in the policy changes).

- :func:`greedy_map`: for tabular agents (``ql``, ``ql-pds``, ``ql-pds-plus``), the greedy action of every
  visited deployment at every rate level, and its estimated value (lower is better).
- :func:`learning_curve`: cumulative average of per-period costs (the quantity the paper's learning curves show).
- :func:`engine_fit`: the micro-batch engine model an OM fitted from its own periods (``model-based``), with its
  error.
- :func:`capacity_fit`: what a ``model-based`` OM learned from busy time (utilisation) per node type: the
  processing rate of one busy replica (tuples/s; DS2's and the Flink autoscaler's true processing rate), the
  service variability, the per-replica rate it expects to meet the bound at, and the bracket its periods proved.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from policies.base import Policy, action_delta, describe_action


def is_tabular(policy: Policy) -> bool:
    """Whether ``policy`` keeps a table over (deployment, rate level) that :func:`greedy_map` can read."""
    from policies.om.qlearning import _TabularBase

    return isinstance(policy, _TabularBase)


def engine_fit(policy: Policy) -> dict[str, Any] | None:
    """The engine model ``policy`` fitted online (:meth:`policies.engine_model.MicroBatchModel.summary`: overhead s,
    cost ms per record, scaling exponent, post-change penalty, latency offset s, RMSE s, periods, ready); None
    when the policy keeps no engine model or has observed no batch."""
    from policies.engine_model import MicroBatchModel

    engine = getattr(policy, "engine", None)
    if not isinstance(engine, MicroBatchModel) or not engine.samples:
        return None
    return engine.summary()


def capacity_fit(policy: Policy) -> dict[str, Any] | None:
    """Per node-type speed of ``policy`` (a ``model-based`` OM with ``capacity_bound``) that measured a busy time:
    ``speed``, ``periods`` (periods that measured it), ``capacity_tuples_s`` (per busy replica:
    :func:`policies.om.model_based.capacity_estimates`), ``service_ms`` (ms per record, 1000 / capacity),
    ``bound_tuples_s`` (the per-replica rate an M/G/1 replica of that capacity and the learned variability serves
    within R_max), ``proven_tuples_s`` / ``violated_tuples_s`` (the bracket of the per-replica bound: the highest
    rate seen within it, the lowest seen above it; None when none); and ``variability`` ((1 + cs^2) / 2, one for
    the operator) and ``latency_offset_s`` (s of its response time that no queue explains, e.g. its share of a
    path's fixed part). None when the policy keeps no such statistics or none was measured."""
    from policies.om.model_based import capacity_estimates

    stats = getattr(policy, "cap_stats", None)
    if not isinstance(stats, np.ndarray) or stats.ndim != 2 or not (stats[:, 0] > 0).any():
        return None
    speeds = np.unique(policy.spec.speedups)
    capacity = capacity_estimates(stats)
    lo, hi = policy.brackets()  # type: ignore[attr-defined]
    bound = policy.per_replica_bound()  # type: ignore[attr-defined]
    rows = []
    for rank in np.flatnonzero(stats[:, 0] > 0).tolist():
        c = float(capacity[rank])
        rows.append(
            {
                "speed": float(speeds[rank]),
                "periods": int(stats[rank, 0]),
                "capacity_tuples_s": c,
                "service_ms": 1000.0 / c if c > 0 and np.isfinite(c) else None,
                "bound_tuples_s": float(bound[rank]) if np.isfinite(bound[rank]) else None,
                "proven_tuples_s": float(lo[rank]) if lo[rank] > 0 else None,
                "violated_tuples_s": float(hi[rank]) if np.isfinite(hi[rank]) else None,
            }
        )
    variability, offset_s = policy.delay_fit()  # type: ignore[attr-defined]
    return {"variability": variability, "latency_offset_s": offset_s, "types": rows}


def greedy_map(policy: Policy, max_deployments: int = 60) -> dict[str, Any]:
    """The learned policy of a tabular agent as a matrix ``deployments x rate levels``.

    Returns ``deployments`` (replica vectors, sorted by total replicas then price; at most ``max_deployments``
    of the visited ones), ``labels`` ("A1:2 A2:1"), ``levels`` (lower rate bound of each level, tuples/s),
    ``level_width`` (tuples/s), ``action`` (greedy action index), ``delta`` (-1 remove, 0 keep, +1 add a replica),
    ``names`` (action descriptions, one per action index) and ``value`` (estimated value of the greedy action).
    Raises ValueError for a non-tabular policy."""
    if not is_tabular(policy):
        raise ValueError(f"policy {policy.name!r} is not tabular: no learned table to show")
    spec = policy.spec
    names = [t.name for t in spec.node_types]
    keys = np.asarray(policy.index.keys_array(), dtype=np.int64).reshape(-1, spec.n_res)  # type: ignore[attr-defined]
    if len(keys) == 0:
        keys = np.zeros((0, spec.n_res), dtype=np.int64)
    prices = np.asarray(spec.prices, dtype=float)
    order = np.lexsort((keys @ prices if len(keys) else np.zeros(0), keys.sum(axis=1)))
    keys = keys[order][:max_deployments]
    n_levels = int(policy.n_levels)  # type: ignore[attr-defined]
    width = float(policy._level_width)  # type: ignore[attr-defined]
    action = np.zeros((len(keys), n_levels), dtype=np.int64)
    delta = np.zeros((len(keys), n_levels), dtype=np.int64)
    value = np.full((len(keys), n_levels), np.nan)
    for i, k in enumerate(keys):
        for lv in range(n_levels):
            values = policy._values(k, lv)  # type: ignore[attr-defined]
            best, best_v = 0, np.inf
            for a, v in values.items():  # first strictly smallest, as the policy's own greedy choice
                if v < best_v:
                    best, best_v = a, v
            action[i, lv] = best
            delta[i, lv] = action_delta(best, spec.n_res)[1] if best else 0
            value[i, lv] = best_v
    n_actions = 2 * spec.n_res + 1
    return {
        "policy": policy.name,
        "steps": int(policy.t),
        "deployments": keys.tolist(),
        "labels": [" ".join(f"{n}:{c}" for n, c in zip(names, k, strict=True) if c) for k in keys.tolist()],
        "levels": [lv * width for lv in range(n_levels)],
        "level_width": width,
        "action": action.tolist(),
        "delta": delta.tolist(),
        "names": [describe_action(a, names) for a in range(n_actions)],
        "value": [[None if not np.isfinite(v) else float(v) for v in row] for row in value],
    }


def learning_curve(costs: np.ndarray) -> np.ndarray:
    """Cumulative average of ``costs`` (one per period, NaN = not learned from, skipped); NaN before the first."""
    c = np.asarray(costs, dtype=float)
    ok = np.isfinite(c)
    num = np.cumsum(np.where(ok, c, 0.0))
    den = np.cumsum(ok)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1), np.nan)
