"""The live Flink demo: the PyFlink WordCount on a local Flink cluster under closed-loop RL control.

    .venv/bin/python scripts/demo_flink.py [--seconds 0] [--port 8000] [--policy model-based-trend] [--period 20]

Uses the embedded defaults unless the environment says otherwise (SQLite under var/, kombu's filesystem broker).
It migrates, then starts and watches:

- a Flink JobManager and one TaskManager of ``--slots`` slots on 127.0.0.1, started from the apache-flink pip
  package (``connectors.flink.jobs.start_local_cluster``; free ports; under ``<var>/flink-demo/cluster``);
- the WordCount PyFlink job ``demo-flink-wordcount`` (sentences -> splitter -> counter -> top) fed by the Taxi
  trace from minute ``--trace-start`` compressed ``--compress`` times (72: a day in 20 minutes), rates x
  ``--rate-scale``, with a per-record lookup wait of ``--cost-ms`` ms in splitter and counter
  (``submit_wordcount``);
- the application ``demo-flink-wordcount`` of user ``demo`` (splitter and counter controlled, T_OM = ``--period``
  s, ``--policy`` as operator manager), its catalog ``flink-demo-nodes`` (TaskManager profile ``tm.4slot``) and
  region ``flink-demo`` (provider ``flink-taskmanagers`` on that cluster, so the RM/IM start and stop
  TaskManagers there);
- the web server on ``--port``, one Celery worker and Celery beat (the control loop).

Every decision is printed as it is written. Ctrl-C, SIGTERM or ``--seconds`` (counted once the control plane is up:
starting the cluster and the job takes 1-2 minutes on a loaded machine) stop every process it started (the
control plane, then the job and the Flink processes, TaskManagers the RM added included); it exits 0 when decisions
with complete metrics were recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import demo_common as common  # noqa: E402 - scripts/ is on sys.path when run as a script

from policies.registry import RECOMMENDED_OM, om_choice  # noqa: E402

APP = "demo-flink-wordcount"
OWNER = "demo"
NODE_TYPE = "tm.4slot"

MANIFEST = """
apiVersion: autoscaler/v1
kind: NodeTypeCatalog
metadata: {{name: flink-demo-nodes}}
spec:
  description: TaskManager profiles of the local Flink demo ($/h are illustrative)
  nodeTypes:
    - {{name: {node_type}, cores: {slots}, memoryMiB: 1536, speedup: 1.0, pricePerHour: 0.10}}
---
apiVersion: autoscaler/v1
kind: Region
metadata: {{name: flink-demo}}
spec:
  catalog: flink-demo-nodes
  maxNodes: 2
  maxNewNodesPerPeriod: 1
  provisioningDelayS: 10
  provider: {{kind: flink-taskmanagers, settings: {{clusterDir: "{cluster_dir}", memoryScale: 1.0}}}}
  endpoints: ["{rest_url}"]
