"""Typed-worker placement on a real standalone cluster: two workers of two node types of the same size.

The region's provider starts one worker per node type (each advertises ``nodetype_<T>``); the operator deployed
on ``fast`` runs its executor on the ``fast`` worker only, and a change to ``std`` (same cores and memory, so
only the placement differs) restarts it onto the ``std`` worker.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from rest_framework.authtoken.models import Token

from autoscaler import manifests
from autoscaler.control.connectors import build_connector
from autoscaler.ingest import store
from connectors.base import ScalingPlan
from connectors.infrastructure import NodeSpec
from connectors.providers import build_provider
from connectors.spark.cluster import StandaloneCluster
from connectors.spark.monitor import rest_executors

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.urls("ingest_only_urls")]

MANIFEST = """
apiVersion: autoscaler/v1
kind: NodeTypeCatalog
metadata: {{name: samesize}}
spec:
  nodeTypes:
    - {{name: std, cores: 1, memoryMiB: 512, speedup: 1.0, pricePerHour: 0.01}}
    - {{name: fast, cores: 1, memoryMiB: 512, speedup: 1.5, pricePerHour: 0.02}}
---
apiVersion: autoscaler/v1
kind: Region
metadata: {{name: typed}}
spec:
  catalog: samesize
  maxNodes: 2
  maxNewNodesPerPeriod: 2
  provider:
    kind: spark-standalone
    settings: {{masterUrl: "{master}", masterWebUi: "{web}", stateDir: "{state}"}}
  endpoints: ["{master}", "http://127.0.0.1:1024-65535"]  # the drivers' UIs take free ports
---
apiVersion: autoscaler/v1
kind: Application
metadata: {{name: placed}}
spec:
  engine: spark
  connector: {{master: "{master}", batchIntervalS: 1.0, applyTimeoutS: 150}}
  slo: {{rMaxMs: 30000, etaV: 0.05, etaR: 0.1}}
  operators:
    - {{name: src, kind: source}}
    - {{name: counter, kind: operator, maxParallelism: 2}}
    - {{name: out, kind: sink}}
  streams: [[src, counter], [counter, out]]
  policies: {{om: threshold}}
  regions: [typed]
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: placed-counter}}
spec: {{application: placed, operator: counter, region: typed, replicas: {{fast: 1}}}}
"""


def worker_executors(web_port: int) -> list[dict]:
    """Executors a worker runs (its own ``/json/``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=10) as resp:
        return json.loads(resp.read()).get("executors", [])


def build_query(checkpoint: str):
    def build(spark):
        from pyspark.sql import functions as F

        return (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 5)
            .load()
            .groupBy((F.col("value") % 3).alias("k"))
            .count()
            .writeStream.outputMode("complete")
            .format("memory")
            .queryName("rows")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second")
            .start()
        )

    return build


def test_executors_run_only_on_workers_of_their_node_type_and_move_with_it(
    live_server, django_user_model, tmp_path
):
    from autoscaler.models import Application
    from connectors.spark.agent import run

    owner = django_user_model.objects.create_user("bob")
    with StandaloneCluster(tmp_path / "cluster") as cluster:
        manifests.apply_documents(
            manifests.parse_documents(
                MANIFEST.format(master=cluster.master_url, web=cluster.web_url, state=tmp_path / "workers")
            ),
            owner,
        )
        app = Application.objects.get(name="placed", owner=owner)
        region = app.operators.get(name="counter").deployment.region
        provider = build_provider(region.name, region.provider)
        agent = None
        try:
            ports = {}
            for t in ("std", "fast"):
                (node,) = provider.acquire(NodeSpec(t, 1, 512), 1)
                ports[t] = int(node.node_id.rsplit("-", 1)[1])
            connector = build_connector(app)
            fast = connector.realizer.profiles["counter"]["fast"]
            assert fast["resource"] == "nodetype_fast"
            op = app.operators.get(name="counter")
            store.set_desired(op, 1, {k: v for k, v in fast.items() if k != "speedup"})
            agent = run(
                build_query(str(tmp_path / "ck")),
                {
                    "spark.sql.shuffle.partitions": "2",
                    "spark.ui.port": "0",
                    "spark.driver.host": "127.0.0.1",
                    "spark.ui.showConsoleProgress": "false",
                },
                master=cluster.master_url,
                application="placed",
                operator="counter",
                url=live_server.url,
                token=Token.objects.get_or_create(user=owner)[0].key,
                block=False,
                apply_timeout_s=120.0,
                poll_interval_s=0.5,
            )

            def placed_on() -> dict[str, list]:
                ui = agent.driver_info()["uiUrl"]
                deadline = time.monotonic() + 180
                while time.monotonic() < deadline:
                    try:  # the driver's UI answers slowly while it starts on a loaded machine
                        execs = rest_executors(ui, timeout_s=10) if ui else []
                        if execs:
                            return {t: worker_executors(p) for t, p in ports.items()}, execs
                    except OSError:
                        pass
                    time.sleep(0.5)
                    ui = agent.driver_info()["uiUrl"]
                raise AssertionError("no executor within 180 s")

            on, execs = placed_on()
            assert [list(e.get("resources", {})) for e in execs] == [["nodetype_fast"]]
            assert on["std"] == [] and len(on["fast"]) == 1

            result = connector.realizer.apply(ScalingPlan({"counter": {"std": 1}}, slot=1))
            assert result.ok, result.error
            assert result.deployments == {"counter": {"std": 1}} and result.downtime_s > 0
            on, execs = placed_on()
            assert [list(e.get("resources", {})) for e in execs] == [["nodetype_std"]]
            assert len(on["std"]) == 1 and on["fast"] == []
            print(f"\nnode-type change by restart: downtime {result.downtime_s:.1f} s")
        finally:
            if agent is not None:
                agent.stop()
            provider.stop_all()
