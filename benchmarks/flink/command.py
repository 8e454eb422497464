"""``manage.py bench_flink``: OM policies in closed loop on a real local Flink cluster (``benchmarks.flink.runner``).

``--runs``: harness strategies (static peak / mean, and OM policies stepped by the harness). ``--policies``: the
product's OM policies through the product (``benchmarks.flink.product``: the job registered by manifest, the
product's tick controls it through the Flink connector), cold start. ``--repeat N`` runs everything N times and
prints the median and worst per strategy; the clairvoyant floor (``BenchConfig.floor_slot_s``) is printed with
every run. ``--json [PATH]`` writes one object per strategy and run (``benchmarks.live.JSON_KEYS``,
core_s = slot-seconds of splitter and counter; default docs/results/bench_flink.json).

Prints one table (ratios of slot-seconds against static peak, measured in the same run when ``static-peak`` is
among ``--runs``, else against its nominal slot-seconds: its parallelism x the run's duration) and, with
``--write``, replaces the ``flink`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks.flink.runner import (
    FLOOR_HEADROOM,
    PRETRAINED,
    BenchConfig,
    RunResult,
    json_floor,
    json_rows,
    measured_capacity,
    run_benchmark,
)
from benchmarks.live import predicted_row, rows_to_fill
from policies.paths import taxi_trace

DEFAULT_JSON = Path(settings.BASE_DIR) / "docs" / "results" / "bench_flink.json"

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
        parser.add_argument(
            "--policies",
            default="",
            help="product OM policies (policies.registry names), each run through the product: registered by "
            "manifest, controlled by the product's tick (cold start)",
        )
        parser.add_argument(
            "--periods",
            type=int,
            default=None,
            help="control periods per run instead of --duration-s (duration = periods x --period-s)",
        )
        parser.add_argument("--repeat", type=int, default=1, help="runs of every strategy (median and worst)")
        parser.add_argument("--trace", default="", help="arrival-rate trace file (default: the Taxi trace)")
        parser.add_argument("--eta-v", type=float, default=0.05, help="eta_V of the product's application")
        parser.add_argument("--eta-r", type=float, default=0.2, help="eta_R of the product's application")
        parser.add_argument(
            "--json",
            nargs="?",
            const=str(DEFAULT_JSON),
            default=None,
            metavar="PATH",
            help="write one object per strategy and run to PATH (default docs/results/bench_flink.json)",
        )
        parser.add_argument("--series-json", default="", help="write every run's per-period rows here")
        parser.add_argument(
            "--predict-from",
            default="",
            metavar="SERIES_JSON",
            help="start no engine: predict the runs of a --series-json file (benchmarks.flink.prediction: the "
            "recorded parallelism replayed; benchmarks.flink.closed_loop: the run's policy through the product on "
            "the fitted engine, under --eta-v, --eta-r, --period-s and T_AM = 10 periods), print each beside its "
            "measured outcome and, with --json PATH, fill the predicted_* and closed_loop_* keys of PATH's rows",
        )

    def handle(self, *args, **opts):
        from django.db import connection

        from benchmarks.live import summary
        from policies import registry

        if opts["predict_from"]:
            cfg = BenchConfig(trace="", r_max_s=opts["r_max_s"], period_s=opts["period_s"])
            logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
            self._predict_from(Path(opts["predict_from"]), opts["json"], cfg, opts["eta_v"], opts["eta_r"])
            return
        runs = [r.strip() for r in opts["runs"].split(",") if r.strip()]
        policies = [p.strip() for p in opts["policies"].split(",") if p.strip()]
        bad = [r for r in runs if r not in RUNS]
        if bad:
            raise CommandError(f"--runs: unknown run(s) {bad}; choose from {', '.join(RUNS)}")
        if not (runs or policies):
            raise CommandError(
                f"--runs: nothing to run: name harness runs ({', '.join(RUNS)}) or product policies (--policies)"
            )
        for p in policies:
            if p.endswith(PRETRAINED):
                raise CommandError(
                    f"--policies: {p}: no pre-trained variant through the product (use --runs)"
                )
            try:
                registry.resolve_om(p)
            except ValueError as exc:
                raise CommandError(f"--policies: {exc}") from exc
        for key in ("duration_s", "period_s", "rate_scale", "cost_ms", "r_max_s"):
            if not opts[key] > 0:
                raise CommandError(f"--{key.replace('_', '-')}: must be > 0, got {opts[key]}")
        for key in ("repeat", "periods"):
            if opts[key] is not None and opts[key] < 1:
                raise CommandError(f"--{key}: must be >= 1, got {opts[key]}")
        for key in ("eta_v", "eta_r"):
            if not 0 < opts[key] <= 1:
                raise CommandError(f"--{key.replace('_', '-')}: must be in (0, 1], got {opts[key]}")
        if policies and connection.vendor == "sqlite":
            raise CommandError("--policies: the product path needs PostgreSQL (set DATABASE_URL)")
        duration = opts["duration_s"] if opts["periods"] is None else opts["periods"] * opts["period_s"]
        cfg = BenchConfig(
            trace=opts["trace"] or str(taxi_trace()), trace_start=opts["trace_start"], steps=opts["steps"],
            duration_s=duration, rate_scale=opts["rate_scale"], cost_ms=opts["cost_ms"],
            r_max_s=opts["r_max_s"], period_s=opts["period_s"],
        )  # fmt: skip
        try:
            cfg.schedule()
        except (OSError, ValueError) as exc:
            raise CommandError(f"--trace: {exc}") from None
        floor = cfg.floor_slot_s()
        self.stdout.write(
            f"{cfg.duration_s:.0f} s per run ({cfg.duration_s / cfg.period_s:.0f} periods of {cfg.period_s:g} s); "
            f"clairvoyant floor {floor:.0f} slot-s (every period sized for its own mean rate at "
            f"{1000.0 / cfg.cost_ms:g} records/s per slot, {FLOOR_HEADROOM:.0%} headroom)"
        )
        if policies:  # the eager tasks' "succeeded in" lines would drown the per-tick lines
            logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
        started = time.time()
        load_before = os.getloadavg()[0]
        root = tempfile.mkdtemp(prefix="bench-flink-")
        try:
            results = run_benchmark(
                root, cfg, runs, log=lambda s: self.stdout.write(s), policies=policies, repeat=opts["repeat"],
                eta_v=opts["eta_v"], eta_r=opts["eta_r"],
            )  # fmt: skip
        finally:
            if policies:
                from benchmarks.flink.product import CATALOG, OWNER, REGION
                from benchmarks.loop.live import cleanup

                cleanup(OWNER, REGION, CATALOG)
        load_after = os.getloadavg()[0]
        rows_json = json_rows(results, cfg)
        if opts["json"]:
            path = Path(opts["json"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(rows_json, indent=1) + "\n")
            self.stdout.write(f"wrote {len(rows_json)} objects to {path}")
        if opts["series_json"]:
            series = [{"strategy": r.name, "run": rep, "series": r.series} for rep, r in results if r.series]
            Path(opts["series_json"]).write_text(json.dumps(series, indent=1) + "\n")
        base = next((r for _, r in results if r.name == "static-peak"), None)
        rows = [r.row(base) for _, r in results]
        cols = list(rows[0])
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(str(row[c]) for c in cols) + " |" for row in rows]
        table = "\n".join(lines)
        self.stdout.write(table)
        rows_floor = json_floor(results, cfg)  # the floor the rows are against
        self.stdout.write(summary(rows_json, rows_floor, "slot-s"))
        measured = measured_floor_note(results, cfg, rows_json)
        self.stdout.write(measured)
        if opts["write"]:
            from benchmarks.doc import write_section

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
                f"shared with other work; total {time.time() - started:.0f} s. "
                + (
                    "Runs named product:<policy> are the product's OM policies registered by manifest and driven "
                    "by the product's tick through the Flink connector (cold start). "
                    if policies
                    else ""
                )
                + f"Clairvoyant floor: {floor:.0f} slot-s nominal, {rows_floor:.0f} slot-s at the measured "
                "capacity (the JSON's `floor_core_s`).\n\n"
                + table
                + "\n\n"
                + summary(rows_json, rows_floor, "slot-s")
                + "\n"
                + measured
            )
            keys = ("runs", "policies", "repeat", "periods", "trace_start", "steps", "duration_s", "period_s",
                    "rate_scale", "cost_ms")  # fmt: skip
            cmd = "python manage.py bench_flink --write " + " ".join(
                f"--{k.replace('_', '-')} {opts[k]}" for k in keys if opts[k] not in ("", None)
            )
            write_section("flink", body, cmd)

    def _predict_from(
        self, series_path: Path, json_path: str | None, cfg: BenchConfig, eta_v: float, eta_r: float
    ) -> None:
        """``--predict-from``: the predictions of every run of a series file, beside its measured outcome."""
        try:
            runs = json.loads(series_path.read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"--predict-from: {series_path}: {exc}") from None
        rows, by_key, header = rows_to_fill(json_path, "slot-s")
        self.stdout.write(header)
        for run in runs:
            r = RunResult(run["strategy"], series=run["series"])
            r.predict(cfg, eta_v, eta_r)
            self.stdout.write(
                predicted_row(
                    by_key.get((run["strategy"], run["run"])),
                    run["strategy"],
                    run["run"],
                    (r.predicted_violations_pct, r.predicted_slot_s),
                    (r.closed_loop_violations_pct, r.closed_loop_slot_s),
                )
            )
        if json_path:
            Path(json_path).write_text(json.dumps(rows, indent=1) + "\n")
            self.stdout.write(f"filled the predictions of {len(by_key)} rows in {json_path}")


def measured_floor_note(results: list[tuple[int, RunResult]], cfg: BenchConfig, rows: list[dict]) -> str:
    """The clairvoyant floor again at the per-slot capacity the runs measured (``runner.measured_capacity``), and
    each strategy's median and worst slot-seconds against it: the nominal floor sizes for the sleep alone, which
    a slot of this machine does not reach, so no strategy within R_max could run at it."""
    capacity, n = measured_capacity([r for _, r in results])
    if not capacity:
        return "Clairvoyant floor at the measured capacity: no service time measured in these runs.\n"
    floor = cfg.floor_slot_s(capacity)
    per_op = ", ".join(f"{op} {mu:.1f}" for op, mu in capacity.items())
    lines = [
        f"Clairvoyant floor at the measured capacity ({per_op} records/s per busy slot: the median service time "
        f"over {n} complete periods of these runs; nominal {1000.0 / cfg.cost_ms:g}): {floor:.0f} slot-s.",
        "",
        "| strategy | runs | slot-s median (worst) | vs measured floor median (worst) |",
        "|---|---|---|---|",
    ]
    by: dict[str, list[float]] = {}
    for row in rows:
        by.setdefault(row["strategy"], []).append(row["core_s"])
    for name, slot_s in by.items():
        med, worst = statistics.median(slot_s), max(slot_s)
        lines.append(
            f"| {name} | {len(slot_s)} | {med:.0f} ({worst:.0f}) | {med / floor:.2f} ({worst / floor:.2f}) |"
        )
    return "\n".join(lines) + "\n"
