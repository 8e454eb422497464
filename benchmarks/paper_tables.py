"""Benchmarks of the Operator Manager policies in the simulator.

    python -m benchmarks paper-tables [--trace PATH] [--seeds N] [--steps N] [--jobs J] [--policies a,b]
        [--k-max 10,20] [--node-types 3,6,10] [--infra A,B] [--output PATH]
    python -m benchmarks decision-latency [--calls N] [--policies a,b] [--infra A] [--node-types 3]
        [--k-max 10] [--output PATH]

Policy names may carry a node-type choice for the DS2 and HPA baselines (``hpa:fastest``, ``ds2:price-performance``).
``paper-tables`` regenerates the layout of Tables 2-5 of paper 001 (rows: policies; columns: infrastructures;
blocks: N_res; one table per K_max) with our values beside the published ones
(``shared/reference/paper_om_tables.csv``), plus a fidelity block against the authors' simulator on infrastructure
A, 3 node types, K_max 10 (``shared/design/paper-benchmark.md``). Random policies are averaged over ``--seeds``
seeds; deterministic ones (rule-based, ``dp-discounted``, ``dp-average``, ``clairvoyant``) run once. Every
policy's ratio to the clairvoyant bound (``clairvoyant``, measured in the same run) is printed in a block of its
own. Policies whose class cannot be imported are reported as
"not available". Each benchmark writes its own section of ``docs/benchmarks.md`` (or ``--output``) and prints it.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from benchmarks.common import DoNothing
from benchmarks.doc import DEFAULT_PATH, write_section
from policies.om.rules import NODE_CHOICES
from policies.paths import reference_csv, taxi_trace
from policies.registry import OM_POLICIES, canonical, load

DEFAULT_TRACE = taxi_trace()
REFERENCE_CSV = reference_csv("paper_om_tables.csv")

#: published policy names of paper 001 (Tables 2-5) -> ours
PAPER_NAMES = {
    "TB-C": "threshold",
    "TB-S": "threshold-speedup",
    "QL": "ql",
    "QL+PDS": "ql-pds",
    "QL+PDS+": "ql-pds-plus",
    "DQL": "dql",
    "DQL+PDS": "dql-pds",
    "DQL+PDS+": "dql-pds-plus",
}
TABLE_ORDER = (
    "threshold",
    "threshold-speedup",
    "threshold-first",
    "ql",
    "ql-pds",
    "ql-pds-plus",
    "dql",
    "dql-pds",
    "dql-pds-plus",
    "model-based",
    "ds2",
    "hpa",
    "dp-discounted",
    "dp-average",
    "clairvoyant",
)
#: the reference every policy's average cost is divided by (issue 24 item 2): no online policy can go below it
BOUND = "clairvoyant"
#: the authors' simulator on the full Taxi trace, infrastructure A, 3 node types, K_max 10
#: (shared/design/paper-benchmark.md): policy -> (avg cost, wall seconds on a 2-core machine)
REFERENCE_FIDELITY = {
    "threshold": (0.0365, 1.5),
    "threshold-speedup": (0.0379, 2.2),
    "ql": (0.1853, 4.4),
    "ql-pds": (0.0839, 8.0),
    "ql-pds-plus": (0.0758, 12.3),
    "model-based": (0.0344, 62.0),
}
#: rule-based baselines that take a node-type choice: "ds2:fastest" is DS2 adding the fastest type
VARIANT_POLICIES = ("ds2", "hpa")
DEFAULT_VARIANTS = ("ds2:fastest", "hpa:fastest")
METRICS = ("avg_cost", "violations_pct", "reconfigurations_pct", "avg_resource_cost")


class UsageError(Exception):
    """A bad command-line argument: one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


# ---- helpers ----------------------------------------------------------------------------------------------------
def _int_list(text: str, option: str, lo: int, hi: int | None = None) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{option}: expected comma-separated integers, got {text!r}") from None
    if not values:
        raise UsageError(f"{option}: empty list")
    for v in values:
        if v < lo or (hi is not None and v > hi):
            raise UsageError(f"{option}: {v} out of range {lo}..{hi if hi is not None else 'inf'}")
    return values


def split_variant(name: str) -> tuple[str, dict[str, Any]]:
    """``"hpa:fastest"`` -> ``("hpa", {"node_type": "fastest"})``: a rule-based baseline with another node-type
    choice (a table row of its own); a plain name has no parameters."""
    base, _, choice = name.partition(":")
    return base, ({"node_type": choice} if choice else {})


