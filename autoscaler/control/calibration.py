"""The operators' service times as the control plane learned them from their own metrics, for the parts that
simulate the application (the AM's Bayesian optimisation, the what-if page): the same online estimator the
Operator Managers run (:class:`policies.calibration.ServiceTimeEstimator`), fed with the recorded periods
(``Tick.metrics``: deployment, input rate, utilisation of the busiest replica, response time). An operator whose
periods teach nothing yet falls back to its declared ``serviceTimeMs`` hint; with neither, it is unknown and the
caller says so (no assumed service time)."""

from __future__ import annotations

import numpy as np

from autoscaler.control.models import Tick
from autoscaler.control.topology import Topology
from policies.calibration import ServiceTimeEstimator

#: how many of the newest recorded periods the estimate reads (the estimator forgets older samples anyway)
PERIODS_READ = 500


def learned_service_times(
    topo: Topology, periods: int = PERIODS_READ
) -> dict[str, tuple[float, float] | None]:
    """Per managed operator: ``(mean service time (s), its variance (s^2))`` on a speedup-1 node, learned from
    the newest ``periods`` done ticks; the declared hint (variance mean^2 / 2) when they teach nothing; None
    when neither is known."""
    speedups = {t.name: t.speedup for t in topo.node_types}
    names = topo.type_names
    s = np.array([speedups[n] for n in names], dtype=float)
    estimators = {op.name: ServiceTimeEstimator() for op in topo.operators}
    rows = (
        Tick.objects.filter(application=topo.application, status=Tick.Status.DONE)
        .order_by("-slot")
        .values_list("metrics", flat=True)[:periods]
    )
    for metrics in reversed(list(rows)):
        ops = (metrics or {}).get("operators") or {}
        for name, est in estimators.items():
            m = ops.get(name)
            if not m or not m.get("complete", True) or m.get("input_rate") is None:
                continue
            dep = m.get("deployment") or {}
            if any(t not in speedups for t in dep):
                continue
            k = np.array([int(dep.get(n, 0)) for n in names], dtype=np.int64)
            est.observe(k, s, float(m["input_rate"]), m.get("utilisation"), m.get("response_time_s"))
    out: dict[str, tuple[float, float] | None] = {}
    for op in topo.operators:
        est = estimators[op.name]
        mean = est.mean_s() if est.ready else None
        if mean is not None and mean > 0:
            var = est.var_s2()
            out[op.name] = (float(mean), float(var if var is not None else mean * mean))
        elif op.service_time_ms:
            hint = op.service_time_ms / 1000.0
            out[op.name] = (hint, hint * hint / 2.0)
        else:
            out[op.name] = None
    return out
