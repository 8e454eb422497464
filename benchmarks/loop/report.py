"""bench_loop's per-application results: SLO fractions after the warm-up, cost, the clairvoyant floor, recovery.

- ``violations_pct`` / ``reconfigurations_pct``: % of the observed periods after the warm-up (ticks ``done``; the
  no-data periods are counted apart, as the control loop's aggregates do) with an application-level violation /
  that began with a reconfiguration; the warm-up's own fractions are reported separately (table only).
- ``cost``: resource cost ($) of the periods after the warm-up, as the tick records it (price of the deployment in
  place x period length).
- ``floor_cost``: the clairvoyant floor over the same periods (``policies.floor``), summed over the scaled
  operators: per operator the cheapest deployment sequence with one replica change per period, at most
  floor(eta_R x periods) periods with a change (a relaxation of the application's budget), no violation of the
  operator's bound (the AM's initial per-operator bound, Alg. 5: equal shares of R_max on every path, so that
  meeting every bound meets R_max) under the simulated engine's true queueing model at the rates the engine
  produced (tuples/s, per operator and period), the same node types and prices, and a free initial deployment.
  Region quotas and provisioning delays are not in the floor (it is a lower bound).
- ``recovery_periods``: for scenarios with a step or flash crowd, periods from the change to the first period from
  which the application stays within R_max for ``RECOVERY_HOLD`` periods (or to the end); None without a change
  or when it never recovers.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.loop.runner import AppRecord
from policies.floor import operator_floor

RECOVERY_HOLD = 5
JSON_KEYS = (
    "app",
    "scenario",
    "periods",
    "warmup",
    "violations_pct",
    "eta_v_pct",
    "reconfigurations_pct",
    "eta_r_pct",
    "cost",
    "floor_cost",
    "cost_vs_floor",
    "recovery_periods",
)


@dataclass
class AppResult:
    """The JSON fields plus what the table shows besides (warm-up fractions, no-data periods, floor detail)."""

    app: str
    scenario: str
    periods: int
    warmup: int
    violations_pct: float
    eta_v_pct: float
    reconfigurations_pct: float
    eta_r_pct: float
    cost: float
    floor_cost: float | None
    cost_vs_floor: float | None
    recovery_periods: int | None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> str:
        return json.dumps({k: getattr(self, k) for k in JSON_KEYS})


def _pct(flags: list[bool]) -> float:
    return 100.0 * sum(flags) / len(flags) if flags else 0.0


def recovery(
    violated: list[bool], done: list[bool], change: int | None, hold: int = RECOVERY_HOLD
) -> int | None:
    """Periods from ``change`` to the first period from which the application stays within R_max (no violation
    and a decision) for ``hold`` periods or to the end of the run; None without a change or without recovery."""
    if change is None or change >= len(violated):
        return None
    ok = [d and not v for v, d in zip(violated, done, strict=True)]
    for p in range(change, len(ok)):
        window = ok[p : p + hold]
        if all(window):
            return p - change
    return None


def floor_of(rec: AppRecord, start: int) -> dict[str, Any]:
    """The clairvoyant floor of the periods from ``start`` on (see module doc)."""
    periods = len(rec.status) - start
    budget = int(math.floor(rec.eta_r * periods + 1e-9))
    cost, violations, changes = 0.0, 0, 0
    for name, rates in rec.rates.items():
        out = operator_floor(
            np.array(rates[start:]),
            rec.models[name],
            np.array(rec.speedups),
            np.array(rec.prices),
            rec.period_s,
            rec.bounds_s[name],
            k_min=1,
            k_max=rec.k_max[name],
            max_changes=budget,
        )
        cost += out.cost
        violations += out.violations
        changes = max(changes, out.changes)
    return {"cost": cost, "violations": violations, "max_changes": budget, "changes": changes}


def app_result(
    scenario: str, rec: AppRecord, warmup: int, change: int | None, with_floor: bool = True
) -> AppResult:
    """The result of one application's run (see module doc)."""
    n = len(rec.status)
    warmup = min(max(warmup, 0), n)
    done = [s == "done" for s in rec.status]

    def observed(flags: list[bool], lo: int, hi: int) -> list[bool]:
        return [f for f, d in zip(flags[lo:hi], done[lo:hi], strict=True) if d]

    cost = float(sum(rec.cost[warmup:]))
    floor = None
    if with_floor and warmup < n:
        try:
            floor = floor_of(rec, warmup)
        except ValueError as exc:  # e.g. a state space too large for the DP: no floor, say why
            floor = {"cost": None, "error": str(exc)}
    floor_cost = None if floor is None else floor["cost"]
    under = 0
    for p in range(warmup, n):
        if any(
            rec.op_violated[name][p] and sum(rec.deployments[name][p].values()) < rec.k_max[name]
            for name in rec.op_violated
        ):
            under += 1
    return AppResult(
        app=rec.name,
        scenario=scenario,
        periods=n - warmup,
        warmup=warmup,
        violations_pct=round(_pct(observed(rec.violated, warmup, n)), 2),
        eta_v_pct=round(100.0 * rec.eta_v, 2),
        reconfigurations_pct=round(_pct(observed(rec.reconfigured, warmup, n)), 2),
        eta_r_pct=round(100.0 * rec.eta_r, 2),
        cost=round(cost, 6),
        floor_cost=None if floor_cost is None else round(floor_cost, 6),
        cost_vs_floor=round(cost / floor_cost, 3) if floor_cost else None,
        recovery_periods=recovery(rec.violated, done, change),
        extra={
            "warmup_violations_pct": round(_pct(observed(rec.violated, 0, warmup)), 2),
            "warmup_reconfigurations_pct": round(_pct(observed(rec.reconfigured, 0, warmup)), 2),
            "warmup_cost": round(float(sum(rec.cost[:warmup])), 6),
            "no_data_periods": sum(1 for d in done[warmup:] if not d),
            "under_provisioned_periods": under,
            "floor": floor,
        },
    )


