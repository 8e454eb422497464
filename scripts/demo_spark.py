"""The live Spark demo: a real WordCount on a local Spark standalone cluster under closed-loop RL control.

    .venv/bin/python scripts/demo_spark.py [--seconds 0] [--port 8000] [--policy model-based-trend] [--period 20]

Uses the embedded defaults unless the environment says otherwise (SQLite under var/, kombu's filesystem broker).
It migrates, then starts and watches:

- a Spark standalone master and ``--workers`` workers on 127.0.0.1 (``connectors.spark.cluster``; free ports);
- the application ``demo-wordcount`` of user ``demo`` (sentences -> splitter -> counter -> top; splitter and
  counter controlled, T_OM = ``--period`` s, ``--policy`` as operator manager), its catalog ``spark-demo-nodes``
  (executor profiles ``exec.small`` 1 core / ``exec.large`` 2 cores) and region ``spark-demo`` (provider
  ``spark-standalone`` on that master, workers managed by this script);
- the web server on ``--port``, one Celery worker and Celery beat (the control loop);
- the two WordCount stages as Spark applications with the agent attached
  (``python -m connectors.spark.pipelines.run``), fed by the Taxi trace compressed ``--compress`` times (72: a
  day in 20 minutes) and scaled by ``--rate-scale``, with a per-record lookup wait that makes one executor too
  few at the daily peak.

Every decision is printed as it is written (operator, observed input rate and latency, deployment, action, AM
outcome). Ctrl-C, SIGTERM or ``--seconds`` stop every process it started (pipelines first, at a batch boundary,
then the cluster and the control plane); it exits 0 when decisions with complete metrics were recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import demo_common as common  # noqa: E402 - scripts/ is on sys.path when run as a script

from policies.registry import RECOMMENDED_OM, om_choice  # noqa: E402

APP = "demo-wordcount"
OWNER = "demo"

MANIFEST = """
apiVersion: autoscaler/v1
kind: NodeTypeCatalog
metadata: {{name: spark-demo-nodes}}
spec:
  description: executor profiles of the local Spark demo ($/h are illustrative)
  nodeTypes:
    - {{name: exec.small, cores: 1, memoryMiB: 512, speedup: 1.0, pricePerHour: 0.05}}
    - {{name: exec.large, cores: 2, memoryMiB: 1024, speedup: 2.0, pricePerHour: 0.10}}
---
apiVersion: autoscaler/v1
kind: Region
metadata: {{name: spark-demo}}
spec:
  catalog: spark-demo-nodes
  maxNodes: {workers}
  maxNewNodesPerPeriod: 1
  provisioningDelayS: 10
  provider:
    kind: spark-standalone
    settings: {{masterUrl: "{master}", masterWebUi: "{web}", managed: false}}
  endpoints: ["{master}", "http://127.0.0.1:4040-4099"]