def _policy_list(text: str | None) -> list[str]:
    """Policy names (``name`` or ``name:node-type-choice``), validated; default: every registered policy plus
    the DS2 and HPA baselines with the fastest node type."""
    if not text:
        names = [p for p in TABLE_ORDER if p in OM_POLICIES] + [
            p for p in OM_POLICIES if p not in TABLE_ORDER
        ]
        return names + [v for v in DEFAULT_VARIANTS if split_variant(v)[0] in OM_POLICIES]
    names = [x.strip() for x in text.split(",") if x.strip()]
    names = [
        canonical("om", n.partition(":")[0]) + (":" + n.partition(":")[2] if ":" in n else "") for n in names
    ]
    for n in names:
        base, params = split_variant(n)
        if base not in OM_POLICIES:
            raise UsageError(
                f"--policies: unknown policy {base!r}: choose from {', '.join(sorted(OM_POLICIES))}"
            )
        if params and (base not in VARIANT_POLICIES or params["node_type"] not in NODE_CHOICES):
            raise UsageError(
                f"--policies: {n!r}: only {', '.join(VARIANT_POLICIES)} take a node-type choice "
                f"({', '.join(NODE_CHOICES)})"
            )
    return names


def availability(name: str) -> tuple[type | None, str]:
    """(class, "") when policy ``name`` can be imported, else (None, reason). Any import-time error counts
    (a module being written by someone else may not even compile yet)."""
    try:
        return load("om", split_variant(name)[0]), ""
    except Exception as exc:  # noqa: BLE001 - reported as "not available"
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def load_reference(path: Path = REFERENCE_CSV) -> dict[tuple[str, int, int, str, str], dict[str, str]]:
    """Published values keyed by (trace, K_max, N_res, our policy name, infra); values kept as printed."""
    out: dict[tuple[str, int, int, str, str], dict[str, str]] = {}
    if not path.is_file():
        return out
    with path.open() as fh:
        for row in csv.DictReader(fh):
            ours = PAPER_NAMES.get(row["policy"])
            if ours is None:
                continue
            key = (row["trace"], int(row["k_max"]), int(row["n_res"]), ours, row["infra"])
            out[key] = row
    return out


# ---- paper-tables ------------------------------------------------------------------------------------------------
_TRACE: np.ndarray | None = None


def _init_worker(trace_path: str, steps: int | None) -> None:
    global _TRACE
    from policies.sim.trace import load_trace

    _TRACE = load_trace(trace_path, steps=steps)


Job = tuple[str, str, int, int, str, int]  # policy, infra, N_res, K_max, start, seed
Cell = tuple[str, str, int, int, str]  # policy, infra, N_res, K_max, start
#: policies also run from a type-0 start (the authors' older simulator), to explain the published rows
TYPE0_VARIANTS = ("threshold", "threshold-speedup")
QUICK = ("threshold", "threshold-speedup", "threshold-first", "ds2", "hpa")


def _run_job(job: Job) -> tuple[Job, dict[str, Any]]:
    """Worker: one paper-mode run; errors are returned, not raised, so one broken policy spoils no table."""
    from policies.sim.scenario import run_paper

    name, infra, n_res, k_max, start, seed = job
    try:
        assert _TRACE is not None
        cpu0 = time.process_time()
        base, params = split_variant(name)
        summary = run_paper(
            _TRACE, base, infra, n_res, k_max, seed=seed, params=params, start=start
        ).summary()
        summary["cpu_seconds"] = time.process_time() - cpu0  # policy construction included (dp solves here)
        return job, summary
    except Exception as exc:  # noqa: BLE001 - reported in the table
        return job, {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}


