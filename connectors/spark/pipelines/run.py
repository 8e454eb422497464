"""Run one pipeline stage as a Spark application, under the autoscaler's agent when ``--url`` is given.

    python -m connectors.spark.pipelines.run --pipeline wordcount --stage counter \\
        --master spark://127.0.0.1:7077 --workdir var/spark-demo --application wordcount-live \\
        --operator counter --url http://127.0.0.1:8000 --token <token> [--compress 72 --rate-scale 0.1 ...]

With ``--url`` the agent owns the session (``connectors.spark.agent.run``): it ships progress and the sink's
end-to-end latency, and applies desired executor counts live / executor profiles by restart from the
checkpoint. Without ``--url`` the stage just runs (local tests, baselines). ``--seconds`` stops it after that
many seconds; SIGTERM / Ctrl-C stop it at a batch boundary. Exit status 2 with a message on bad options.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from . import STAGES
from .common import LatencyReporter, StageOptions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="connectors.spark.pipelines.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--pipeline", required=True, choices=sorted({k[0] for k in STAGES}))
    p.add_argument("--stage", required=True, help="splitter | counter (wordcount), all (taxi)")
    p.add_argument("--master", default="local[2]", help="spark://host:port or local[n]")
    p.add_argument("--workdir", required=True, help="checkpoints, intermediate files and sink output")
    p.add_argument("--application", default="", help="application name in the autoscaler")
    p.add_argument("--operator", default="", help="operator name in the autoscaler (default: --stage)")
    p.add_argument("--app-name", default="", help="Spark application name")
    p.add_argument("--url", default="", help="autoscaler base URL (enables the agent)")
    p.add_argument("--token", default=os.environ.get("STREAMSCALER_TOKEN", ""))
    p.add_argument("--trace", default="taxi_last_month")
    p.add_argument("--trace-start", type=int, default=0, help="first trace minute")
    p.add_argument("--trace-minutes", type=int, default=None, help="trace minutes to replay")
    p.add_argument("--compress", type=float, default=72.0, help="trace minutes per wall minute")
    p.add_argument("--rate-scale", type=float, default=0.1, help="multiplier of the trace rates")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--source",
        choices=("python", "files"),
        default="python",
        help="python: the Python data source; files: a generator thread + Spark's file source",
    )
    p.add_argument(
        "--report-backlog",
        action="store_true",
        help="files source under the agent: report the records written but not yet read as the source's "
        "backlog (what a Kafka source reports as offsets behind), so the monitor sees arrivals, not reads",
    )
    p.add_argument("--start-time", type=float, default=None, help="t0 of the trace (epoch s)")
    p.add_argument("--partitions", type=int, default=4, help="source partitions per micro-batch")
    p.add_argument("--shuffle-partitions", type=int, default=4)
    p.add_argument("--interval", type=float, default=5.0, help="micro-batch trigger interval (s)")
    p.add_argument("--cpu-ms", type=float, default=0.0, help="busy CPU per record (ms)")
    p.add_argument("--wait-ms", type=float, default=0.0, help="lookup wait per record (ms)")
    p.add_argument("--executors", type=int, default=1, help="initial executors")
    p.add_argument("--executor-cores", type=int, default=1)
    p.add_argument("--executor-memory-mib", type=int, default=512)
    p.add_argument("--profile-name", default="", help="node type of the initial executor profile")
    p.add_argument("--memory-scale", type=float, default=1.0, help="executor memory = memoryMiB x this")
    p.add_argument("--max-executors", type=int, default=8)
    p.add_argument("--ui-port", type=int, default=0, help="driver UI port (0 = Spark's default search)")
    p.add_argument("--dynamic-allocation", action="store_true", help="Spark's own dynamic allocation")
    p.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--retries", type=int, default=3, help="restarts of a failed query from its checkpoint")
    p.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf (repeatable)"
    )
    args = p.parse_args(argv)
    if (args.pipeline, args.stage) not in STAGES:
        stages = sorted(s for pl, s in STAGES if pl == args.pipeline)
        p.exit(2, f"--stage: {args.stage!r} is not a stage of {args.pipeline} ({', '.join(stages)})\n")
    for name in ("compress", "rate_scale", "interval"):
        if getattr(args, name) <= 0:
            p.exit(2, f"--{name.replace('_', '-')}: must be > 0\n")
    for item in args.conf:
        if "=" not in item or not item.split("=", 1)[0].startswith("spark."):
            p.exit(2, f"--conf: {item!r} is not spark.<key>=<value>\n")
    if args.url and not args.token:
        p.exit(2, "--token: required with --url (or STREAMSCALER_TOKEN)\n")
    if args.url and not args.application:
        p.exit(2, "--application: required with --url\n")
    return args


def stage_options(args: argparse.Namespace) -> StageOptions:
    workdir = Path(args.workdir).resolve()
    return StageOptions(
        workdir=str(workdir),
        trace=args.trace,
        trace_start=args.trace_start,
        trace_minutes=args.trace_minutes,
        compress=args.compress,
        rate_scale=args.rate_scale,
        seed=args.seed,
        start_time=args.start_time,
        partitions=args.partitions,
        shuffle_partitions=args.shuffle_partitions,
        interval_s=args.interval,
        source=args.source,
        cpu_ms=args.cpu_ms,
        wait_ms=args.wait_ms,
        latency=LatencyReporter(path=workdir / "latency" / f"{args.stage}.jsonl"),
    )


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    conf = {
        "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    }
    if args.ui_port:
        conf["spark.ui.port"] = str(args.ui_port)
    conf.update(dict(item.split("=", 1) for item in args.conf))
    if args.dynamic_allocation:
        conf.update(
            {
                "spark.dynamicAllocation.enabled": "true",
                "spark.dynamicAllocation.shuffleTracking.enabled": "true",
                "spark.dynamicAllocation.minExecutors": "1",
                "spark.dynamicAllocation.maxExecutors": str(args.max_executors),
                "spark.dynamicAllocation.initialExecutors": str(args.executors),
                "spark.dynamicAllocation.executorIdleTimeout": "20s",
                "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
                "spark.executor.cores": str(args.executor_cores),
                "spark.executor.memory": f"{max(args.executor_memory_mib, 512)}m",
            }
        )
    return conf


def _standalone_session(args: argparse.Namespace, conf: dict[str, str]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(args.app_name or f"{args.pipeline}-{args.stage}").master(
        args.master
    )
    if args.master.startswith("spark://") and not args.dynamic_allocation:
        conf = {
            **conf,
            "spark.executor.cores": str(args.executor_cores),
            "spark.executor.memory": f"{max(int(args.executor_memory_mib * args.memory_scale), 512)}m",
            "spark.cores.max": str(args.executors * args.executor_cores),
        }
    for k, v in conf.items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


class FileBacklog:
    """The files source's backlog for the agent's progress: records the trace generator has written minus
    records read by the finished micro-batches (cumulative over the process's query runs; a restarted query
    resumes after the last committed batch), put into the progress as ``sources[0].metrics.backlog``."""

    def __init__(self) -> None:
        self.read = 0

    def written(self) -> int | None:
        from connectors.spark.trace_source import _GENERATORS

        gens = list(_GENERATORS.values())
        return gens[0].next_index if len(gens) == 1 else None

    def enrich(self, progress_json: str) -> str:
        import json

        p = json.loads(progress_json)
        self.read += int(p.get("numInputRows") or 0)
        written = self.written()
        if written is None or not p.get("sources"):
            return progress_json
        metrics = p["sources"][0].get("metrics") or {}
        metrics["backlog"] = str(max(0, written - self.read))
        p["sources"][0]["metrics"] = metrics
        return json.dumps(p)

    def attach(self, ag: Any) -> None:
        """Route the agent's progress events through :meth:`enrich` (an event it cannot read passes as is)."""
        inner = ag.on_progress

        def on_progress(progress_json: str) -> None:
            try:
                progress_json = self.enrich(progress_json)
            except Exception:  # noqa: BLE001 - never into the query
                pass
            inner(progress_json)

        ag.on_progress = on_progress


