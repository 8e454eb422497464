"""Benchmark ``model-based``: whole-trace time and memory of the model-based OM (:mod:`policies.om.model_based`)
on infrastructure A, and its quality against the best published online policy of paper 001's Tables 2-3 and the
offline optimum ``dp``; writes section ``model-based`` of docs/benchmarks.md. Every run is its own subprocess.

    python -m benchmarks model-based [--trace PATH] [--steps N] [--jobs J] [--cells all|timing] [--results PATH]
        [--resume] [--render-only]
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.common import DoNothing, published_rows, subprocess_env
from policies.paths import reference_csv, taxi_trace

REFERENCE_WALL_S = 62.0  # authors' simulator, model-based, infra A, 3 types, K_max 10, whole Taxi trace
BENCH_CELLS = [(infra, n, k) for k in (10, 20) for infra in ("A", "B") for n in (3, 6, 10)]
TIMING_CELLS = [("A", 3, 10), ("A", 3, 20), ("A", 10, 10), ("A", 10, 20)]


def _run_cell(policy: str, infra: str, n_res: int, k_max: int, trace_path: str, steps: int) -> dict[str, Any]:
    """One whole-trace run in this process (the benchmark starts one subprocess per run): the policy, then a
    do-nothing loop over the same trace; wall times in seconds, peak memory (ru_maxrss) in MiB."""
    import resource
    import time

    from policies.sim.operator import run_operator
    from policies.sim.scenario import build_policy, initial_deployment, paper_spec
    from policies.sim.trace import load_trace

    trace = load_trace(trace_path, steps or None)
    spec = paper_spec(infra, n_res, k_max)
    start = time.perf_counter()
    cpu_start = time.process_time()
    pol = build_policy(policy, spec)
    if hasattr(pol, "set_trace"):
        pol.set_trace(trace)
    setup = time.perf_counter() - start
    result = run_operator(trace, pol, spec=spec, k0=initial_deployment(spec, pol))
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    cpu_idle = time.process_time()
    idle = run_operator(trace, DoNothing(paper_spec(infra, n_res, k_max)), spec=spec).wall_seconds
    cpu_idle = time.process_time() - cpu_idle
    out = result.summary()
    out.update(
        policy=policy,
        infra=infra,
        n_res=n_res,
        k_max=k_max,
        wall_total_s=wall,
        cpu_s=cpu,
        nothing_cpu_s=cpu_idle,
        setup_s=setup,
        nothing_s=idle,
        maxrss_mib=rss_mib,
        space=getattr(pol, "space").size,  # noqa: B009 - a ModelBased (built by name)
    )
    return out


def _subprocess_cell(args: tuple[str, str, int, int, str, int]) -> dict[str, Any]:
    import json
    import subprocess
    import sys

    policy, infra, n_res, k_max, trace_path, steps = args
    cmd = [sys.executable, "-m", "benchmarks", "model-based", "--run", policy, infra, str(n_res), str(k_max)]
    cmd += ["--trace", trace_path, "--steps", str(steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=subprocess_env())
    if proc.returncode != 0:
        return {"policy": policy, "infra": infra, "n_res": n_res, "k_max": k_max, "error": proc.stderr[-400:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _published_best(k_max: int, n_res: int, infra: str, path: str) -> tuple[str, float]:
    """The published online policy with the lowest average cost in the Taxi cell (K_max, N_res, infra)."""
    best = ("-", math.inf)
    for row in published_rows(path):
        if (int(row["k_max"]), int(row["n_res"]), row["infra"]) == (k_max, n_res, infra):
            if float(row["avg_cost"]) < best[1]:
                best = (row["policy"], float(row["avg_cost"]))
    return best


def bench(argv: list[str]) -> int:  # pragma: no cover - a benchmark, run by hand
    import argparse
    import json
    import sys
    from multiprocessing.pool import ThreadPool
    from pathlib import Path

    from benchmarks.doc import write_section

    ap = argparse.ArgumentParser(prog="python -m benchmarks model-based")
    ap.add_argument("--trace", default=str(taxi_trace()))
    ap.add_argument("--reference", default=str(reference_csv("paper_om_tables.csv")))
    ap.add_argument("--steps", type=int, default=0, help="0 = whole trace")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cells", choices=("all", "timing"), default="all")
    ap.add_argument(
        "--results", default="/tmp/model_based_bench.jsonl", help="one JSON line per finished run"
    )
    ap.add_argument("--resume", action="store_true", help="skip runs already in --results")
    ap.add_argument(
        "--render-only", action="store_true", help="write the section from --results, run nothing"
    )
    args = ap.parse_args(argv)
    timing = [("model-based", *c) for c in TIMING_CELLS]
    jobs = list(timing)
    if args.cells == "all":
        jobs = [("dp", *c) for c in BENCH_CELLS] + timing
        jobs += [("model-based", *c) for c in BENCH_CELLS if c not in TIMING_CELLS]
    results_path = Path(args.results)
    done: dict[tuple, dict[str, Any]] = {}
    if (args.resume or args.render_only) and results_path.exists():
        for line in results_path.read_text().splitlines():
            r = json.loads(line)
            if "error" not in r:
                done[(r["policy"], r["infra"], r["n_res"], r["k_max"])] = r
    elif results_path.exists():
        results_path.unlink()
    todo = [j for j in jobs if j not in done]
    if not args.render_only and todo:
        with ThreadPool(max(1, args.jobs)) as pool, results_path.open("a") as fh:
            for r in pool.imap_unordered(_subprocess_cell, [(*j, args.trace, args.steps) for j in todo]):
                fh.write(json.dumps(r) + "\n")
                fh.flush()
                if "error" in r:
                    print(
                        f"{r['policy']} {r['infra']} {r['n_res']} {r['k_max']}: FAILED {r['error']}",
                        file=sys.stderr,
                    )
                else:
                    done[(r["policy"], r["infra"], r["n_res"], r["k_max"])] = r
                    print(
                        f"done {r['policy']} {r['infra']} {r['n_res']} {r['k_max']}: {r['avg_cost']:.4f}",
                        flush=True,
                    )
    by = done

    lines = [
        "### Whole-trace time and memory (model-based, infrastructure A)",
        "",
        "Each run is its own subprocess (peak RSS = its ru_maxrss). `do-nothing` is a policy that never acts, run",
        "over the same trace in the same subprocess (simulator overhead). Reference: the authors' simulator, "
        f"{REFERENCE_WALL_S:.0f} CPU-s for 3 types, K_max 10; it cannot run 10 types (5.5 million states).",
        "Wall times were measured while other benchmarks shared the 2 cores (see `do-nothing` for the slowdown).",
        "",
        "| types | K_max | deployments in space | wall s | CPU s | do-nothing CPU s | CPU x do-nothing "
        "| CPU x reference 62 s | peak MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for infra, n, k in TIMING_CELLS:
        r = by.get(("model-based", infra, n, k), {})
        if "wall_total_s" not in r:
            lines.append(f"| {n} | {k} | - | not run | | | | | |")
            continue
        cpu, idle = r.get("cpu_s", math.nan), r.get("nothing_cpu_s", math.nan)
        lines.append(
            f"| {n} | {k} | {r['space']} | {r['wall_total_s']:.0f} | {cpu:.0f} | {idle:.1f} | {cpu / idle:.0f} | "
            f"{cpu / REFERENCE_WALL_S:.2f} | {r['maxrss_mib']:.0f} |"
        )
    if args.cells == "all":
        lines += [
            "",
            "### Quality vs the best published online policy (paper 001, Tables 2-3, Taxi)",
            "",
            "Target: model-based below the best published average cost, violations < 1 %, within 5 % of dp.",
            "",
            "| K_max | infra | types | best published | model-based cost | viol % | rcf % | dp cost | mb / dp "
            "| target |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for infra, n, k in sorted(BENCH_CELLS, key=lambda c: (c[2], c[0], c[1])):
            mb, dp = by.get(("model-based", infra, n, k), {}), by.get(("dp", infra, n, k), {})
            name, pub = _published_best(k, n, infra, args.reference)
            dpc = dp.get("avg_cost", math.nan)
            if "avg_cost" not in mb:
                lines.append(f"| {k} | {infra} | {n} | {name} {pub:.4f} | not run | | | {dpc:.4f} | | |")
                continue
            ok = mb["avg_cost"] < pub and mb["violations_pct"] < 1.0 and mb["avg_cost"] <= 1.05 * dpc
            lines.append(
                f"| {k} | {infra} | {n} | {name} {pub:.4f} | {mb['avg_cost']:.4f} | {mb['violations_pct']:.2f} | "
                f"{mb['reconfigurations_pct']:.2f} | {dpc:.4f} | {mb['avg_cost'] / dpc:.3f} | "
                f"{'met' if ok else 'MISSED'} |"
            )
    steps_note = "whole trace" if not args.steps else f"first {args.steps} steps"
    lines += [
        "",
        f"Trace: `{Path(args.trace).name}` ({steps_note}). model-based: learned rate-level transitions, per-speed "
        "per-replica rate bounds (violation model), value iteration over the deployments mixing at most two node "
        "types (full space when <= 5,000 deployments), full sweeps every `sweep_every` steps plus local backups "
        "around the current deployment (see `policies/om/model_based.py`). dp: the same MDP with the true "
        "queueing model and the transition matrix of the whole trace (`policies/om/offline.py`). Both are "
        "deterministic (one run per cell). The runs can be split over several invocations (`--resume`, "
        "`--render-only` merge them from `--results`).",
    ]
    markdown = "\n".join(lines)
    print(markdown)
    command = "nice python -m benchmarks model-based " + " ".join(argv)
    write_section("model-based", markdown, command.strip())
    return 0


def main(argv: list[str]) -> int:  # pragma: no cover - command line
    """``python -m benchmarks model-based [options]``; ``--run POLICY INFRA N_RES K_MAX --trace PATH --steps N``
    is one run, in the subprocess the benchmark starts for it (one JSON line)."""
    import json

    if argv[:1] == ["--run"] and len(argv) >= 5:
        policy, infra, n_res, k_max = argv[1], argv[2], int(argv[3]), int(argv[4])
        rest = dict(zip(argv[5::2], argv[6::2], strict=False))
        out = _run_cell(policy, infra, n_res, k_max, rest["--trace"], int(rest.get("--steps", 0)))
        print(json.dumps(out))
        return 0
    return bench(argv)
