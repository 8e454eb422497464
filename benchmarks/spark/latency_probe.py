"""Measure live executor add/remove latency on a local standalone cluster, stage by stage.

    nice -n 19 .venv/bin/python -m benchmarks spark-latency [--steps 1,2,3,2,1] [--cores 3]
    .venv/bin/python -m benchmarks spark-latency --steps 2,2:768,2:512   # restart-based changes

A step ``N:MEM`` asks for ``N`` executors of ``MEM`` MiB: a different executor size is a restart-based change
(the query stops at a batch boundary and resumes from its checkpoint in a new SparkContext), for which the
agent's measured ``downtime`` (query stopped until it runs again with an executor) is printed too.

Starts a master and one worker (``--cores`` cores, 1-core executors), the ingest stand-in
(``benchmarks.spark.ingest_stub``) and a small rate-source query under the agent (``agent.run``), then
publishes each desired executor count in turn and prints, per change (seconds from publishing):

- ``request``: the agent fetched the new generation and called ``requestTotalExecutors``/``killExecutor``
  (= ack time - the agent's own duration);
- ``granted``: the worker log says it was asked to launch the executor (1 s resolution, adds only);
- ``jvm``: the executor's first log line (its JVM runs and logs; 1 s resolution, adds only);
- ``registered``: the executor's ``addTime`` on the driver's REST API (adds) / its removal seen (removes);
- ``acked``: the agent's acknowledgement arrived (count verified on the driver's REST API);
- ``downtime`` (restart-based changes): the agent's measured downtime (s).

The load average at the start and the end is printed too: on a shared 2-core machine the numbers mostly say
how loaded it was.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.spark.ingest_stub import IngestStub
from connectors.spark.cluster import StandaloneCluster

LOG_TS = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d)")


def _log_time(line: str) -> float | None:
    m = LOG_TS.match(line)
    return dt.datetime.strptime(m.group(1), "%y/%m/%d %H:%M:%S").timestamp() if m else None


def _first_log_time(path: Path) -> float | None:
    try:
        with open(path, errors="replace") as f:
            for line in f:
                t = _log_time(line)
                if t is not None:
                    return t
    except OSError:
        return None
    return None


def _granted_time(worker_log: Path, app_id: str, exec_id: str) -> float | None:
    needle = f"Asked to launch executor {app_id}/{exec_id} "
    with open(worker_log, errors="replace") as f:
        for line in f:
            if needle in line:
                return _log_time(line)
    return None


def _executors(ui: str, app_id: str, include_dead: bool = False) -> list[dict]:
    url = f"{ui}/api/v1/applications/{app_id}/{'allexecutors' if include_dead else 'executors'}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return [e for e in json.loads(resp.read()) if e["id"] != "driver"]


def _build(checkpoint: str):
    def build(spark):
        from pyspark.sql import functions as F

        return (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 20)
            .load()
            .groupBy((F.col("value") % 4).alias("k"))
            .count()
            .writeStream.outputMode("complete")
            .format("memory")
            .queryName("probe")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second")
            .start()
        )

    return build


def _step(text: str) -> tuple[int, int | None]:
    """``N`` or ``N:MEM`` -> (executors, executor memory MiB or None = unchanged)."""
    count, _, memory = text.partition(":")
    if not count.strip().isdigit() or (memory and not memory.strip().isdigit()):
        raise ValueError(f"{text!r}: expected N or N:MEM (integers)")
    return int(count), int(memory) if memory else None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks spark-latency", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--steps", default="2,3,2,1", help="desired executor counts in turn, after starting with 1"
    )
    ap.add_argument("--cores", type=int, default=3, help="worker cores (executors have 1 core)")
    ap.add_argument("--poll", type=float, default=None, help="agent poll interval (s); default: the agent's")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    args = ap.parse_args(argv)
    try:
        steps = [_step(s) for s in args.steps.split(",") if s]
    except ValueError as exc:
        raise SystemExit(f"--steps: {exc}") from None
    extra = dict(kv.split("=", 1) for kv in args.conf if "=" in kv)
    if len(extra) != len(args.conf):
        raise SystemExit("--conf: KEY=VALUE expected")
    if not steps or min(n for n, _ in steps) < 1 or max(n for n, _ in steps) > args.cores:
        raise SystemExit(f"--steps: counts must be within 1..--cores ({args.cores})")
    from connectors.spark.agent import run

    work = Path(tempfile.mkdtemp(prefix="latency-probe-"))
    stub = IngestStub().start()
    profile = {"name": "small", "cores": 1, "memoryMiB": 512}
    stub.set_desired(1, profile)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    with StandaloneCluster(work) as cluster:
        worker = cluster.add_worker(args.cores, 512 * args.cores + 256)
        options = {"poll_interval_s": args.poll} if args.poll else {}
        agent = run(
            _build(str(work / "ck")),
            {"spark.sql.shuffle.partitions": "2", "spark.ui.port": "0", "spark.driver.host": "127.0.0.1",
             "spark.ui.showConsoleProgress": "false", **extra},
            master=cluster.master_url, application="probe", operator="op", url=stub.url, token="-",
            profile=profile, executors=1, block=False, apply_timeout_s=120.0, **options,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and not stub.progress:
                time.sleep(0.5)
            sc = agent.spark.sparkContext
            ui, app_id = sc.uiWebUrl, sc.applicationId
            print(f"query running; executors {len(_executors(ui, app_id))}", flush=True)
            worker_dir = Path(worker.log).with_suffix("")
            rows = []
            for n, memory in steps:
                if memory and memory != profile["memoryMiB"]:
                    profile = {**profile, "name": f"mem{memory}", "memoryMiB": memory}
                before = {e["id"] for e in _executors(ui, app_id)}
                acks = len(stub.acks)
                t0 = time.time()
                gen = stub.set_desired(n, profile)
                while len(stub.acks) == acks or stub.acks[-1][1]["generation"] < gen:
                    time.sleep(0.05)
                t_ack, ack = stub.acks[-1]
                row = {"to": n, "request": t_ack - ack["durationS"] - t0, "acked": t_ack - t0}
                if (
                    memory and agent.spark.sparkContext.applicationId != app_id
                ):  # restarted: a new application
                    sc = agent.spark.sparkContext
                    ui, app_id = sc.uiWebUrl, sc.applicationId
                    row["downtime"] = float(ack["downtimeS"])
                    before = set()
                after = {e["id"]: e for e in _executors(ui, app_id, include_dead=True)}
                new = [after[i] for i in after if i not in before and after[i].get("isActive", True)]
                if new:
                    e = max(new, key=lambda x: x["addTime"])
                    added = dt.datetime.strptime(e["addTime"][:23], "%Y-%m-%dT%H:%M:%S.%f")
                    row["registered"] = added.replace(tzinfo=dt.UTC).timestamp() - t0
                    g = _granted_time(Path(worker.log), app_id, e["id"])
                    row["granted"] = g - t0 if g else None
                    j = _first_log_time(worker_dir / app_id / e["id"] / "stderr")
                    row["jvm"] = j - t0 if j else None
                row["error"] = ack["error"]
                rows.append(row)
                print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                      flush=True)  # fmt: skip
                time.sleep(3)
        finally:
            agent.stop()
            stub.stop()
    print(f"load average at end: {os.getloadavg()}")
