"""The ``connectors.spark.store.SparkStore`` contract, run against every implementation.

A test module subclasses ``SparkStoreContract`` and provides a ``harness`` fixture: a ``Harness`` holding the
store, two operator keys and the writers of the agent's side (progress, latency, driver status,
acknowledgement) for that implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import pytest

from connectors.spark.store import (
    Acknowledgement,
    DesiredState,
    DriverState,
    LatencyRecord,
    ProgressRecord,
    SparkStore,
)

T0 = 1_800_000_000.0  # s since the epoch
SMALL = {"name": "small", "cores": 1, "memoryMiB": 512}


@dataclass
class Harness:
    store: SparkStore
    key: Hashable
    other: Hashable  # a second operator: nothing written for ``key`` shows there
    add_progress: Callable[[Hashable, ProgressRecord], None]
    add_latency: Callable[[Hashable, LatencyRecord], None]
    set_driver: Callable[[Hashable, DriverState], None]
    add_ack: Callable[[Hashable, Acknowledgement], None]


def batch(batch_id: int, at: float, rows: int = 10, run: str = "r", **extra: Any) -> ProgressRecord:
    return ProgressRecord(run, batch_id, at, rows, **extra)


class SparkStoreContract:
    def test_progress_of_a_period_oldest_first_with_every_field(self, harness: Harness) -> None:
        full = batch(
            3,
            T0 + 2.5,
            rows=120,
            batch_duration_ms=400.0,
            e2e_mean_s=0.5,
            e2e_p95_s=0.9,
            e2e_n=120,
            backlog=30.0,
            raw={"batchId": 3, "stateOperators": [{"numShufflePartitions": 4}]},
        )
        for r in (batch(4, T0 + 5.0), full, batch(1, T0 - 1.0), batch(5, T0 + 10.0)):
            harness.add_progress(harness.key, r)
        got = harness.store.progress(harness.key, T0, T0 + 10)
        assert [r.batch_id for r in got] == [3, 4]  # [start, end): T0 + 10 is the next period's
        assert got[0] == full and isinstance(got[0].timestamp, float)
        assert harness.store.progress(harness.other, T0 - 10, T0 + 20) == []

    def test_a_batch_stored_twice_is_kept_once(self, harness: Harness) -> None:
        harness.add_progress(harness.key, batch(1, T0, rows=5))
        harness.add_progress(harness.key, batch(1, T0, rows=5))
        assert len(harness.store.progress(harness.key, T0, T0 + 1)) == 1

    def test_the_batch_before_a_time_one_batch_and_earlier_batches_of_a_run(self, harness: Harness) -> None:
        for r in (
            batch(7, T0 - 12, backlog=5.0),
            batch(6, T0 - 20),
            batch(2, T0 - 5, run="r2"),
            batch(8, T0),
        ):
            harness.add_progress(harness.key, r)
        assert harness.store.last_progress_before(harness.key, T0).batch_id == 2
        assert harness.store.last_progress_before(harness.key, T0 - 6) == batch(7, T0 - 12, backlog=5.0)
        assert harness.store.last_progress_before(harness.key, T0 - 20) is None
        assert harness.store.batch(harness.key, "r", 6).timestamp == pytest.approx(T0 - 20)
        assert harness.store.batch(harness.key, "r2", 6) is None
        assert harness.store.has_batch_before(harness.key, "r", 7)
        assert not harness.store.has_batch_before(harness.key, "r", 6)
        assert not harness.store.has_batch_before(harness.key, "r2", 2)
        assert not harness.store.has_batch_before(harness.other, "r", 9)

    def test_latencies_of_a_period(self, harness: Harness) -> None:
        for t in (T0 - 1, T0, T0 + 9.5, T0 + 10):
            harness.add_latency(harness.key, LatencyRecord(t, 1.0, 2.0, 3))
        got = harness.store.latencies(harness.key, T0, T0 + 10)
        assert sorted(r.timestamp for r in got) == [pytest.approx(T0), pytest.approx(T0 + 9.5)]
        assert (got[0].mean_s, got[0].p95_s, got[0].n) == (1.0, 2.0, 3)

    def test_driver_status(self, harness: Harness) -> None:
        assert harness.store.driver(harness.key) is None
        harness.set_driver(harness.key, DriverState("http://127.0.0.1:4040", "app-x", 2, SMALL, T0))
        d = harness.store.driver(harness.key)
        assert (d.ui_url, d.app_id, d.executors, d.profile) == ("http://127.0.0.1:4040", "app-x", 2, SMALL)
        assert d.last_seen == pytest.approx(T0)
        assert harness.store.driver(harness.other) is None

    def test_desired_state_generations(self, harness: Harness) -> None:
        assert harness.store.desired(harness.key) == DesiredState(0, None, None)
        assert harness.store.set_desired(harness.key, 2, SMALL) == 1
        assert harness.store.set_desired(harness.key, 3, {**SMALL, "name": "large"}) == 2
        assert harness.store.desired(harness.key) == DesiredState(2, 3, {**SMALL, "name": "large"})
        assert harness.store.desired(harness.other).generation == 0

    def test_the_acknowledgement_of_the_highest_generation_at_least_asked(self, harness: Harness) -> None:
        assert harness.store.acknowledgement(harness.key, 1) is None
        harness.add_ack(harness.key, Acknowledgement(1, 2))
        assert harness.store.acknowledgement(harness.key, 2) is None
        harness.add_ack(harness.key, Acknowledgement(3, 1, downtime_s=4.5, duration_s=6.0, error="boom"))
        harness.add_ack(harness.key, Acknowledgement(3, 2, downtime_s=1.0, duration_s=2.0))
        harness.add_ack(harness.key, Acknowledgement(2, 5))
        assert harness.store.acknowledgement(harness.key, 2) == Acknowledgement(3, 2, 1.0, 2.0, "")
        assert harness.store.acknowledgement(harness.key, 1).generation == 3
        assert harness.store.acknowledgement(harness.other, 1) is None
