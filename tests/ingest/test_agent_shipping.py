"""The Spark agent's shipping against the real ingest endpoints on a live server, with an ingest token (no Spark
needed: shipping is the agent's queue and HTTP). Items the control plane refuses for good are dropped one by
one and never block the others; a body over the size limit is shipped in smaller parts."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from autoscaler.ingest import tokens
from autoscaler.ingest.models import DriverStatus, LatencySample, ProgressSample
from connectors.spark.agent import SparkAgent

pytestmark = pytest.mark.django_db(transaction=True)


def progress(batch: int, **extra) -> str:
    now = dt.datetime.now(dt.UTC).isoformat()
    item = {"runId": "run", "batchId": batch, "timestamp": now, "numInputRows": 3, "pad": "x" * 300}
    return json.dumps({**item, **extra})


def test_refused_items_are_dropped_and_the_rest_is_stored(live_server, spark_app, settings):
    settings.INGEST_MAX_BODY_BYTES = 4000  # about 9 items: the first shipment is too large
    agent = SparkAgent("wc", "counter", live_server.url, tokens.issue(spark_app), batch_size=20)
    for i in range(12):
        agent.on_progress(progress(i))
    agent.on_progress(progress(12, batchId=2**63))  # out of range: refused
    agent.report_latency(float("inf"), 1.0, 3)  # not JSON once serialised: the body is refused as a whole
    agent.report_latency(0.5, 1.0, 3)
    agent.on_progress(progress(13))
    assert agent.flush(120)
    stored = sorted(ProgressSample.objects.values_list("batch_id", flat=True))
    assert stored == [*range(12), 13]
    assert list(LatencySample.objects.values_list("mean_s", flat=True)) == [0.5]
    assert agent.stats.rejected == 2 and agent.stats.shipped == 14
    assert DriverStatus.objects.get().operator.application == spark_app


def test_a_wrong_token_is_retried_not_dropped(live_server, spark_app):
    agent = SparkAgent("wc", "counter", live_server.url, "ssi_not-a-token", batch_size=5)
    agent.on_progress(progress(1))
    assert not agent.flush(1.0)  # 401: kept for when the token is fixed
    assert agent.stats.rejected == 0 and agent.stats.post_failures >= 1
    agent.token = tokens.issue(spark_app)
    assert agent.flush(30)
    assert list(ProgressSample.objects.values_list("batch_id", flat=True)) == [1]


def test_the_bench_stub_takes_only_its_ingest_token():
    """The bench harness's stand-in for the control plane checks the token like the real endpoints."""
    from benchmarks.spark.ingest_stub import IngestStub, new_token

    stub = IngestStub(token=new_token()).start()
    try:
        wrong = SparkAgent("bench", "op", stub.url, new_token(), batch_size=5)
        wrong.on_progress(progress(1))
        assert not wrong.flush(0.5) and stub.since(0)[0] == []
        with pytest.raises(Exception, match="401"):
            wrong.fetch_desired()
        right = SparkAgent("bench", "op", stub.url, stub.token, batch_size=5)
        right.on_progress(progress(2))
        assert right.flush(10) and [p["batchId"] for p in stub.since(0)[0]] == [2]
        assert right.fetch_desired()[0] == 0
    finally:
        stub.stop()
