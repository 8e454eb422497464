"""A live run's closed loop replayed through the product: shared by ``benchmarks.flink.closed_loop`` and
``benchmarks.spark.closed_loop``.

Each engine fits the simulated engine from its run and writes the manifests (an application on ``engine:
simulated`` whose trace is the run's arrival rate, one per period); :func:`replay_ledger` applies them and drives
the product's control path for the run's number of periods (``benchmarks.loop.runner.run_scenario``: manifest ->
``control.tick`` -> OM / AM -> connector, the AM's tuning and the region's step, as ``bench_loop`` drives them),
returns the ledger and removes what it registered. :func:`count_ledger` counts the ledger as the live runs are
counted: per period the replicas the observed period ran (the last applied when the engine reported none) times
the period, and the worst path's response time against ``R_max``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ReplayRun:
    """What a replay's manifest takes from the live run's own: ``om_policy`` (``spec.policies.om``),
    ``r_max_s`` (s), ``eta_v`` / ``eta_r`` (fractions), ``period_s`` (T_OM, s), ``am_period_s`` (T_AM, s),
    ``k_max`` (replicas per operator at most); each engine adds its own."""

    om_policy: dict[str, Any]
    r_max_s: float
    eta_v: float
    eta_r: float
    period_s: float
    am_period_s: float
    k_max: int


@dataclass(frozen=True)
class ClosedLoopPrediction:
    """What the product's ledger recorded for the simulated run: ``violations`` (periods whose worst path
    exceeded R_max) and ``violations_pct`` (% of the ``complete`` periods, or of all with ``over_all_periods``
    in :func:`count_ledger`), ``replica_s`` (replica-seconds of
    the counted operators: slot-seconds on Flink, executor-seconds on Spark), ``reconfigurations``, ``periods``;
    ``replicas``: per counted operator, the replicas each period ran."""

    violations_pct: float
    replica_s: float
    reconfigurations: int
    periods: int
    complete: int
    violations: int
    replicas: dict[str, tuple[int, ...]] = field(default_factory=dict)


def replay_application(
    name: str, connector: dict[str, Any], operators: list[dict[str, Any]], region: str, run: ReplayRun
) -> dict[str, Any]:
    """The replay's Application document: ``operators`` in a chain (in their order) on ``engine: simulated``
    with ``connector``, in ``region``, under the live run's SLO, OM policy and periods (``run``)."""
    names = [op["name"] for op in operators]
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "Application",
        "metadata": {"name": name},
        "spec": {
            "engine": "simulated",
            "connector": connector,
            "slo": {"rMaxMs": run.r_max_s * 1000.0, "etaV": run.eta_v, "etaR": run.eta_r},
            "operators": operators,
            "streams": [[a, b] for a, b in zip(names, names[1:], strict=False)],
            "policies": {"om": run.om_policy},
            "periods": {"omS": run.period_s, "amS": run.am_period_s},
            "regions": [region],
            "state": "running",
        },
    }


def replay_ledger(
    scenario_name: str,
    documents: Callable[[str], list[dict[str, Any]]],
    rates: Sequence[float],
    periods: int,
    catalog: str,
) -> tuple[dict[int, Any], int]:
    """Apply ``documents(trace_path)`` (the trace file holds ``rates``, tuples/s, one per period) and run
    ``periods`` control periods of its application through the product; returns its ledger (slot -> ``Tick``)
    and the first slot. Uses the database; what it registers (the scenario's region and applications, the
    ``catalog``) is removed again."""
    from autoscaler.control.models import Tick
    from autoscaler.models import NodeTypeCatalog
    from benchmarks.loop.runner import cleanup, run_scenario
    from benchmarks.loop.scenarios import Scenario, write_trace

    with tempfile.TemporaryDirectory(prefix=f"{scenario_name}-") as tmp:
        docs = documents(write_trace(Path(tmp), "arrivals", list(rates)))
        scenario = Scenario(scenario_name, "a live run's fitted engine", lambda _dir, _n: docs)
        try:
            rec = run_scenario(scenario, periods, Path(tmp)).apps[0]
            ticks = {
                t.slot: t
                for t in Tick.objects.filter(application_id=rec.app_id).only("slot", "metrics", "result")
            }
            return ticks, rec.first_slot
        finally:
            cleanup([scenario_name])
            NodeTypeCatalog.objects.filter(name=catalog).delete()


def count_ledger(
    ticks: dict[int, Any],
    first_slot: int,
    periods: int,
    period_s: float,
    r_max_s: float,
    operators: Sequence[str],
    replica_cores: float = 1.0,
    over_all_periods: bool = False,
) -> ClosedLoopPrediction:
    """Count ``periods`` periods of a ledger from ``first_slot`` (module doc): replica-seconds of
    ``operators`` (each starting at 1 replica) times ``replica_cores``, violations in % of the complete periods
    (Flink's count), or of all periods with ``over_all_periods`` (Spark's, ``benchmarks.spark.runner.finish``)."""
    running = dict.fromkeys(operators, 1)
    ran: dict[str, list[int]] = {op: [] for op in operators}
    replica_s = 0.0
    complete = violations = reconfigurations = 0
    for slot in range(first_slot, first_slot + periods):
        tick = ticks.get(slot)
        metrics = (tick.metrics if tick is not None else None) or {}
        ops = metrics.get("operators") or {}
        for op in operators:  # the deployment the observed period ran (the last applied one when down)
            dep = (ops.get(op) or {}).get("deployment")
            if dep:
                running[op] = sum(int(n) for n in dep.values())
        replica_s += sum(running.values()) * period_s
        for op in operators:
            ran[op].append(running[op])
        paths = [v for v in (metrics.get("path_response_time_s") or {}).values() if v is not None]
        if paths and metrics.get("complete"):
            complete += 1
            violations += int(max(paths) > r_max_s)
        result = (tick.result if tick is not None else None) or None
        if result is not None:
            reconfigurations += 1
            if result.get("ok"):
                for op in operators:
                    dep = (result.get("deployments") or {}).get(op)
                    if dep:
                        running[op] = sum(int(n) for n in dep.values())
    base = periods if over_all_periods else complete
    pct = 100.0 * violations / base if base else float("nan")
    return ClosedLoopPrediction(
        pct,
        replica_s * replica_cores,
        reconfigurations,
        periods,
        complete,
        violations,
        {op: tuple(ks) for op, ks in ran.items()},
    )