---
apiVersion: autoscaler/v1
kind: Application
metadata: {{name: {app}}}
spec:
  engine: spark
  connector: {{master: "{master}", batchIntervalS: {interval}, checkpointDir: "{workdir}/checkpoints",
              applyTimeoutS: 90}}
  slo: {{rMaxMs: {rmax_ms}, etaV: 0.05, etaR: 0.10}}
  operators:
    - {{name: sentences, kind: source}}
    - {{name: splitter, kind: operator, maxParallelism: {kmax}, selectivity: 4.5}}
    - {{name: counter, kind: operator, maxParallelism: {kmax}}}
    - {{name: top, kind: sink}}
  streams: [[sentences, splitter], [splitter, counter], [counter, top]]
  policies: {{om: {policy_json}, am: naive}}
  periods: {{omS: {period}, amS: {am_period}}}
  regions: [spark-demo]
  state: running
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: {app}-splitter}}
spec: {{application: {app}, operator: splitter, region: spark-demo, replicas: {{exec.small: 1}}}}
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: {app}-counter}}
spec: {{application: {app}, operator: counter, region: spark-demo, replicas: {{exec.small: 1}}}}
"""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=0.0, help="stop after this many seconds (0 = Ctrl-C)")
    p.add_argument("--port", type=int, default=8000, help="web server port")
    p.add_argument(
        "--policy",
        default=RECOMMENDED_OM,
        help="OM policy (or named variant) of both controlled operators; default: the best measured",
    )
    p.add_argument("--period", type=float, default=20.0, help="T_OM (s)")
    p.add_argument("--interval", type=float, default=5.0, help="micro-batch trigger interval (s)")
    p.add_argument("--compress", type=float, default=72.0, help="trace minutes per wall minute")
    p.add_argument("--rate-scale", type=float, default=0.05, help="multiplier of the Taxi trace rates")
    p.add_argument("--trace-start", type=int, default=0, help="first trace minute")
    p.add_argument("--splitter-wait-ms", type=float, default=25.0, help="lookup wait per sentence (ms)")
    p.add_argument("--counter-wait-ms", type=float, default=5.0, help="lookup wait per word (ms)")
    p.add_argument(
        "--source",
        choices=("files", "python"),
        default="files",
        help="trace source: files (generator + file source, robust on a loaded machine) or python (data source)",
    )
    p.add_argument("--workers", type=int, default=2, help="Spark workers")
    p.add_argument("--worker-cores", type=int, default=6)
    p.add_argument("--worker-memory-mib", type=int, default=4096)
    p.add_argument("--kmax", type=int, default=4, help="K_max of each controlled operator (executors)")
    p.add_argument("--rmax-ms", type=int, default=30000, help="R_max of the end-to-end response time (ms)")
    args = p.parse_args()
    for name in ("period", "interval", "compress", "rate_scale"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')}: must be > 0")
    return args


def _setup(args: argparse.Namespace, cluster, workdir: Path) -> tuple[object, str]:
    """Create (afresh) the demo application and its resources; (application, its ingest token: what its agents
    write with, nothing else)."""
    from django.contrib.auth import get_user_model

    from autoscaler import manifests
    from autoscaler.ingest import tokens
    from autoscaler.models import Application

    user, _ = get_user_model().objects.get_or_create(username=OWNER)
    Application.objects.filter(owner=user, name=APP).delete()
    text = MANIFEST.format(
        app=APP,
        master=cluster.master_url,
        web=cluster.web_url,
        workers=args.workers,
        interval=args.interval,
        workdir=workdir,
        rmax_ms=args.rmax_ms,
        kmax=args.kmax,
        policy_json=json.dumps(om_choice(args.policy)),
        period=args.period,
        am_period=3 * args.period,
    )
    manifests.apply_documents(manifests.parse_documents(text), user)
    app = Application.objects.get(owner=user, name=APP)
    return app, tokens.issue(app, rotate=True)


def _stage_cmd(args, stage: str, master: str, workdir: Path, wait_ms: float) -> list[str]:
    """The command of one pipeline stage; its ingest token comes in ``STREAMSCALER_TOKEN`` (the environment is
    private to the user, a command line is not)."""
    return [
        sys.executable,
        "-m",
        "connectors.spark.pipelines.run",
        "--pipeline",
        "wordcount",
        "--stage",
        stage,
        "--master",
        master,
        "--workdir",
        str(workdir),
        "--application",
        APP,
        "--operator",
        stage,
        "--app-name",
        f"{APP}-{stage}",
        "--url",
        f"http://127.0.0.1:{args.port}",
        "--compress",
        str(args.compress),
        "--rate-scale",
        str(args.rate_scale),
        "--trace-start",
        str(args.trace_start),
        "--interval",
        str(args.interval),
        "--wait-ms",
        str(wait_ms),
        "--executors",
        "1",
        "--executor-cores",
        "1",
        "--executor-memory-mib",
        "512",
        "--profile-name",
        "exec.small",
        "--max-executors",
        str(args.kmax),
        "--source",
        args.source,
        "--retries",
        "10",
    ]


def main() -> int:
    args = parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoscaler.settings")
    common.sqlite_for_many_writers()
    py = sys.executable
    subprocess.run([py, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)

    import django

    django.setup()
    from django.conf import settings

    from connectors.spark.cluster import StandaloneCluster

    var = Path(settings.VAR_DIR)
    workdir = var / "spark-demo" / "wordcount"
    shutil.rmtree(workdir, ignore_errors=True)  # a fresh run: new checkpoints, new trace t0
    cluster = StandaloneCluster(var / "spark-demo")
    control: list[subprocess.Popen] = []
    stages: list[subprocess.Popen] = []
    stopping = {"flag": False}

    def _sigterm(signum, frame):  # noqa: ANN001
        stopping["flag"] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _sigterm)
    seen = complete = periods = 0
    started = time.time()
    try:
        cluster.start()
        for _ in range(args.workers):
            cluster.add_worker(args.worker_cores, args.worker_memory_mib)
        app, token = _setup(args, cluster, workdir)
        print(
            f"demo: Spark master {cluster.master_url} (UI {cluster.web_url}), {args.workers} workers; "
            f"application {APP} (id {app.pk}), T_OM = {args.period:g} s, OM {args.policy}",
            flush=True,
        )
        session = {"cwd": ROOT, "start_new_session": True}
        logs = var / "spark-demo" / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        control += common.start_control_plane(args.port, var, logs)
        common.wait_http(f"http://127.0.0.1:{args.port}/metrics", 180)
        # SPARK_LOCAL_IP: the drivers bind and report their UI on 127.0.0.1, the endpoint the demo region
        # declares (a UI reported under the machine's hostname would not be contacted)
        env = {**os.environ, "PYSPARK_PYTHON": py, "STREAMSCALER_TOKEN": token, "SPARK_LOCAL_IP": "127.0.0.1"}
        for stage, wait_ms in (("splitter", args.splitter_wait_ms), ("counter", args.counter_wait_ms)):
            log = open(logs / f"{stage}.log", "ab")  # noqa: SIM115 - closed with the process
            stages.append(
                subprocess.Popen(
                    _stage_cmd(args, stage, cluster.master_url, workdir, wait_ms),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    **session,
                )
            )
        print(
            f"demo: web http://127.0.0.1:{args.port}/ ; logs in {logs}; top words in "
            f"{workdir / 'top.json'}; Ctrl-C to stop",
            flush=True,
        )
        while not args.seconds or time.time() - started < args.seconds:
            seen, new_complete = common.print_decisions(app, seen)
            complete += new_complete
            periods = common.print_slo(app, periods)
            dead = [p for p in control + stages if p.poll() is not None]
            if dead:
                print(f"demo: a process exited ({dead[0].args[:4]}); stopping", file=sys.stderr, flush=True)
                break
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        print("demo: stopping the pipelines, the Spark cluster and the control plane", flush=True)
        common.terminate(stages, 60.0)
        cluster.stop()
        common.terminate(control, 15.0)
    print(f"demo: {complete} decisions with complete metrics", flush=True)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
