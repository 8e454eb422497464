"""What the control loop needs to know about a stored Application: managed operators, node types, paths, OM specs
and the AM configuration (per-operator response-time bounds and cost weights)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.exceptions import ObjectDoesNotExist

from autoscaler.models import Application, NodeType, Operator
from policies.am.naive import EQUAL_WEIGHTS, fill_paths
from policies.calibration import levels_from_hint
from policies.graph import source_to_sink_paths
from policies.model import CostWeights, OperatorSpec, QueueModel
from policies.model import NodeType as PolicyNodeType
from policies.registry import RECOMMENDED_OM, om_choice

#: the OM of an application that declares none: the recommended one, as a manifest writes it ({"name", "params"})
DEFAULT_OM_POLICY: dict[str, Any] = om_choice(RECOMMENDED_OM)
DEFAULT_AM_POLICY = "naive"


def policy_choice(
    application: Application, level: str, default: str | dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """(name, params) of the application's policy at ``level`` ("om", "am", ...); ``default`` (a name, or
    ``{"name", "params"}``) when unset. A choice without a name takes the default's name and params, its own
    params over them."""
    if isinstance(default, str):
        default_name, default_params = default, {}
    else:
        default_name, default_params = str(default["name"]), dict(default.get("params") or {})
    value = (application.policies or {}).get(level)
    if value is None:
        return default_name, default_params
    if isinstance(value, str):
        return value, {}
    params = dict(value.get("params") or {})
    if value.get("name") is None:
        return default_name, {**default_params, **params}
    return str(value["name"]), params


@dataclass
class Topology:
    """The managed operators (those with a Deployment) of an application, in position order, and its node types."""

    application: Application
    operators: list[Operator]
    node_types: tuple[PolicyNodeType, ...]
    all_operators: list[Operator]
    streams: list[tuple[str, str]]

    @property
    def type_names(self) -> list[str]:
        return [t.name for t in self.node_types]

    @property
    def prices_per_hour(self) -> np.ndarray:
        return np.array([t.price for t in self.node_types], dtype=float)

    def vector(self, deployment: dict[str, int]) -> np.ndarray:
        """A deployment dict as the replica vector over ``node_types`` (unknown types raise ValueError)."""
        k = np.zeros(len(self.node_types), dtype=np.int64)
        index = {n: i for i, n in enumerate(self.type_names)}
        for name, n in (deployment or {}).items():
            if name not in index:
                raise ValueError(f"deployment: node type {name!r} is not in the application's catalog")
            k[index[name]] = int(n)
        return k

    def as_dict(self, k: np.ndarray) -> dict[str, int]:
        return {name: int(n) for name, n in zip(self.type_names, k, strict=True) if n > 0}

    def paths(self) -> list[list[str]]:
        """Every source-to-sink path of the whole graph (operator names)."""
        return source_to_sink_paths([op.name for op in self.all_operators], self.streams)


def topology(application: Application) -> Topology:
    all_ops = list(application.operators.all().select_related("deployment__region"))
    managed = []
    region_ids = set()
    for op in all_ops:
        try:
            dep = op.deployment
        except ObjectDoesNotExist:
            continue
        managed.append(op)
        region_ids.add(dep.region.catalog_id)
    if region_ids:
        rows = NodeType.objects.filter(catalog_id__in=region_ids).order_by("catalog_id", "position")
    else:
        rows = NodeType.objects.filter(catalog__regions__applications=application).order_by("position")
    seen: dict[str, PolicyNodeType] = {}
    for t in rows:
        seen.setdefault(
            t.name, PolicyNodeType(t.name, float(t.speedup), float(t.price_per_hour), t.cores, t.memory_mib)
        )
    streams = [(s.source.name, s.target.name) for s in application.streams.select_related("source", "target")]
    return Topology(application, managed, tuple(seen.values()), all_ops, streams)


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
    topo: Topology, op: Operator, am_config: dict[str, Any], k_min: int = 1, k_max: int | None = None
) -> OperatorSpec:
    """The OM's view of ``op``: node types, replica bounds, its response-time bound (s) and cost weights.

    Nothing about the operator's performance is assumed (:mod:`policies.calibration`): the rate range of the
    discretised state is learned from the observed rates (starting from the manifest's ``expectedPeakRate`` when
    declared) and grows when rates leave it; the service time is learned from the operator's own metrics,
    starting from the manifest's ``serviceTimeMs`` when declared (``model_mode`` "hint", else "learn": the
    placeholder model is then never read)."""

    bound_ms = am_config.get("bounds_ms", {}).get(op.name, topo.application.r_max_ms)
    w = am_config.get("weights") or {
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
        weights=guarded_weights(CostWeights(float(w["perf"]), float(w["res"]), float(w["rcf"])), am_config),
        model=QueueModel(hint_s, hint_s * hint_s / 2.0) if hint_s else QueueModel(),
        model_mode="hint" if hint_s else "learn",
        rate_levels=levels_from_hint(op.expected_peak_rate),
        c_max=op.max_parallelism * max(t.price for t in topo.node_types) or 1.0,
        k_min=max(1, min(k_min, hi)),
    )


def guarded_weights(tuned: CostWeights, am_config: dict[str, Any]) -> CostWeights:
    """The weights the OMs run with: ``tuned`` under the violation-budget guard's scale
    (``am_config["guard_scale"]``, 1 when the guard is off or relaxed; :func:`policies.am.guard.scaled_weights`)."""
    from policies.am.guard import scaled_weights

    return scaled_weights(tuned, float(am_config.get("guard_scale", 1.0)))


def finite(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become None (PostgreSQL jsonb rejects Infinity/NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return finite(value.item())
    return value