def combine(results: list[AppResult]) -> tuple[AppResult, dict[str, Any]]:
    """Repeated runs of one application: the median of every number (an AppResult) and the worst of each
    (largest violations, reconfigurations, cost, cost/floor and recovery)."""
    first = results[0]

    def med(key: str) -> Any:
        values = [getattr(r, key) for r in results if getattr(r, key) is not None]
        if not values:
            return None
        value = statistics.median(values)
        return int(value) if key == "recovery_periods" else round(float(value), 6)

    def worst(key: str) -> Any:
        values = [getattr(r, key) for r in results]
        if any(v is None for v in values) and key == "recovery_periods":
            return None  # a run that never recovered is the worst
        values = [v for v in values if v is not None]
        return max(values) if values else None

    median = AppResult(
        app=first.app,
        scenario=first.scenario,
        periods=first.periods,
        warmup=first.warmup,
        violations_pct=med("violations_pct"),
        eta_v_pct=first.eta_v_pct,
        reconfigurations_pct=med("reconfigurations_pct"),
        eta_r_pct=first.eta_r_pct,
        cost=med("cost"),
        floor_cost=med("floor_cost"),
        cost_vs_floor=med("cost_vs_floor"),
        recovery_periods=med("recovery_periods"),
        extra={
            k: statistics.median([r.extra[k] for r in results])
            for k in (
                "warmup_violations_pct",
                "warmup_reconfigurations_pct",
                "warmup_cost",
                "no_data_periods",
                "under_provisioned_periods",
            )
        },
    )
    worst_of = {
        k: worst(k)
        for k in ("violations_pct", "reconfigurations_pct", "cost", "cost_vs_floor", "recovery_periods")
    }
    return median, worst_of


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[tuple[AppResult, dict[str, Any] | None]]) -> str:
    """A markdown table: one line per application (median; the worst of repeated runs in brackets)."""
    head = (
        "| scenario | app | periods (+warm-up) | violations % (eta_V) | reconfigurations % (eta_R) | "
        "warm-up viol. % / reconf. % | cost $ | floor $ | cost / floor | recovery (periods) | "
        "under-provisioned periods | no-data periods |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r, worst in rows:

        def w(key: str, spec: str = ".2f", r=r, worst=worst) -> str:
            base = _fmt(getattr(r, key), spec) if key != "recovery_periods" else _fmt(r.recovery_periods, "d")
            if worst is None:
                return base
            other = worst[key]
            return f"{base} [{_fmt(other, spec) if key != 'recovery_periods' else _fmt(other, 'd')}]"

        lines.append(
            f"| {r.scenario} | {r.app} | {r.periods} (+{r.warmup}) | {w('violations_pct')} ({r.eta_v_pct:g}) | "
            f"{w('reconfigurations_pct')} ({r.eta_r_pct:g}) | "
            f"{r.extra['warmup_violations_pct']:.1f} / {r.extra['warmup_reconfigurations_pct']:.1f} | "
            f"{w('cost', '.3f')} | {_fmt(r.floor_cost, '.3f')} | {w('cost_vs_floor')} | "
            f"{w('recovery_periods')} | {r.extra['under_provisioned_periods']:g} | {r.extra['no_data_periods']:g} |"
        )
    return "\n".join(lines)