def run_grid(
    trace_path: str,
    steps: int | None,
    policies: list[str],
    infras: list[str],
    node_types: list[int],
    k_maxes: list[int],
    seeds: int,
    jobs: int,
    type0_variants: bool = True,
) -> tuple[dict[Cell, dict[str, Any]], dict[str, str]]:
    """Run every (policy, infra, N_res, K_max) over the seeds, plus the type-0-start variants of the threshold
    baselines; returns per-cell mean results and, per unavailable policy, the reason."""
    unavailable: dict[str, str] = {}
    work: list[Job] = []
    for name in policies:
        cls, reason = availability(name)
        if cls is None:
            unavailable[name] = reason
            continue
        n_seeds = 1 if getattr(cls, "deterministic", False) else seeds
        starts = ["policy", "type0"] if type0_variants and name in TYPE0_VARIANTS else ["policy"]
        for k_max in k_maxes:
            for n_res in node_types:
                for infra in infras:
                    for start in starts:
                        work.extend((name, infra, n_res, k_max, start, s) for s in range(n_seeds))
    # longest first keeps the pool busy: learning policies and large N_res take longest
    work.sort(key=lambda j: (j[0] in QUICK, -j[2]))
    raw: dict[Cell, list[dict[str, Any]]] = {}
    if jobs <= 1:
        _init_worker(trace_path, steps)
        for job, summary in map(_run_job, work):
            raw.setdefault(job[:5], []).append(summary)
    else:
        ctx = mp.get_context("fork")
        with ctx.Pool(jobs, initializer=_init_worker, initargs=(trace_path, steps)) as pool:
            for job, summary in pool.imap_unordered(_run_job, work):
                raw.setdefault(job[:5], []).append(summary)
    cells: dict[Cell, dict[str, Any]] = {}
    for key, runs in raw.items():
        errors = [r["error"] for r in runs if "error" in r]
        ok = [r for r in runs if "error" not in r]
        if not ok:
            cells[key] = {"error": errors[0]}
            continue
        cell = {
            m: float(np.mean([r[m] for r in ok])) for m in (*METRICS, "wall_seconds", "cpu_seconds", "steps")
        }
        cell["seeds"] = len(ok)
        cell["cost_std"] = float(np.std([r["avg_cost"] for r in ok]))
        if errors:
            cell["error"] = errors[0]
        cells[key] = cell
    return cells, unavailable


def _fmt_pct(v: float) -> str:
    return "< 0.1" if 0 < v < 0.05 else f"{v:.1f}"


def _pub(ref: dict[str, str] | None, field: str) -> str:
    return f" ({ref[field]})" if ref else ""


def render_tables(
    cells: dict[Cell, dict[str, Any]],
    unavailable: dict[str, str],
    policies: list[str],
    infras: list[str],
    node_types: list[int],
    k_maxes: list[int],
    trace_name: str,
    reference: dict[tuple[str, int, int, str, str], dict[str, str]],
    start: str = "policy",
    title: str = "",
) -> str:
    """Markdown tables in the layout of paper 001's Tables 2-5: ours, the published value in brackets."""
    lines: list[str] = []
    for k_max in k_maxes:
        lines.append(f"#### {title}Trace {trace_name}, K_max = {k_max}: ours (published)\n")
        head = "| N_res | Policy |"
        rule = "|---|---|"
        for infra in infras:
            head += f" {infra}: Avg. cost | {infra}: Viol. % | {infra}: Rcf. % | {infra}: Res. |"
            rule += "---|---|---|---|"
        lines += [head, rule]
        for n_res in node_types:
            for name in policies:
                row = f"| {n_res} | {name} |"
                for infra in infras:
                    if name in unavailable:
                        row += " not available | | | |"
                        continue
                    cell = cells.get((name, infra, n_res, k_max, start))
                    ref = reference.get((trace_name, k_max, n_res, name, infra))
                    if cell is None or "avg_cost" not in cell:
                        msg = cell["error"] if cell else "not run"
                        row += f" error: {msg[:60]} | | | |"
                        continue
                    row += (
                        f" {cell['avg_cost']:.4f}{_pub(ref, 'avg_cost')} |"
                        f" {_fmt_pct(cell['violations_pct'])}{_pub(ref, 'violations_pct')} |"
                        f" {_fmt_pct(cell['reconfigurations_pct'])}{_pub(ref, 'reconfigurations_pct')} |"
                        f" {cell['avg_resource_cost']:.2f}{_pub(ref, 'resource_cost')} |"
                    )
                lines.append(row)
        lines.append("")
    return "\n".join(lines)


