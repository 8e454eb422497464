"""Ingest bounds: every accepted edge value round-trips through the ORM; values just past an edge, non-finite
numbers, unstorable strings, deep nesting, other media types and oversized bodies are rejected with the field
named and nothing stored. (The issue's bad-input table, against a live server: ``tests/reliability``.)"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from autoscaler.ingest import store
from autoscaler.ingest.models import AppliedAck, DriverStatus, LatencySample, ProgressSample
from autoscaler.ingest.serializers import INT32_MAX, INT64_MAX, MAX_DURATION_MS, MAX_RATE, MAX_SECONDS
from autoscaler.schemas.errors import join_loc

from .conftest import token_client

pytestmark = pytest.mark.django_db
URL = "/api/v1/ingest/wc/counter"
NOW = dt.datetime.now(dt.UTC)


def locs(response) -> list[str]:
    """The ``loc`` of every error, as dotted paths (a list-valued ``loc`` is joined the same way)."""
    return [e["loc"] if isinstance(e["loc"], str) else join_loc(*e["loc"]) for e in response.json()["errors"]]


def nothing_stored() -> bool:
    return not (
        ProgressSample.objects.exists()
        or LatencySample.objects.exists()
        or DriverStatus.objects.exists()
        or AppliedAck.objects.exists()
    )


def item(**fields) -> dict:
    base = {"runId": "r", "batchId": 1, "timestamp": NOW.isoformat(), "numInputRows": 1}
    return {**base, **fields}


def test_every_edge_value_is_stored_and_read_back(spark_app, alice, monkeypatch):
    monkeypatch.setattr(store, "_last_prune", NOW.timestamp() + 3600)  # no pruning until the test prunes
    latest = NOW + dt.timedelta(hours=23)
    body = {
        "progress": [
            item(
                runId="é" * 64,
                batchId=INT64_MAX,
                numInputRows=INT64_MAX,
                timestamp=latest.isoformat(),
                inputRowsPerSecond=MAX_RATE,
                processedRowsPerSecond=0,
                batchDuration=MAX_DURATION_MS,
                observedMetrics={"e2e": {"mean_s": MAX_SECONDS, "p95_s": 0.0, "n": INT64_MAX}},
                sources=[{"metrics": {"backlog": "1e18"}}],
                big=10**30,  # kept in the raw JSON as is
            ),
            item(batchId=INT64_MAX - 1, numInputRows=INT64_MAX, timestamp=latest.isoformat(),
                 observedMetrics={"e2e": {"mean_s": 0, "p95_s": 0, "n": INT64_MAX}}),
            item(batchId=0, numInputRows=0, timestamp="2000-01-01T12:00:00+12:00"),  # = 2000-01-01T00:00Z
        ],
        "latency": [{"timestamp": latest.timestamp(), "mean_s": MAX_SECONDS, "p95_s": MAX_SECONDS, "n": INT64_MAX}],
        "dropped": INT64_MAX,
        "driver": {"uiUrl": "http://127.0.0.1:4040/" + "x" * 233, "appId": "a" * 255, "executors": INT32_MAX,
                   "generation": INT64_MAX, "profile": {"name": "small"}},
    }  # fmt: skip
    assert len(body["driver"]["uiUrl"]) == 255
    r = token_client(alice).post(f"{URL}/progress", body, format="json")
    assert r.status_code == 201, r.json()
    top = ProgressSample.objects.get(batch_id=INT64_MAX)  # a fresh read of every column
    assert (top.run_id, top.num_input_rows, top.input_rate, top.batch_duration_ms) == (
        "é" * 64, INT64_MAX, MAX_RATE, MAX_DURATION_MS
    )  # fmt: skip
    assert (top.e2e_mean_s, top.e2e_n, top.backlog) == (MAX_SECONDS, INT64_MAX, 1e18)
    assert abs(top.timestamp - latest) < dt.timedelta(milliseconds=1) and top.raw["big"] == 10**30
    low = ProgressSample.objects.get(batch_id=0)
    assert low.timestamp == dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    lat = LatencySample.objects.get()
    assert (lat.mean_s, lat.n) == (MAX_SECONDS, INT64_MAX)
    d = DriverStatus.objects.get()
    assert (len(d.ui_url), d.executors, d.generation, d.dropped) == (255, INT32_MAX, INT64_MAX, INT64_MAX)
    op = spark_app.operators.get(name="counter")
    assert store.prune(NOW.timestamp() + 30 * 86400)["rolled_up"] == 3  # sums saturate instead of overflowing
    roll = op.progress_rollups.order_by("hour").last()
    assert roll.input_rows == INT64_MAX and roll.e2e_n == INT64_MAX
    # acknowledgements at their edges
    store.set_desired(op, 1, {"name": "small"})
    ack = {
        "generation": 1,
        "executors": INT32_MAX,
        "downtimeS": MAX_SECONDS,
        "durationS": 0,
        "error": "e" * 10_000,
    }
    assert token_client(alice).post(f"{URL}/applied", ack, format="json").status_code == 201
    a = AppliedAck.objects.get()
    assert (a.executors, a.downtime_s, len(a.error)) == (INT32_MAX, MAX_SECONDS, 10_000)


#: (raw body, the field named); their test ids are their positions and fields (the bodies hold the collection
#: time, which would differ between pytest-xdist workers)
EDGE_CASES = [
        (json.dumps({"progress": [item(batchId=INT64_MAX + 1)]}), "progress[0].batchId"),
        (json.dumps({"progress": [item(batchId=-1)]}), "progress[0].batchId"),
        (json.dumps({"progress": [item(inputRowsPerSecond=MAX_RATE * 10)]}), "progress[0].inputRowsPerSecond"),
        (json.dumps({"progress": [item(batchDuration=-0.5)]}), "progress[0].batchDuration"),
        (json.dumps({"progress": [item(runId="r" * 65)]}), "progress[0].runId"),
        (json.dumps({"progress": [item(runId="a\x00b")]}), "progress[0].runId"),
        ('{"progress": [{"runId": "\\ud800", "batchId": 1}]}', "progress[0].runId"),
        ('{"progress": [], "driver": {"profile": {"\\u0000": 1}}}', "driver.profile"),
        (json.dumps({"progress": [item(timestamp="1999-12-31T23:59:59Z")]}), "progress[0].timestamp"),
        (json.dumps({"progress": [item(timestamp=(NOW + dt.timedelta(days=2)).isoformat())]}),
         "progress[0].timestamp"),
        ('{"progress": [], "dropped": NaN}', "body"),
        ('{"progress": [], "latency": [{"timestamp": 1e999, "mean_s": 1, "p95_s": 1, "n": 1}]}',
         "latency[0].timestamp"),
        (json.dumps({"latency": [{"timestamp": 946684799.0, "mean_s": 1, "p95_s": 1, "n": 1}]}),
         "latency[0].timestamp"),
        (json.dumps({"latency": [{"timestamp": NOW.timestamp(), "mean_s": 1, "p95_s": MAX_SECONDS * 2, "n": 1}]}),
         "latency[0].p95_s"),
        (json.dumps({"driver": {"uiUrl": "http://127.0.0.1/" + "x" * 239}}), "driver.uiUrl"),
        (json.dumps({"driver": {"uiUrl": "javascript:alert(1)"}}), "driver.uiUrl"),
        (json.dumps({"driver": {"uiUrl": "http://a b"}}), "driver.uiUrl"),
        (json.dumps({"driver": {"appId": "a" * 256}}), "driver.appId"),
        (json.dumps({"driver": {"executors": INT32_MAX + 1}}), "driver.executors"),
        (json.dumps({"dropped": INT64_MAX + 1}), "dropped"),
        (json.dumps({"progress": [item(deep=json.loads("[" * 40 + "]" * 40))]}), "progress[0].deep"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "loc"), EDGE_CASES, ids=[f"{i:02d}-{loc}" for i, (_, loc) in enumerate(EDGE_CASES)]
)
def test_values_past_an_edge_are_rejected_by_name(spark_app, alice, raw, loc):
    r = token_client(alice).post(f"{URL}/progress", raw, content_type="application/json")
    assert r.status_code == 400, r.content[:300]
    found = locs(r)
    assert any(x == loc or x.startswith(loc + ".") or x.startswith(loc + "[") for x in found), (loc, found)
    assert all(e["msg"] for e in r.json()["errors"])
    assert nothing_stored()


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"generation": INT64_MAX + 1, "executors": 1}, "generation"),
        ({"generation": 1, "executors": INT32_MAX + 1}, "executors"),
        ({"generation": 1, "executors": 1, "downtimeS": "Infinity"}, "downtimeS"),
        ({"generation": 1, "executors": 1, "durationS": MAX_SECONDS + 1}, "durationS"),
        ({"generation": 1, "executors": 1, "error": "e" * 10_001}, "error"),
    ],
)
def test_bad_acknowledgements_are_rejected_by_name(spark_app, alice, body, loc):
    store.set_desired(spark_app.operators.get(name="counter"), 1, {"name": "small"})
    r = token_client(alice).post(f"{URL}/applied", body, format="json")
    assert r.status_code == 400 and loc in locs(r), r.json()
    assert nothing_stored()


def test_only_json_is_read_and_the_size_is_limited(spark_app, alice, settings):
    api = token_client(alice)
    r = api.post(f"{URL}/progress", {"progress": "x"}, format="multipart")
    assert r.status_code == 415 and locs(r) == ["body"]
    r = api.post(f"{URL}/progress", "progress=1", content_type="application/x-www-form-urlencoded")
    assert r.status_code == 415
    settings.INGEST_MAX_BODY_BYTES = 1000
    small = json.dumps({"progress": [item()]})
    assert api.post(f"{URL}/progress", small, content_type="application/json").status_code == 201
    ProgressSample.objects.all().delete()
    DriverStatus.objects.all().delete()
    big = json.dumps({"progress": [item(pad="x" * 1000)]})
    r = api.post(f"{URL}/progress", big, content_type="application/json")
    assert r.status_code == 413 and locs(r) == ["body"] and "1000 bytes" in r.json()["errors"][0]["msg"]
    r = api.post(f"{URL}/progress", b"\xff\xfe{}", content_type="application/json")
    assert r.status_code == 400 and "UTF-8" in r.json()["errors"][0]["msg"]
    assert nothing_stored()


def test_the_clock_bounds_endpoint_timestamps_and_storability_bounds_direct_validation():
    """The endpoints judge timestamps against the server's clock; connectors validating directly (virtual time)
    are held to what can be stored and read back."""
    from pydantic import ValidationError

    from autoscaler.ingest.serializers import ProgressPayload, parse

    future = {"progress": [item(timestamp="2030-01-01T00:00:00Z")]}
    now = dt.datetime(2029, 12, 31, tzinfo=dt.UTC).timestamp()
    assert parse(ProgressPayload, future, now=now)[1] == []
    payload, errors = parse(ProgressPayload, future, now=now - 86400)
    assert payload is None and [e.loc for e in errors] == ["progress[0].timestamp"]
    assert ProgressPayload.model_validate(future).progress[0].timestamp.year == 2030
    with pytest.raises(ValidationError, match="before the year 9000"):
        ProgressPayload.model_validate({"progress": [item(timestamp="9999-12-31T23:59:59-12:00")]})
