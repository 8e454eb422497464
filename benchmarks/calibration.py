"""Issue 20's two saturation cases, before (the papers' fixed range and given model) and after self-calibration
(no range, model learned; :mod:`policies.calibration`):

    python -m benchmarks calibration [--steps N] [--policies model-based,ql-pds-plus] [--jobs J]

Infrastructure A, 3 node types, K_max 10, R_max 50 ms, service rate ``mu`` 180 or 1,600 tuples/s on a speedup-1
node. Traces: ``taxi`` = the first ``--steps`` periods of the Taxi trace scaled so that their largest rate is
1,800 tuples/s; ``ramp`` = 500 periods at 60 tuples/s, a linear ramp to 1,800 tuples/s over 3,000 periods, 2,000
periods at 1,800 tuples/s (times a uniform 0.95-1.0 noise, seed 0). One JSON object per run: violations and
reconfigurations (% of periods), mean replicas, violations during the last 2,000 periods, the periods in violation
while K_max allowed more replicas, the final rate range (tuples/s) and how often it grew.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

PEAK = 1800.0  # tuples/s: the largest rate of both traces (issue 20)


def make_trace(kind: str, steps: int) -> np.ndarray:
    """The ``taxi`` or ``ramp`` trace (tuples/s per period)."""
    if kind == "taxi":
        from policies.paths import taxi_trace
        from policies.sim.trace import load_trace

        t = load_trace(taxi_trace(), steps)
        return t * (PEAK / t.max())
    rng = np.random.default_rng(0)
    base = np.concatenate([np.full(500, 60.0), np.linspace(60.0, PEAK, 3000), np.full(2000, PEAK)])
    return base * rng.uniform(0.95, 1.0, len(base))


def one_run(job: tuple[str, str, float, bool, int]) -> dict[str, Any]:
    from policies.sim.scenario import paper_spec, run_paper

    policy, kind, mu, calibrate, steps = job
    trace = make_trace(kind, steps)
    res = run_paper(trace, policy, "A", 3, 10, mu=mu, calibrate=calibrate)
    spec = paper_spec("A", 3, 10, mu=mu)
    s = res.summary()
    return {
        "policy": policy,
        "trace": kind,
        "mu_tuples_s": mu,
        "calibrate": calibrate,
        "steps": s["steps"],
        "violations_pct": round(s["violations_pct"], 3),
        "reconfigurations_pct": round(s["reconfigurations_pct"], 3),
        "avg_replicas": round(s["avg_replicas"], 3),
        "max_replicas": int(res.replicas.max()),
        "avg_cost": round(s["avg_cost"], 5),
        "last_2000_violations_pct": round(100.0 * float(res.violation[-2000:].mean()), 3),
        "violating_below_k_max": int(((res.violation) & (res.replicas < spec.k_max)).sum()),
        "rate_range_tuples_s": res.meta["rate_range_tuples_s"],
        "rerangings": res.meta["rerangings"],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks calibration", description=__doc__)
    ap.add_argument("--steps", type=int, default=20_000, help="periods of the taxi trace (>= 2)")
    ap.add_argument("--policies", default="model-based,ql-pds-plus", help="comma-separated OM policies")
    ap.add_argument("--jobs", type=int, default=4, help="worker processes (>= 1)")
    args = ap.parse_args(argv)
    if args.steps < 2 or args.jobs < 1:
        ap.error("--steps must be >= 2 and --jobs >= 1")
    jobs = [
        (p, kind, mu, cal, args.steps)
        for p in args.policies.split(",")
        for kind in ("taxi", "ramp")
        for mu in (180.0, 1600.0)
        for cal in (False, True)
    ]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for rec in pool.map(one_run, jobs):
            print(json.dumps(rec), flush=True)
