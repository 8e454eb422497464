"""Run one strategy of ``bench_spark`` and measure it.

The pipeline is the taxi analytics (one Spark application, ``connectors.spark.pipelines.taxi``) with the
generator/file source, started as ``python -m connectors.spark.pipelines.run`` with the agent attached to an
``IngestStub``; the strategy's controller publishes the desired executor count every ``period_s``. After
``minutes`` of trace the generator stops, the sink drains, and the sink is compared with the trace's
deterministic records.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from connectors.spark.pipelines.taxi import zone_totals
from connectors.spark.trace_source import TraceSchedule, expected_zone_trips, load_trace

from .ingest_stub import IngestStub, new_token
from .prediction import engine_prediction, simulator_prediction
from .strategies import PeriodStats, Strategy

PROFILE = {"name": "exec.small", "cores": 1, "memoryMiB": 512}
PRICE_PER_CORE_HOUR = 0.005  # $/h of vm.small (1 core) in the vm-example catalog


@dataclass
class BenchConfig:
    """One benchmark setting (units in comments)."""

    master: str
    workdir: Path
    master_web_ui: str = ""  # http://host:port of the master's web UI (the product path's region reads it)
    minutes: float = 3.0  # wall minutes of trace per run
    compress: float = 72.0  # trace minutes per wall minute
    rate_scale: float = 0.3
    trace: str = "taxi_last_month"
    trace_start: int = 0  # first trace minute
    wait_ms: float = 20.0  # lookup wait per trip (ms)
    cpu_ms: float = 0.0
    interval_s: float = 5.0
    period_s: float = 15.0
    r_max_s: float = 15.0
    k_max: int = 6
    partitions: int = 8
    drain_s: float = 180.0

    @property
    def trace_minutes(self) -> int:
        return max(1, int(round(self.minutes * self.compress)))

    def schedule(self) -> TraceSchedule:
        return TraceSchedule(
            load_trace(self.trace, self.trace_start, self.trace_minutes), self.compress, self.rate_scale
        )


@dataclass
class RunResult:
    strategy: str
    periods: int = 0
    violations_pct: float = 0.0
    latency_mean_s: float = 0.0
    core_seconds: float = 0.0
    cost_usd: float = 0.0
    reconfigurations: int = 0
    apply_mean_s: float = 0.0
    apply_max_s: float = 0.0
    downtime_max_s: float = 0.0
    expected: int = 0
    got: int = 0
    lost: int = 0
    duplicated: int = 0
    pred_violations_pct: float = 0.0
    pred_latency_mean_s: float = 0.0
    sim_violations_pct: float | None = None  # the project simulator's M/G/1 model, see prediction.py
    sim_latency_mean_s: float | None = None
    #: the engine model fitted from the run (policies.engine_model), replayed on its executor series
    engine_violations_pct: float | None = None
    engine_latency_mean_s: float | None = None
    engine_core_s: float | None = None
    #: what the run's policy itself does, cold, through the product on the engine fitted from the run
    #: (``closed_loop.closed_loop_prediction``; product runs only): violations % of periods, executor-core-s
    closed_loop_violations_pct: float | None = None
    closed_loop_core_s: float | None = None
    mu_per_executor: float = 0.0
    error: str = ""
    series: list[dict[str, Any]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("series")
        return d


def _batch_seconds(p: dict[str, Any]) -> float:
    return float(p.get("batchDuration") or p.get("durationMs", {}).get("triggerExecution", 0)) / 1000.0


def period_stats(
    prog: list[dict],
    lat: list[dict],
    executors: int,
    period_s: float,
    interval_s: float,
    elapsed_s: float = 0.0,
    arrived: int | None = None,
) -> PeriodStats:
    """One period's statistics from the agent's progress and latency reports (``PeriodStats``). ``arrived``:
    records the source created during the period (the input rate's numerator; the Spark monitor reads it as
    rows read plus the growth of the source's backlog); without it the input rate is the rate read."""
    rows = sum(int(p.get("numInputRows", 0)) for p in prog)
    busy = sum(_batch_seconds(p) for p in prog)
    n = sum(int(x.get("n", 0)) for x in lat)
    mean = sum(x["mean_s"] * x["n"] for x in lat) / n if n else None
    p95 = max((x["p95_s"] for x in lat if x.get("n")), default=None)
    ratio = (busy / len(prog) / interval_s) if prog else 0.0
    startup = any(p.get("batchId") == 0 for p in prog)
    input_rate = (arrived if arrived is not None else rows) / period_s
    return PeriodStats(
        input_rate,
        rows / period_s,
        ratio,
        busy / period_s,
        mean,
        p95,
        executors,
        startup,
        elapsed_s,
        busy / len(prog) if prog else None,
        rows / len(prog) if prog else None,
    )


def batch_detail(prog: list[dict]) -> dict[str, list]:
    """The period's micro-batches one by one (the engine model's samples, ``policies.engine_model``):
    ``batch_ids``, ``batch_rows`` (records read) and ``batch_s`` (duration, s), in the order reported."""
    return {
        "batch_ids": [int(p.get("batchId", -1)) for p in prog],
        "batch_rows": [int(p.get("numInputRows", 0)) for p in prog],
        "batch_s": [round(_batch_seconds(p), 3) for p in prog],
    }


def _stage_cmd(
    cfg: BenchConfig,
    strategy: Strategy,
    url: str,
    workdir: Path,
    application: str = "bench",
    operator: str | None = None,
) -> list[str]:
    """The stage's command line; the agent reports to ``url`` as ``application``/``operator`` (default: the
    strategy's name)."""
    cmd = [
        sys.executable, "-m", "connectors.spark.pipelines.run", "--pipeline", "taxi", "--stage", "all",
        "--master", cfg.master, "--workdir", str(workdir), "--application", application, "--operator",
        operator or strategy.name, "--app-name", f"bench-{strategy.name}", "--url", url,
        "--trace", cfg.trace, "--trace-start", str(cfg.trace_start), "--trace-minutes", str(cfg.trace_minutes),
        "--compress", str(cfg.compress), "--rate-scale", str(cfg.rate_scale), "--source", "files",
        "--partitions", str(cfg.partitions), "--shuffle-partitions", str(cfg.partitions),
        "--interval", str(cfg.interval_s), "--wait-ms", str(cfg.wait_ms), "--cpu-ms", str(cfg.cpu_ms),
        "--executors", str(strategy.initial()), "--executor-cores", "1", "--executor-memory-mib", "512",
        "--profile-name", PROFILE["name"], "--max-executors", str(cfg.k_max), "--retries", "5",
        "--report-backlog",
    ]  # fmt: skip
    if strategy.dynamic:
        cmd.append("--dynamic-allocation")
    return cmd


class Stage:
    """The pipeline's process (``connectors.spark.pipelines.run``, own process group, log in
    ``workdir/stage.log``), its agent reporting to ``url`` with ``token`` (passed in the environment, not on
    argv)."""

    def __init__(self, cmd: list[str], workdir: Path, token: str) -> None:
        self.workdir = workdir
        self.logf = open(workdir / "stage.log", "wb")  # noqa: SIM115 - closed in stop()
        # SPARK_LOCAL_IP: the driver (and its UI URL, which the agent reports) on 127.0.0.1 like the cluster
        env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "STREAMSCALER_TOKEN": token,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        self.proc = subprocess.Popen(
            cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def wait_t0(self, timeout_s: float = 600.0) -> float:
        """t0 of the trace (epoch s): written by the stage's generator with its first file, once Spark and its
        Python workers are up."""
        t0_file = self.workdir / "input" / "_t0"
        deadline = time.time() + timeout_s
        while not t0_file.exists():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the stage did not start (see {self.workdir / 'stage.log'})")
            time.sleep(0.5)
        return float(t0_file.read_text())

    def drain(self, total: int, drain_s: float) -> None:
        """Wait (at most ``drain_s`` s) until the sink holds ``total`` trips: the generator stopped at the end of
        the trace slice."""
        deadline = time.time() + drain_s
        while zone_totals(self.workdir)[1] < total and time.time() < deadline:
            time.sleep(2.0)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.logf.close()


def fresh_workdir(cfg: BenchConfig, name: str) -> Path:
    workdir = cfg.workdir / name
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    return workdir


def fluid_prediction(
    cfg: BenchConfig, series: list[dict[str, Any]], mu: float, t0: float
) -> tuple[float, float]:
    """(violations %, mean latency s) a fluid queue predicts for the recorded executor series: arrivals from
    the trace schedule, capacity ``executors x mu``, latency = 1.5 batch intervals + backlog / capacity."""
    if mu <= 0 or not series:
        return 0.0, 0.0
    sched = cfg.schedule()
    q, lat_periods = 0.0, []
    for row in series:
        k = max(1, int(row["executors"]))
        lats = []
        for s in np.arange(row["start"], row["end"], 1.0):
            lam = sched.rate_at(s - t0)
            q = max(0.0, q + (lam - k * mu) * 1.0)
            lats.append(1.5 * cfg.interval_s + q / (k * mu))
        lat_periods.append(float(np.mean(lats)) if lats else 0.0)
    viol = 100.0 * sum(x > cfg.r_max_s for x in lat_periods) / len(lat_periods)
    return viol, float(np.mean(lat_periods))


def run_strategy(cfg: BenchConfig, strategy: Strategy, log=print) -> RunResult:  # noqa: ANN001
    """Run ``strategy`` once (see module docstring)."""
    res = RunResult(strategy.name)
    workdir = fresh_workdir(cfg, strategy.name)
    stub = IngestStub(token=new_token()).start()
    stage = Stage(_stage_cmd(cfg, strategy, stub.url, workdir), workdir, stub.token or "")
    sched = cfg.schedule()
    try:
        t0 = stage.wait_t0()
        k = strategy.initial()
        start = time.time()
        end_run = t0 + sched.duration_s
        core_s, last_t, last_exec = 0.0, start, k
        while time.time() < end_run:
            p_start = time.time()
            while time.time() < min(p_start + cfg.period_s, end_run):
                time.sleep(1.0)
                _, _, drv = stub.since(time.time())
                now = time.time()
                core_s += last_exec * (now - last_t)
                last_t = now
                if drv and isinstance(drv.get("executors"), int):
                    last_exec = drv["executors"]
            prog, lat, drv = stub.since(p_start)
            executors = int(drv.get("executors", k)) if drv else k
            now = time.time()
            arrived = sched.count_at(now - t0) - sched.count_at(p_start - t0)
            stats = period_stats(prog, lat, executors, now - p_start, cfg.interval_s, now - t0, arrived)
            row = {"start": p_start, "end": now, **asdict(stats), **batch_detail(prog)}
            res.series.append(row)
            want = strategy.decide(stats)
            log(period_line(strategy.name, stats, want))
            if want is not None and want != executors and not strategy.dynamic:
                stub.set_desired(want, PROFILE)
        stage.drain(sched.total, cfg.drain_s)
        res.core_seconds = core_s
    except Exception as exc:  # noqa: BLE001 - reported in the result
        res.error = str(exc)
    finally:
        stage.stop()
        stub.stop()
    finish(res, cfg, workdir, [a for _, a in stub.acks])
    return res


def period_line(name: str, stats: PeriodStats, want: int | None, note: str = "") -> str:
    """One period of a run, as the bench prints it."""
    lat = stats.latency_mean_s if stats.latency_mean_s is not None else float("nan")
    return (
        f"  {name}: in {stats.input_rate:6.1f}/s, read {stats.processed_rate:6.1f}/s, "
        f"batch/interval {stats.batch_ratio:4.2f}, R {lat:5.1f} s, "
        f"executors {stats.executors} -> {want if want is not None else '-'}"
        f"{' (start-up)' if stats.startup else ''}{note}"
    )


def finish(res: RunResult, cfg: BenchConfig, workdir: Path, acks: list[dict[str, Any]]) -> None:
    """The run's outcome into ``res`` from its series, the sink and the agent's acknowledgements
    (``durationS``, ``downtimeS``): loss and duplication, violations, reconfigurations, the predictions."""
    sched = cfg.schedule()
    totals, got = zone_totals(workdir)
    expected = expected_zone_trips(range(sched.total), _seed())
    res.expected, res.got = sched.total, got
    res.lost = sum(max(0, v - totals.get(z, 0)) for z, v in expected.items())
    res.duplicated = sum(max(0, v - expected.get(z, 0)) for z, v in totals.items())
    periods = [r for r in res.series if r["latency_mean_s"] is not None]
    res.periods = len(res.series)
    if periods:
        res.violations_pct = 100.0 * sum(r["latency_mean_s"] > cfg.r_max_s for r in periods) / len(res.series)
        res.latency_mean_s = float(np.mean([r["latency_mean_s"] for r in periods]))
    res.cost_usd = res.core_seconds / 3600.0 * PRICE_PER_CORE_HOUR
    res.reconfigurations = len(acks)
    if acks:
        res.apply_mean_s = float(np.mean([a.get("durationS", 0.0) for a in acks]))
        res.apply_max_s = float(np.max([a.get("durationS", 0.0) for a in acks]))
        res.downtime_max_s = float(np.max([a.get("downtimeS", 0.0) for a in acks]))
    busy = [
        (r["processed_rate"], r["busy_s_per_s"], r["executors"]) for r in res.series if r["busy_s_per_s"] > 0
    ]
    if busy:  # records per busy executor-second, fitted over the run
        res.mu_per_executor = sum(p for p, _, _ in busy) / sum(b * k for _, b, k in busy)
    if res.series:
        t0 = float((workdir / "input" / "_t0").read_text()) if (workdir / "input" / "_t0").exists() else 0.0
        res.pred_violations_pct, res.pred_latency_mean_s = fluid_prediction(
            cfg, res.series, res.mu_per_executor, t0
        )
        sim = simulator_prediction(res.series, sched.rate_at, t0, cfg.interval_s, cfg.r_max_s)
        if sim is not None:
            res.sim_violations_pct, res.sim_latency_mean_s = sim
        eng = engine_prediction(res.series, cfg.interval_s, cfg.r_max_s, cfg.partitions)
        if eng is not None:
            res.engine_violations_pct, res.engine_latency_mean_s, res.engine_core_s = eng


def _seed() -> int:
    return 0


def static_sizes(cfg: BenchConfig) -> tuple[int, int]:
    """(peak, mean) executors: the trace slice's peak / mean rate over one executor's nominal capacity
    (1000 / wait_ms records/s), rounded up."""
    sched = cfg.schedule()
    rates = sched.per_step / sched.step_s
    cap = 1000.0 / max(cfg.wait_ms + cfg.cpu_ms, 1e-3)
    peak = min(cfg.k_max, max(1, math.ceil(float(rates.max()) / cap)))
    mean = min(cfg.k_max, max(1, math.ceil(float(rates.mean()) / cap)))
    return peak, mean
