"""A local Flink cluster shared by the live test modules that only submit their own jobs (the rescales and taxi
tests): one JobManager and one 8-slot TaskManager for the session, stopped at the end."""

from __future__ import annotations

import pytest

from connectors.flink.cluster import FlinkCluster, FlinkClusterError, TaskManagerProfile, flink_home


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory):
    try:
        flink_home()
    except FlinkClusterError as exc:
        pytest.fail(f"{exc} (scripts/test.sh sources scripts/flink_env.sh)")
    c = FlinkCluster(tmp_path_factory.mktemp("flink-shared"))
    try:
        c.start()
        c.start_taskmanager("tm-base", TaskManagerProfile(slots=8, memory_mb=2048, node_type="vm.small"))
        yield c
    finally:
        c.stop()
