"""Engine failures right after a rescale, through the control tick, on real engines.

- Flink: a real local cluster (apache-flink from ``.venv-flink``) runs the WordCount; a threshold OM with a tiny
  threshold makes the first tick with complete metrics scale ``splitter``/``counter`` 2 -> 3, and the job is
  cancelled as soon as the JobManager holds the new resource requirements. The engine then runs nothing until
  the job is submitted again; it is back when its vertices run and records reach the sink.
- Spark: a real standalone cluster; the driver (with its agent) runs as its own process on a rate source; the
  first tick with complete metrics scales the query 1 -> 2 executors and the driver process is killed (SIGKILL)
  as soon as the new desired state is written. The engine is back when the driver is started again.

For each: the rescale is not reported as applied (nor as rolled back when nothing runs), the ledger says why,
the periods while the engine is down are "no data" with the reason (never zero load), no stale target is
applied when the engine comes back, exactly one decision per (operator, slot) that ran, and the loop decides
again (complete metrics) within 2 periods once the engine is back. Results are printed (``-s`` shows them).
Each scenario is bounded (a few minutes); they skip only when Java (or the Flink installation) is missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from autoscaler import manifests
from autoscaler.control.models import Decision, Tick
from autoscaler.control.tick import forget_definitions, run_tick
from autoscaler.models import Application

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def next_slot_tick(app_id: int, period_s: float) -> tuple[int, object]:
    """Wait for the next slot boundary and run that slot's tick (as the dispatcher would, on time); a database
    error is retried as the Celery task does (SQLite's shared in-memory test database answers "table is locked"
    while the live server stores the agent's progress)."""
    from django.db import OperationalError

    slot = int(time.time() // period_s) + 1
    time.sleep(max(slot * period_s - time.time(), 0.0))
    for attempt in range(5):
        try:
            return slot, run_tick(app_id, slot)
        except OperationalError:
            if attempt == 4:
                raise
            time.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")


def one_decision_per_operator_and_slot(app: Application, slots: list[int]) -> None:
    rows = Counter(Decision.objects.filter(application=app).values_list("operator__name", "slot"))
    assert all(n == 1 for n in rows.values()), rows
    assert {s for _, s in rows} == set(slots)  # every slot that ran decided, no other


def wait_for(predicate, timeout_s: float, what: str, diagnose=None):
    """``predicate()``'s first truthy value within ``timeout_s``; a database error counts as not yet (SQLite's
    shared in-memory test database answers "table is locked" while the live server writes). On a timeout the
    message ends with ``diagnose()`` (what the engine reports) when given."""
    from django.db import OperationalError

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            got = predicate()
        except OperationalError:
            got = None
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(
        f"timed out after {timeout_s} s waiting for {what}" + (f"; {diagnose()}" if diagnose else "")
    )


# ---- Flink ---------------------------------------------------------------------------------------------------
FLINK_APP = """
apiVersion: autoscaler/v1
kind: Application
metadata: {{name: wc-flink-fault}}
spec:
  engine: flink
  connector: {{restUrl: "{url}", jobName: {job}, applyTimeoutS: {timeout}}}
  slo: {{rMaxMs: 5000, etaV: 0.05, etaR: 0.5}}
  operators:
    - {{name: sentences, kind: source}}
    - {{name: splitter, kind: operator, maxParallelism: 3}}
    - {{name: counter, kind: operator, maxParallelism: 3}}
    - {{name: top, kind: sink}}
  streams: [[sentences, splitter], [splitter, counter], [counter, top]]
  policies: {{om: {{name: threshold, params: {{threshold: 0.01}}}}}}
  periods: {{omS: {period}, amS: 600}}
  regions: [vm-local]
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: wcf-splitter}}
spec: {{application: wc-flink-fault, operator: splitter, region: vm-local, replicas: {{vm.small: 2}}}}
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: wcf-counter}}
spec: {{application: wc-flink-fault, operator: counter, region: vm-local, replicas: {{vm.small: 2}}}}
"""
FLINK_PERIOD_S = 10
FLINK_TM = dict(slots=4, memory_mb=1536, node_type="vm.small")  # TaskManagerProfile's fields
FLINK_JOB = dict(trace_start=600, steps=100, step_s=4.0, rate_scale=0.5, duration_s=400.0, ticks_per_s=50.0,
                 cost_ms=1.0, parallelism=2, job_name="wc-fault")  # fmt: skip


@pytest.fixture(autouse=True)
def declared_endpoints(settings):
    """Staff declare the test Flink cluster's JobManager (a free port on 127.0.0.1) as an engine endpoint."""
    settings.AUTOSCALER_ENGINE_ENDPOINTS = ["http://127.0.0.1:1024-65535"]


@pytest.fixture(scope="module")
def flink_cluster(tmp_path_factory):
    from connectors.flink.cluster import FlinkCluster, FlinkClusterError, TaskManagerProfile, flink_home

    if shutil.which("java") is None:
        pytest.skip("no Java on this machine: the Flink engine fault cannot run")
    try:
        flink_home()
    except FlinkClusterError as exc:
        pytest.skip(f"no Flink installation ({exc}); scripts/test.sh sources scripts/flink_env.sh")
    c = FlinkCluster(tmp_path_factory.mktemp("flink-faults"))
    try:
        c.start()
        c.start_taskmanager("tm-1", TaskManagerProfile(**FLINK_TM))
        yield c
    finally:
        c.stop()


def _on_rescale(rest, job_id: str, vertex_id: str, stop: threading.Event, seen: dict, fault) -> None:
    """Run ``fault()`` as soon as the JobManager holds a new upper bound for ``vertex_id`` (a rescale request)."""
    while not stop.is_set():
        try:
            bound = rest.resource_requirements(job_id)[vertex_id]["parallelism"]["upperBound"]
        except Exception:  # noqa: BLE001 - the job may be between states: try again
            bound = None
        if bound is not None and int(bound) != 2:
            fault()
            seen.update(requested=int(bound), fault_at=time.time())
            return
        stop.wait(0.05)


def _cancel_on_rescale(rest, job_id: str, vertex_id: str, stop: threading.Event, seen: dict) -> None:
    """Cancel the job as soon as the JobManager holds a new upper bound for ``vertex_id`` (a rescale request)."""
    _on_rescale(rest, job_id, vertex_id, stop, seen, lambda: rest.patch(f"/jobs/{job_id}?mode=cancel"))


@pytest.mark.django_db
def test_flink_job_cancelled_after_a_rescale_is_surfaced_and_the_loop_recovers(flink_cluster, shared, alice):
    from connectors.flink.jobs import submit_wordcount
    from policies.paths import taxi_trace

    rest = flink_cluster.rest()
    job_id = submit_wordcount(flink_cluster, taxi_trace(), **FLINK_JOB)
    counter_vertex = next(v["id"] for v in rest.job(job_id)["vertices"] if v["name"] == "counter")
    text = FLINK_APP.format(url=flink_cluster.rest_url, period=FLINK_PERIOD_S, job="wc-fault", timeout=60)
    manifests.apply_documents(manifests.parse_documents(text), alice)
    app = Application.objects.get(name="wc-flink-fault")
    forget_definitions(app.pk)
    stop, seen = threading.Event(), {}
    watcher = threading.Thread(target=_cancel_on_rescale, args=(rest, job_id, counter_vertex, stop, seen))
    watcher.start()
    slots: list[int] = []
    try:
        # ---- ticks until one decides on complete metrics: it scales out, the job is cancelled meanwhile --------
        deadline = time.monotonic() + 240
        while True:
            slot, out = next_slot_tick(app.pk, FLINK_PERIOD_S)
            slots.append(slot)
            if out.status != Tick.Status.NO_DATA or time.monotonic() > deadline:
                break
        fault_slot = slot
        tick = Tick.objects.get(application=app, slot=fault_slot)
        assert out.status == Tick.Status.DONE and tick.plan, (out, tick.error)
        assert seen.get("requested") == 3, seen  # the JobManager got the rescale, then the job was cancelled
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert not out.applied
    assert rest.job(job_id)["state"] == "CANCELED"
    result = tick.result
    assert result["ok"] is False and result["rolled_back"] is False
    assert "job gone" in result["error"] and "is CANCELED" in result["error"], result["error"]
    assert result["details"]["job_gone"] is True and result["details"]["restored"] is False
    decided = {d.operator.name: d for d in Decision.objects.filter(application=app, slot=fault_slot)}
    for name in ("splitter", "counter"):
        assert decided[name].outcome == Decision.Outcome.FAILED, decided[name].reason
        assert "connector: " in decided[name].reason and "is CANCELED" in decided[name].reason
        assert decided[name].applied == {}  # nothing runs
    app.refresh_from_db()
    app.dry_run = True  # later decisions are recorded, not applied: the recovery is measured on observations
    app.save()

    # ---- the engine runs nothing: incomplete periods with the reason, never zero load ------------------------
    slot, out = next_slot_tick(app.pk, FLINK_PERIOD_S)
    slots.append(slot)
    assert out.status == Tick.Status.NO_DATA
    down = Tick.objects.get(application=app, slot=slot)
    assert "Flink unavailable: no running Flink job named 'wc-fault'" in down.error
    # the JobManager answered: a job that runs no more, not a failing one to roll back
    assert down.metrics["cause"] == "job_not_running"
    assert all(d.observed == {} for d in Decision.objects.filter(application=app, slot=slot))

    # ---- the engine is back (the job submitted again, records flowing): decisions within 2 periods -----------
    # the TaskManager is the fixture's, not what the test is about: one that stopped (CI once waited 600 s for
    # the resubmitted job) is started again, and said so, so that the resubmission has slots
    from connectors.flink.cluster import TaskManagerProfile

    if flink_cluster.ensure_taskmanager("tm-1", TaskManagerProfile(**FLINK_TM)):
        print("the fixture's TaskManager tm-1 had stopped: started again before the resubmission")
    new_id = submit_wordcount(flink_cluster, taxi_trace(), **FLINK_JOB)

    def flowing() -> bool:
        job = rest.job(new_id)
        sink = next(v for v in job["vertices"] if v["name"].startswith("top"))
        running = job["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in job["vertices"])
        return running and (sink.get("metrics") or {}).get("read-records", 0) > 0

    # the bound only stops a hung test: what is waited for is the engine's own report (RUNNING, records at the
    # sink); a resubmission on this loaded 2-core machine took more than 180 s once (JVM start, slot offers)
    wait_for(
        flowing,
        600,
        "the resubmitted job to run with records reaching its sink",
        diagnose=lambda: flink_cluster.job_diagnosis(new_id),
    )
    back_at = time.time()
    # 2 periods: the first one's counters start with the new attempt (incomplete, "(re)started"), the second is
    # measured. A third is allowed only when the engine's REST metric store did not refresh (seen once on this
    # loaded machine: "no time accounted ... metric store not refreshed"), which the monitor reports as such.
    recovery: list[str] = []
    for _ in range(3):
        slot, out = next_slot_tick(app.pk, FLINK_PERIOD_S)
        slots.append(slot)
        recovery.append(out.status)
        if out.status == Tick.Status.DONE:
            break
    reasons = [Tick.objects.get(application=app, slot=s).error for s in slots[-len(recovery) :]]
    assert recovery[-1] == Tick.Status.DONE, reasons
    assert len(recovery) <= 2 or "metric store not refreshed" in reasons[1], reasons
    # no stale apply: the failed target (3) never reached the new job
    assert {v["name"]: v["parallelism"] for v in rest.job(new_id)["vertices"]}["counter"] == 2
    one_decision_per_operator_and_slot(app, slots)
    print(
        f"\nflink: job cancelled {seen['fault_at'] - tick.decided_at.timestamp():.1f} s after the decision "
        f"of slot {fault_slot}; apply failed after {result['details']['elapsed_s']:.1f} s: {result['error'][-60:]}; "
        f"slots while down: {len(slots) - len(recovery) - slots.index(fault_slot) - 1} (no data); ticks to a "
        f"complete decision once the job runs again: {len(recovery)} ({recovery}, {time.time() - back_at:.0f} s)"
    )


# ---- Spark ---------------------------------------------------------------------------------------------------
SPARK_APP = """
apiVersion: autoscaler/v1
kind: NodeTypeCatalog
metadata: {{name: sparkfaultcat}}
spec:
  nodeTypes:
    - {{name: small, cores: 1, memoryMiB: 512, speedup: 1.0, pricePerHour: 0.01}}
    - {{name: large, cores: 2, memoryMiB: 1024, speedup: 2.0, pricePerHour: 0.02}}
---
apiVersion: autoscaler/v1
kind: Region
metadata: {{name: spark-fault-region}}
spec:
  catalog: sparkfaultcat
  maxNodes: 4
  maxNewNodesPerPeriod: 2
  # the test cluster's master and the driver's UI take free ports on 127.0.0.1
  endpoints: ["spark://127.0.0.1:1024-65535", "http://127.0.0.1:1024-65535"]
---
apiVersion: autoscaler/v1
kind: Application
metadata: {{name: wcs}}
spec:
  engine: spark
  connector: {{master: "{master}", batchIntervalS: 1.0, applyTimeoutS: 150}}
  slo: {{rMaxMs: 30000, etaV: 0.05, etaR: 0.5}}
  operators:
    - {{name: src, kind: source}}
    - {{name: counter, kind: operator, maxParallelism: 2}}
    - {{name: out, kind: sink}}
  streams: [[src, counter], [counter, out]]
  policies: {{om: {{name: threshold, params: {{threshold: 0.01}}}}}}
  periods: {{omS: {period}, amS: 60}}
  regions: [spark-fault-region]
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: wcs-counter}}
spec: {{application: wcs, operator: counter, region: spark-fault-region, replicas: {{small: 1}}}}
"""
SPARK_PERIOD_S = 6
#: ticks after the restarted driver's first micro-batch until one must decide (a bound for a hung engine, 2 min)
RECOVERY_TICKS_MAX = 20

DRIVER = textwrap.dedent(
    '''
    """A Spark driver with the streamscaler agent: a rate source (20 rows/s) into a no-op sink, 1-s triggers,
    restartable from its checkpoint. argv: control-plane URL, token, master URL, checkpoint directory."""
    import sys

    from connectors.spark.agent import run

    url, token, master, checkpoint = sys.argv[1:5]


    def build(spark):
        from pyspark.sql import functions as F

        rows = spark.readStream.format("rate").option("rowsPerSecond", 20).load()
        lat = F.unix_micros(F.current_timestamp()) / 1e6 - F.unix_micros(F.col("timestamp")) / 1e6
        observed = rows.withColumn("lat", lat).observe(
            "e2e", F.avg("lat").alias("mean_s"), F.percentile_approx("lat", 0.95).alias("p95_s"),
            F.count(F.lit(1)).alias("n"),
        )
        return (
            observed.writeStream.format("noop").option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second").start()
        )


    conf = {"spark.sql.shuffle.partitions": "2", "spark.ui.port": "0", "spark.driver.host": "127.0.0.1",
            "spark.ui.showConsoleProgress": "false"}
    run(build, conf, master=master, application="wcs", operator="counter", url=url, token=token,
        profile={"name": "small", "cores": 1, "memoryMiB": 512}, executors=1, block=True,
        apply_timeout_s=60.0, poll_interval_s=0.5, ship_interval_s=1.0)
    '''
)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    if shutil.which("java") is None:
        pytest.skip("no Java on this machine: the Spark engine fault cannot run")
    from connectors.spark.cluster import StandaloneCluster

    c = StandaloneCluster(tmp_path_factory.mktemp("spark-faults"))
    c.start()
    try:
        c.add_worker(2, 2048)
        c.add_worker(2, 2048)
        yield c
    finally:
        c.stop()


class Driver:
    """The driver process (python + its JVM, one process group); ``kill()`` is SIGKILL to the group."""

    def __init__(self, script: Path, args: list[str], log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.log = open(log, "ab")  # noqa: SIM115 - closed in kill()
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *args], cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        self.log.close()


def _desired_generation(url: str, token: str) -> int:
    import json
    import urllib.request

    req = urllib.request.Request(f"{url}/api/v1/ingest/wcs/counter/desired")
    req.add_header("Authorization", f"Token {token}")
    with urllib.request.urlopen(req, timeout=5) as resp:
        return int(json.loads(resp.read()).get("generation", 0))


def _kill_on_new_generation(url: str, token: str, driver: Driver, stop: threading.Event, seen: dict) -> None:
    """Kill the driver as soon as the control plane holds a new desired state (the rescale request), asking the
    ingest endpoint the agent polls."""
    first = None
    while not stop.is_set():
        try:
            gen = _desired_generation(url, token)
        except OSError:
            gen = None
        if gen is not None:
            first = gen if first is None else first
            if gen > first:
                driver.kill()
                seen.update(before=first, generation=gen, killed_at=time.time())
                return
        stop.wait(0.05)


@pytest.mark.django_db(transaction=True)
def test_spark_driver_killed_after_a_rescale_is_surfaced_and_the_loop_recovers(
    spark_cluster, live_server, django_user_model, tmp_path
):
    from rest_framework.authtoken.models import Token

    from autoscaler.ingest.models import DesiredState, DriverStatus, ProgressSample
    from connectors.spark.monitor import rest_executors

    owner = django_user_model.objects.create_user("spark-fault")
    text = SPARK_APP.format(master=spark_cluster.master_url, period=SPARK_PERIOD_S)
    manifests.apply_documents(manifests.parse_documents(text), owner)
    app = Application.objects.get(name="wcs", owner=owner)
    forget_definitions(app.pk)
    token = Token.objects.get_or_create(user=owner)[0].key
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    args = [live_server.url, token, spark_cluster.master_url, str(tmp_path / "checkpoint")]
    driver = Driver(script, args, tmp_path / "driver-1.log")
    stop, seen = threading.Event(), {}
    watcher = threading.Thread(
        target=_kill_on_new_generation, args=(live_server.url, token, driver, stop, seen)
    )
    slots: list[int] = []
    try:
        wait_for(lambda: ProgressSample.objects.filter(operator__application=app).exists(), 300,
                 "the first micro-batch of the driver")  # fmt: skip
        watcher.start()
        # ---- ticks until one decides on complete metrics: it scales out, the driver is killed meanwhile --------
        deadline = time.monotonic() + 180
        while True:
            slot, out = next_slot_tick(app.pk, SPARK_PERIOD_S)
            slots.append(slot)
            if out.status != Tick.Status.NO_DATA or time.monotonic() > deadline:
                break
        fault_slot = slot
        tick = Tick.objects.get(application=app, slot=fault_slot)
        assert out.status == Tick.Status.DONE and tick.plan == {"counter": {"small": 2}}, (out, tick.error)
        assert seen.get("generation") == seen.get("before", -1) + 1, (
            seen
        )  # killed once the rescale was desired
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join(timeout=10)
        if driver.proc.poll() is None:
            driver.kill()
    assert not out.applied
    result = tick.result
    assert result["ok"] is False and result["rolled_back"] is False, result
    assert "the Spark driver is gone" in result["error"], result["error"]
    info = result["details"]["counter"]
    assert info["generation"] == seen["generation"] and info["verified"] is False
    assert info["restored_desired"] == info["generation"] + 1
    assert info["duration_s"] < 150  # found gone, not waited out
    assert result["deployments"] == {"counter": {}}  # nothing runs
    d = Decision.objects.get(application=app, slot=fault_slot)
    assert d.outcome == Decision.Outcome.FAILED and "the Spark driver is gone" in d.reason
    desired = DesiredState.objects.get(operator__application=app)
    # the previous allocation (1 small executor), for the next driver
    assert (desired.generation, desired.executors, desired.profile["name"]) == (
        info["restored_desired"],
        1,
        "small",
    )
    app.refresh_from_db()
    app.dry_run = True  # later decisions are recorded, not applied: the recovery is measured on observations
    app.save()

    # ---- the driver is down: incomplete periods with the reason, never zero load -----------------------------
    slot, out = next_slot_tick(app.pk, SPARK_PERIOD_S)
    slots.append(slot)
    assert out.status == Tick.Status.NO_DATA
    down = Decision.objects.get(application=app, slot=slot)
    assert "no progress from the Spark job in this period" in down.reason
    assert down.observed["input_rate"] is None and down.observed["complete"] is False

    # ---- the driver starts again (from its checkpoint): it takes the previous allocation, decisions resume -----
    old_runs = set(ProgressSample.objects.filter(operator__application=app).values_list("run_id", flat=True))
    driver = Driver(script, args, tmp_path / "driver-2.log")
    try:
        wait_for(
            lambda: (
                ProgressSample.objects.filter(operator__application=app).exclude(run_id__in=old_runs).exists()
            ),
            300,
            "the first micro-batch of the restarted driver",
        )
        back_at = time.time()
        recovery: list[str] = []
        reasons: list[str] = []
        # the restarted driver's first periods may not be covered yet on a loaded machine (its first batches outlast
        # the trigger): ticks continue until one decides; the bound only stops an engine that never recovers
        for _ in range(RECOVERY_TICKS_MAX):
            slot, out = next_slot_tick(app.pk, SPARK_PERIOD_S)
            slots.append(slot)
            recovery.append(out.status)
            if out.status == Tick.Status.DONE:
                break
            reasons.append(Decision.objects.get(application=app, slot=slot).reason)
        assert recovery[-1] == Tick.Status.DONE, (recovery, reasons)
        assert not any("the Spark driver is gone" in r for r in reasons), reasons  # it runs again
        status = wait_for(
            lambda: DriverStatus.objects.get(operator__application=app), 30, "the driver status"
        )
        # the restarted driver runs the restored state, not the failed target
        assert status.generation == info["restored_desired"]
        assert len(rest_executors(status.ui_url, status.app_id)) == 1
    finally:
        driver.kill()
    one_decision_per_operator_and_slot(app, slots)
    print(
        f"\nspark: driver killed {seen['killed_at'] - tick.decided_at.timestamp():.1f} s after the decision of "
        f"slot {fault_slot}; apply took {info['duration_s']:.1f} s: {result['error'][:200]}; "
        f"slots while down: {len(slots) - len(recovery) - slots.index(fault_slot) - 1} (no data); ticks to a "
        f"complete decision once the driver runs again: {len(recovery)} ({recovery}, {time.time() - back_at:.0f} s)"
    )