def render_deviations(
    cells: dict[Cell, dict[str, Any]],
    reference: dict[tuple[str, int, int, str, str], dict[str, str]],
    trace_name: str,
    tolerance: float = 0.10,
) -> str:
    """Every cell whose average cost differs from the published one by more than ``tolerance`` (relative), with
    the type-0-start variant's ratio where it was run (it explains most threshold rows)."""
    lines = []
    for (name, infra, n_res, k_max, start), cell in sorted(cells.items()):
        ref = reference.get((trace_name, k_max, n_res, name, infra))
        if start != "policy" or ref is None or "avg_cost" not in cell:
            continue
        published = float(ref["avg_cost"])
        ratio = cell["avg_cost"] / published
        if abs(ratio - 1.0) <= tolerance:
            continue
        note = ""
        alt = cells.get((name, infra, n_res, k_max, "type0"))
        if alt is not None and "avg_cost" in alt:
            alt_ratio = alt["avg_cost"] / published
            note = f"; type-0 start {alt['avg_cost']:.4f} (ratio {alt_ratio:.3f})"
            if abs(alt_ratio - 1.0) <= tolerance:
                note += ": matches the published value"
        lines.append(
            f"- {name}, infrastructure {infra}, N_res {n_res}, K_max {k_max}: ours {cell['avg_cost']:.4f}, "
            f"published {published:.4f} (ratio {ratio:.3f}){note}"
        )
    if not lines:
        return f"All cells with a published value are within {tolerance:.0%} of it."
    return f"Cells more than {tolerance:.0%} away from the published average cost:\n\n" + "\n".join(lines)


def render_bound_ratios(
    cells: dict[Cell, dict[str, Any]],
    policies: list[str],
    infras: list[str],
    node_types: list[int],
    k_maxes: list[int],
) -> str:
    """Every policy's average cost divided by the clairvoyant bound of the same trace, infrastructure, N_res and
    K_max, measured in the same run (1.00 = as cheap as a controller knowing every future rate)."""
    cols = [(k, n, i) for k in k_maxes for n in node_types for i in infras]
    bounds = {c: cells.get((BOUND, c[2], c[1], c[0], "policy"), {}) for c in cols}
    lines = [
        f"#### Ratio to the clairvoyant bound (`{BOUND}`: backward dynamic programming over the actual trace, the "
        "cheapest one-replica-per-step action sequence from one type-0 replica; no online policy can go below it)\n",
        "| Policy | " + " | ".join(f"K_max {k}, N_res {n}, {i}" for k, n, i in cols) + " |",
        "|---|" + "---|" * len(cols),
        "| bound (avg. cost) | "
        + " | ".join(f"{b['avg_cost']:.4f}" if "avg_cost" in b else "n/a" for b in bounds.values())
        + " |",
    ]
    for name in policies:
        if name == BOUND:
            continue
        row = []
        for c in cols:
            cell, bound = cells.get((name, c[2], c[1], c[0], "policy"), {}), bounds[c]
            if "avg_cost" in cell and bound.get("avg_cost", 0.0) > 0.0:
                row.append(f"{cell['avg_cost'] / bound['avg_cost']:.2f}x")
            else:
                row.append("")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    missing = [c for c, b in bounds.items() if "avg_cost" not in b]
    if missing:
        why = bounds[missing[0]].get("error", "not run")
        lines.append(f"\n(n/a: the bound was not computed: {why[:140]})")
    return "\n".join(lines)


