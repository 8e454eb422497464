"""``autoscaler.ingest.spark_store.OrmSparkStore`` keeps the ``SparkStore`` contract on the ingest tables."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict

import pytest

from autoscaler.ingest.models import AppliedAck, DriverStatus, LatencySample, ProgressSample
from autoscaler.ingest.spark_store import OrmSparkStore
from connectors.spark.store import Acknowledgement, DriverState, LatencyRecord, ProgressRecord
from tests.connectors.spark.store_contract import Harness, SparkStoreContract

pytestmark = pytest.mark.django_db


def _ts(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def add_progress(key: int, r: ProgressRecord) -> None:
    ProgressSample.objects.bulk_create(
        [ProgressSample(operator_id=key, **{**asdict(r), "timestamp": _ts(r.timestamp)})],
        ignore_conflicts=True,
    )


def add_latency(key: int, r: LatencyRecord) -> None:
    LatencySample.objects.create(operator_id=key, **{**asdict(r), "timestamp": _ts(r.timestamp)})


def set_driver(key: int, d: DriverState) -> None:
    DriverStatus.objects.update_or_create(
        operator_id=key, defaults={**asdict(d), "last_seen": _ts(d.last_seen)}
    )


def add_ack(key: int, a: Acknowledgement) -> None:
    AppliedAck.objects.create(operator_id=key, **asdict(a))


@pytest.fixture
def harness(spark_app) -> Harness:
    return Harness(
        store=OrmSparkStore(),
        key=spark_app.operators.get(name="counter").pk,
        other=spark_app.operators.get(name="src").pk,
        add_progress=add_progress,
        add_latency=add_latency,
        set_driver=set_driver,
        add_ack=add_ack,
    )


class TestOrmSparkStore(SparkStoreContract):
    pass


def test_the_stored_applications_connector_reads_and_writes_the_ingest_tables(spark_app):
    """``build_connector`` wires the Spark monitor and realizer to the ingest tables under the Operator's key; an
    executor count without a profile is named after the declared deployment's node type."""
    from autoscaler.control.connectors import build_connector
    from autoscaler.ingest import store
    from autoscaler.ingest.models import DesiredState
    from autoscaler.ingest.serializers import ProgressPayload
    from connectors.base import Period

    t0 = 1_800_000_000.0
    op = spark_app.operators.get(name="counter")

    def batch(i: int, t: float) -> dict:
        return {
            "runId": "r",
            "batchId": i,
            "timestamp": _ts(t).isoformat(),
            "numInputRows": 100,
            "batchDuration": 400,
        }

    items = [batch(0, t0 - 60)] + [
        batch(1 + i, t0 + i) for i in range(10)
    ]  # a start-up batch, then the period's
    driver = {"appId": "app-x", "executors": 3}
    store.store_progress(op, ProgressPayload.model_validate({"progress": items, "driver": driver}))
    connector = build_connector(spark_app)
    m = connector.monitor.collect(Period(0, t0, t0 + 10))
    assert m.complete, m.reason
    assert m.operators["counter"].deployment == {"small": 3}  # the declared type: no profile reported
    assert m.operators["counter"].input_rate == pytest.approx(100.0)
    assert connector.realizer.store.set_desired(op.pk, 2, {"name": "small"}) == 1
    assert DesiredState.objects.get(operator=op).executors == 2