def _run_under_agent(
    args: argparse.Namespace, opts: StageOptions, build: Any, conf: dict[str, str], stop: dict[str, bool]
) -> int:
    """Serve the stage under the agent; a failed query (e.g. a Python worker that did not start on a loaded
    machine) is restarted from its checkpoint with a new session, at most ``--retries`` times."""
    from connectors.spark import agent as agent_mod

    profile = {"cores": args.executor_cores, "memoryMiB": args.executor_memory_mib, "name": args.profile_name}
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    backlog = FileBacklog()  # across restarts: the records read so far
    for attempt in range(args.retries + 1):
        ag = agent_mod.run(
            lambda spark: build(spark, opts),
            conf,
            master=args.master,
            application=args.application,
            operator=args.operator or args.stage,
            url=args.url,
            token=args.token,
            profile=profile,
            executors=args.executors,
            app_name=args.app_name or f"{args.application}-{args.stage}",
            block=False,
            memory_scale=args.memory_scale,
            max_executors=args.max_executors,
        )
        opts.latency.bind(ag.report_latency)
        if args.report_backlog and args.source == "files":
            backlog.attach(ag)
        print(f"{args.pipeline}/{args.stage}: running under the agent ({args.url})", flush=True)
        try:
            while deadline is None or time.monotonic() < deadline:
                if ag._serve_thread is not None and not ag._serve_thread.is_alive():
                    break
                time.sleep(0.5)
        except KeyboardInterrupt:
            stop["flag"] = True
        finally:
            ag.stop()
        if not ag.error or stop["flag"] or (deadline is not None and time.monotonic() >= deadline):
            return 1 if ag.error else 0
        print(
            f"{args.pipeline}/{args.stage}: query failed ({ag.error}); restart {attempt + 1} from the "
            "checkpoint",
            file=sys.stderr,
            flush=True,
        )
        time.sleep(2.0)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    opts = stage_options(args)
    build = STAGES[(args.pipeline, args.stage)]
    conf = spark_conf(args)
    stop = {"flag": False}

    def _term(signum: int, frame: Any) -> None:
        stop["flag"] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    if args.url:
        return _run_under_agent(args, opts, build, conf, stop)
    spark = _standalone_session(args, conf)
    query = build(spark, opts)
    print(f"{args.pipeline}/{args.stage}: running ({args.master})", flush=True)
    try:
        query.awaitTermination(args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        if query.isActive:
            query.stop()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
