"""The taxi analytics PyFlink job (trips -> enrich -> aggregate -> report) on a real local Flink cluster, driven by
the trace source: its operators resolve to job vertices, and once the bounded replay ends the trip count per
pickup zone is exactly what the trace's deterministic records give."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from connectors.flink.connector import check_settings
from connectors.flink.jobs import submit_taxi
from connectors.flink.pipelines.trace_source import Schedule, load_rates, read_counts, taxi_trip
from policies.paths import taxi_trace

pytestmark = pytest.mark.slow

OPERATORS = ["trips", "enrich", "aggregate", "report"]
JOB = dict(trace_start=1200, steps=20, step_s=2.0, rate_scale=0.2, duration_s=40.0, ticks_per_s=50.0,
           cost_ms=0.5, parallelism=2, job_name="taxi-test")  # fmt: skip


def expected_trips_per_zone(schedule: Schedule, ticks: int) -> dict[str, int]:
    """Trips per pickup zone over the records of ticks ``0 .. ticks-1``."""
    out: dict[str, int] = {}
    for record in range(schedule.first_index(ticks)):
        zone = taxi_trip(record)[0]
        out[zone] = out.get(zone, 0) + 1
    return out


def test_taxi_job_binds_its_operators_and_counts_trips_per_zone_exactly(shared_cluster):
    counts_dir = Path(shared_cluster.root) / "counts-taxi"
    job_id = submit_taxi(shared_cluster, taxi_trace(), counts_dir=counts_dir, **JOB)
    submitted = time.time()
    settings = {"restUrl": shared_cluster.rest_url, "jobName": JOB["job_name"]}
    bound = check_settings(settings, OPERATORS)
    assert set(bound) == set(OPERATORS) and len({v.id for v in bound.values()}) == 4  # a vertex each
    assert bound["trips"].name.endswith("trips") and bound["trips"].parallelism == 1
    assert bound["enrich"].parallelism == 2 and bound["aggregate"].parallelism == 2
    assert bound["report"].name.startswith("report") and bound["report"].parallelism == 1

    deadline = submitted + JOB["duration_s"] + 150
    while (state := shared_cluster.rest().job(job_id)["state"]) != "FINISHED":
        assert state not in ("FAILED", "CANCELED") and time.time() < deadline, shared_cluster.job_diagnosis(
            job_id, state
        )
        time.sleep(2)
    schedule = Schedule(load_rates(str(taxi_trace()), JOB["trace_start"], JOB["steps"]), JOB["step_s"],
                        JOB["rate_scale"], JOB["ticks_per_s"])  # fmt: skip
    expected = expected_trips_per_zone(schedule, int(JOB["duration_s"] * JOB["ticks_per_s"]))
    assert sum(expected.values()) > 500 and len(expected) == 50
    assert read_counts(str(counts_dir)) == expected
