"""The fault suite's rig: real PostgreSQL (the test database), a Redis server of the test's own (so that stopping it
disturbs nobody) as the broker, and real ``celery worker`` / ``celery beat`` processes of the worktree, with
short control periods and a 1 s dispatcher.

Skips when ``DATABASE_URL`` (PostgreSQL) or ``REDIS_URL`` is not set, as CI sets both.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
DISPATCH_INTERVAL_S = 1.0


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url_of_this_test() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def wait_until(predicate: Callable[[], object], timeout: float, what: str, step: float = 0.1) -> object:
    """Poll ``predicate`` until it returns a true value (returned); ``timeout`` (s) is only an upper bound."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)


class Proc:
    """A ``celery`` worker (solo pool: the task runs in the process we signal) or beat process."""

    def __init__(self, kind: str, name: str, env: dict[str, str], log_dir: Path) -> None:
        self.kind, self.name = kind, name
        self.log = log_dir / f"{kind}-{name}.log"
        if kind == "worker":
            args = ["worker", "--pool=solo", "-l", "info", "-n", f"{name}@%h"]
            args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
            ready = "ready."
        else:
            args = ["beat", "-l", "info", "-s", str(log_dir / f"{name}-schedule")]
            args += ["--pidfile", str(log_dir / f"{name}.pid")]
            ready = "beat: Starting"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "autoscaler", *args],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 60
        while ready not in self.log.read_text():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{kind} {name} did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no acknowledgement."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


class Rig:
    """Broker, workers and beats of one test."""

    def __init__(self, tmp: Path, redis_exe: str) -> None:
        self.tmp, self.redis_exe = tmp, redis_exe
        self.port = _free_port()
        self.broker = f"redis://127.0.0.1:{self.port}/0"
        self.redis: subprocess.Popen | None = None
        self.procs: list[Proc] = []
        self.env = dict(os.environ)
        self.env.update(
            DATABASE_URL=database_url_of_this_test(),
            DATABASE_CONN_MAX_AGE="600",  # connections reused across tasks: the mode a database outage broke
            CELERY_BROKER_URL=self.broker,
            DJANGO_SETTINGS_MODULE="autoscaler.settings",
            AUTOSCALER_DISPATCH_INTERVAL_S=str(DISPATCH_INTERVAL_S),
            AUTOSCALER_DISPATCH_SPREAD="0",
            AUTOSCALER_STALE_AFTER_PERIODS="1",
            PYTHONUNBUFFERED="1",
        )

    def start_broker(self) -> None:
        self.redis = subprocess.Popen(
            [
                self.redis_exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ]
            + ["--dir", str(self.tmp)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: _port_open(self.port), 15, "the private redis-server")

    def stop_broker(self) -> None:
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(10)

    def worker(self, name: str, **env: str) -> Proc:
        p = Proc("worker", name, {**self.env, **env}, self.tmp)
        self.procs.append(p)
        return p

    def beat(self, name: str = "beat") -> Proc:
        p = Proc("beat", name, self.env, self.tmp)
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            p.stop()
        self.stop_broker()


@pytest.fixture
def rig(tmp_path) -> Iterator[Rig]:
    if not os.environ.get("DATABASE_URL") or connection.vendor != "postgresql":
        pytest.skip("the fault suite needs PostgreSQL: set DATABASE_URL (CI does)")
    if not os.environ.get("REDIS_URL"):
        pytest.skip("the fault suite needs Redis: set REDIS_URL (CI does)")
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("the fault suite needs the redis-server program (it runs a broker of its own)")
    r = Rig(tmp_path, exe)
    r.start_broker()
    try:
        yield r
    finally:
        r.close()