---
apiVersion: autoscaler/v1
kind: Application
metadata: {{name: {app}}}
spec:
  engine: flink
  connector: {{restUrl: "{rest_url}", jobName: {app}, applyTimeoutS: 60}}
  slo: {{rMaxMs: {rmax_ms}, etaV: 0.05, etaR: 0.10}}
  operators:
    - {{name: sentences, kind: source}}
    - {{name: splitter, kind: operator, maxParallelism: {kmax}, selectivity: 4.5}}
    - {{name: counter, kind: operator, maxParallelism: {kmax}}}
    - {{name: top, kind: sink}}
  streams: [[sentences, splitter], [splitter, counter], [counter, top]]
  policies: {{om: {policy_json}, am: naive}}
  periods: {{omS: {period}, amS: {am_period}}}
  regions: [flink-demo]
  state: running
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: {app}-splitter}}
spec: {{application: {app}, operator: splitter, region: flink-demo, replicas: {{{node_type}: 1}}}}
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: {app}-counter}}
spec: {{application: {app}, operator: counter, region: flink-demo, replicas: {{{node_type}: 1}}}}
"""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--seconds",
        type=float,
        default=0.0,
        help="stop after the control loop ran this many seconds (0 = Ctrl-C)",
    )
    p.add_argument("--port", type=int, default=8000, help="web server port")
    p.add_argument(
        "--policy",
        default=RECOMMENDED_OM,
        help="OM policy (or named variant) of both controlled operators; default: the best measured",
    )
    p.add_argument("--period", type=float, default=20.0, help="T_OM (s)")
    p.add_argument("--compress", type=float, default=72.0, help="trace minutes per wall minute")
    p.add_argument("--rate-scale", type=float, default=0.1, help="multiplier of the Taxi trace rates")
    p.add_argument("--trace-start", type=int, default=360, help="first trace minute")
    p.add_argument(
        "--trace-minutes", type=int, default=1440, help="trace minutes replayed (the job's length)"
    )
    p.add_argument(
        "--cost-ms", type=float, default=5.0, help="lookup wait per record in splitter and counter (ms)"
    )
    p.add_argument("--slots", type=int, default=4, help="task slots of a TaskManager (node type tm.4slot)")
    p.add_argument("--kmax", type=int, default=4, help="K_max of each controlled operator (parallelism)")
    p.add_argument("--rmax-ms", type=int, default=5000, help="R_max of the end-to-end response time (ms)")
    args = p.parse_args()
    for name in ("period", "compress", "rate_scale"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')}: must be > 0")
    for name in ("slots", "kmax", "trace_minutes"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be >= 1")
    return args


def _setup(args: argparse.Namespace, cluster) -> object:
    """Create (afresh) the demo application and its resources; returns the application."""
    from django.contrib.auth import get_user_model

    from autoscaler import manifests
    from autoscaler.models import Application

    user, _ = get_user_model().objects.get_or_create(username=OWNER)
    Application.objects.filter(owner=user, name=APP).delete()
    text = MANIFEST.format(
        app=APP,
        node_type=NODE_TYPE,
        slots=args.slots,
        cluster_dir=cluster.root,
        rest_url=cluster.rest_url,
        rmax_ms=args.rmax_ms,
        kmax=args.kmax,
        policy_json=json.dumps(om_choice(args.policy)),
        period=args.period,
        am_period=3 * args.period,
    )
    for result in manifests.apply_documents(manifests.parse_documents(text), user):
        print(f"demo: {result}", flush=True)
    return Application.objects.get(owner=user, name=APP)


def main() -> int:
    args = parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoscaler.settings")
    common.sqlite_for_many_writers()
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)

    import django

    django.setup()
    from django.conf import settings

    from connectors.flink.cluster import FlinkCluster, FlinkClusterError, TaskManagerProfile
    from connectors.flink.jobs import start_local_cluster, submit_wordcount
    from policies.paths import taxi_trace

    base = Path(settings.VAR_DIR) / "flink-demo"
    root = base / "cluster"
    if root.exists():  # a previous run killed without cleanup: stop what it left, then start afresh
        try:
            FlinkCluster(root).stop()
        except FlinkClusterError:
            pass
        shutil.rmtree(root, ignore_errors=True)
    logs = base / "logs"
    cluster = None
    control: list[subprocess.Popen] = []
    common.stop_on_sigterm()
    complete = 0
    try:
        profile = TaskManagerProfile(
            slots=args.slots, memory_mb=1536, cpu_cores=args.slots, node_type=NODE_TYPE
        )
        cluster = FlinkCluster(root)  # assigned before start: a failed start is stopped in `finally`
        cluster = start_local_cluster(root, {f"flink-demo-{NODE_TYPE}-1": profile})
        step_s = 60.0 / args.compress
        job_id = submit_wordcount(
            cluster, taxi_trace(), trace_start=args.trace_start, steps=args.trace_minutes, step_s=step_s,
            rate_scale=args.rate_scale, cost_ms=args.cost_ms, parallelism=1, job_name=APP,
        )  # fmt: skip
        app = _setup(args, cluster)
        print(
            f"demo: Flink JobManager {cluster.rest_url} (web UI), job {APP} ({job_id}), one TaskManager of "
            f"{args.slots} slots; application {APP} (id {app.pk}), T_OM = {args.period:g} s, OM {args.policy}",
            flush=True,
        )
        control = common.start_control_plane(args.port, Path(settings.VAR_DIR), logs)
        common.wait_http(f"http://127.0.0.1:{args.port}/metrics", 180)
        print(f"demo: web http://127.0.0.1:{args.port}/ ; logs in {logs}; Ctrl-C to stop", flush=True)
        complete = common.watch(app, control, args.seconds, time.time())
    except KeyboardInterrupt:
        pass
    finally:
        print("demo: stopping the control plane, the Flink job and the Flink cluster", flush=True)
        common.terminate(control, 15.0)
        if cluster is not None:
            try:
                cluster.cancel_all()
            except Exception as exc:  # noqa: BLE001 - stopping goes on regardless
                print(f"demo: cancelling the job: {exc}", file=sys.stderr, flush=True)
            cluster.stop()
    print(f"demo: {complete} decisions with complete metrics", flush=True)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
