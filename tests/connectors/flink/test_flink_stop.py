"""Stopping a Flink process directory kills only the daemon started for it (Flink's own ``taskmanager.sh stop``,
no JVM needed): a pid left behind by a daemon that died, and taken since by an unrelated process, is dropped from
the pid file instead of killed (on this machine pid_max is 32,768 and every JVM thread takes a pid, so pids come
round again within minutes of a busy test run)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectors.flink.cluster import (
    DAEMON_GONE_POLLS,
    FlinkCluster,
    FlinkClusterError,
    drop_stale_pids,
    flink_home,
)


def _sleeper(*extra: str) -> subprocess.Popen:
    """A process sleeping with ``extra`` on its command line, returned once it runs that command line (between
    fork and exec its /proc cmdline is still the parent's)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *extra])
    while b"time.sleep(120)" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        time.sleep(0.01)
    return proc


def _pid_file(tm: Path) -> Path:
    ident = os.environ.get("FLINK_IDENT_STRING", os.environ.get("USER", ""))
    return tm / f"flink-{ident}-taskexecutor.pid"


@pytest.fixture
def cluster(tmp_path) -> FlinkCluster:
    try:
        flink_home()
    except FlinkClusterError as exc:
        pytest.fail(f"{exc} (scripts/test.sh sources scripts/flink_env.sh)")
    c = FlinkCluster(tmp_path / "cluster")
    c._save_state(rest_port=1, rpc_port=2)  # no JobManager: only the TaskManager's stop script runs
    return c


def test_stop_kills_the_daemon_of_its_directory_and_spares_a_process_that_took_a_stale_pid(cluster):
    tm = cluster.root / "tm" / "tm-1"
    cluster._write_conf(tm / "conf", {})
    own = _sleeper("--configDir", str(tm / "conf"))  # as flink-daemon.sh starts one
    stranger = _sleeper()  # a process that got the pid of a daemon that died
    try:
        _pid_file(tm).write_text(f"{own.pid}\n{stranger.pid}\n")  # stop takes the last line first
        cluster.stop_taskmanager("tm-1")  # returns once the process it signalled is gone
        assert stranger.poll() is None, "an unrelated process was killed by a stale pid"
        assert own.wait(timeout=30) is not None  # SIGTERM from flink-daemon.sh
    finally:
        for p in (own, stranger):
            p.kill()
            p.wait()


def test_stale_pids_are_dropped_and_a_file_with_none_left_is_removed(tmp_path):
    own = _sleeper("--configDir", str(tmp_path / "conf"))
    stranger = _sleeper()
    try:
        pid_file = tmp_path / "flink--standalonesession.pid"
        pid_file.write_text(f"{stranger.pid}\n{own.pid}\n")
        assert drop_stale_pids(tmp_path) == [stranger.pid]
        assert pid_file.read_text() == f"{own.pid}\n"
        own.kill()
        own.wait()
        assert drop_stale_pids(tmp_path) == [own.pid] and not pid_file.exists()
    finally:
        for p in (own, stranger):
            p.kill()
            p.wait()


def test_a_daemon_that_exits_before_it_is_ready_fails_at_once_with_its_log(cluster):
    tm = cluster.root / "tm" / "tm-2"
    (tm / "log").mkdir(parents=True)
    (tm / "log" / "flink-taskexecutor-0.out").write_text("Error: Could not reserve enough space\n")
    gone = _sleeper("--configDir", str(tm / "conf"))
    _pid_file(tm).write_text(f"{gone.pid}\n")
    gone.kill()
    gone.wait()
    probes = []
    with pytest.raises(FlinkClusterError, match="exited before it was ready.*Could not reserve enough space"):
        cluster._wait(lambda: probes.append(1), "TaskManager tm-2", tm)
    # after DAEMON_GONE_POLLS polls (about 2 s: a daemon being exec'd is missed for a moment), not after the
    # liveness bound (START_TIMEOUT_S)
    assert len(probes) == DAEMON_GONE_POLLS
