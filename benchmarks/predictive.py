"""Benchmark of the ``predictive`` OM policy against every online policy and the clairvoyant bound on the shipped
short trace and on synthetic step, flash-crowd and weekly traces (issue 24, item 3).

    python -m benchmarks predictive [--infra A,B] [--k-max 10,20] [--seed 0] [--predictive-params JSON]
        [--output FILE]

Synthetic traces (one rate per 60-s period, tuples/s, count-like noise: each rate is a Poisson draw of the
shape's value, as in the Taxi trace whose error variance grows with the rate):

- ``step``: 3 days at 150, then 450 from a third of the run on (one step, never seen before: nothing to forecast);
- ``flash``: 3 days at 150 with a flash crowd of 900 for 15 periods at half the run;
- ``weekly``: 3 weeks; weekdays a daily cycle 100 -> 500 (peak at 18:00), weekends 100 -> 250 (peak at 14:00),
  with a morning step of +150 from 08:00 to 10:00 on weekdays;
- ``taxi_last_month``: the shipped 44,000-period trace.

Every run is paper mode from one replica; ratios are to the clairvoyant bound of the same trace measured in the
same run. Pure Python (no Django).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from policies.om.clairvoyant import Clairvoyant
from policies.paths import SHIPPED_TRACES_DIR
from policies.registry import resolve_om
from policies.sim.operator import run_operator
from policies.sim.scenario import initial_deployment, paper_spec
from policies.sim.trace import load_trace

DAY = 1440  # periods of 60 s
ONLINE = ("threshold", "ds2", "hpa", "model-based", "model-based-trend", "predictive")


def step_shape(days: int = 3) -> np.ndarray:
    n = days * DAY
    out = np.full(n, 150.0)
    out[n // 3 :] = 450.0
    return out


def flash_shape(days: int = 3) -> np.ndarray:
    n = days * DAY
    out = np.full(n, 150.0)
    out[n // 2 : n // 2 + 15] = 900.0
    return out


def weekly_shape(weeks: int = 3) -> np.ndarray:
    minute = np.arange(DAY)
    weekday = 300.0 - 200.0 * np.cos(2 * np.pi * (minute - 18 * 60) / DAY)
    weekday[8 * 60 : 10 * 60] += 150.0
    weekend = 175.0 - 75.0 * np.cos(2 * np.pi * (minute - 14 * 60) / DAY)
    week = np.concatenate([np.tile(weekday, 5), np.tile(weekend, 2)])
    return np.tile(week, weeks)


def noisy(shape: np.ndarray, seed: int) -> np.ndarray:
    """Count-like noise: a Poisson draw of each rate (tuples/s)."""
    return np.random.default_rng(seed).poisson(shape).astype(float)


def run(
    trace: np.ndarray, name: str, infra: str, k_max: int, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One paper-mode run of policy ``name`` (``overrides``: parameters over its registry defaults)."""
    spec = paper_spec(infra, 3, k_max)
    cpu = time.process_time()
    if name == "clairvoyant":
        pol = Clairvoyant(spec)
        pol.set_trace(trace)
    else:
        cls, params = resolve_om(name)
        pol = cls(spec, {**params, **(overrides or {})}, 0)
    res = run_operator(trace, pol, spec=spec, k0=initial_deployment(spec, pol))
    out = res.summary()
    out["cpu_s"] = time.process_time() - cpu
    return out


def main(argv: list[str]) -> int:  # pragma: no cover - a benchmark, run by hand
    ap = argparse.ArgumentParser(prog="python -m benchmarks predictive")
    ap.add_argument("--infra", default="A,B")
    ap.add_argument("--k-max", default="10,20")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic traces' noise")
    ap.add_argument(
        "--traces", default="step,flash,weekly,taxi_last_month", help="comma-separated trace names"
    )
    ap.add_argument("--output", default="", help="also write the markdown here")
    ap.add_argument(
        "--predictive-params",
        default="{}",
        help="JSON parameters of predictive, e.g. '{\"multi_step\": true}'",
    )
    ap.add_argument("--policies", default=",".join(ONLINE), help="comma-separated online policies to run")
    args = ap.parse_args(argv)
    online = tuple(args.policies.split(","))
    try:
        overrides = json.loads(args.predictive_params)
        if not isinstance(overrides, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        ap.error(f"--predictive-params: must be a JSON object ({exc})")
    makers = {
        "step": lambda: noisy(step_shape(), args.seed),
        "flash": lambda: noisy(flash_shape(), args.seed),
        "weekly": lambda: noisy(weekly_shape(), args.seed),
        "taxi_last_month": lambda: load_trace(SHIPPED_TRACES_DIR / "taxi_last_month.txt"),
    }
    traces = {name: makers[name]() for name in args.traces.split(",")}
    cells = [(i, int(k)) for k in args.k_max.split(",") for i in args.infra.split(",")]
    lines = []
    start = time.perf_counter()
    for tname, trace in traces.items():
        lines += [
            f"#### {tname} ({len(trace)} periods): average cost, ratio to the clairvoyant bound, violations %",
            "",
            "| policy | " + " | ".join(f"{i} K{k}" for i, k in cells) + " |",
            "|---|" + "---|" * len(cells),
        ]
        results = {
            (p, c): run(trace, p, *c, overrides if p == "predictive" else None)
            for p in ("clairvoyant", *online)
            for c in cells
        }
        for p in ("clairvoyant", *online):
            row = []
            for c in cells:
                r, bound = results[(p, c)], results[("clairvoyant", c)]["avg_cost"]
                best = min(results[(q, c)]["avg_cost"] for q in online)
                mark = "**" if p in online and r["avg_cost"] == best else ""
                row.append(
                    f"{mark}{r['avg_cost']:.4f} ({r['avg_cost'] / bound:.2f}x, {r['violations_pct']:.2f} %){mark}"
                )
            lines.append(f"| {p} | " + " | ".join(row) + " |")
            print(lines[-1], file=sys.stderr, flush=True)
        lines.append("")
    lines.append(f"Total {time.perf_counter() - start:.0f} s wall. Bold: the best online policy of the cell.")
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(text + "\n")
    return 0
