"""The in-memory ingest of the Spark contract tests (``tests/connectors/spark/store_ingest.py``) answers and stores
as the control plane's ingest views: the same requests to both give the same answers, and the Spark connector
reads the same records from the ``InMemorySparkStore`` as from the database (``OrmSparkStore``)."""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.error
import urllib.request
from dataclasses import replace
from typing import Any

import pytest

from autoscaler.ingest import tokens
from autoscaler.ingest.spark_store import OrmSparkStore
from connectors.spark.agent import SparkAgent
from connectors.spark.store import InMemorySparkStore
from tests.connectors.spark.store_ingest import StoreIngest

pytestmark = pytest.mark.django_db(transaction=True)

SMALL = {"name": "small", "cores": 1, "memoryMiB": 512}


def call(base: str, method: str, path: str, body: Any, token: str, content_type: str = "application/json"):
    """(status, JSON answer) of one request to ``base``/api/v1/ingest/``path``."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}/api/v1/ingest/{path}", data=data, method=method)
    req.add_header("Authorization", f"Token {token}")
    req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def progress(batch: int, at: float, rows: int = 100, run: str = "run-1", **extra: Any) -> dict[str, Any]:
    return {
        "id": "q",
        "runId": run,
        "batchId": batch,
        "timestamp": dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="microseconds"),
        "numInputRows": rows,
        "inputRowsPerSecond": 101.5,
        "processedRowsPerSecond": 230.25,
        "batchDuration": 431,
        **extra,
    }


def test_the_same_requests_get_the_same_answers_and_the_same_records(live_server, spark_app):
    token = tokens.issue(spark_app)
    key = spark_app.operators.get(name="counter").pk
    orm, memory = OrmSparkStore(), InMemorySparkStore()
    t0 = time.time() - 60
    shipment = {
        "progress": [
            progress(0, t0, rows=2),
            progress(1, t0 + 1.25, observedMetrics={"e2e": {"mean_s": 0.5, "p95_s": 0.9, "n": 100}}),
            progress(
                2, t0 + 2.5, sources=[{"description": "kafka", "metrics": {"avgOffsetsBehindLatest": "40"}}]
            ),
            progress(3, t0 + 3.75, stateOperators=[{"numRowsTotal": 4, "numShufflePartitions": 2}]),
            progress(3, t0 + 3.75),  # a retried batch: stored once
        ],
        "latency": [{"timestamp": t0 + 1.123456789, "mean_s": 0.25, "p95_s": 0.5, "n": 7}],
        "dropped": 3,
        "driver": {"uiUrl": "http://127.0.0.1:4040", "appId": "app-1", "executors": 2, "profile": SMALL},
    }
    requests: list[tuple[str, str, Any, dict[str, str]]] = [
        ("POST", "wc/counter/progress", shipment, {}),
        ("POST", "wc/counter/progress", {"progress": [progress(4, t0 + 5)], "dropped": 3}, {}),  # no driver
        ("POST", "wc/counter/progress", {"progress": [progress(5, t0 + 6, batchId=2**63)]}, {}),
        (
            "POST",
            "wc/counter/progress",
            {"latency": [{"timestamp": t0, "mean_s": -1, "p95_s": 0, "n": 1}]},
            {},
        ),
        ("POST", "wc/counter/progress", {"progress": [], "surplus": 1}, {}),
        ("POST", "wc/counter/progress", b'{"progress": [], "dropped": NaN}', {}),
        ("POST", "wc/counter/progress", b"[1, 2", {}),
        ("POST", "wc/counter/progress", {"progress": []}, {"type": "text/plain"}),
        ("GET", "wc/counter/desired", None, {}),
        ("POST", "wc/counter/applied", {"generation": 1, "executors": 2}, {}),  # nothing desired yet
        ("GET", "wc/counter/progress", None, {}),
        ("GET", "wc/nope/desired", None, {}),
        ("GET", "other/counter/desired", None, {}),
        ("GET", "wc/counter/desired", None, {"token": "ssi_not-the-token"}),
    ]
    with StoreIngest(memory, "wc", {"counter": key}, token) as ingest:
        for method, path, body, extra in requests:
            answers = [
                call(
                    base, method, path, body, extra.get("token", token), extra.get("type", "application/json")
                )
                for base in (live_server.url, ingest.url)
            ]
            assert answers[0] == answers[1], (method, path, answers)
        assert orm.set_desired(key, 3, SMALL) == memory.set_desired(key, 3, SMALL) == 1
        ack = {
            "generation": 1,
            "executors": 3,
            "profile": SMALL,
            "downtimeS": 0,
            "durationS": 2.5,
            "error": "",
        }
        driver = {"uiUrl": "http://127.0.0.1:4041", "appId": "app-2", "executors": 3, "generation": 1}
        for method, path, body in (
            ("GET", "wc/counter/desired", None),
            ("POST", "wc/counter/applied", {**ack, "driver": driver}),
            ("POST", "wc/counter/applied", {**ack, "generation": 2}),  # not desired yet
        ):
            (s1, a1), (s2, a2) = (
                call(base, method, path, body, token) for base in (live_server.url, ingest.url)
            )
            assert s1 == s2 and a1.keys() == a2.keys(), (path, a1, a2)  # acks are numbered by each store
            assert "id" in a1 or a1 == a2

        # the connector reads the same records from both stores
        end = time.time() + 1
        assert memory.progress(key, t0 - 1, end) == orm.progress(key, t0 - 1, end)
        assert [r.batch_id for r in memory.progress(key, t0 - 1, end)] == [0, 1, 2, 3, 4]
        assert memory.progress(key, t0 - 1, end)[2].backlog == 40.0
        assert memory.last_progress_before(key, t0 + 2) == orm.last_progress_before(key, t0 + 2)
        assert memory.batch(key, "run-1", 3) == orm.batch(key, "run-1", 3)
        assert memory.has_batch_before(key, "run-1", 1) is orm.has_batch_before(key, "run-1", 1) is True
        assert memory.latencies(key, t0 - 1, end) == orm.latencies(key, t0 - 1, end) != []
        heard = memory.driver(key), orm.driver(key)
        assert heard[0] is not None and heard[1] is not None
        assert replace(heard[0], last_seen=0.0) == replace(heard[1], last_seen=0.0)
        assert heard[0].app_id == "app-2" and abs(heard[0].last_seen - heard[1].last_seen) < 60
        assert memory.desired(key) == orm.desired(key)
        assert memory.acknowledgement(key, 1) == orm.acknowledgement(key, 1)


def test_a_driver_first_heard_of_without_its_block_has_the_defaults(live_server, spark_app):
    token = tokens.issue(spark_app)
    key = spark_app.operators.get(name="counter").pk
    memory = InMemorySparkStore()
    with StoreIngest(memory, "wc", {"counter": key}, token) as ingest:
        for base in (live_server.url, ingest.url):
            assert call(base, "POST", "wc/counter/progress", {"progress": []}, token) == (201, {"stored": 0})
        got, want = memory.driver(key), OrmSparkStore().driver(key)
        assert got is not None and want is not None
        assert replace(got, last_seen=0.0) == replace(want, last_seen=0.0)


def test_an_agent_ships_to_it_as_to_the_control_plane(spark_app):
    """The agent's refused-item handling works against it: an item out of bounds is dropped by its path."""
    token = tokens.issue(spark_app)
    memory = InMemorySparkStore()
    with StoreIngest(memory, "wc", {"counter": "counter"}, token) as ingest:
        agent = SparkAgent("wc", "counter", ingest.url, token, batch_size=20)
        now = time.time()
        for i in range(3):
            agent.on_progress(json.dumps(progress(i, now + i)))
        agent.on_progress(json.dumps(progress(3, now + 3, batchId=2**63)))
        agent.report_latency(0.5, 1.0, 3)
        assert agent.flush(30)
        assert [r.batch_id for r in memory.progress("counter", now - 1, now + 10)] == [0, 1, 2]
        assert agent.stats.rejected == 1 and len(memory.latencies("counter", now - 1, time.time() + 1)) == 1
        assert agent.fetch_desired() == (0, None, None)
        memory.set_desired("counter", 2, SMALL)
        assert agent.fetch_desired()[:2] == (1, 2)
