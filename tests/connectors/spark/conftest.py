"""Fixtures of the Spark connector tests: a Spark application owned by a user, a standalone cluster."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token

from autoscaler import manifests

APP = """
apiVersion: autoscaler/v1
kind: NodeTypeCatalog
metadata: {{name: sparkcat}}
spec:
  nodeTypes:
    - {{name: small, cores: 1, memoryMiB: 512, speedup: 1.0, pricePerHour: 0.01}}
    - {{name: large, cores: 2, memoryMiB: 1024, speedup: 2.0, pricePerHour: 0.02}}
---
apiVersion: autoscaler/v1
kind: Region
metadata: {{name: spark-region}}
spec:
  catalog: sparkcat
  maxNodes: 4
  maxNewNodesPerPeriod: 2
  # the test cluster's master and the drivers' UIs take free ports on 127.0.0.1
  endpoints: ["spark://127.0.0.1:1024-65535", "http://127.0.0.1:1024-65535"]
---
apiVersion: autoscaler/v1
kind: Application
metadata: {{name: wc}}
spec:
  engine: spark
  connector: {connector}
  slo: {{rMaxMs: 30000, etaV: 0.05, etaR: 0.1}}
  operators:
    - {{name: src, kind: source}}
    - {{name: counter, kind: operator, maxParallelism: 8}}
    - {{name: out, kind: sink}}
  streams: [[src, counter], [counter, out]]
  policies: {{om: threshold}}
  periods: {{omS: 4, amS: 60}}
  regions: [spark-region]
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {{name: wc-counter}}
spec: {{application: wc, operator: counter, region: spark-region, replicas: {{small: 1}}}}
"""


def _make_app(owner, connector: str = "{batchIntervalS: 1.0}"):
    """The ``wc`` application (src -> counter -> out, counter controlled) of ``owner`` and their API token."""
    from autoscaler.models import Application

    manifests.apply_documents(manifests.parse_documents(APP.format(connector=connector)), owner)
    token = Token.objects.get_or_create(user=owner)[0].key
    return Application.objects.get(name="wc", owner=owner), token


@pytest.fixture
def make_app():
    """``make_app(owner, connector_yaml) -> (Application, token)``."""
    return _make_app


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master with two workers of 2 cores and 2048 MiB each (executors: small 1 core, large 2)."""
    from connectors.spark.cluster import StandaloneCluster

    c = StandaloneCluster(tmp_path_factory.mktemp("spark"))
    c.start()
    try:
        c.add_worker(2, 2048)
        c.add_worker(2, 2048)
        yield c
    finally:
        c.stop()
