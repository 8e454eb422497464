"""Closed-loop benchmark of OM policies on a real local Flink cluster (``manage.py bench_flink``).

The WordCount job replays one compressed slice of the Taxi trace (``trace_start`` .. ``+steps`` lines in
``duration_s`` seconds, rates x ``rate_scale``) with a per-record cost on ``splitter`` and ``counter``. Every
``period_s`` seconds the connector's monitor collects, each controlled operator's policy steps, and the realizer
applies the proposals (one PUT of resource requirements for both vertices). Runs, in turn, on a fresh job:
``static-peak`` and ``static-mean`` (parallelism sized for the slice's peak / mean rate at 70 % utilisation from
the per-record cost), ``ds2`` (target utilisation 0.7, scale-down after two periods) and ``model-based`` (its
queue model fitted from the service times measured in the static-peak run). Reported per run: SLO violations
(% of complete periods whose end-to-end latency exceeded ``r_max_s``), incomplete periods, slot-seconds and
cost ($, vm.small price per slot), reconfigurations, mean/max downtime (s), records lost or duplicated (the
final counts compared with the trace's exact counts).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.live import clairvoyant_floor, record
from connectors.base import ConnectorError, Period, ScalingPlan
from connectors.flink.cluster import FlinkCluster, TaskManagerProfile
from connectors.flink.connector import build
from connectors.flink.jobs import submit_wordcount
from connectors.flink.pipelines.trace_source import Schedule, expected_counts, load_rates, read_counts

OPERATORS = ["sentences", "splitter", "counter", "top"]
STREAMS = [("sentences", "splitter"), ("splitter", "counter"), ("counter", "top")]
CONTROLLED = ("splitter", "counter")
WORDS_PER_SENTENCE = 4.5  # 5 words, 1 in 10 vocabulary words filtered out
NODE_TYPE, PRICE_PER_SLOT_H = "vm.small", 0.005
#: the floor's headroom over the nominal capacity (1000 / cost_ms records/s per slot), as bench_spark's floor
FLOOR_HEADROOM = 0.1
#: a run named ``<policy>-pretrained`` replays every earlier run's recorded observations through the policy first
PRETRAINED = "-pretrained"


@dataclass
class BenchConfig:
    """One benchmark: trace slice, replay length (s), per-record cost (ms), SLO (s), control period (s)."""

    trace: str
    trace_start: int = 480
    steps: int = 360
    duration_s: float = 150.0
    rate_scale: float = 0.12
    cost_ms: float = 10.0
    r_max_s: float = 2.0
    period_s: float = 20.0
    k_max: int = 6
    slots: int = 8

    def schedule(self) -> Schedule:
        return Schedule(load_rates(self.trace, self.trace_start, self.steps), self.duration_s / self.steps,
                        self.rate_scale, 50.0)  # fmt: skip

    def static_parallelism(self, rate: float) -> dict[str, int]:
        """Parallelism of each controlled operator for ``rate`` sentences/s at 70 % utilisation."""
        per_slot = 1000.0 / self.cost_ms * 0.7
        need = {"splitter": rate / per_slot, "counter": rate * WORDS_PER_SENTENCE / per_slot}
        return {op: min(max(math.ceil(v), 1), self.k_max) for op, v in need.items()}

    @property
    def taskmanager_type(self) -> str:
        """The node type of the bench's one TaskManager (``slots`` slots; the product path's catalog)."""
        return taskmanager_type(self.slots)

    def floor_slot_s(self, capacity: dict[str, float] | None = None) -> float:
        """The clairvoyant floor (slot-seconds of splitter and counter): every control period sized exactly for
        its own mean rate of the trace (counter: x ``WORDS_PER_SENTENCE``) with ``FLOOR_HEADROOM``
        (``benchmarks.live.clairvoyant_floor``), at ``capacity[op]`` records/s per slot (default, and for an
        operator it leaves out: the nominal 1000 / ``cost_ms``)."""
        sched, nominal = self.schedule(), 1000.0 / self.cost_ms
        total = 0.0
        for op, per_sentence in (("splitter", 1.0), ("counter", WORDS_PER_SENTENCE)):
            mu = (capacity or {}).get(op, nominal)
            count_at = lambda t, f=per_sentence: sched.cumulative(t) * f  # noqa: E731
            total += clairvoyant_floor(count_at, sched.duration_s, self.period_s, mu, FLOOR_HEADROOM)
        return total


def taskmanager_type(slots: int) -> str:
    """The name of the node type of a TaskManager with ``slots`` task slots (the bench's catalogs)."""
    return f"tm.{slots}slot"


def measured_capacity(results: list[RunResult]) -> tuple[dict[str, float], int]:
    """Records/s one busy slot of each controlled operator processed in ``results``: 1 / the median of the mean
    service times (s) the monitor measured (busy time per record) over every complete period of every run, and
    the number of periods behind it (the smallest over the operators; 0 and an empty dict when none measured).
    The nominal 1000 / ``cost_ms`` is the sleep alone; a slot also serialises, deserialises and hands records
    over, so it processes fewer (29 Nov: ~83 records/s per slot against the nominal 100)."""
    capacity: dict[str, float] = {}
    counts = []
    for op in CONTROLLED:
        times = [t for r in results for t in r.service_times.get(op, []) if t and t > 0]
        counts.append(len(times))
        if times:
            capacity[op] = 1.0 / statistics.median(times)
    return capacity, (min(counts) if capacity else 0)


@dataclass
class RunResult:
    name: str
    periods: int = 0
    incomplete: int = 0
    violations: int = 0
    slot_s: float = 0.0
    reconfigurations: int = 0
    downtimes: list[float] = field(default_factory=list)
    failed_applies: int = 0
    #: records missing from / counted beyond the final counts (-1: not read)
    lost: int = -1
    duplicated: int = -1
    latencies: list[float] = field(default_factory=list)
    service_times: dict[str, list[float]] = field(default_factory=dict)
    parallelism: list[dict[str, int]] = field(default_factory=list)
    #: per complete period, what each controlled operator's OM observed (replayed to pre-train a later run)
    observations: list[dict[str, Any]] = field(default_factory=list)
    #: per measured period: bounds (epoch s), parallelism during it, e2e latency (s, None when incomplete), input
    #: rates and service times per controlled operator, downtime of a rescale applied after it; a product run
    #: adds its slot, tick status, parallelism after the tick and decisions (``product._measure``)
    series: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    #: what the queue model fitted from the run predicts for its own parallelism series
    #: (``prediction.flink_prediction``): violations % of complete periods, mean latency (s), slot-seconds
    predicted_violations_pct: float | None = None
    predicted_latency_s: float | None = None
    predicted_slot_s: float | None = None
    #: what the run's policy itself does, cold, through the product on the engine fitted from the run
    #: (``closed_loop.closed_loop_prediction``): violations % of complete periods, slot-seconds
    closed_loop_violations_pct: float | None = None
    closed_loop_slot_s: float | None = None

    def predict(self, cfg: BenchConfig, eta_v: float = 0.05, eta_r: float = 0.2,
                am_period_s: float | None = None) -> None:  # fmt: skip
        """Fill the ``predicted_*`` fields from the run's series, and the ``closed_loop_*`` ones where the run's
        strategy is an OM policy (:func:`closed_loop_policy`); each left None when it cannot be fitted.
        ``eta_v`` / ``eta_r`` / ``am_period_s``: the SLO budgets and T_AM (s; default 10 control periods) of the
        product runs, which the closed loop runs under."""
        from .closed_loop import ReplaySettings, closed_loop_prediction
        from .prediction import flink_prediction

        predicted = flink_prediction(self.series, cfg.r_max_s)
        if predicted is not None:
            self.predicted_violations_pct, self.predicted_latency_s, self.predicted_slot_s = predicted
        choice = closed_loop_policy(self.name)
        if choice is None:
            return
        am_s = 10 * cfg.period_s if am_period_s is None else am_period_s
        settings = ReplaySettings(choice, cfg.r_max_s, eta_v, eta_r, cfg.period_s, am_s, cfg.k_max, cfg.slots)
        loop = closed_loop_prediction(self.series, settings)
        if loop is not None:
            self.closed_loop_violations_pct, self.closed_loop_slot_s = loop.violations_pct, loop.replica_s

    @property
    def violation_pct(self) -> float:
        complete = self.periods - self.incomplete
        return 100.0 * self.violations / complete if complete else float("nan")

    @property
    def cost(self) -> float:
        return self.slot_s / 3600.0 * PRICE_PER_SLOT_H

    @property
    def lost_or_duplicated(self) -> int:
        """Records lost plus records duplicated (-1 when the final counts were not read)."""
        return self.lost + self.duplicated if self.lost >= 0 and self.duplicated >= 0 else -1

    def row(self, baseline: RunResult | None) -> dict[str, Any]:
        return {
            "run": self.name,
            "violations_pct": round(self.violation_pct, 1),
            "incomplete_periods": f"{self.incomplete}/{self.periods}",
            "slot_s": round(self.slot_s),
            "cost_ratio_vs_static_peak": round(self.slot_s / baseline.slot_s, 3)
            if baseline and baseline.slot_s
            else None,
            "cost_usd": round(self.cost, 6),
            "reconfigurations": self.reconfigurations,
            "failed_applies": self.failed_applies,
            "downtime_mean_s": round(statistics.mean(self.downtimes), 2) if self.downtimes else 0.0,
            "downtime_max_s": round(max(self.downtimes), 2) if self.downtimes else 0.0,
            "e2e_median_s": round(statistics.median(self.latencies), 3) if self.latencies else None,
            "lost_or_duplicated": self.lost_or_duplicated,
            "error": self.error or "-",
        }


def closed_loop_policy(strategy: str) -> dict[str, Any] | None:
    """The manifest's ``spec.policies.om`` of an OM policy a run's strategy names (``product:<policy>`` or a
    harness run of a registered policy), for the closed-loop prediction; None for a static, pre-trained or
    unknown strategy (a static run's replay is already its own prediction; a pre-trained one's history is not
    replayed)."""
    from policies.registry import om_choice, resolve_om

    name = strategy.removeprefix("product:")
    if name.endswith(PRETRAINED):
        return None
    try:
        resolve_om(name)
    except ValueError:
        return None
    return om_choice(name)


def _policy(name: str, cfg: BenchConfig, service_s: float | None):
    from policies import registry
    from policies.operator_model import NodeType, OperatorSpec, QueueModel, RateLevels

    types = (NodeType(NODE_TYPE, 1.0, PRICE_PER_SLOT_H),)
    kwargs: dict[str, Any] = {"node_types": types, "k_max": cfg.k_max, "r_max_s": cfg.r_max_s / 2.0,
                              "rate_levels": RateLevels(30, 1000.0 / cfg.cost_ms * cfg.k_max)}  # fmt: skip
    if service_s:
        kwargs["model"] = QueueModel(service_s, service_s * service_s / 2.0)
    spec = OperatorSpec(**kwargs)
    cls, params = registry.resolve_om(name)
    if name == "ds2":
        params = {"period_s": cfg.period_s, "scale_down_delay_s": 2 * cfg.period_s}
    return cls(spec, params or None)


def _observation(m, replicas: int, bound_s: float):
    """The OM's observation of one complete period: its share of the path's response time (s) vs ``bound_s``."""
    from policies.base import Observation

    rt = m.response_time_s
    return Observation(np.array([replicas]), float(m.input_rate), rt, rt is None or rt > bound_s, m.utilisation,
                       True)  # fmt: skip


def pretrain(policy, observations: list[Any]) -> int:
    """Replay recorded observations of one operator through ``policy.step`` (learning only: the proposals are
    not applied); returns how many were replayed."""
    for obs in observations:
        policy.step(obs)
    return len(observations)


def run_one(cluster: FlinkCluster, cfg: BenchConfig, name: str, initial: dict[str, int], policy_name: str | None,
            service_s: dict[str, float] | None = None, log=print,
            history: list[RunResult] | None = None) -> RunResult:  # fmt: skip
    """One run on a fresh job; ``policy_name`` None keeps ``initial`` (static). ``history``: earlier runs whose
    recorded observations pre-train the policies before the run starts."""

    job_name, counts_dir = submit(cluster, cfg, name)
    settings = {"restUrl": cluster.rest_url, "jobName": job_name, "applyTimeoutS": 60}
    conn = build(settings, OPERATORS, STREAMS, {op: {NODE_TYPE: 1} for op in CONTROLLED})
    result = RunResult(name, service_times={op: [] for op in CONTROLLED})
    try:
        first = conn.realizer.apply(ScalingPlan({op: {NODE_TYPE: k} for op, k in initial.items()}, 0))
    except ConnectorError as exc:
        first = None
        result.error = str(exc)[:200]
    if first is None or not first.ok:
        result.error = result.error or (first.error[:200] if first else "")
        log(f"  {name}: initial parallelism not applied: {result.error}")
        return result
    started = time.monotonic()
    job_id = conn.job.find()
    policies = {op: _policy(policy_name, cfg, (service_s or {}).get(op)) for op in CONTROLLED} \
        if policy_name else {}  # fmt: skip
    for op, policy in policies.items():
        if history:
            n = pretrain(policy, [o[op] for r in history for o in r.observations])
            log(f"  {name}: {op} pre-trained on {n} recorded periods of {', '.join(r.name for r in history)}")
    k = dict(initial)
    slot = 0
    last = time.monotonic()
    while True:
        time.sleep(max(0.0, cfg.period_s - (time.monotonic() - last)))
        now_m = time.monotonic()
        length, last = now_m - last, now_m
        try:
            state = conn.job.rest.job(job_id)["state"]
        except ConnectorError:
            state = "UNKNOWN"
        if state != "RUNNING":
            break
        slot += 1
        result.slot_s += sum(k.values()) * length
        now = time.time()
        try:
            metrics = conn.monitor.collect(Period(slot, now - length, now))
        except ConnectorError as exc:
            log(f"  {name} period {slot}: collect failed: {str(exc)[:160]}")
            break
        result.periods += 1
        result.parallelism.append(dict(k))
        e2e = metrics.end_to_end_response_time_s
        row = _series_row(metrics, now - length, now, k, e2e)
        result.series.append(row)
        if not metrics.complete or e2e is None:
            row["e2e_s"] = None
            result.incomplete += 1
            log(f"  {name} period {slot}: incomplete ({metrics.reason[:120]})")
            continue
        result.latencies.append(e2e)
        violated = e2e > cfg.r_max_s
        result.violations += int(violated)
        for op in CONTROLLED:
            st = metrics.operators[op].service_time_mean_s
            if st:
                result.service_times[op].append(st)
        log(
            f"  {name} period {slot}: k={k} e2e={e2e:.2f}s rates="
            f"{ {op: round(metrics.operators[op].input_rate, 1) for op in CONTROLLED} } "
            f"util={ {op: round(metrics.operators[op].utilisation or 0, 2) for op in CONTROLLED} }"
        )
        # each OM sees its operator's share of the path's time (the monitor's queueing-estimate split) against
        # its own bound R_max / 2, as the control plane does: the bottleneck is blamed, not every operator
        observed = {op: _observation(metrics.operators[op], k[op], cfg.r_max_s / 2.0) for op in CONTROLLED}
        result.observations.append(observed)
        if not policies:
            continue
        targets: dict[str, int] = {}
        for op, policy in policies.items():
            new = int(policy.step(observed[op]).deployment.sum())
            if new != k[op]:
                targets[op] = new
        if targets:
            try:
                res = conn.realizer.apply(
                    ScalingPlan({op: {NODE_TYPE: n} for op, n in targets.items()}, slot)
                )
            except ConnectorError as exc:  # e.g. the bounded job finished meanwhile
                log(f"  {name} period {slot}: apply failed: {str(exc)[:160]}")
                result.failed_applies += 1
                continue
            result.reconfigurations += 1
            result.downtimes.append(res.downtime_s)
            row["downtime_s"] = res.downtime_s
            if res.ok:
                k.update(targets)
            else:
                result.failed_applies += 1
        if time.monotonic() - started > cfg.duration_s + 180:
            break
    final_counts(conn.job.rest, job_id, cfg, counts_dir, result)
    return result


def series_row(
    start: float,
    end: float,
    parallelism_during: dict[str, float],
    e2e: float | None,
    rates: dict[str, float | None],
    service: dict[str, float | None],
    downtime_s: float | None = None,
) -> dict[str, Any]:
    """One measured period as every bench_flink run keeps it (what ``prediction`` and ``closed_loop`` read): its
    bounds (epoch s), the mean parallelism of each controlled operator during it, the end-to-end latency (s, None
    when incomplete), the input rate (tuples/s) and service time (s per record) of each controlled operator, and
    the downtime (s) of a rescale applied at its end (None without one). A product run adds its own keys
    (``product._measure``)."""
    return {
        "start": start,
        "end": end,
        "parallelism_during": {op: float(parallelism_during[op]) for op in CONTROLLED},
        "e2e_s": e2e,
        "input_rate": {op: rates.get(op) for op in CONTROLLED},
        "service_time_s": {op: service.get(op) for op in CONTROLLED},
        "downtime_s": downtime_s,
    }


def _series_row(metrics, start: float, end: float, k: dict[str, int], e2e: float | None) -> dict[str, Any]:  # noqa: ANN001
    """One period of a harness run (:func:`series_row`) from the monitor's metrics and the parallelism it ran."""
    ops = metrics.operators
    return series_row(
        start,
        end,
        {op: float(k[op]) for op in CONTROLLED},
        e2e,
        {op: ops[op].input_rate if op in ops else None for op in CONTROLLED},
        {op: ops[op].service_time_mean_s if op in ops else None for op in CONTROLLED},
    )


def submit(cluster: FlinkCluster, cfg: BenchConfig, name: str) -> tuple[str, Path]:
    """Cancel what runs and submit a fresh WordCount at parallelism 1; returns (job name, counts directory)."""
    counts_dir = Path(cluster.root) / f"counts-{name.replace(':', '-')}-{int(time.time())}"
    job_name = f"bench-{name.replace(':', '-')}"
    cluster.cancel_all()
    submit_wordcount(cluster, cfg.trace, trace_start=cfg.trace_start, steps=cfg.steps,
                     step_s=cfg.duration_s / cfg.steps, rate_scale=cfg.rate_scale, duration_s=cfg.duration_s,
                     cost_ms=cfg.cost_ms, parallelism=1, counts_dir=counts_dir, job_name=job_name)  # fmt: skip
    return job_name, counts_dir


def final_counts(rest, job_id: str, cfg: BenchConfig, counts_dir: Path, result: RunResult,
                 wait_s: float = 120.0) -> None:  # fmt: skip
    """Wait (at most ``wait_s`` s) for the bounded job to finish, then compare its final word counts with the
    trace's exact counts: ``result.lost`` = words missing, ``result.duplicated`` = words counted beyond them."""
    deadline = time.monotonic() + wait_s
    final = rest.job(job_id)["state"]
    while final not in ("FINISHED", "FAILED", "CANCELED") and time.monotonic() < deadline:
        time.sleep(1)
        final = rest.job(job_id)["state"]
    if final != "FINISHED":  # the sink may still be behind: its counts are not final
        result.error = result.error or f"job {final} when the counts were read"
    expected = expected_counts(cfg.schedule(), int(cfg.duration_s * 50.0))
    got = read_counts(str(counts_dir))
    result.lost = sum(max(n - got.get(w, 0), 0) for w, n in expected.items())
    result.duplicated = sum(max(got.get(w, 0) - n, 0) for w, n in expected.items()) + sum(
        n for w, n in got.items() if w not in expected
    )


def run_benchmark(root: str | Path, cfg: BenchConfig, runs: list[str], log=print, policies: list[str] | None = None,
                  repeat: int = 1, **product: Any) -> list[tuple[int, RunResult]]:  # fmt: skip
    """Start a cluster (one TaskManager of ``cfg.slots`` slots, node type ``cfg.taskmanager_type``), run ``runs``
    (harness strategies) then ``policies`` (product OM policies through the product's tick,
    ``benchmarks.flink.product``; ``product``: its keyword options) in order, ``repeat`` times; stop the
    cluster. Returns (repetition, result) in run order."""
    cluster = FlinkCluster(root).start()
    results: list[tuple[int, RunResult]] = []
    try:
        profile = TaskManagerProfile(slots=cfg.slots, memory_mb=2048, node_type=cfg.taskmanager_type)
        cluster.start_taskmanager("bench-tm", profile)
        sched = cfg.schedule()
        rates = [r * cfg.rate_scale for r in sched.rates]
        budgets = {k: v for k, v in product.items() if k in ("eta_v", "eta_r", "am_period_s")}
        peak, mean = cfg.static_parallelism(max(rates)), cfg.static_parallelism(sum(rates) / len(rates))
        for rep in range(1, repeat + 1):
            fitted: dict[str, float] = {}
            for name in runs:
                log(f"run {rep}/{repeat} {name}")
                earlier = [r for _, r in results]
                if name == "static-peak":
                    r = run_one(cluster, cfg, name, peak, None, log=log)
                    fitted = {op: statistics.median(v) for op, v in r.service_times.items() if v}
                elif name == "static-mean":
                    r = run_one(cluster, cfg, name, mean, None, log=log)
                elif name.endswith(PRETRAINED):
                    r = run_one(cluster, cfg, name, mean, name.removesuffix(PRETRAINED), service_s=fitted,
                                log=log, history=earlier)  # fmt: skip
                else:
                    r = run_one(cluster, cfg, name, mean, name, service_s=fitted, log=log)
                r.predict(cfg, **budgets)
                results.append((rep, r))
                log(run_line(r, cfg))
            for policy in policies or []:
                from benchmarks.flink.product import PREFIX, run_product

                log(f"run {rep}/{repeat} {PREFIX}{policy}")
                r = run_product(cluster, cfg, policy, log=log, **product)
                r.predict(cfg, **budgets)
                results.append((rep, r))
                log(run_line(r, cfg))
    finally:
        cluster.stop()
    return results


def run_line(r: RunResult, cfg: BenchConfig) -> str:
    """One run's outcome with the clairvoyant floor (printed after every run)."""
    floor = cfg.floor_slot_s()
    return (
        f"  {r.name}: {r.periods} periods ({r.incomplete} incomplete), violations {r.violation_pct:.0f} %, "
        f"{r.slot_s:.0f} slot-s = {r.slot_s / floor:.2f} x the clairvoyant floor ({floor:.0f} slot-s), "
        f"{r.reconfigurations} reconfigurations, lost {r.lost}, duplicated {r.duplicated}"
        f"{', error: ' + r.error if r.error else ''}; predicted (queue model fitted from the run): "
        + (
            "no fit"
            if r.predicted_violations_pct is None
            else f"violations {r.predicted_violations_pct:.0f} %, mean latency {r.predicted_latency_s:.2f} s"
        )
        + "; closed loop (the policy on that engine, through the product): "
        + (
            "-"
            if r.closed_loop_slot_s is None
            else f"violations {r.closed_loop_violations_pct:.0f} %, {r.closed_loop_slot_s:.0f} slot-s"
        )
    )


def json_floor(runs: list[tuple[int, RunResult]], cfg: BenchConfig) -> float:
    """The clairvoyant floor (slot-s) the JSON rows are against: the one at the per-slot capacity these runs
    measured (:func:`measured_capacity`, every run of the invocation), else the nominal one (1000 / ``cost_ms``).
    No slot of a real machine reaches the sleep's nominal rate, so the nominal floor is not one any strategy
    could run at (4 Dec: 81-85 records/s per busy slot against 100)."""
    capacity, _ = measured_capacity([r for _, r in runs])
    return cfg.floor_slot_s(capacity or None)


def json_rows(runs: list[tuple[int, RunResult]], cfg: BenchConfig) -> list[dict[str, Any]]:
    """One ``benchmarks.live.record`` per (repetition, run): core_s = slot-seconds of splitter and counter,
    against the static-peak run of the same repetition (else static peak's nominal slot-seconds: its parallelism x
    the trace's duration) and against the clairvoyant floor; ``predicted_*``: the queue model fitted from the run
    (``prediction.flink_prediction``; None when it could not be fitted). The floor is :func:`json_floor`'s."""
    rates = [r * cfg.rate_scale for r in cfg.schedule().rates]
    nominal = sum(cfg.static_parallelism(max(rates)).values()) * cfg.duration_s
    peak_of = {rep: r.slot_s for rep, r in runs if r.name == "static-peak" and r.slot_s > 0 and not r.error}
    floor = json_floor(runs, cfg)
    return [
        record(
            "flink",
            r.name,
            rep,
            r.periods,
            not r.name.endswith(PRETRAINED),
            r.violation_pct,
            r.slot_s,
            peak_of.get(rep, nominal),
            floor,
            r.reconfigurations,
            r.lost,
            r.duplicated,
            r.predicted_violations_pct,
            r.predicted_slot_s,
            r.closed_loop_violations_pct,
            r.closed_loop_slot_s,
        )  # fmt: skip
        for rep, r in runs
    ]
