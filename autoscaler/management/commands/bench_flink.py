"""``manage.py bench_flink``: OM policies in closed loop on a real local Flink cluster (``connectors.flink.bench``).

Prints one table (ratios of slot-seconds against static peak, measured in the same run) and, with ``--write``,
replaces the ``flink`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import os
import tempfile
import time

from django.core.management.base import BaseCommand, CommandError

from connectors.flink.bench import BenchConfig, run_benchmark
from policies.paths import taxi_trace

RUNS = (
    "static-peak",
    "static-mean",
    "ds2",
    "model-based",
    "model-based-pretrained",
    "model-based-capacity",
    "model-based-capacity-pretrained",
)
DEFAULT_RUNS = (
    "static-peak",
    "static-mean",
    "ds2",
    "model-based",
    "model-based-capacity",
    "model-based-pretrained",
)


class Command(BaseCommand):
    help = "Benchmark OM policies on a real local Flink cluster (WordCount, compressed Taxi trace)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--runs", default=",".join(DEFAULT_RUNS), help=f"comma-separated, from {', '.join(RUNS)}"
        )
        parser.add_argument("--duration-s", type=float, default=150.0, help="replay length per run (s)")
        parser.add_argument("--period-s", type=float, default=20.0, help="control period (s)")
        parser.add_argument("--trace-start", type=int, default=480, help="first Taxi trace line (minute)")
        parser.add_argument("--steps", type=int, default=360, help="trace lines replayed per run")
        parser.add_argument("--rate-scale", type=float, default=0.12, help="multiplier of the trace rates")
        parser.add_argument("--cost-ms", type=float, default=10.0, help="per-record cost (ms, sleep)")
        parser.add_argument("--r-max-s", type=float, default=2.0, help="end-to-end latency bound (s)")
        parser.add_argument("--write", action="store_true", help="write the docs/benchmarks.md section")

    def handle(self, *args, **opts):
        runs = [r.strip() for r in opts["runs"].split(",") if r.strip()]
        bad = [r for r in runs if r not in RUNS]
        if bad or not runs:
            raise CommandError(f"--runs: unknown run(s) {bad}; choose from {', '.join(RUNS)}")
        if "static-peak" not in runs:
            raise CommandError("--runs: static-peak is the baseline and must be included")
        for key in ("duration_s", "period_s", "rate_scale", "cost_ms", "r_max_s"):
            if not opts[key] > 0:
                raise CommandError(f"--{key.replace('_', '-')}: must be > 0, got {opts[key]}")
        cfg = BenchConfig(
            trace=str(taxi_trace()), trace_start=opts["trace_start"], steps=opts["steps"],
            duration_s=opts["duration_s"], rate_scale=opts["rate_scale"], cost_ms=opts["cost_ms"],
            r_max_s=opts["r_max_s"], period_s=opts["period_s"],
        )  # fmt: skip
        started = time.time()
        load_before = os.getloadavg()[0]
        root = tempfile.mkdtemp(prefix="bench-flink-")
        results = run_benchmark(root, cfg, runs, log=lambda s: self.stdout.write(s))
        load_after = os.getloadavg()[0]
        base = next(r for r in results if r.name == "static-peak")
        rows = [r.row(base) for r in results]
        cols = list(rows[0])
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(str(row[c]) for c in cols) + " |" for row in rows]
        table = "\n".join(lines)
        self.stdout.write(table)
        if opts["write"]:
            from policies.benchdoc import write_section

            body = (
                "## Flink: OM policies in closed loop on a real local Flink cluster\n\n"
                f"WordCount (PyFlink, apache-flink 2.3.0) replaying Taxi trace lines {cfg.trace_start}.."
                f"{cfg.trace_start + cfg.steps} in {cfg.duration_s:.0f} s per run (rates x {cfg.rate_scale}), "
                f"per-record cost {cfg.cost_ms} ms (sleep) on splitter and counter, control period "
                f"{cfg.period_s:.0f} s, R_max {cfg.r_max_s} s end to end, one TaskManager of {cfg.slots} slots. "
                "Static runs are sized from the per-record cost at 70 % utilisation; `cost_ratio_vs_static_peak` "
                "is slot-seconds against the static-peak run of the same invocation. `lost_or_duplicated` "
                "compares the final counts with the trace's exact counts (0 = exactly once across every "
                f"rescale). Load average (1 min) before/after: {load_before:.1f}/{load_after:.1f} on 2 cores "
                f"shared with other work; total {time.time() - started:.0f} s.\n\n" + table + "\n"
            )
            cmd = "python manage.py bench_flink --write " + " ".join(
                f"--{k.replace('_', '-')} {opts[k]}"
                for k in ("trace_start", "steps", "duration_s", "period_s", "rate_scale", "cost_ms")
            )
            write_section("flink", body, cmd)
