"""A pid kept on disk is signalled only while it still names the process that was started (connectors.processes,
the Spark provider's state entries): a process that took the pid since is left alone."""

from __future__ import annotations

import subprocess
import sys
import time

from connectors.processes import cmdline, runs_with
from connectors.spark.provider import _started_worker


def _sleeper(*extra: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *extra])
    while b"time.sleep(60)" not in (cmdline(proc.pid) or b""):  # between fork and exec: the parent's
        time.sleep(0.01)
    return proc


def test_arguments_match_whole_and_one_after_the_other():
    p = _sleeper("--configDir", "/var/x/tm-1/conf", "--cores", "1")
    try:
        assert runs_with(p.pid, "--configDir", "/var/x/tm-1/conf")
        assert runs_with(p.pid, "--cores", "1")
        assert not runs_with(p.pid, "--configDir", "/var/x/tm-10/conf")  # another daemon's directory
        assert not runs_with(p.pid, "--core")  # a whole argument, not a prefix
        assert not runs_with(p.pid, "--configDir", "1")  # both there, not one after the other
    finally:
        p.kill()
        p.wait()
    assert not runs_with(p.pid, "--cores")


def test_a_spark_state_entry_names_its_worker_only_while_the_pid_runs_that_worker():
    worker = _sleeper("org.apache.spark.deploy.worker.Worker", "--cores", "1", "--webui-port", "40123")
    stranger = _sleeper("--webui-port", "40123")
    try:
        assert _started_worker({"pid": worker.pid, "webui_port": 40123})
        assert not _started_worker({"pid": worker.pid, "webui_port": 1})  # "1" is there, not as the port
        assert not _started_worker({"pid": stranger.pid, "webui_port": 40123})
    finally:
        for p in (worker, stranger):
            p.kill()
            p.wait()
    assert not _started_worker({"pid": worker.pid, "webui_port": 40123})  # the worker is gone