def render_fidelity(cells: dict[Cell, dict[str, Any]], full_steps: bool, jobs: int = 1) -> str:
    """Our values against the authors' simulator (infrastructure A, 3 node types, K_max 10, Taxi trace).

    "wall s" is the simulation loop's wall time, "CPU s" the process CPU time of the whole run (policy construction
    included): on a shared machine, or with ``--jobs`` > 1, the CPU time is the fairer comparison."""
    lines = [
        "#### Fidelity: infrastructure A, 3 node types, K_max 10, against the authors' simulator\n",
        f"({jobs} parallel job(s) on this machine; the reference times are the authors' on a 2-core machine.)\n",
        "| Policy | Avg. cost ours | theirs | ratio | within 10% | wall s ours | CPU s ours | theirs s | CPU ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, (cost, wall) in REFERENCE_FIDELITY.items():
        cell = cells.get((name, "A", 3, 10, "policy"))
        if cell is None or "avg_cost" not in cell:
            lines.append(f"| {name} | {'error' if cell else 'not run'} | {cost} | | | | | {wall} | |")
            continue
        ratio = cell["avg_cost"] / cost
        lines.append(
            f"| {name} | {cell['avg_cost']:.4f} | {cost} | {ratio:.3f} | {'yes' if abs(ratio - 1) <= 0.1 else 'NO'} |"
            f" {cell['wall_seconds']:.2f} | {cell['cpu_seconds']:.2f} | {wall} | {cell['cpu_seconds'] / wall:.2f} |"
        )
    if not full_steps:
        lines.append("\n(Not the full trace: the ratios are not comparable with the reference figures.)")
    return "\n".join(lines)


def paper_tables(argv: list[str]) -> int:
    p = _Parser(prog="python -m benchmarks paper-tables", description="paper 001 Tables 2-5")
    p.add_argument("--trace", default=str(DEFAULT_TRACE), help="trace file (tuples/s per line)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per random policy")
    p.add_argument("--steps", type=int, default=None, help="first N steps of the trace (default: all)")
    p.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    p.add_argument("--policies", default=None, help="comma-separated policy names (default: all)")
    p.add_argument("--k-max", default="10,20", help="comma-separated K_max values")
    p.add_argument("--node-types", default="3,6,10", help="comma-separated N_res values")
    p.add_argument("--infra", default="A,B", help="comma-separated infrastructures (A, B, B2)")
    p.add_argument("--output", default=str(DEFAULT_PATH), help="markdown file whose section is written")
    args = p.parse_args(argv)
    if args.seeds < 1:
        raise UsageError(f"--seeds: must be >= 1, got {args.seeds}")
    if args.jobs < 1:
        raise UsageError(f"--jobs: must be >= 1, got {args.jobs}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps: must be >= 1, got {args.steps}")
    k_maxes = _int_list(args.k_max, "--k-max", 1)
    node_types = _int_list(args.node_types, "--node-types", 1, 10)
    infras = [x.strip() for x in args.infra.split(",") if x.strip()]
    for infra in infras:
        if infra not in ("A", "B", "B2"):
            raise UsageError(f"--infra: unknown infrastructure {infra!r}: choose A, B or B2")
    policies = _policy_list(args.policies)
    from policies.sim.trace import load_trace

    try:
        n_steps = len(load_trace(args.trace, steps=args.steps))
        full_len = len(load_trace(args.trace))
    except ValueError as exc:
        raise UsageError(f"--trace: {exc}") from None

    t0 = time.perf_counter()
    cells, unavailable = run_grid(
        args.trace, args.steps, policies, infras, node_types, k_maxes, args.seeds, args.jobs
    )
    elapsed = time.perf_counter() - t0
    trace_name = Path(args.trace).stem
    body = [
        f"Trace `{trace_name}` ({n_steps} steps), paper mode (`shared/design/paper-benchmark.md`); random policies: "
        f"mean over {args.seeds} seed(s), deterministic ones (rule-based, dp-*, clairvoyant) one run; {args.jobs} parallel job(s); "
        f"total {elapsed:.0f} s. Published values of paper 001 (Tables 2-5) in brackets where they exist.\n",
        render_tables(
            cells, unavailable, policies, infras, node_types, k_maxes, trace_name, load_reference()
        ),
        render_bound_ratios(cells, policies, infras, node_types, k_maxes) if BOUND in policies else "",
        "",
        render_fidelity(cells, full_steps=n_steps == full_len and trace_name == "taxi", jobs=args.jobs),
        "",
        render_deviations(cells, load_reference(), trace_name),
    ]
    variants = [p for p in policies if p in TYPE0_VARIANTS and p not in unavailable]
    if variants:
        body += [
            "\nThe threshold baselines again, every run starting from one replica of type 0 instead of the "
            "policy's own type (the authors' older simulator always created the first replica on type 0, and the "
            "threshold policy never removes a replica of another type than its own):\n",
            render_tables(
                cells,
                unavailable,
                variants,
                infras,
                node_types,
                k_maxes,
                trace_name,
                load_reference(),
                start="type0",
                title="Type-0 start. ",
            ),
        ]
    if unavailable:
        body.append(
            "\nNot available (class not importable yet): "
            + "; ".join(f"`{n}` ({r[:80]})" for n, r in unavailable.items())
        )
    markdown = "\n".join(body)
    command = "python -m benchmarks paper-tables" + ("" if not argv else " " + " ".join(argv))
    write_section("paper-tables", markdown, command, path=args.output)
    print(markdown)
    return 0


# ---- decision-latency --------------------------------------------------------------------------------------------
def time_steps(policy: Any, spec: Any, rates: np.ndarray, k0: np.ndarray, warmup: int = 200) -> np.ndarray:
    """Nanoseconds of each ``policy.step(Observation)`` call over ``rates`` (after ``warmup`` untimed calls),
    the deployment following the proposals as the control loop would apply them."""
    from policies.base import Observation

    model, speed = spec.model, spec.speedups
    k = np.array(k0, dtype=np.int64)
    out = np.empty(len(rates) - warmup, dtype=np.int64)
    clock = time.perf_counter_ns
    for i, rate in enumerate(rates.tolist()):
        r = model.response_time(k, speed, rate)
        obs = Observation(
            deployment=k.copy(),
            input_rate=rate,
            response_time_s=r,
            utilisation=model.utilisation(k, speed, rate),
        )
        t0 = clock()
        proposal = policy.step(obs)
        dt = clock() - t0
        if i >= warmup:
            out[i - warmup] = dt
        k = proposal.deployment
    return out


def decision_latency(argv: list[str]) -> int:
    p = _Parser(prog="python -m benchmarks decision-latency", description="Policy.step() latency")
    p.add_argument("--trace", default=str(DEFAULT_TRACE), help="trace file the observations' rates come from")
    p.add_argument("--calls", type=int, default=10_000, help="timed step() calls per policy")
    p.add_argument("--policies", default=None, help="comma-separated policy names (default: all)")
    p.add_argument("--infra", default="A", help="infrastructure A, B or B2")
    p.add_argument("--node-types", type=int, default=3, help="N_res")
    p.add_argument("--k-max", type=int, default=10, help="K_max")
    p.add_argument("--output", default=str(DEFAULT_PATH), help="markdown file whose section is written")
    args = p.parse_args(argv)
    if args.calls < 1:
        raise UsageError(f"--calls: must be >= 1, got {args.calls}")
    policies = _policy_list(args.policies)
    from policies.sim.scenario import build_policy, initial_deployment, paper_spec
    from policies.sim.trace import load_trace

    try:
        spec = paper_spec(args.infra, args.node_types, args.k_max)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    warmup = 200
    try:
        rates = load_trace(args.trace, steps=args.calls + warmup)
    except ValueError as exc:
        raise UsageError(f"--trace: {exc}") from None
    if len(rates) < args.calls + warmup:
        rates = np.resize(rates, args.calls + warmup)

    def measure(policy: Any) -> np.ndarray:
        return time_steps(policy, spec, rates, initial_deployment(spec, policy), warmup)

    base = measure(DoNothing(spec))
    base_p50 = float(np.percentile(base, 50)) / 1000.0
    rows = [
        "| Policy | p50 µs | p99 µs | p50 / trivial | budget | within |",
        "|---|---|---|---|---|---|",
        f"| trivial do-nothing (baseline) | {base_p50:.1f} | {np.percentile(base, 99) / 1000:.1f} | 1.00 | | |",
    ]
    for name in policies:
        cls, reason = availability(name)
        if cls is None:
            rows.append(f"| {name} | not available | | | | |")
            continue
        try:
            base_name, params = split_variant(name)
            policy = build_policy(base_name, spec, params, 0)
            set_trace = getattr(policy, "set_trace", None)
            if callable(set_trace):
                set_trace(rates)
            ns = measure(policy)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            rows.append(f"| {name} | error: {type(exc).__name__}: {str(exc)[:60]} | | | | |")
            continue
        p50, p99 = float(np.percentile(ns, 50)) / 1000.0, float(np.percentile(ns, 99)) / 1000.0
        budget = 5000.0 if name.startswith("dql") else 1000.0
        rows.append(
            f"| {name} | {p50:.1f} | {p99:.1f} | {p50 / base_p50:.2f} | {budget / 1000:.0f} ms |"
            f" {'yes' if p99 < budget else 'NO'} |"
        )
    markdown = (
        f"`Policy.step()` with an `Observation` (the control loop's call), {args.calls} timed calls per policy after "
        f"{warmup} untimed ones, rates from `{Path(args.trace).name}`, infrastructure {args.infra}, "
        f"{args.node_types} node types, K_max {args.k_max}; the deployment follows the proposals. Budget (issue 3): "
        "1 ms tabular/rule-based, 5 ms deep; 'within' compares p99.\n\n" + "\n".join(rows)
    )
    command = "python -m benchmarks decision-latency" + ("" if not argv else " " + " ".join(argv))
    write_section("decision-latency", markdown, command, path=args.output)
    print(markdown)
    return 0


# ---- entry points of the runner (``python -m benchmarks``) -------------------------------------------------------
def _cli(func: Any, argv: list[str]) -> int:
    try:
        return int(func(argv))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main_paper_tables(argv: list[str]) -> int:
    return _cli(paper_tables, argv)


def main_decision_latency(argv: list[str]) -> int:
    return _cli(decision_latency, argv)
