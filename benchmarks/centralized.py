"""Benchmark ``centralized``: paper 000 Table 1 (centralized MDP / RL+ / RL vs decentralized U = 0.6/0.7/0.8).

Model and parameters of paper 000 Sec. 4 (see :mod:`policies.sim.paper000`): 3-operator pipeline, M/D/1 with
mu = 3.7, 3.3, 2.7 tuples/s, K_max = 5, one-minute slots, rate quantum 20 tuples/min, w_SLA = w_util = w_rcf =
0.4, w_res = 0.2, T_SLA = 650 ms, gamma = 0.99, alpha = 0.1; the workload is one simulated year generated from
the rate-level transition matrix estimated from the Taxi trace (per-minute trip counts), as in the paper.

Run: ``python -m benchmarks centralized [--steps 525600] [--rt-mode max] [--sweep-every 10]``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time

import numpy as np

from policies.paths import reference_csv, taxi_trace
from policies.sim.paper000 import RT_MODES, Model, generate_levels, rate_levels, run, transition_matrix
from policies.sim.trace import load_trace

REFERENCE = reference_csv("paper_centralized_vs_decentralized.csv")
ROWS = (("mdp", 0.7), ("rl+", 0.7), ("rl", 0.7), ("decentralized", 0.6), ("decentralized", 0.7),
        ("decentralized", 0.8))  # fmt: skip


def published() -> list[dict[str, str]]:
    with REFERENCE.open() as fh:
        return list(csv.DictReader(fh))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks centralized", description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=525_600, help="simulated minutes (paper: one year)")
    ap.add_argument("--rt-mode", default="max", choices=RT_MODES, help="reading of the response time")
    ap.add_argument("--sweep-every", type=int, default=10, help="Alg. 1 value-iteration sweep every N steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.steps < 2:
        raise SystemExit("--steps: must be >= 2")
    if args.sweep_every < 1:
        raise SystemExit("--sweep-every: must be >= 1")
    t0 = time.perf_counter()
    levels = rate_levels(load_trace(taxi_trace()))
    n_levels = int(levels.max()) + 1
    p = transition_matrix(levels, n_levels)
    work = generate_levels(p, int(levels[0]), args.steps + 1, np.random.default_rng(args.seed))
    model = Model(n_levels, rt_mode=args.rt_mode)
    outs = []
    for policy, u_bar in ROWS:
        o = run(policy, work, model, p, u_bar=u_bar, sweep_every=args.sweep_every)
        outs.append(o)
        print(o, flush=True)
    infeasible = float(model.violation[work[1:], -1].mean())  # minutes even K_max everywhere misses T_SLA
    md = render(outs, args, n_levels, float(work.mean()) * 20.0, model, time.perf_counter() - t0, infeasible)
    print(md)
    if not args.no_write:
        from benchmarks.doc import write_section

        extra = " ".join(argv if argv is not None else sys.argv[1:])
        write_section("centralized", md, f"python -m benchmarks centralized {extra}".rstrip())
    return 0


def render(
    outs: list,
    args: argparse.Namespace,
    n_levels: int,
    mean_rate: float,
    model: Model,
    wall: float,
    infeasible: float = float("nan"),
) -> str:
    ref = published()
    year = 525_600 / outs[0].steps
    lines = [
        f"Paper 000 Table 1 (3-operator pipeline) with the paper's model and parameters "
        f"(`policies/sim/paper000.py`): {outs[0].steps} one-minute steps generated from the Taxi trace's "
        f"level-transition matrix ({n_levels} levels of 20 tuples/min, mean {mean_rate:.0f} tuples/min), "
        f"response time read as `{args.rt_mode}` (see below), Alg. 1 sweep every {args.sweep_every} step(s). "
        "Counts are over the run"
        + (
            f" (x {year:.2f} = one year; a shorter run than the paper's year because the shared machine's "
            "load average was 25-47: compare the percentages, the paper's are its counts / 525,600 minutes)"
            if abs(year - 1) > 1e-3
            else ""
        )
        + ".",
        "",
        "| policy | avg cost (ours / paper) | SLA violations (ours / paper) | reconfigurations (ours / paper) | "
        "avg instances (ours / paper) |",
        "|---|---|---|---|---|",
    ]
    for o, r in zip(outs, ref, strict=True):
        lines.append(
            f"| {r['scaling_policy']} | {o.avg_cost:.3f} / {float(r['avg_cost']):.3f} | "
            f"{o.sla_violations} ({100 * o.sla_violations / o.steps:.1f}%) / {r['sla_violations']} "
            f"({100 * int(r['sla_violations']) / 525_600:.1f}%) | "
            f"{o.reconfigurations} ({100 * o.reconfigurations / o.steps:.1f}%) / {r['reconfigurations']} "
            f"({100 * int(r['reconfigurations']) / 525_600:.1f}%) | "
            f"{o.avg_instances:.2f} / {r['avg_instances']} |"
        )
    mdp, dec = outs[0], outs[3:]
    lines += [
        "",
        f"- Cost of decentralisation: best decentralized / MDP = {min(d.avg_cost for d in dec) / mdp.avg_cost:.2f} "
        f"(paper {0.173 / 0.163:.2f}); decentralized reconfigurations / MDP's = "
        f"{np.mean([d.reconfigurations for d in dec]) / max(mdp.reconfigurations, 1):.1f}x (paper "
        f"{np.mean([30104, 30404, 29681]) / 13882:.1f}x).",
        f"- Avg instances: ours / paper between {min(o.avg_instances / float(r['avg_instances']) for o, r in zip(outs, ref, strict=True)):.2f} "
        f"and {max(o.avg_instances / float(r['avg_instances']) for o, r in zip(outs, ref, strict=True)):.2f}. "
        f"In {100 * infeasible:.1f}% of the generated minutes the rate exceeds what 5 instances of every operator "
        f"serve within T_SLA: no policy can avoid those violations (the MDP's {100 * mdp.sla_violations / mdp.steps:.1f}% "
        "are almost only those).",
        f"- Fraction of (level, deployment) pairs violating T_SLA: {model.violation.mean():.2f}. Wall time "
        f"{wall:.0f} s ({', '.join(f'{o.policy} {o.seconds:.0f} s' for o in outs)}) on the shared 2-core machine.",
        "",
        "**Where and why we differ from the paper**",
        "",
        "- *Response time*: paper 000 defines it as the maximal source-sink latency, but its service times "
        "alone sum to 1/3.7 + 1/3.3 + 1/2.7 = 943 ms > T_SLA = 650 ms, so that literal reading violates in "
        "every state. We read it as the slowest operator's M/D/1 response time (`max`; `--rt-mode queueing` "
        "sums the queueing delays instead). Either reading caps op 3 near 60% utilisation.",
        "- *Workload*: our Taxi trace is the per-minute trip count (mean 330, max 1029 tuples/min). Above "
        "about 480 tuples/min even 5 instances of op 3 miss T_SLA, so every policy violates in the peak hours: "
        "our violation counts are several times the paper's and the average costs higher. The paper's workload "
        "evidently had lower peaks relative to the capacity; it does not publish its level range.",
        "- *Alg. 1*: one value-iteration sweep every `--sweep-every` steps instead of every step (bounded run "
        "time); the RL agents act greedily (no exploration) on optimistic initial estimates (unknown cost 0). "
        "'centralized RL' learns its SLA cost per (level, deployment, action), 52 x 125 x 27 entries: in a run "
        "shorter than a year it is still learning (paper Fig. 2a: it is also the slowest to converge there).",
        "- *Decentralized*: each agent knows its utilisation model (paper: 'leveraging the available "
        "knowledge') and learns the level transitions; reconfigurations count minutes in which any operator "
        "changed.",
    ]
    return "\n".join(lines)
