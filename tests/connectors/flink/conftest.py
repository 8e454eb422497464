"""A local Flink cluster shared by the live test modules that only submit their own jobs (the rescales and taxi
tests): one JobManager and one 8-slot TaskManager for the session, stopped at the end.

Each test gets it with its TaskManager running: one that stopped during an earlier test (its stop cause is in
that test's failure message, :meth:`FlinkCluster.job_diagnosis`) is started again, so that one test's fault does
not fail the next ones (CI once lost the TaskManager during the rescales test, and the taxi test after it then
failed for want of slots)."""

from __future__ import annotations

import pytest

from connectors.flink.cluster import FlinkCluster, FlinkClusterError, TaskManagerProfile, flink_home

BASE_TM = "tm-base"
BASE_PROFILE = TaskManagerProfile(slots=8, memory_mb=2048, node_type="vm.small")


@pytest.fixture(scope="session")
def flink_session(tmp_path_factory):
    """The session's cluster as started (module-scoped fixtures take it with :func:`heal_shared`)."""
    try:
        flink_home()
    except FlinkClusterError as exc:
        pytest.fail(f"{exc} (scripts/test.sh sources scripts/flink_env.sh)")
    c = FlinkCluster(tmp_path_factory.mktemp("flink-shared"))
    try:
        c.start()
        c.start_taskmanager(BASE_TM, BASE_PROFILE)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def heal_shared(flink_session: FlinkCluster):
    """``heal_shared()``: start the session cluster's TaskManager again if it stopped; returns the cluster."""

    def heal() -> FlinkCluster:
        flink_session.ensure_taskmanager(BASE_TM, BASE_PROFILE)
        return flink_session

    return heal


@pytest.fixture
def shared_cluster(heal_shared) -> FlinkCluster:
    """The session's cluster with its TaskManager registered (restarted when it stopped)."""
    return heal_shared()
