"""The shared live cluster of the Flink tests heals between tests: a TaskManager that stopped is started again
(``FlinkCluster.ensure_taskmanager``), so that one test's fault does not fail the tests after it."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.slow

BASE_TM = "tm-base"  # the TaskManager conftest.shared_cluster starts


def test_a_stopped_taskmanager_is_started_again_and_one_that_runs_is_left_alone(shared_cluster):
    assert BASE_TM in shared_cluster.taskmanager_ids()
    profile = shared_cluster.local_taskmanagers()[BASE_TM]
    assert shared_cluster.ensure_taskmanager(BASE_TM, profile) is False  # registered: nothing done
    shared_cluster.stop_taskmanager(BASE_TM)
    assert BASE_TM not in shared_cluster.local_taskmanagers()
    # a stopped TaskManager deregisters at once; the JobManager may list it a while longer
    deadline = time.monotonic() + 120
    while BASE_TM in shared_cluster.taskmanager_ids():
        assert time.monotonic() < deadline, "the stopped TaskManager is still registered"
        time.sleep(1.0)
    assert shared_cluster.ensure_taskmanager(BASE_TM, profile) is True
    assert BASE_TM in shared_cluster.taskmanager_ids()
    assert shared_cluster.local_taskmanagers()[BASE_TM] == profile
    stopped = list((shared_cluster.root / "tm-stopped").glob(f"{BASE_TM}-*"))
    assert stopped and all((d / "log").is_dir() for d in stopped)  # the logs of the stopped one are kept
