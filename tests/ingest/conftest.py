"""Fixtures of the ingest tests: a Spark application owned by alice, token clients."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler import manifests

SPARK_APP = """
apiVersion: autoscaler/v1
kind: NodeTypeCatalog
metadata: {name: ingest-cat}
spec:
  nodeTypes:
    - {name: small, cores: 1, memoryMiB: 512, speedup: 1.0, pricePerHour: 0.01}
    - {name: large, cores: 2, memoryMiB: 1024, speedup: 2.0, pricePerHour: 0.02}
---
apiVersion: autoscaler/v1
kind: Region
metadata: {name: ingest-region}
spec: {catalog: ingest-cat, maxNodes: 4, maxNewNodesPerPeriod: 2}
---
apiVersion: autoscaler/v1
kind: Application
metadata: {name: wc}
spec:
  engine: spark
  slo: {rMaxMs: 5000, etaV: 0.05, etaR: 0.1}
  operators:
    - {name: src, kind: source}
    - {name: counter, kind: operator, maxParallelism: 4}
    - {name: out, kind: sink}
  streams: [[src, counter], [counter, out]]
  regions: [ingest-region]
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {name: wc-counter}
spec: {application: wc, operator: counter, region: ingest-region, replicas: {small: 1}}
"""


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob")


@pytest.fixture
def spark_app(alice):
    manifests.apply_documents(manifests.parse_documents(SPARK_APP), alice)
    from autoscaler.models import Application

    return Application.objects.get(name="wc", owner=alice)
