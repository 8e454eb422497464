"""The fault suite's rig: real PostgreSQL (the test database), a Redis server of the test's own (so that stopping it
disturbs nobody) as the broker, and real ``celery worker`` / ``celery beat`` processes of the worktree, with
short control periods and a 1 s dispatcher.

Skips when ``DATABASE_URL`` (PostgreSQL) or ``REDIS_URL`` is not set, as CI sets both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.celery_procs import CeleryProcess, database_url, free_port, start_redis, wait_until

__all__ = ["Proc", "Rig", "wait_until"]

DISPATCH_INTERVAL_S = 1.0


class Proc(CeleryProcess):
    """A ``celery`` worker (solo pool: the task runs in the process we signal) or beat process."""

    def __init__(self, kind: str, name: str, env: dict[str, str], log_dir: Path) -> None:
        self.kind, self.name = kind, name
        if kind == "worker":
            args = ["worker", "--pool=solo", "-l", "info", "-n", f"{name}@%h"]
            args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
            ready = "ready."
        else:
            args = ["beat", "-l", "info", "-s", str(log_dir / f"{name}-schedule")]
            args += ["--pidfile", str(log_dir / f"{name}.pid")]
            ready = "beat: Starting"
        super().__init__(args, env, log_dir / f"{kind}-{name}.log", ready)


class Rig:
    """Broker, workers and beats of one test."""

    def __init__(self, tmp: Path, redis_exe: str) -> None:
        self.tmp, self.redis_exe = tmp, redis_exe
        self.port = free_port()
        self.broker = f"redis://127.0.0.1:{self.port}/0"
        self.redis: subprocess.Popen | None = None
        self.procs: list[Proc] = []
        self.env = dict(os.environ)
        self.env.update(
            DATABASE_URL=database_url(),
            DATABASE_CONN_MAX_AGE="600",  # connections reused across tasks: the mode a database outage broke
            CELERY_BROKER_URL=self.broker,
            DJANGO_SETTINGS_MODULE="autoscaler.settings",
            AUTOSCALER_DISPATCH_INTERVAL_S=str(DISPATCH_INTERVAL_S),
            AUTOSCALER_DISPATCH_SPREAD="0",
            AUTOSCALER_STALE_AFTER_PERIODS="1",
            PYTHONUNBUFFERED="1",
        )

    def start_broker(self) -> None:
        self.redis = start_redis(self.redis_exe, self.port, self.tmp)

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
