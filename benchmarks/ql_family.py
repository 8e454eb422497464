"""Benchmark ``ql-family``: fidelity (against the authors' simulator and paper 001's Tables 2-3), speed (against
their 12.3 s and the do-nothing loop) and memory (``ru_maxrss`` of a subprocess) of the tabular Q-learning OMs
``ql``, ``ql-pds`` and ``ql-pds-plus`` (:mod:`policies.om.qlearning`); writes section ``ql-family`` of
docs/benchmarks.md.

    python -m benchmarks ql-family [--seeds 3] [--grid-seeds 2] [--jobs 2] [--authors-grid] [--save PATH]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from benchmarks.common import bench_spec, full_run, make_policy, published_rows, subprocess_env
from policies.base import Observation, Policy
from policies.om.qlearning import QLearning, QLearningPDS, QLearningPDSPlus, _TabularBase
from policies.paths import reference_csv, taxi_trace

POLICY_CLASSES: dict[str, type[_TabularBase]] = {
    "ql": QLearning,
    "ql-pds": QLearningPDS,
    "ql-pds-plus": QLearningPDSPlus,
}
PUBLISHED_NAMES = {"ql": "QL", "ql-pds": "QL+PDS", "ql-pds-plus": "QL+PDS+"}
# the authors' simulator on the whole Taxi trace, infrastructure A, 3 node types, K_max 10
# (shared/design/paper-benchmark.md): average cost and CPU seconds for the whole trace on a 2-core machine
REFERENCE_COST = {"ql": 0.1853, "ql-pds": 0.0839, "ql-pds-plus": 0.0758}
REFERENCE_SECONDS = {"ql": 4.4, "ql-pds": 8.0, "ql-pds-plus": 12.3}
REFERENCE_QL_MEMORY_GB = 7.3  # its tabular Q-learning with 10 node types
# what the authors' public simulator does for PDS agents (greedy; old V~ read at the pre-decision state)
AUTHORS_MODE: dict[str, Any] = {"explore": False, "v_index": "pre-decision"}
DEFAULT_PUBLISHED = str(reference_csv("paper_om_tables.csv"))


def _published(path: str) -> dict[tuple[int, int, str, str], dict[str, str]]:
    """Published Taxi rows of Tables 2-3 keyed by (K_max, N_res, policy, infra)."""
    return {(int(r["k_max"]), int(r["n_res"]), r["policy"], r["infra"]): r for r in published_rows(path)}


def _memory_child(name: str, infra: str, n_res: int, k_max: int, trace_path: str, steps: int | None) -> None:
    """Entry point of the memory probe subprocess: one whole-trace run, then JSON with ``ru_maxrss``."""
    import json
    import resource

    summary = full_run((name, infra, n_res, k_max, 0, {}, trace_path, steps))
    summary["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(summary, default=str))


def _memory_probe(name: str, infra: str, n_res: int, k_max: int, trace_path: str, steps: int | None) -> dict:
    import json
    import subprocess
    import sys

    code = (
        "from benchmarks.ql_family import _memory_child; "
        f"_memory_child({name!r}, {infra!r}, {n_res}, {k_max}, {trace_path!r}, {steps!r})"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=subprocess_env()
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _step_latency(policy: Policy, rates: np.ndarray) -> np.ndarray:
    """Seconds per ``policy.step`` call (learning + decision + explanation), deployment following proposals."""
    import time

    spec = policy.spec
    k = np.zeros(spec.n_res, dtype=np.int64)
    k[0] = 1
    out = np.empty(len(rates))
    clock = time.perf_counter
    for i, rate in enumerate(rates.tolist()):
        violated = spec.model.response_time(k, spec.speedups, rate) > spec.r_max_s
        obs = Observation(deployment=k, input_rate=rate, violated=bool(violated))
        t0 = clock()
        prop = policy.step(obs)
        out[i] = clock() - t0
        k = prop.deployment
    return out


def _pub_float(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "-"):
        return None
    text = text.strip()
    return 0.05 if text.startswith("<") else float(text)  # "<0.1" read as 0.05 for the comparison


def _agg(rs: list[dict[str, Any]]) -> dict[str, float]:
    cost = np.array([r["avg_cost"] for r in rs])
    return {
        "cost": float(cost.mean()),
        "lo": float(cost.min()),
        "hi": float(cost.max()),
        "viol": float(np.mean([r["violations_pct"] for r in rs])),
        "rcf": float(np.mean([r["reconfigurations_pct"] for r in rs])),
        "res": float(np.mean([r["avg_resource_cost"] for r in rs])),
        "sec": float(np.mean([r["wall_seconds"] for r in rs])),
    }


TABLE_NOTES = """\
Why cells differ from the published tables by more than 10 % (flagged `*`). Plain QL matches almost everywhere.
The PDS variants differ because the published numbers come from the authors' code, whose PDS agents do not follow
the paper's eq. 10 as we do by default: they never explore (greedy only) and read the old value of the V~ update
at the pre-decision state (k, l) instead of (k + a, l). With both behaviours switched on (`authors' mode`,
`explore=false, v_index=pre-decision`; column `authors' mode` when the bench runs with `--authors-grid`) our
agents land close to the published cells, infrastructure B and K_max 20 included. Two mechanisms: (1) on
infrastructure B the 1 % exploration floor keeps adding a type-1 node (speedup 0.05, which violates at once
under round robin) or removing the fast type-2 node, so epsilon-greedy agents pay violations a greedy agent never
sees; (2) with K_max 20, unvisited post-decision states keep V~ = 0 under eq. 10 (optimistic), so our agents
keep exploring larger deployments (resource cost 11-13 $/h instead of ~6-7); reading the old value at the
pre-decision state initialises a new PDS from its neighbour and removes that optimism. Published QL+PDS on B with
6 and 10 types fails in both implementations (74-99 % violations). The published figures are single runs;
our seed spread is shown as (min-max)."""


def _measure(args: Any) -> dict[str, Any]:
    """Run every measurement of the benchmark; returns plain data (JSON-serialisable) for :func:`_render`."""
    import sys
    import time
    from concurrent.futures import ProcessPoolExecutor

    from policies.sim.operator import run_operator
    from policies.sim.trace import load_trace

    trace = load_trace(args.trace, args.steps)
    log = sys.stderr
    data: dict[str, Any] = {"n_steps": len(trace), "seeds": args.seeds, "grid_seeds": args.grid_seeds}

    # speed: whole-trace runs in this process, alternating, best of two, against the do-nothing loop
    spec_a3 = ("A", 3, 10)
    wall_s: dict[str, float] = {}
    cpu_s: dict[str, float] = {}
    for _ in range(2):
        for name in ("do-nothing", *POLICY_CLASSES):
            t0, c0 = time.perf_counter(), time.process_time()
            run_operator(trace, make_policy(name, bench_spec(*spec_a3)))
            sec, cpu = time.perf_counter() - t0, time.process_time() - c0
            wall_s[name] = min(sec, wall_s.get(name, math.inf))
            cpu_s[name] = min(cpu, cpu_s.get(name, math.inf))
            print(f"speed {name}: {sec:.2f} s wall, {cpu:.2f} s CPU", file=log)
    data["speed"] = {"wall": wall_s, "cpu": cpu_s}

    # decision latency: step() as the control loop calls it
    rates = load_trace(args.trace, args.calls)
    data["calls"] = len(rates)
    latency = []
    for n_res, k_max in ((3, 10), (10, 20)):
        for name in ("do-nothing", *POLICY_CLASSES):
            lat = _step_latency(make_policy(name, bench_spec("A", n_res, k_max)), rates)
            latency.append(
                {
                    "policy": name,
                    "n_res": n_res,
                    "k_max": k_max,
                    "p50": float(np.percentile(lat, 50)),
                    "p99": float(np.percentile(lat, 99)),
                    "max": float(lat.max()),
                    "mean": float(lat.mean()),
                }
            )
            print(f"latency {latency[-1]}", file=log)
    data["latency"] = latency

    # memory: ru_maxrss of a fresh subprocess per run
    memory = []
    for name, n_res, k_max in (
        ("do-nothing", 10, 20),
        ("ql", 10, 10),
        ("ql", 10, 20),
        ("ql-pds-plus", 10, 20),
    ):
        m = _memory_probe(name, "A", n_res, k_max, args.trace, args.steps)
        memory.append(
            {
                "policy": name,
                "n_res": n_res,
                "k_max": k_max,
                "rss_mib": m["max_rss_mib"],
                "cost": m["avg_cost"],
            }
        )
        print(f"memory {memory[-1]}", file=log)
    data["memory"] = memory

    # quality: the fidelity cell (defaults and the authors' mode) and the Tables 2-3 grid
    jobs: list[tuple[Any, ...]] = [
        (n, *spec_a3, s, {}, args.trace, args.steps) for n in POLICY_CLASSES for s in range(args.seeds)
    ]
    jobs += [
        (n, *spec_a3, s, AUTHORS_MODE, args.trace, args.steps)
        for n in ("ql-pds", "ql-pds-plus")
        for s in range(args.seeds)
    ]
    if not args.no_tables:
        jobs += [
            (name, infra, n_res, k_max, s, {}, args.trace, args.steps)
            for k_max, n_res, infra in GRID_CELLS
            if (infra, n_res, k_max) != spec_a3
            for name in POLICY_CLASSES
            for s in range(args.grid_seeds)
        ]
    if args.authors_grid and not args.no_tables:
        jobs += [
            (name, infra, n_res, k_max, 0, AUTHORS_MODE, args.trace, args.steps)
            for k_max, n_res, infra in GRID_CELLS
            if (infra, n_res, k_max) != spec_a3
            for name in ("ql-pds", "ql-pds-plus")
        ]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        data["results"] = list(pool.map(full_run, jobs))
    data["quality_wall"] = time.perf_counter() - t0
    data["jobs"] = args.jobs
    data["tables"] = not args.no_tables
    return data


GRID_CELLS = [(k_max, n_res, infra) for k_max in (10, 20) for n_res in (3, 6, 10) for infra in ("A", "B")]


def _render(data: dict[str, Any], published_path: str) -> str:
    """Markdown of the benchmark from the data of :func:`_measure`."""
    n_steps = data["n_steps"]
    cpu_s, wall_s = data["speed"]["cpu"], data["speed"]["wall"]
    base = cpu_s["do-nothing"]
    lines = [
        f"### Speed: whole Taxi trace ({n_steps} steps), infrastructure A, 3 node types, K_max 10",
        "",
        "Seconds of `run_operator` (simulator + policy), best of two alternating runs in one process; CPU = "
        "process CPU time (robust to other load on the shared machine), wall = elapsed. The do-nothing policy "
        "measures the simulator loop alone. Reference: the authors' simulator, whole trace, 2-core machine.",
        "",
        "| policy | CPU s | wall s | CPU vs do-nothing loop | policy µs/step (CPU) | reference s | ours (CPU) / reference |",
        "|---|---|---|---|---|---|---|",
        f"| do-nothing | {base:.2f} | {wall_s['do-nothing']:.2f} | 1.00 | - | - | - |",
    ]
    for name in POLICY_CLASSES:
        cpu = cpu_s[name]
        lines.append(
            f"| {name} | {cpu:.2f} | {wall_s[name]:.2f} | {cpu / base:.2f} | "
            f"{1e6 * (cpu - base) / n_steps:.1f} | {REFERENCE_SECONDS[name]} | {cpu / REFERENCE_SECONDS[name]:.2f} |"
        )
    lines += [
        "",
        f"### Decision latency: `Policy.step()` over {data['calls']} calls (learning + decision + explanation)",
        "",
        "Deployment following the proposals on the first Taxi rates; max includes pre-emption by other load.",
        "",
        "| policy | types | K_max | p50 (ms) | p99 (ms) | max (ms) | mean (ms) | mean / do-nothing mean |",
        "|---|---|---|---|---|---|---|---|",
    ]
    trivial = {(r["n_res"], r["k_max"]): r["mean"] for r in data["latency"] if r["policy"] == "do-nothing"}
    for r in data["latency"]:
        lines.append(
            f"| {r['policy']} | {r['n_res']} | {r['k_max']} | {1e3 * r['p50']:.4f} | {1e3 * r['p99']:.4f} | "
            f"{1e3 * r['max']:.3f} | {1e3 * r['mean']:.4f} | {r['mean'] / trivial[(r['n_res'], r['k_max'])]:.1f} |"
        )
    lines += [
        "",
        f"### Memory: whole-trace run in a fresh subprocess, `ru_maxrss` (reference: {REFERENCE_QL_MEMORY_GB} GB "
        "for its tabular QL with 10 node types)",
        "",
        "| policy | infra | types | K_max | max RSS (MiB) | avg cost |",
        "|---|---|---|---|---|---|",
    ]
    for m in data["memory"]:
        lines.append(
            f"| {m['policy']} | A | {m['n_res']} | {m['k_max']} | {m['rss_mib']:.0f} | {m['cost']:.4f} |"
        )

    results = data["results"]

    def pick(name: str, infra: str, n_res: int, k_max: int, params: dict[str, Any]) -> dict[str, float]:
        key = (name, infra, n_res, k_max)
        return _agg(
            [
                r
                for r in results
                if (r["policy"], r["infra"], r["n_res"], r["k_max"]) == key and r["params"] == params
            ]
        )

    def authors_cell(name: str, infra: str, n_res: int, k_max: int) -> str:
        key = (name, infra, n_res, k_max)
        rs = [
            r
            for r in results
            if (r["policy"], r["infra"], r["n_res"], r["k_max"]) == key and r["params"] == AUTHORS_MODE
        ]
        if not rs:
            return "-"
        a = _agg(rs)
        return f"{a['cost']:.4f} ({a['viol']:.2f}, {a['rcf']:.2f})"

    published = _published(published_path)
    lines += [
        "",
        f"### Fidelity: Taxi trace ({n_steps} steps), infrastructure A, 3 node types, K_max 10, {data['seeds']} seeds",
        "",
        "Target: within 10 % of the authors' simulator. Defaults follow the paper's equations (epsilon-greedy, "
        "V~ update at the post-decision state); `authors' mode` = `explore=false, v_index=pre-decision`.",
        "",
        "| policy | avg cost (min-max) | viol. % | rcf. % | res. ($/h) | authors' simulator | diff | published (Table 2): cost (viol. / rcf.) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in POLICY_CLASSES:
        for params, label in (({}, name), (AUTHORS_MODE, f"{name}, authors' mode")):
            if params and name == "ql":
                continue
            a = pick(name, "A", 3, 10, params)
            ref = REFERENCE_COST[name]
            pub = published.get((10, 3, PUBLISHED_NAMES[name], "A"), {})
            lines.append(
                f"| {label} | {a['cost']:.4f} ({a['lo']:.4f}-{a['hi']:.4f}) | {a['viol']:.2f} | {a['rcf']:.2f} | "
                f"{a['res']:.2f} | {ref} | {100 * (a['cost'] / ref - 1):+.1f} % | {pub.get('avg_cost', '-')} "
                f"({pub.get('violations_pct', '-')} / {pub.get('reconfigurations_pct', '-')}) |"
            )
    if data["tables"]:
        lines += [
            "",
            "### Tables 2-3 (Taxi, K_max 10 and 20): ours beside the published run",
            "",
            f"Ours: mean of {data['grid_seeds']} seeds ({data['seeds']} in the A / 3 / 10 cell), default parameters. "
            "`*` = average cost differs from the published one by more than 10 %.",
            "",
            "| K_max | N_res | infra | policy | ours: cost (min-max) | viol. % | rcf. % | res. | published: cost | viol. % | rcf. % | res. | ours / published | authors' mode: cost (viol. %, rcf. %) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for k_max, n_res, infra in GRID_CELLS:
            for name in POLICY_CLASSES:
                a = pick(name, infra, n_res, k_max, {})
                pub = published.get((k_max, n_res, PUBLISHED_NAMES[name], infra), {})
                pc = _pub_float(pub.get("avg_cost"))
                ratio = (
                    "-"
                    if not pc
                    else f"{a['cost'] / pc:.2f}" + (" *" if abs(a["cost"] / pc - 1) > 0.1 else "")
                )
                lines.append(
                    f"| {k_max} | {n_res} | {infra} | {name} | {a['cost']:.4f} ({a['lo']:.4f}-{a['hi']:.4f}) | "
                    f"{a['viol']:.2f} | {a['rcf']:.2f} | {a['res']:.2f} | {pub.get('avg_cost', '-')} | "
                    f"{pub.get('violations_pct', '-')} | {pub.get('reconfigurations_pct', '-')} | "
                    f"{pub.get('resource_cost', '-')} | {ratio} | {authors_cell(name, infra, n_res, k_max)} |"
                )
        lines += ["", TABLE_NOTES]
    lines += [
        "",
        f"{len(results)} quality runs in {data['quality_wall']:.0f} s wall with {data['jobs']} worker processes.",
    ]
    return "\n".join(lines)


def bench(argv: list[str] | None = None) -> str:
    """Fidelity (vs the authors' simulator and Tables 2-3), speed (vs 12.3 s and the do-nothing loop) and memory
    (``ru_maxrss`` of a subprocess) of ql, ql-pds and ql-pds-plus; writes section ``ql-family`` of
    docs/benchmarks.md. ``--save`` keeps the raw measurements; ``--render`` re-renders saved ones."""
    import argparse
    import json
    import shlex
    import sys

    from benchmarks.doc import write_section

    ap = argparse.ArgumentParser(prog="python -m benchmarks ql-family", description=bench.__doc__)
    ap.add_argument("--trace", default=str(taxi_trace()), help="rate trace, one tuples/s value per line")
    ap.add_argument("--published", default=DEFAULT_PUBLISHED, help="CSV of the published Tables 2-5")
    ap.add_argument("--steps", type=int, default=None, help="trace steps per run (default: the whole trace)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds of the fidelity cell (A, 3 types, K_max 10)")
    ap.add_argument("--grid-seeds", type=int, default=None, help="seeds per other cell (default: --seeds)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the quality runs")
    ap.add_argument("--calls", type=int, default=10_000, help="step() calls per latency measurement")
    ap.add_argument("--no-tables", action="store_true", help="skip the Tables 2-3 grid (fidelity cell only)")
    ap.add_argument(
        "--authors-grid", action="store_true", help="also run the authors' mode in every grid cell (1 seed)"
    )
    ap.add_argument("--no-write", action="store_true", help="print only, do not write docs/benchmarks.md")
    ap.add_argument("--save", default=None, help="write the raw measurements to this JSON file")
    ap.add_argument("--render", default=None, help="no runs: render the measurements saved in this JSON file")
    args = ap.parse_args(argv)
    if args.grid_seeds is None:
        args.grid_seeds = args.seeds
    if min(args.seeds, args.grid_seeds, args.jobs, args.calls) < 1 or (
        args.steps is not None and args.steps < 1
    ):
        ap.error("--seeds, --grid-seeds, --jobs, --calls and --steps must be >= 1")
    if args.render:
        with open(args.render) as fh:
            saved = json.load(fh)
        data, command = saved["data"], saved["command"]
    else:
        data = _measure(args)
        command = "python -m benchmarks ql-family " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-write"
        )
        if args.save:
            with open(args.save, "w") as fh:
                json.dump({"command": command.strip(), "data": data}, fh, default=str)
    body = _render(data, args.published)
    if not args.no_write:
        write_section("ql-family", body, command.strip())
    return body


def main(argv: list[str]) -> int:
    print(bench(argv))
    return 0
