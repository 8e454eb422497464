"""The connector contract (tests/connectors/connector_contract.py) on a real local Flink cluster (the session's
shared 8-slot cluster): a WordCount job of its own, observed, rescaled, asked for more slots than the cluster has,
and cancelled for the period without data (the contract's last test)."""

from __future__ import annotations

import time

import pytest
from connector_contract import ConnectorContract, Harness

from connectors.base import Period, PeriodMetrics, ScalingPlan
from connectors.flink.connector import build
from connectors.flink.jobs import submit_wordcount
from policies.paths import taxi_trace

pytestmark = pytest.mark.slow

OPERATORS = ["sentences", "splitter", "counter", "top"]
STREAMS = [("sentences", "splitter"), ("splitter", "counter"), ("counter", "top")]
JOB = dict(trace_start=600, steps=60, step_s=5.0, rate_scale=0.2, duration_s=300.0, ticks_per_s=50.0,
           cost_ms=1.0, parallelism=1, job_name="wc-contract")  # fmt: skip
#: the engine's own report is awaited; the bound only stops a hung test (a loaded 2-core machine is slow)
WAIT_S = 300.0


@pytest.fixture(scope="module")
def harness(heal_shared):
    cluster = heal_shared()
    job_id = submit_wordcount(cluster, taxi_trace(), **JOB)
    settings = {"restUrl": cluster.rest_url, "jobName": JOB["job_name"], "applyTimeoutS": 60}
    conn = build(settings, OPERATORS, STREAMS, {"splitter": {"vm.small": 1}, "counter": {"vm.small": 1}})
    slots = iter(range(1, 10_000))

    def period(length_s: float = 10.0) -> PeriodMetrics:
        now = time.time()
        return conn.monitor.collect(Period(next(slots), now - length_s, now))

    def complete_period() -> PeriodMetrics:
        deadline = time.monotonic() + WAIT_S
        while True:
            metrics = period()
            if metrics.complete or time.monotonic() > deadline:
                return metrics
            time.sleep(2)

    def scaled(current):
        return ScalingPlan({"counter": {"vm.small": sum(current["counter"].values()) + 1}}, 1)

    def unsatisfiable(current):
        return ScalingPlan({"counter": {"vm.small": 12}}, 2)  # 12 subtasks on an 8-slot cluster

    def without_data() -> PeriodMetrics:
        cluster.rest().patch(f"/jobs/{job_id}?mode=cancel")
        deadline = time.monotonic() + WAIT_S
        while cluster.rest().job(job_id)["state"] != "CANCELED" and time.monotonic() < deadline:
            time.sleep(1)
        return period()

    try:
        yield Harness(conn, ["splitter", "counter"], complete_period, scaled, unsatisfiable, without_data)
    finally:
        conn.close()
        if cluster.rest().job(job_id)["state"] not in ("FINISHED", "CANCELED", "FAILED"):
            cluster.rest().patch(f"/jobs/{job_id}?mode=cancel")


class TestFlinkConnectorContract(ConnectorContract):
    """The four guarantees, in order (the last one cancels the job)."""
