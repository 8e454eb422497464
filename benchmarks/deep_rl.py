"""Benchmark ``deep-rl``: decision latency of the deep Q-learning OMs ``dql``, ``dql-pds`` and ``dql-pds-plus``
(:mod:`policies.om.deep`; ``step()`` over 10,000 calls against a trivial policy) and their whole-trace quality
against paper 001's Table 2; writes section ``deep-rl`` of docs/benchmarks.md.

    python -m benchmarks deep-rl [--seeds 3] [--jobs 2] [--steps N] [--sizes 3x10,10x20] [--no-quality]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.common import DoNothing, bench_spec, full_run, published_rows
from policies.base import Observation, Policy
from policies.om.deep import DeepQLearning, DeepQLearningPDS, DeepQLearningPDSPlus, _DeepQBase
from policies.operator_model import OperatorSpec
from policies.paths import reference_csv, taxi_trace

POLICY_CLASSES: dict[str, type[_DeepQBase]] = {
    "dql": DeepQLearning,
    "dql-pds": DeepQLearningPDS,
    "dql-pds-plus": DeepQLearningPDSPlus,
}
PUBLISHED_NAMES = {"dql": "DQL", "dql-pds": "DQL+PDS", "dql-pds-plus": "DQL+PDS+"}


def _latency(policy: Policy, rates: np.ndarray) -> np.ndarray:
    """Seconds per ``policy.step`` call over ``rates``, the deployment following the proposals."""
    import time

    spec = policy.spec
    k = np.zeros(spec.n_res, dtype=np.int64)
    k[0] = 1
    out = np.empty(len(rates))
    clock = time.perf_counter
    for i, rate in enumerate(rates):
        rate = float(rate)
        obs = Observation(deployment=k, input_rate=rate, violated=bool(_violates(spec, k, rate)))
        t0 = clock()
        prop = policy.step(obs)
        out[i] = clock() - t0
        k = prop.deployment
    return out


def _violates(spec: OperatorSpec, k: np.ndarray, rate: float) -> bool:
    return spec.model.response_time(k, spec.speedups, rate) > spec.r_max_s


def _published(path: str, n_res: int, k_max: int) -> dict[tuple[str, str], dict[str, str]]:
    """Published Taxi rows of Table 2 for ``n_res`` types and ``k_max``, keyed by (policy, infra)."""
    return {
        (r["policy"], r["infra"]): r
        for r in published_rows(path)
        if int(r["n_res"]) == n_res and int(r["k_max"]) == k_max
    }


SETUP_NOTES = """Setup (paper 001, Appendix B, and what the paper leaves open): network input "reduced2" (per-type
one-hot replica counts, one-hot set of types present, one-hot rate level: 67 inputs for 3 types), 3 hidden ReLU
layers of 3/4 of their input (50, 38, 28), linear output (7 Q values for `dql`, one V~ for the PDS variants),
Xavier-normal initial weights, MSE, plain SGD with learning rate 0.1 (the paper gives none; 0.1 is the default
of the authors' public simulator and beat 0.01 and Adam 1e-3 on the first 100,000 Taxi steps), replay buffer
10,000 sampled uniformly with replacement, a batch of 32 every 5 steps, gamma 0.99, epsilon = max(0.01,
0.95^(t-1)), no target network (the paper uses none). The PDS+ estimate uses the rate of the period just
observed (the paper: "rate assumed unchanged"). Costs of stored transitions are recomputed from raw facts
at training time, so a reconfiguration of weights or R_max applies to the whole buffer."""


def bench(argv: list[str] | None = None) -> str:
    """Decision latency (``step()`` over 10,000 calls vs a trivial policy) and whole-trace quality vs Table 2."""
    import argparse
    import shlex
    import sys
    import time
    from concurrent.futures import ProcessPoolExecutor

    from benchmarks.doc import write_section
    from policies.sim.trace import load_trace

    ap = argparse.ArgumentParser(prog="python -m benchmarks deep-rl", description=bench.__doc__)
    ap.add_argument("--trace", default=str(taxi_trace()))
    ap.add_argument("--published", default=str(reference_csv("paper_om_tables.csv")))
    ap.add_argument("--steps", type=int, default=None, help="trace steps for the quality runs (default: all)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--calls", type=int, default=10_000, help="step() calls per latency measurement")
    ap.add_argument(
        "--sizes",
        default="3x10",
        help="latency configurations TYPESxK_MAX, comma separated (e.g. 3x10,10x20)",
    )
    ap.add_argument("--no-quality", action="store_true", help="latency only")
    ap.add_argument("--no-write", action="store_true", help="print, do not write docs/benchmarks.md")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1 or args.calls < 1:
        ap.error("--seeds, --jobs and --calls must be >= 1")
    try:
        sizes = [tuple(int(v) for v in item.split("x")) for item in args.sizes.split(",")]
        if any(len(sz) != 2 or sz[0] < 1 or sz[1] < 1 for sz in sizes):
            raise ValueError
    except ValueError:
        ap.error(f"--sizes: expected TYPESxK_MAX[,TYPESxK_MAX...], got {args.sizes!r}")
    rates = load_trace(args.trace, args.calls)
    lines = ["### Decision latency: `Policy.step()` (the control loop's call)", ""]
    lines.append(
        f"{args.calls} consecutive calls on the first {args.calls} Taxi rates, learning included (a training "
        "step every 5th call), deployment following the proposals; the trivial do-nothing policy is measured "
        "in the same run."
    )
    lines += [
        "",
        "| policy | types | K_max | p50 (ms) | p99 (ms) | mean (ms) | p50 / trivial p50 |",
        "|---|---|---|---|---|---|---|",
    ]
    for n_res, k_max in sizes:
        spec = bench_spec("A", n_res, k_max)
        trivial = _latency(DoNothing(spec), rates)
        t50 = float(np.percentile(trivial, 50))
        lines.append(
            f"| do-nothing | {n_res} | {k_max} | {1e3 * t50:.4f} | {1e3 * np.percentile(trivial, 99):.4f} | "
            f"{1e3 * trivial.mean():.4f} | 1 |"
        )
        for name, cls in POLICY_CLASSES.items():
            lat = _latency(cls(bench_spec("A", n_res, k_max), seed=0), rates)
            p50 = float(np.percentile(lat, 50))
            lines.append(
                f"| {name} | {n_res} | {k_max} | {1e3 * p50:.3f} | {1e3 * np.percentile(lat, 99):.3f} | "
                f"{1e3 * lat.mean():.3f} | {p50 / t50:.0f} |"
            )
            print(lines[-1], file=sys.stderr)
    if not args.no_quality:
        published = _published(args.published, 3, 10)
        jobs: list[tuple[str, str, int, int, int, dict[str, Any], str, int | None]] = [
            (name, infra, 3, 10, seed, {}, args.trace, args.steps)
            for infra in ("A", "B")
            for name in POLICY_CLASSES
            for seed in range(args.seeds)
        ]
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(full_run, jobs))
        wall = time.perf_counter() - t0
        steps = results[0]["steps"]
        lines += [
            "",
            f"### Quality: Taxi trace ({steps} steps), 3 node types, K_max 10, {args.seeds} seeds "
            f"(mean, min-max of the average cost)",
            "",
            "| infra | policy | avg cost | (min-max) | viol. % | rcf. % | res. ($/h) | published cost | published viol. % / rcf. % / res. | s per run |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for infra in ("A", "B"):
            for name in POLICY_CLASSES:
                rs = [r for r in results if r["infra"] == infra and r["policy"] == name]
                cost = np.array([r["avg_cost"] for r in rs])
                pub = published.get((PUBLISHED_NAMES[name], infra), {})
                lines.append(
                    f"| {infra} | {name} | {cost.mean():.4f} | ({cost.min():.4f}-{cost.max():.4f}) | "
                    f"{np.mean([r['violations_pct'] for r in rs]):.2f} | "
                    f"{np.mean([r['reconfigurations_pct'] for r in rs]):.2f} | "
                    f"{np.mean([r['avg_resource_cost'] for r in rs]):.2f} | {pub.get('avg_cost', '-')} | "
                    f"{pub.get('violations_pct', '-')} / {pub.get('reconfigurations_pct', '-')} / "
                    f"{pub.get('resource_cost', '-')} | {np.mean([r['wall_seconds'] for r in rs]):.0f} |"
                )
        lines += [
            "",
            f"{len(jobs)} runs in {wall:.0f} s wall with {args.jobs} worker processes.",
            "",
            SETUP_NOTES,
        ]
    body = "\n".join(lines)
    command = "python -m benchmarks deep-rl " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    if not args.no_write:
        write_section("deep-rl", body, command.strip())
    return body


def main(argv: list[str]) -> int:
    print(bench(argv))
    return 0
