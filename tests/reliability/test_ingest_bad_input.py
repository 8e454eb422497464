"""The ingest bad-input table of issue 19 against a live HTTP server on 127.0.0.1, authenticated as the engine
agents are (the application's ingest token): each case is a 4xx in the API's JSON error format naming the field,
and nothing is stored. Run it against PostgreSQL too (``DATABASE_URL``): SQLite hides some of these."""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request

import pytest

from autoscaler import manifests
from autoscaler.ingest import store, tokens
from autoscaler.ingest.models import AppliedAck, DriverStatus, LatencySample, ProgressSample
from autoscaler.schemas.errors import join_loc

pytestmark = pytest.mark.django_db(transaction=True)

APP = """
apiVersion: autoscaler/v1
kind: NodeTypeCatalog
metadata: {name: bad-input-cat}
spec:
  nodeTypes: [{name: small, cores: 1, memoryMiB: 512, speedup: 1.0, pricePerHour: 0.01}]
---
apiVersion: autoscaler/v1
kind: Region
metadata: {name: bad-input-region}
spec: {catalog: bad-input-cat, maxNodes: 4, maxNewNodesPerPeriod: 2}
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
  regions: [bad-input-region]
"""
NOW = dt.datetime.now(dt.UTC)


def progress(**fields) -> dict:
    base = {"runId": "run-1", "batchId": 7, "timestamp": NOW.isoformat(), "numInputRows": 10,
            "inputRowsPerSecond": 5.0, "processedRowsPerSecond": 6.0, "batchDuration": 300}  # fmt: skip
    return {**base, **fields}


def body(*items: dict, **rest) -> str:
    return json.dumps({"progress": list(items), **rest})


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# (case, endpoint, raw JSON text, status, loc the error must name (or a path under it))
CASES = [
    ("rate 'Infinity'", "progress", body(progress(inputRowsPerSecond="Infinity")), 400,
     "progress[0].inputRowsPerSecond"),
    ("rate 1e999", "progress", body(progress()).replace("6.0", "1e999"), 400, "progress[0].processedRowsPerSecond"),
    ("rate Infinity literal", "progress", body(progress()).replace("6.0", "Infinity"), 400, "body"),
    ("rate NaN literal", "progress", body(progress()).replace("6.0", "NaN"), 400, "body"),
    ("batchId 2^63", "progress", body(progress(batchId=2**63)), 400, "progress[0].batchId"),
    ("numInputRows 2^63", "progress", body(progress(numInputRows=2**63)), 400, "progress[0].numInputRows"),
    ("numInputRows 10^30", "progress", body(progress(numInputRows=10**30)), 400, "progress[0].numInputRows"),
    ("runId 200 chars", "progress", body(progress(runId="r" * 200)), 400, "progress[0].runId"),
    ("uiUrl 1000 chars", "progress", body(driver={"uiUrl": "http://127.0.0.1:4040/" + "u" * 978}), 400,
     "driver.uiUrl"),
    ("timestamp 1e20", "progress", body(progress(timestamp=1e20)), 400, "progress[0].timestamp"),
    ("timestamp 9999-12-31T23:59:59-12:00", "progress", body(progress(timestamp="9999-12-31T23:59:59-12:00")),
     400, "progress[0].timestamp"),
    ("nesting 5000 in an item", "progress",
     body(progress()).replace('"runId"', f'"extra": {deep(5000)}, "runId"'), 400, "body"),
    ("nesting 5000 in the profile", "progress", f'{{"driver": {{"profile": {{"x": {deep(5000)}}}}}}}', 400,
     "body"),
    ("nesting 5000 as the body", "progress", deep(5000), 400, "body"),
    ("nesting 40 in the profile", "progress", f'{{"driver": {{"profile": {{"x": {deep(40)}}}}}}}', 400,
     "driver.profile.x"),
    ("5 MB body", "progress", body(progress(pad="x" * (5 << 20))), 413, "body"),
    ("latency mean_s 'Infinity'", "progress",
     body(latency=[{"timestamp": NOW.timestamp(), "mean_s": "Infinity", "p95_s": 1.0, "n": 3}]), 400,
     "latency[0].mean_s"),
    ("latency timestamp 1e20", "progress",
     body(latency=[{"timestamp": 1e20, "mean_s": 1.0, "p95_s": 1.0, "n": 3}]), 400, "latency[0].timestamp"),
    ("ack downtimeS 'Infinity'", "applied",
     json.dumps({"generation": 1, "executors": 2, "downtimeS": "Infinity"}), 400, "downtimeS"),
    ("ack executors 2^63", "applied", json.dumps({"generation": 1, "executors": 2**63}), 400, "executors"),
    ("ack 5 MB error", "applied", json.dumps({"generation": 1, "executors": 2, "error": "e" * (5 << 20)}), 413,
     "body"),
]  # fmt: skip


@pytest.fixture
def agent_post(live_server, alice):
    """``post(endpoint, raw) -> (status, JSON answer)`` to alice's ``wc``/``counter`` with its ingest token."""
    manifests.apply_documents(manifests.parse_documents(APP), alice)
    app = alice.applications.get(name="wc")
    store.set_desired(app.operators.get(name="counter"), 2, {"name": "small", "cores": 1, "memoryMiB": 512})
    secret = tokens.issue(app)

    def post(endpoint: str, raw: str) -> tuple[int, dict]:
        req = urllib.request.Request(
            f"{live_server.url}/api/v1/ingest/wc/counter/{endpoint}",
            data=raw.encode(),
            method="POST",
            headers={"Authorization": f"Token {secret}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            assert err.headers.get_content_type() == "application/json", err.read()[:300]
            return err.code, json.loads(err.read())

    return post


def nothing_stored() -> bool:
    return not any(m.objects.exists() for m in (ProgressSample, LatencySample, DriverStatus, AppliedAck))


@pytest.mark.parametrize(("case", "endpoint", "raw", "status", "loc"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_4xx_naming_the_field_and_stores_nothing(agent_post, case, endpoint, raw, status, loc):
    code, answer = agent_post(endpoint, raw)
    assert code == status, (case, code, answer)
    errors = answer["errors"]
    assert errors and all(set(e) == {"loc", "msg"} and e["msg"] for e in errors), answer
    found = [e["loc"] if isinstance(e["loc"], str) else join_loc(*e["loc"]) for e in errors]
    assert any(x == loc or x.startswith((loc + ".", loc + "[")) for x in found), (loc, found)
    assert nothing_stored()


def test_the_same_endpoint_stores_a_good_shipment(agent_post):
    """The table is not rejecting everything: the same request shape with sane values is stored."""
    driver = {"uiUrl": "http://127.0.0.1:4040", "executors": 2}
    code, answer = agent_post("progress", body(progress(), driver=driver))
    assert (code, answer) == (201, {"stored": 1})
    assert ProgressSample.objects.get().batch_id == 7
    code, _ = agent_post("applied", json.dumps({"generation": 1, "executors": 2, "downtimeS": 0.5}))
    assert code == 201 and AppliedAck.objects.get().downtime_s == 0.5
