"""How the OMs of an application are configured: the AM's initial configuration (Alg. 5 of paper 001: latency
bounds apportioned along the paths, equal weights), each OM's spec from the topology and the AM's configuration,
and the weights under the violation-budget guard's scale."""

from __future__ import annotations

from typing import Any

import numpy as np

from autoscaler.control.app_state import AmConfig
from autoscaler.control.topology import Topology
from autoscaler.models import Operator
from policies.am.naive import EQUAL_WEIGHTS, fill_paths
from policies.calibration import levels_from_hint
from policies.operator_model import CostWeights, OperatorSpec, QueueModel


def naive_configuration(topo: Topology) -> dict[str, Any]:
    """Alg. 5 on the managed operators: equal shares of R_max along every path, spare latency redistributed;
    equal cost weights. Bounds in ms."""
    names = [op.name for op in topo.operators]
    r_max_s = topo.application.r_max_ms / 1000.0
    rows = []
    for path in topo.paths():
        row = [name in path for name in names]
        if any(row):
            rows.append(row)
    if not rows or not names:
        bounds = np.full(len(names), r_max_s)
    else:
        on_path = np.array(rows, dtype=bool)
        alloc = np.full(len(names), np.inf)
        for p in range(on_path.shape[0]):
            alloc[on_path[p]] = np.minimum(alloc[on_path[p]], r_max_s / on_path[p].sum())
        alloc[~np.isfinite(alloc)] = r_max_s
        bounds = fill_paths(on_path, alloc, r_max_s)
    w = EQUAL_WEIGHTS
    return {
        "policy": "naive",
        "bounds_ms": {n: float(b) * 1000.0 for n, b in zip(names, bounds, strict=True)},
        "weights": {"perf": w.perf, "res": w.res, "rcf": w.rcf},
    }


def operator_spec(
    topo: Topology,
    op: Operator,
    am_config: AmConfig | dict[str, Any],
    k_min: int = 1,
    k_max: int | None = None,
) -> OperatorSpec:
    """The OM's view of ``op``: node types, replica bounds, its response-time bound (s) and cost weights
    (``am_config``: the AM's configuration, :class:`autoscaler.control.app_state.AmConfig` or its JSON).

    Nothing about the operator's performance is assumed (:mod:`policies.calibration`): the rate range of the
    discretised state is learned from the observed rates (starting from the manifest's ``expectedPeakRate`` when
    declared) and grows when rates leave it; the service time is learned from the operator's own metrics,
    starting from the manifest's ``serviceTimeMs`` when declared (``model_mode`` "hint", else "learn": the
    placeholder model is then never read)."""

    config = _am_config(am_config)
    bound_ms = config.bounds_ms.get(op.name, topo.application.r_max_ms)
    w = config.weights or {
        "perf": EQUAL_WEIGHTS.perf,
        "res": EQUAL_WEIGHTS.res,
        "rcf": EQUAL_WEIGHTS.rcf,
    }
    hint_s = op.service_time_ms / 1000.0 if op.service_time_ms else None
    hi = int(k_max if k_max is not None else op.max_parallelism)
    return OperatorSpec(
        node_types=topo.node_types,
        k_max=hi,
        r_max_s=max(float(bound_ms) / 1000.0, 1e-6),
        weights=guarded_weights(CostWeights(float(w["perf"]), float(w["res"]), float(w["rcf"])), config),
        model=QueueModel(hint_s, hint_s * hint_s / 2.0) if hint_s else QueueModel(),
        model_mode="hint" if hint_s else "learn",
        rate_levels=levels_from_hint(op.expected_peak_rate),
        c_max=op.max_parallelism * max(t.price for t in topo.node_types) or 1.0,
        k_min=max(1, min(k_min, hi)),
    )


def guarded_weights(tuned: CostWeights, am_config: AmConfig | dict[str, Any]) -> CostWeights:
    """The weights the OMs run with: ``tuned`` under the violation-budget guard's scale
    (``AmConfig.guard_scale``, 1 when the guard is off or relaxed; :func:`policies.am.guard.scaled_weights`)."""
    from policies.am.guard import scaled_weights

    return scaled_weights(tuned, _am_config(am_config).scale)


def _am_config(value: AmConfig | dict[str, Any]) -> AmConfig:
    return value if isinstance(value, AmConfig) else AmConfig.from_json(value)
