"""``manage.py bench_spark``: one Spark pipeline and one compressed trace, in turn under several strategies.

The taxi analytics pipeline (``connectors.spark.pipelines.taxi``, a lookup wait per trip so that executors add
capacity on a small machine) runs on a Spark standalone cluster started on 127.0.0.1 (or ``--master``), fed by
the Taxi trace slice from ``--trace-start`` for ``--periods`` control periods of ``--period`` s (compressed
``--compress`` times, rates x ``--rate-scale``), once per strategy and ``--repeat`` times.

- The product's OM policies (``--policies``, default the recommended one) run through the product: the pipeline
  is registered by manifest and the product's tick (``control.tick``, ``control.am_tune``,
  ``control.region_step``, run eagerly as ``bench_loop`` does) controls the job through the Spark connector; the
  job's agent reports to the control plane's ingest endpoints (``benchmarks.spark.product``). Cold start
  by default; ``<policy>-pretrained`` first replays the earlier runs' periods into the operator's agent state.
- Baselines that are not product policies stay harness strategies (the agent reports to an in-process stub, the
  harness publishes the executor count): static peak and static mean provisioning (nominal capacity 1000 /
  ``--wait-ms`` records/s per executor), Spark's dynamic allocation (shuffle tracking), Spark Streaming's
  allocator rule (batch time / interval: up at 0.9, down at 0.3), DS2, and a clairvoyant reference that reads the
  future rates off the trace. ``--harness-policies`` runs OM policies through the harness adapter instead.

Per run: R_max violations (% of periods whose mean end-to-end latency exceeds ``--rmax``), executor-core-seconds
and their ratio to static peak (measured in the same repetition, else its nominal peak x duration) and to the
clairvoyant floor (sizing every period for its own mean rate without lag, ``strategies.clairvoyant_bound``,
printed with every run), reconfigurations, apply time and downtime, records lost / duplicated (sink vs the
trace's deterministic records after draining), and beside the real outcome the predictions fitted from the run's
own metrics (fluid queue, M/G/1 simulator, the micro-batch engine model). ``--json [PATH]`` writes one object per
strategy and run (keys in ``benchmarks.spark.report.JSON_KEYS``; default
``docs/results/bench_spark.json``); with ``--repeat`` the median and worst of every strategy are printed.
``--write`` puts the tables into docs/benchmarks.md (section ``bench_spark_product``).
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from benchmarks.spark.product import PREFIX
from benchmarks.spark.report import fmt, json_rows, summary
from policies.registry import RECOMMENDED_OM as RECOMMENDED

if TYPE_CHECKING:
    from benchmarks.spark.runner import BenchConfig, RunResult

BASE = Path(settings.BASE_DIR)
DEFAULT_JSON = BASE / "docs" / "results" / "bench_spark.json"
STRATEGIES = (
    "static-peak",
    "static-mean",
    "spark-dynamic-allocation",
    "spark-streaming-rule",
    "ds2",
    "clairvoyant",
)


class Command(BaseCommand):
    help = "Benchmark scaling strategies on a real Spark pipeline (docs/benchmarks.md, section bench_spark_product)."

    def add_arguments(self, parser) -> None:  # noqa: ANN001
        parser.add_argument("--periods", type=int, default=60, help="control periods per run")
        parser.add_argument(
            "--minutes",
            type=float,
            default=None,
            help="wall minutes per run instead of --periods (the earlier runs' commands): periods = minutes x 60 "
            "/ --period, rounded",
        )
        parser.add_argument("--repeat", type=int, default=1, help="runs of every strategy (median and worst)")
        parser.add_argument("--compress", type=float, default=72.0, help="trace minutes per wall minute")
        parser.add_argument(
            "--rate-scale",
            type=float,
            default=None,
            help="multiplier of the trace rates (default: the slice's peak needs --peak-executors executors)",
        )
        parser.add_argument("--peak-executors", type=int, default=4)
        parser.add_argument(
            "--trace",
            default="taxi_last_month",
            help="arrival-rate trace: a shipped name or a file of one rate (tuples/s) per trace minute",
        )
        parser.add_argument(
            "--trace-start",
            type=int,
            default=None,
            help="first trace minute (default: the "
            "first day's quietest minute, so the run covers the morning ramp)",
        )
        parser.add_argument("--wait-ms", type=float, default=20.0, help="lookup wait per trip (ms)")
        parser.add_argument("--period", type=float, default=15.0, help="control period T_OM (s)")
        parser.add_argument("--interval", type=float, default=5.0, help="micro-batch interval (s)")
        parser.add_argument("--rmax", type=float, default=15.0, help="R_max of the mean e2e latency (s)")
        parser.add_argument("--eta-v", type=float, default=0.05, help="eta_V of the product's application")
        parser.add_argument(
            "--eta-r",
            type=float,
            default=0.2,
            help="eta_R of the product's application (reconfigurations per period the AM grants on average)",
        )
        parser.add_argument("--kmax", type=int, default=6, help="executors at most")
        parser.add_argument(
            "--partitions",
            type=int,
            default=8,
            help="input and shuffle partitions: a batch runs in ceil(partitions / executors) waves of tasks, so "
            "executors beyond a divisor of it add no capacity (8: 5-7 executors are no faster than 4)",
        )
        parser.add_argument(
            "--strategies",
            default=",".join(STRATEGIES),
            help=f"harness baselines, comma separated ({', '.join(STRATEGIES)}; empty: none)",
        )
        parser.add_argument(
            "--policies",
            default=RECOMMENDED,
            help="product OM policies, run through the product (manifest, control.tick, the Spark connector); "
            "<policy>-pretrained first replays the earlier runs' recorded periods into its agent state",
        )
        parser.add_argument(
            "--harness-policies",
            default="",
            help="OM policies driven by the harness adapter instead of the product (the earlier bench_spark)",
        )
        parser.add_argument(
            "--clairvoyant-capacity",
            type=float,
            default=None,
            help="records/s per executor the clairvoyant reference sizes for (default 0.85 x 1000 / --wait-ms, "
            "what 1-core executors processed in earlier runs)",
        )
        parser.add_argument("--worker-cores", type=int, default=8)
        parser.add_argument(
            "--master",
            default="",
            help="an existing standalone master (spark://127.0.0.1:port) instead of a cluster started for the run",
        )
        parser.add_argument(
            "--master-web-ui",
            default="",
            help="that master's web UI (http://127.0.0.1:port); required with --master and --policies (the "
            "region of the product path reads the cluster's workers there)",
        )
        parser.add_argument(
            "--control-plane",
            default="",
            help="base URL of a running server of this database for the agent's ingest calls (default: one "
            "served in this process)",
        )
        parser.add_argument(
            "--floor-only",
            action="store_true",
            help="print the slice and the clairvoyant floor of executor-seconds, start nothing",
        )
        parser.add_argument(
            "--json",
            nargs="?",
            const=str(DEFAULT_JSON),
            default=None,
            metavar="PATH",
            help=f"write one object per strategy and run to PATH (default {DEFAULT_JSON.relative_to(BASE)})",
        )
        parser.add_argument(
            "--keep",
            action="store_true",
            help="keep the last product run's application (paused) to look at; the next run deletes it",
        )
        parser.add_argument("--write", action="store_true", help="write the section in docs/benchmarks.md")
        parser.add_argument(
            "--series-json",
            default="",
            help="write every run's per-period measurements (with its micro-batches) to this JSON file",
        )
        parser.add_argument(
            "--predict-from",
            default="",
            metavar="SERIES_JSON",
            help="start no engine: predict the product runs of a --series-json file (the engine model's replay "
            "of the recorded executors; the run's policy, cold, through the product on the fitted engine: "
            "benchmarks.spark.closed_loop, under the file's settings, --eta-v, --eta-r and T_AM = 10 periods), "
            "print each beside its measured outcome and, with --json PATH, fill the predicted_* and "
            "closed_loop_* keys of PATH's rows",
        )

    def handle(self, *args, **opts) -> None:  # noqa: ANN002, ANN003
        from benchmarks.spark.product import ProductPolicy
        from benchmarks.spark.runner import BenchConfig, static_sizes
        from benchmarks.spark.strategies import PRETRAINED, clairvoyant_bound
        from connectors.spark.trace_source import load_trace
        from policies import registry

        if opts["predict_from"]:
            logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
            self._predict_from(Path(opts["predict_from"]), opts["json"], opts["eta_v"], opts["eta_r"])
            return
        positive = ("compress", "wait_ms", "period", "interval", "rmax", "peak_executors", "partitions")
        for name in positive:
            if opts[name] <= 0:
                raise CommandError(f"--{name.replace('_', '-')}: must be > 0")
        if opts["minutes"] is not None:
            if opts["minutes"] <= 0:
                raise CommandError("--minutes: must be > 0")
            opts["periods"] = max(1, round(opts["minutes"] * 60.0 / opts["period"]))
        for name in ("periods", "repeat", "kmax"):
            if opts[name] < 1:
                raise CommandError(f"--{name}: must be >= 1, got {opts[name]}")
        for name in ("eta_v", "eta_r"):
            if not 0 < opts[name] <= 1:
                raise CommandError(f"--{name.replace('_', '-')}: must be in (0, 1], got {opts[name]}")
        wanted = [s for s in opts["strategies"].split(",") if s]
        unknown = [s for s in wanted if s not in STRATEGIES]
        if unknown:
            raise CommandError(f"--strategies: unknown {unknown} (known: {', '.join(STRATEGIES)})")
        product = [p for p in opts["policies"].split(",") if p]
        harness = [p for p in opts["harness_policies"].split(",") if p]
        for flag, names in (("--policies", product), ("--harness-policies", harness)):
            for p in names:
                try:
                    registry.resolve_om(p.removesuffix(PRETRAINED))
                except ValueError as exc:
                    raise CommandError(f"{flag}: {exc}") from exc
        if product and not opts["control_plane"] and connection.vendor == "sqlite" and not opts["floor_only"]:
            raise CommandError(
                "--policies: the product path serves the ingest endpoints in this process while the tick runs; "
                "SQLite allows one writer at a time (the agent's writes fail as 'database is locked'): set "
                "DATABASE_URL to a PostgreSQL database, or --control-plane to a server of this database"
            )
        if opts["master"] and not opts["master"].startswith("spark://"):
            raise CommandError("--master: must start with spark://")
        web_ui = opts["master_web_ui"]
        if web_ui and not web_ui.startswith(("http://", "https://")):
            raise CommandError("--master-web-ui: must start with http:// or https://")
        if product and opts["master"] and not web_ui and not opts["floor_only"]:
            raise CommandError(
                "--master-web-ui: required with --master for --policies (the product path's region reads the "
                "cluster's workers from the master's web UI)"
            )
        if opts["control_plane"] and not opts["control_plane"].startswith(("http://", "https://")):
            raise CommandError("--control-plane: must start with http:// or https://")
        try:
            load_trace(opts["trace"], 0, 1)
        except (ValueError, OSError) as exc:
            raise CommandError(f"--trace: {exc}") from None
        trace_start = opts["trace_start"]
        if trace_start is None:
            day = load_trace(opts["trace"], 0, 1440)
            trace_start = int(day.argmin())
        try:
            load_trace(opts["trace"], trace_start, 1)
        except ValueError as exc:
            raise CommandError(f"--trace-start: {exc}") from None
        mu_oracle = opts["clairvoyant_capacity"]
        if mu_oracle is None:
            mu_oracle = 0.85 * 1000.0 / opts["wait_ms"]
        if mu_oracle <= 0:
            raise CommandError("--clairvoyant-capacity: must be > 0")
        if opts["rate_scale"] is not None and opts["rate_scale"] <= 0:
            raise CommandError("--rate-scale: must be > 0")
        minutes_wall = opts["periods"] * opts["period"] / 60.0
        rate_scale = opts["rate_scale"]
        if rate_scale is None:  # the slice's peak = 0.9 x the nominal capacity of --peak-executors executors
            minutes = max(1, int(round(minutes_wall * opts["compress"])))
            peak_rate = float(load_trace(opts["trace"], trace_start, minutes).max())
            rate_scale = 0.9 * opts["peak_executors"] * 1000.0 / opts["wait_ms"] / peak_rate
        var = Path(settings.VAR_DIR) / "bench-spark"
        cfg = BenchConfig(
            master=opts["master"], master_web_ui=web_ui, workdir=var / "runs", minutes=minutes_wall, trace=opts["trace"],
            compress=opts["compress"], rate_scale=rate_scale, trace_start=trace_start,
            wait_ms=opts["wait_ms"], interval_s=opts["interval"], period_s=opts["period"],
            r_max_s=opts["rmax"], k_max=opts["kmax"], partitions=opts["partitions"],
        )  # fmt: skip
        try:
            peak, mean = static_sizes(cfg)
        except ValueError as exc:
            raise CommandError(f"--trace-start: {exc}") from None
        sched = cfg.schedule()
        rates = sched.per_step / sched.step_s
        self.stdout.write(
            f"trace minutes {trace_start}..{trace_start + cfg.trace_minutes} in {sched.duration_s:.0f} s "
            f"({opts['periods']} periods of {cfg.period_s:g} s), {sched.total} trips, rate "
            f"{rates.min():.0f}..{rates.max():.0f}/s; static peak {peak}, mean {mean}"
        )
        bound = clairvoyant_bound(sched, cfg.period_s, mu_oracle, peak)
        floor_core_s = bound * peak * sched.duration_s
        self.stdout.write(
            f"clairvoyant floor at {mu_oracle:g} records/s per executor, 10 % headroom: {floor_core_s:.0f} "
            f"executor-core-s = {bound:.2f} x static peak"
        )
        if opts["floor_only"]:
            return
        builders = self._builders(cfg, sched, peak, mean, mu_oracle, float(rates.max()))
        plan = [(s, lambda s=s: builders[s]()) for s in wanted]
        plan += [(p, lambda p=p: builders["harness"](p)) for p in harness]
        plan += [(PREFIX + p, lambda p=p: ProductPolicy(p)) for p in product]
        runs: list[tuple[int, RunResult]] = []
        with ExitStack() as stack:
            if not cfg.master:
                cfg.master, cfg.master_web_ui = stack.enter_context(_cluster(var, opts["worker_cores"]))
            url = opts["control_plane"]
            if product and not url:
                url = stack.enter_context(_control_plane(opts["keep"]))
            if product:
                logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
            for rep in range(1, opts["repeat"] + 1):
                for name, build in plan:
                    strategy = build()
                    t = time.time()
                    self.stdout.write(f"run {rep}/{opts['repeat']} {name} ...")
                    history = [row for _, r in runs for row in r.series]
                    res = self._run(cfg, strategy, url, history, opts)
                    self.stdout.write(
                        f"  done in {time.time() - t:.0f} s: {res.periods} periods, violations "
                        f"{res.violations_pct:.0f} %, {res.core_seconds:.0f} executor-core-s = "
                        f"{res.core_seconds / floor_core_s:.2f} x the clairvoyant floor ({floor_core_s:.0f}), "
                        f"lost {res.lost}, duplicated {res.duplicated}"
                        f"{', error: ' + res.error if res.error else ''}"
                    )
                    self.stdout.write(
                        f"  predicted: engine replay of its executors {fmt(res.engine_violations_pct, 1)} %, "
                        f"{fmt(res.engine_core_s, 0)} executor-core-s; the policy's closed loop on the fitted "
                        f"engine {fmt(res.closed_loop_violations_pct, 1)} %, {fmt(res.closed_loop_core_s, 0)} "
                        "executor-core-s"
                    )
                    runs.append((rep, res))
                    if opts["series_json"]:  # after every run: a later failure keeps the earlier runs
                        _write_series(Path(opts["series_json"]), cfg, runs)
        rows = json_rows(runs, peak * sched.duration_s, floor_core_s)
        if opts["json"]:
            path = Path(opts["json"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(rows, indent=1) + "\n")
            self.stdout.write(f"wrote {len(rows)} objects to {path}")
        body = _table([r for _, r in runs], cfg, peak, mean, trace_start, mu_oracle, bound)
        body += "\n" + summary(rows, floor_core_s) + "\n"
        self.stdout.write(body)
        if opts["write"]:
            from benchmarks.doc import write_section

            command = "python manage.py bench_spark " + " ".join(shlex.quote(a) for a in sys.argv[2:])
            write_section("bench_spark_product", body, command.strip())

    def _predict_from(self, series_path: Path, json_path: str | None, eta_v: float, eta_r: float) -> None:
        """``--predict-from``: the predictions of every product run of a series file, beside its measured
        outcome (and filled into ``json_path``'s rows of the same strategy and run)."""
        from benchmarks.live import predicted_row, rows_to_fill
        from benchmarks.spark.prediction import engine_prediction
        from benchmarks.spark.product import predict_closed_loop
        from benchmarks.spark.runner import BenchConfig, RunResult
        from benchmarks.spark.strategies import PRETRAINED

        try:
            recorded = json.loads(series_path.read_text())
            config = recorded["config"]
            cfg = BenchConfig(
                master="", workdir=Path("."), period_s=float(config["period_s"]),
                interval_s=float(config["interval_s"]), r_max_s=float(config["r_max_s"]),
                k_max=int(config["k_max"]), partitions=int(config["partitions"]),
            )  # fmt: skip
            runs = recorded["runs"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CommandError(f"--predict-from: {series_path}: {exc!r}") from None
        rows, by_key, header = rows_to_fill(json_path, "executor-core-s")
        self.stdout.write(header)
        seen: dict[str, int] = {}
        for run in runs:
            name = run["strategy"]
            seen[name] = seen.get(name, 0) + 1
            number = int(run.get("run", seen[name]))
            if not name.startswith(PREFIX) or name.endswith(PRETRAINED):
                continue
            res = RunResult(name, series=run["series"])
            eng = engine_prediction(res.series, cfg.interval_s, cfg.r_max_s, cfg.partitions)
            if eng is not None:
                res.engine_violations_pct, _, res.engine_core_s = eng
            predict_closed_loop(res, cfg, name.removeprefix(PREFIX), eta_v, eta_r, 10 * cfg.period_s)
            self.stdout.write(
                predicted_row(
                    by_key.get((name, number)),
                    name,
                    number,
                    (res.engine_violations_pct, res.engine_core_s),
                    (res.closed_loop_violations_pct, res.closed_loop_core_s),
                )
            )
        if json_path:
            Path(json_path).write_text(json.dumps(rows, indent=1) + "\n")
            self.stdout.write(f"filled the predictions of the matching rows in {json_path}")

    @staticmethod
    def _builders(cfg: BenchConfig, sched, peak: int, mean: int, mu_oracle: float, max_rate: float) -> dict:  # noqa: ANN001
        from benchmarks.spark.strategies import (
            DS2,
            Clairvoyant,
            OMPolicy,
            SparkDynamic,
            Static,
            StreamingRule,
        )

        return {
            "static-peak": lambda: Static("static-peak", peak),
            "static-mean": lambda: Static("static-mean", mean),
            "spark-dynamic-allocation": SparkDynamic,
            "spark-streaming-rule": lambda: StreamingRule(cfg.k_max),
            "ds2": lambda: DS2(cfg.k_max),
            "clairvoyant": lambda: Clairvoyant(
                sched, cfg.period_s, mu_oracle, cfg.k_max, interval_s=cfg.interval_s
            ),
            "harness": lambda p: OMPolicy(
                p,
                cfg.k_max,
                cfg.r_max_s,
                cfg.wait_ms / 1000.0,
                max_rate * 1.2,
                (cfg.partitions, cfg.interval_s, cfg.period_s),
            ),
        }

    def _run(self, cfg: BenchConfig, strategy, url: str, history: list, opts: dict) -> RunResult:  # noqa: ANN001
        from benchmarks.spark.product import ProductPolicy, run_product
        from benchmarks.spark.runner import run_strategy

        log = lambda s: self.stdout.write(s)  # noqa: E731
        if isinstance(strategy, ProductPolicy):
            return run_product(
                cfg, strategy, url, log=log, history=history, eta_v=opts["eta_v"], eta_r=opts["eta_r"]
            )
        if getattr(strategy, "wants_history", False):
            n = strategy.pretrain(history)
            self.stdout.write(f"  pre-trained on {n} recorded periods of earlier runs")
        return run_strategy(cfg, strategy, log=log)


def _table(
    results: list[RunResult],
    cfg: BenchConfig,
    peak: int,
    mean: int,
    trace_start: int,
    mu_oracle: float,
    bound: float,
) -> str:
    base = next((r for r in results if r.strategy == "static-peak" and r.core_seconds > 0), None)
    lines = [
        "## Spark: benchmarks through the product (bench_spark, issue 21 part 2)",
        "",
        f"Taxi analytics (parse -> enrich with a {cfg.wait_ms:g} ms lookup per trip -> windowed aggregation "
        f"per zone) on a local standalone cluster, trace {cfg.trace} minutes {trace_start}..."
        f"{trace_start + cfg.trace_minutes} compressed {cfg.compress:g}x (a run = {cfg.minutes:g} wall "
        f"minutes), rates x {cfg.rate_scale:g}. Strategies named product:<policy> are the product's OM "
        "policies registered by manifest and driven by the product's tick (control.tick, control.am_tune, "
        "control.region_step) through the Spark connector, cold start unless -pretrained; the others are "
        f"harness strategies. Micro-batch {cfg.interval_s:g} s, control period "
        f"{cfg.period_s:g} s, R_max = {cfg.r_max_s:g} s (mean e2e latency per period), K_max = {cfg.k_max}, "
        f"{cfg.partitions} partitions. "
        f"Static peak = {peak}, static mean = {mean} executors (1 core each). Ratios are against static "
        "peak in the same run. The clairvoyant reference reads each next period's rate off the trace and "
        f"sizes for it at {mu_oracle:g} records/s per executor with 10 % headroom (plus the backlog); sizing "
        f"every period for its own mean rate that way, without lag, needs {bound:.2f} x static peak's "
        "executor-seconds, the floor for any strategy at that capacity. Predictions for the run's own "
        "executor series: fluid = a fluid queue with the capacity per executor fitted from its batches "
        "(carries backlog); sim = the project "
        "simulator's M/G/1 model fitted from the run's per-record service times (mean, variance) plus 1.5 "
        "micro-batch intervals; engine = the micro-batch engine model model-based fits online (overhead + "
        "per-record cost over waves of tasks, post-change penalty, policies/engine_model.py) fitted from the "
        "run's periods and replayed batch by batch on its executor series and arrival rates, with its "
        "executor-seconds (benchmarks/spark/prediction.py); loop = the run's policy, cold, through the product "
        "on the simulated engine's micro-batch mode fitted the same way (product runs; "
        "benchmarks/spark/closed_loop.py). The numbers are what was measured, on a "
        "machine shared with other jobs.",
        "",
        "| strategy | periods | viol. % (fluid / sim / engine / loop) | mean R s (fluid / sim / engine) | core-s "
        "(engine / loop) | vs peak | cost $ | reconf. | apply mean/max s | downtime max s | trips | lost | dup. | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ratio = f"{r.core_seconds / base.core_seconds:.2f}" if base else "-"
        lines.append(
            f"| {r.strategy} | {r.periods} | {r.violations_pct:.0f} ({r.pred_violations_pct:.0f} / {fmt(r.sim_violations_pct, 0)} / "
            f"{fmt(r.engine_violations_pct, 0)} / {fmt(r.closed_loop_violations_pct, 0)}) | {r.latency_mean_s:.1f} ({r.pred_latency_mean_s:.1f} / "
            f"{fmt(r.sim_latency_mean_s, 1)} / {fmt(r.engine_latency_mean_s, 1)}) | {r.core_seconds:.0f} "
            f"({fmt(r.engine_core_s, 0)} / {fmt(r.closed_loop_core_s, 0)}) | {ratio} | "
            f"{r.cost_usd:.5f} | {r.reconfigurations} | {r.apply_mean_s:.1f}/{r.apply_max_s:.1f} | "
            f"{r.downtime_max_s:.1f} | {r.got}/{r.expected} | {r.lost} | {r.duplicated} | "
            f"{r.error[:60] or '-'} |"
        )
    return "\n".join(lines) + "\n"


@contextmanager
def _cluster(var: Path, worker_cores: int) -> Iterator[tuple[str, str]]:
    """A standalone master with one worker of ``worker_cores`` cores (8 GiB) for the run; yields its URL and its
    web UI's."""
    from connectors.spark.cluster import StandaloneCluster

    cluster = StandaloneCluster(var)
    try:
        cluster.start()
        cluster.add_worker(worker_cores, 8192)
        yield cluster.master_url, cluster.web_url
    finally:
        cluster.stop()


@contextmanager
def _control_plane(keep: bool) -> Iterator[str]:
    """The web application served in this process for the agent's ingest calls; yields its base URL. At the
    end the product runs' application is deleted, or paused with ``keep``."""
    from autoscaler.models import Application
    from benchmarks.loop.live import cleanup
    from benchmarks.spark.product import CATALOG, OWNER, REGION, ControlPlane

    plane = ControlPlane().start()
    try:
        yield plane.url
    finally:
        plane.stop()
        if keep:
            Application.objects.filter(owner__username=OWNER).update(state=Application.State.PAUSED)
        else:
            cleanup(OWNER, REGION, CATALOG)


def _write_series(path: Path, cfg: BenchConfig, results: list[tuple[int, RunResult]]) -> None:
    """Every run's per-period rows (``RunResult.series``: rates in records/s, times in s, and the period's
    micro-batches) with its strategy and repetition, and the benchmark's settings, as one JSON object."""
    import dataclasses
    import json

    config = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("master", "workdir")}
    runs = [{"strategy": r.strategy, "run": rep, "series": r.series} for rep, r in results]
    path.write_text(json.dumps({"config": config, "runs": runs}, indent=1))
