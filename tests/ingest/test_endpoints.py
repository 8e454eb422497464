"""The ingest endpoints: authenticated, batched, validated all-or-nothing, desired state and acks."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from autoscaler.ingest import store
from autoscaler.ingest.models import AppliedAck, DriverStatus, LatencySample, ProgressRollup, ProgressSample

from .conftest import token_client

pytestmark = pytest.mark.django_db
URL = "/api/v1/ingest/wc/counter"


def progress(batch: int, ts: str = "2026-11-26T08:32:06.001Z", rows: int = 50, **extra) -> dict:
    """A StreamingQueryProgress as Spark 4 serialises it (shortened)."""
    return {
        "id": "cef16d9e-36f4-47ed-b9ef-fbd0a5b23f4e",
        "runId": "d71c9e7b-9c69-4620-9b0b-71dfc2c2f5de",
        "name": None,
        "timestamp": ts,
        "batchId": batch,
        "batchDuration": 340,
        "numInputRows": rows,
        "inputRowsPerSecond": 50.0,
        "processedRowsPerSecond": 147.1,
        "durationMs": {"addBatch": 213, "triggerExecution": 340},
        "stateOperators": [],
        "sources": [{"description": "RateStreamV2", "startOffset": 6, "endOffset": 7, "numInputRows": rows}],
        "sink": {"description": "NoopTable", "numOutputRows": rows},
        "observedMetrics": {"e2e": {"mean_s": 0.945, "p95_s": 1.395, "n": rows}},
        **extra,
    }


def test_a_batch_is_stored_with_the_numbers_the_monitor_needs(spark_app, alice):
    api = token_client(alice)
    recent = dt.datetime.now(dt.UTC).replace(microsecond=1000)  # newer than the raw-JSON retention
    body = {
        "progress": [progress(1, recent.isoformat()), progress(2, recent.isoformat())],
        "latency": [{"timestamp": recent.timestamp(), "mean_s": 0.5, "p95_s": 0.9, "n": 10}],
        "dropped": 3,
        "driver": {
            "uiUrl": "http://127.0.0.1:4041",
            "appId": "app-1",
            "executors": 2,
            "profile": {"name": "small", "cores": 1, "memoryMiB": 512},
        },
    }
    r = api.post(f"{URL}/progress", body, format="json")
    assert r.status_code == 201, r.json()
    assert r.json() == {"stored": 2}
    rows = list(ProgressSample.objects.order_by("batch_id"))
    assert [s.batch_id for s in rows] == [1, 2]
    s = rows[0]
    assert (s.num_input_rows, s.input_rate, s.processed_rate, s.batch_duration_ms) == (50, 50.0, 147.1, 340)
    assert (s.e2e_mean_s, s.e2e_p95_s, s.e2e_n) == (0.945, 1.395, 50)
    assert s.timestamp == recent
    assert s.raw["sink"]["numOutputRows"] == 50
    assert LatencySample.objects.get().n == 10
    d = DriverStatus.objects.get()
    assert (d.ui_url, d.app_id, d.executors, d.dropped) == ("http://127.0.0.1:4041", "app-1", 2, 3)


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda b: b["progress"][1].pop("batchId"), "progress[1].batchId"),
        (lambda b: b["progress"][0].update(numInputRows=-1), "progress[0].numInputRows"),
        (lambda b: b["progress"][1].update(timestamp="yesterday"), "progress[1].timestamp"),
        (
            lambda b: b["progress"][0]["observedMetrics"]["e2e"].update(mean_s="slow"),
            "progress[0].observedMetrics.e2e.mean_s",
        ),
        (
            lambda b: b.update(latency=[{"timestamp": 1.0, "mean_s": -1, "p95_s": 0, "n": 1}]),
            "latency[0].mean_s",
        ),
        (lambda b: b.update(surprise=1), "surprise"),
    ],
)
def test_a_malformed_batch_is_rejected_with_the_field_and_nothing_is_stored(spark_app, alice, mutate, loc):
    body = {"progress": [progress(1), progress(2)], "driver": {"executors": 1}}
    mutate(body)
    r = token_client(alice).post(f"{URL}/progress", body, format="json")
    assert r.status_code == 400
    assert loc in [e["loc"] for e in r.json()["errors"]], r.json()
    assert ProgressSample.objects.count() == 0 and LatencySample.objects.count() == 0
    assert DriverStatus.objects.count() == 0


def test_a_body_that_is_not_an_object_is_rejected(spark_app, alice):
    r = token_client(alice).post(f"{URL}/progress", [progress(1)], format="json")
    assert r.status_code == 400 and r.json()["errors"][0]["msg"] == "the body must be a JSON object"
    assert ProgressSample.objects.count() == 0


def test_unknown_or_foreign_application_and_unknown_operator_are_404_and_store_nothing(spark_app, alice, bob):
    body = {"progress": [progress(1)]}
    r = token_client(alice).post("/api/v1/ingest/nope/counter/progress", body, format="json")
    assert r.status_code == 404 and "nope" in r.json()["errors"][0]["msg"]
    r = token_client(alice).post("/api/v1/ingest/wc/nope/progress", body, format="json")
    assert r.status_code == 404 and "no operator named 'nope'" in r.json()["errors"][0]["msg"]
    assert token_client(bob).post(f"{URL}/progress", body, format="json").status_code == 404
    assert token_client(bob).get(f"{URL}/desired").status_code == 404
    from rest_framework.test import APIClient

    assert APIClient().post(f"{URL}/progress", body, format="json").status_code == 401
    assert ProgressSample.objects.count() == 0


def test_desired_state_generations_and_acks(spark_app, alice):
    api = token_client(alice)
    assert api.get(f"{URL}/desired").json() == {"generation": 0, "executors": None, "profile": None}
    op = spark_app.operators.get(name="counter")
    profile = {"name": "small", "cores": 1, "memoryMiB": 512}
    assert store.set_desired(op, 2, profile) == 1
    assert store.set_desired(op, 3, profile) == 2
    assert api.get(f"{URL}/desired").json() == {"generation": 2, "executors": 3, "profile": profile}
    r = api.post(f"{URL}/applied", {"generation": 3, "executors": 3}, format="json")
    assert r.status_code == 400 and r.json()["errors"][0]["loc"] == "generation"
    r = api.post(f"{URL}/applied", {"generation": 2, "executors": "many"}, format="json")
    assert r.status_code == 400 and r.json()["errors"][0]["loc"] == "executors"
    assert AppliedAck.objects.count() == 0
    r = api.post(
        f"{URL}/applied", {"generation": 2, "executors": 3, "downtimeS": 0, "durationS": 6.5}, format="json"
    )
    assert r.status_code == 201
    ack = store.ack_of(op, 2)
    assert ack.executors == 3 and ack.duration_s == 6.5 and ack.error == ""


def test_old_samples_are_rolled_up_hourly_and_raw_json_expires(spark_app, alice, monkeypatch):
    api = token_client(alice)
    # the ingest prunes by itself at most every PRUNE_EVERY_S per process, at the wall clock's time: as if it had
    # just done so, else the post below prunes these old samples first (whether it did depended on what the
    # worker process ran before: a CI run failed on it)
    monkeypatch.setattr(store, "_last_prune", time.time())
    body = {
        "progress": [progress(i, f"2026-01-01T10:{i:02d}:00Z", rows=10) for i in range(5)]
        + [progress(9, "2026-11-26T08:00:00Z")]
    }
    assert api.post(f"{URL}/progress", body, format="json").status_code == 201
    now = dt.datetime(2026, 11, 26, 8, 30, tzinfo=dt.UTC).timestamp()
    out = store.prune(now)
    assert out == {"raw_cleared": 5, "rolled_up": 5}
    assert list(ProgressSample.objects.values_list("batch_id", flat=True)) == [9]
    assert ProgressSample.objects.get().raw is not None  # younger than the raw retention (1 h)
    roll = ProgressRollup.objects.get()
    assert (roll.batches, roll.input_rows, roll.busy_ms, roll.e2e_n) == (5, 50, 1700, 50)
    assert roll.e2e_sum_s == pytest.approx(0.945 * 50)
    assert store.prune(now + 7200)["raw_cleared"] == 1


def test_a_retried_shipment_is_stored_once(spark_app, alice):
    api = token_client(alice)
    body = {"progress": [progress(1), progress(2, "2026-11-26T08:32:07.001Z")]}
    assert api.post(f"{URL}/progress", body, format="json").status_code == 201
    body["progress"].append(progress(3, "2026-11-26T08:32:08.001Z"))
    assert api.post(f"{URL}/progress", body, format="json").status_code == 201
    assert list(ProgressSample.objects.order_by("batch_id").values_list("batch_id", flat=True)) == [1, 2, 3]
