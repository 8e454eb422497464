"""Run a product OM policy on ``bench_flink``'s WordCount through the product's own control path.

What a user does, in one process (``bench_flink --policies``):

1. A fresh WordCount job is submitted at parallelism 1 (``bench.submit``) and waited for until it and its
   vertices run.
2. It is registered by manifest (``autoscaler.manifests.apply_documents``, what ``manage.py apply`` does; owner
   ``bench-flink``): a catalog of the bench TaskManager's node type (``BenchConfig.taskmanager_type``: cores =
   task slots, ``PRICE_PER_SLOT_H`` $/h per slot), a region whose provider is the bench's own cluster
   (``flink-taskmanagers`` on its directory, one node at most: the TaskManager that runs already is adopted as
   ready at the region's first step, nothing is provisioned, so no grant waits for a node), the application
   (``engine: flink`` bound to the job by name, sentences -> splitter -> counter -> top, SLO R_max / eta_V /
   eta_R, the OM policy, T_OM = the bench's control period) and one Deployment per controlled operator (1 slot).
3. At every slot boundary (``slot x T_OM`` s since the epoch, plus ``tick_delay_s``) the Celery task functions of
   ``autoscaler.control.tasks`` run eagerly (``Task.apply``) as in ``manage.py bench_loop``: ``control.tick`` (the
   Flink connector's monitor reads the job's metrics, the OM decides, the AM arbitrates, the realizer rescales
   the job and verifies it), ``control.am_tune`` when the AM slot advanced, ``control.region_step``.
4. The run is measured like the harness strategies (``bench.run_one``): per tick, the end-to-end latency the
   monitor read from the engine (the tick's stored metrics; a period is violated above R_max, incomplete without
   a latency), slot-seconds of splitter and counter from the parallelism the REST API reports (sampled every
   second), reconfigurations and downtime from the ticks' apply results, records lost / duplicated from the final
   counts. ``RunResult.series`` keeps per tick its status, the latency, the measured input rates (tuples/s) and
   service times (s per record), the parallelism the REST API shows after it, the mean parallelism during the
   period observed (``parallelism_during``, from the samples), the period's bounds (``start``/``end``, epoch s),
   the downtime of a rescale the tick applied (s), and each operator's decision (outcome, target).

There is no pre-trained variant on this path (``-pretrained`` stays a harness run).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from benchmarks.flink.runner import (
    CONTROLLED,
    OPERATORS,
    PRICE_PER_SLOT_H,
    STREAMS,
    WORDS_PER_SENTENCE,
    BenchConfig,
    RunResult,
    final_counts,
    series_row,
    submit,
    taskmanager_type,
)
from benchmarks.loop.scenarios import deployment_documents
from connectors.flink.cluster import FlinkCluster
from connectors.flink.monitor import FlinkJob
from connectors.flink.rest import FlinkRest

OWNER = "bench-flink"
APPLICATION = "bench-flink-wordcount"
REGION = "bench-flink"
CATALOG = "bench-flink-nodes"
#: the ``product:`` prefix names a run through the product (``bench_flink --policies``)
PREFIX = "product:"


def documents(
    cfg: BenchConfig,
    policy: str,
    cluster: FlinkCluster,
    job_name: str,
    eta_v: float,
    eta_r: float,
    am_period_s: float,
) -> list[dict[str, Any]]:
    """The manifests of the bench job under ``policy`` (see module docstring)."""
    from policies.registry import om_choice

    ops: list[dict[str, Any]] = [{"name": OPERATORS[0], "kind": "source"}]
    ops += [
        {
            "name": "splitter",
            "kind": "operator",
            "maxParallelism": cfg.k_max,
            "selectivity": WORDS_PER_SENTENCE,
        },
        {"name": "counter", "kind": "operator", "maxParallelism": cfg.k_max},
        {"name": OPERATORS[-1], "kind": "sink"},
    ]
    docs: list[dict[str, Any]] = [
        catalog_document(
            CATALOG, cfg.slots, "bench_flink: the bench's TaskManager (a slot hosts one subtask)"
        ),
        {
            "apiVersion": "autoscaler/v1",
            "kind": "Region",
            "metadata": {"name": REGION},
            "spec": {
                "catalog": CATALOG,
                # the bench's one TaskManager, there already (adopted as ready): nothing to provision
                "maxNodes": 1,
                "maxNewNodesPerPeriod": 1,
                "provisioningDelayS": 0,
                "provider": {"kind": "flink-taskmanagers", "settings": {"clusterDir": str(cluster.root)}},
                "endpoints": [cluster.rest_url],
            },
        },
        {
            "apiVersion": "autoscaler/v1",
            "kind": "Application",
            "metadata": {"name": APPLICATION},
            "spec": {
                "engine": "flink",
                "connector": {
                    "restUrl": cluster.rest_url,
                    "jobName": job_name,
                    "applyTimeoutS": max(60.0, 2 * cfg.period_s),
                },
                "slo": {"rMaxMs": cfg.r_max_s * 1000.0, "etaV": eta_v, "etaR": eta_r},
                "operators": ops,
                "streams": [list(s) for s in STREAMS],
                "policies": {"om": om_choice(policy)},
                "periods": {"omS": cfg.period_s, "amS": am_period_s},
                "regions": [REGION],
                "state": "running",
            },
        },
    ]
    return docs + deployment_documents(docs[-1], REGION, cfg.taskmanager_type)


def catalog_document(name: str, slots: int, description: str) -> dict[str, Any]:
    """A catalog of one node type: the bench's TaskManager (``runner.taskmanager_type``; cores = ``slots`` task
    slots, 2 GiB, speedup 1, ``PRICE_PER_SLOT_H`` $/h per slot)."""
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "NodeTypeCatalog",
        "metadata": {"name": name},
        "spec": {
            "description": description,
            "nodeTypes": [
                {
                    "name": taskmanager_type(slots),
                    "cores": slots,
                    "memoryMiB": 2048,
                    "speedup": 1.0,
                    "pricePerHour": PRICE_PER_SLOT_H * slots,
                }
            ],
        },
    }


def register(cfg: BenchConfig, policy: str, cluster: FlinkCluster, job_name: str, eta_v: float, eta_r: float,
             am_period_s: float):  # noqa: ANN201  # fmt: skip
    """Apply the manifests (after deleting an earlier run's) and return the Application."""
    from benchmarks.loop import live

    docs = documents(cfg, policy, cluster, job_name, eta_v, eta_r, am_period_s)
    return live.register(docs, OWNER, APPLICATION, REGION, CATALOG)


class ParallelismSampler:
    """Every second, the parallelism of the controlled operators' vertices as the JobManager's REST API reports
    it, kept as (epoch s, {operator: parallelism}) samples (slot-seconds: their integral over time)."""

    def __init__(self, job: FlinkJob, since: float) -> None:
        self.job = job
        self.samples: list[tuple[float, dict[str, int]]] = [
            (since, self.read() or dict.fromkeys(CONTROLLED, 1))
        ]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def read(self) -> dict[str, int] | None:
        """{operator: parallelism} now; None when the job cannot be read (no running job, JobManager down)."""
        try:
            _, _, bound = self.job.snapshot()
        except Exception:  # noqa: BLE001 - a gap in the samples: the last value holds
            return None
        return {op: bound[op].parallelism for op in CONTROLLED}

    def tick(self, now: float | None = None) -> dict[str, int]:
        """Take a sample now (the last one again when the job cannot be read) and return it."""
        value = self.read() or self.samples[-1][1]
        self.samples.append((time.time() if now is None else now, value))
        return value

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.tick()

    def slot_s(self, start: float, end: float) -> float:
        """Slot-seconds of the controlled operators in ``[start, end)`` (epoch s), each sample held until the
        next."""
        return sum(self.slot_s_by_operator(start, end).values())

    def slot_s_by_operator(self, start: float, end: float) -> dict[str, float]:
        """Slot-seconds of each controlled operator in ``[start, end)`` (epoch s), each sample held until the
        next."""
        total = dict.fromkeys(CONTROLLED, 0.0)
        for (a, k), (b, _) in zip(self.samples, [*self.samples[1:], (end, {})], strict=True):
            held = max(0.0, min(b, end) - max(a, start))
            for op in CONTROLLED:
                total[op] += k.get(op, 0) * held
        return total

    def start(self) -> ParallelismSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


def wait_running(job: FlinkJob, timeout_s: float = 180.0) -> str:
    """Wait until the job and each of its vertices are RUNNING; returns its id (raises TimeoutError)."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            job_id, details, _ = job.snapshot()
            if details.get("state") == "RUNNING" and all(
                v.get("status") == "RUNNING" for v in details.get("vertices", [])
            ):
                return job_id
            last = str(details.get("state"))
        except Exception as exc:  # noqa: BLE001 - not submitted / not bound yet
            last = str(exc)[:160]
        time.sleep(1.0)
    raise TimeoutError(f"job {job.job_name} not running after {timeout_s:.0f} s: {last}")


def run_product(
    cluster: FlinkCluster,
    cfg: BenchConfig,
    policy: str,
    log=print,  # noqa: ANN001
    eta_v: float = 0.05,
    eta_r: float = 0.2,
    am_period_s: float | None = None,
    tick_delay_s: float = 1.0,
) -> RunResult:
    """Run the product OM ``policy`` once on a fresh job (module docstring); ``am_period_s``: T_AM (default 10
    control periods); ``tick_delay_s``: how long after a slot boundary its tick runs (s)."""
    from autoscaler.control.tick import slot_of
    from autoscaler.models import Region
    from benchmarks.loop import live

    period = cfg.period_s
    am_period_s = 10 * period if am_period_s is None else am_period_s
    res = RunResult(PREFIX + policy)
    job_name, counts_dir = submit(cluster, cfg, res.name)
    job = FlinkJob(FlinkRest(cluster.rest_url, 5.0), job_name, None, {op: op for op in OPERATORS})
    sampler: ParallelismSampler | None = None
    job_id = ""
    start = end = time.time()
    try:
        job_id = wait_running(job)
        job.job_id = job_id  # this run's job only, even once it has finished
        app = register(cfg, policy, cluster, job_name, eta_v, eta_r, am_period_s)
        region = Region.objects.get(name=REGION)
        start = time.time()
        sampler = ParallelismSampler(job, start).start()
        slot = slot_of(start, period) + 1  # the first tick observes [(slot - 1) T, slot T), which holds start
        am_last = -1
        while True:
            live.sleep_until(slot * period + tick_delay_s)
            if job.rest.job(job_id)["state"] != "RUNNING":  # the bounded job finished: the run is over
                break
            status, am_last = live.control_slot(app, region, slot, period, am_period_s, am_last)
            end = slot * period
            parallelism = sampler.tick()
            held = sampler.slot_s_by_operator((slot - 1) * period, slot * period)
            during = {op: v / period for op, v in held.items()}
            row = _measure(res, app, slot, status, parallelism, during, period, cfg.r_max_s)
            log(_line(res.name, row))
            slot += 1
            if time.time() - start > cfg.duration_s + 180:
                break
    except Exception as exc:  # noqa: BLE001 - reported in the result
        res.error = str(exc)[:300]
        log(f"  {res.name}: {res.error}")
    finally:
        if sampler is not None:
            sampler.stop()
            res.slot_s = sampler.slot_s(start, end)  # the measured periods only, as for the harness runs
    if job_id:
        final_counts(job.rest, job_id, cfg, counts_dir, res)
    return res


def _measure(
    res: RunResult,
    app,  # noqa: ANN001 - the Application
    slot: int,
    status: str,
    parallelism: dict[str, int],
    parallelism_during: dict[str, float],
    period_s: float,
    r_max_s: float,
) -> dict:
    """Add the tick of ``slot`` to ``res`` (as ``run_one`` counts a period) and return its series row
    (``runner.series_row`` of the period it observed, ``[(slot - 1) T, slot T)``, plus the tick's status, the
    parallelism after it and each operator's decision)."""
    from autoscaler.control.models import Decision, Tick

    tick = Tick.objects.filter(application=app, slot=slot).first()
    metrics = (tick.metrics if tick else None) or {}
    paths = [v for v in (metrics.get("path_response_time_s") or {}).values() if v is not None]
    e2e = max(paths) if paths and metrics.get("complete") else None
    ops = metrics.get("operators") or {}
    rates = {op: ops.get(op, {}).get("input_rate") for op in CONTROLLED}
    service = {op: ops.get(op, {}).get("service_time_mean_s") for op in CONTROLLED}
    decisions = {
        d.operator.name: {
            "outcome": d.outcome,
            "target": (d.proposal or {}).get("target"),
            "reason": d.reason[:200],
        }
        for d in Decision.objects.filter(application=app, slot=slot).select_related("operator")
    }
    result = (tick.result if tick else None) or None
    res.periods += 1
    res.parallelism.append(dict(parallelism))
    if e2e is None:
        res.incomplete += 1
    else:
        res.latencies.append(e2e)
        res.violations += int(e2e > r_max_s)
        for op in CONTROLLED:  # busy time per record, as run_one keeps it (runner.measured_capacity)
            st = (metrics.get("operators") or {}).get(op, {}).get("service_time_mean_s")
            if st:
                res.service_times.setdefault(op, []).append(float(st))
    if result is not None:
        res.reconfigurations += 1
        res.downtimes.append(float(result.get("downtime_s") or 0.0))
        res.failed_applies += int(not result.get("ok"))
    downtime = None if result is None else float(result.get("downtime_s") or 0.0)
    row = series_row(
        (slot - 1) * period_s, slot * period_s, parallelism_during, e2e, rates, service, downtime
    )
    row.update(
        slot=slot,
        tick=status,
        parallelism=dict(parallelism),
        applied=None if result is None else bool(result.get("ok")),
        decisions=decisions,
    )
    res.series.append(row)
    return row


def _line(name: str, row: dict) -> str:
    e2e = "-" if row["e2e_s"] is None else f"{row['e2e_s']:.2f} s"
    rates = {op: None if r is None else round(r, 1) for op, r in row["input_rate"].items()}
    outcomes = {op: d["outcome"] for op, d in row["decisions"].items()}
    return (
        f"  {name}: slot {row['slot']}: e2e {e2e}, rates {rates}, parallelism {row['parallelism']} "
        f"[tick {row['tick']}, {outcomes}]"
    )
