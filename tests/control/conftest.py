"""Real Celery workers on a real Redis broker and the test run's PostgreSQL database.

Worker tests skip on SQLite (they need a database that separate processes share with row and advisory locks)
and when no Redis answers on 127.0.0.1:6379.
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
REDIS_URL = os.environ.get("CONTROL_TEST_REDIS", "redis://127.0.0.1:6379/7")
#: the worker tests here send ticks of made-up slots (10, 11, ...) by hand, i.e. replays of slots long past: the
#: staleness rule is off for them (tests/reliability runs workers with the rule on, on the real clock)
REPLAY_ENV = {"AUTOSCALER_STALE_AFTER_PERIODS": "0"}


def _redis_up(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def queue_name() -> str:
    """A broker queue of this test database only (parallel test runs use other databases and other queues)."""
    return f"control-tests-{connection.settings_dict['NAME']}"


def database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


class Worker:
    """One ``celery worker`` process (solo pool: the task runs in the process we signal)."""

    def __init__(
        self, name: str, broker: str, log_dir: Path, extra_env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        env = dict(os.environ)
        env.update(
            DATABASE_URL=database_url(),
            CELERY_BROKER_URL=broker,
            DJANGO_SETTINGS_MODULE="autoscaler.settings",
            PYTHONUNBUFFERED="1",
        )
        env.update(extra_env if extra_env is not None else REPLAY_ENV)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "autoscaler",
                "worker",
                "--pool=solo",
                "-l",
                "info",
                "-n",
                f"{name}@%h",
                "-Q",
                queue_name(),
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 30
        while "ready." not in self.log.read_text():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"worker {name} did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no ack."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def broker() -> str:
    if connection.vendor != "postgresql":
        pytest.skip(
            "worker tests need PostgreSQL (set DATABASE_URL): SQLite cannot be shared by worker processes"
        )
    if not _redis_up("127.0.0.1", int(REDIS_URL.split(":")[2].split("/")[0])):
        pytest.skip(f"worker tests need Redis at {REDIS_URL}")
    import redis

    redis.Redis.from_url(REDIS_URL).delete(queue_name())  # leftovers of an interrupted earlier run
    return REDIS_URL


@pytest.fixture
def start_worker(tmp_path) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def start(
        name: str = "w1", broker_url: str = REDIS_URL, extra_env: dict[str, str] | None = None
    ) -> Worker:
        w = Worker(name, broker_url, tmp_path, extra_env)
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.stop()


def sender(broker_url: str):
    """A producer-only Celery app on ``broker_url`` (tasks are sent by name, as beat would)."""
    from celery import Celery

    app = Celery("control-tests", broker=broker_url)
    app.conf.task_default_queue = queue_name()
    return app


@pytest.fixture
def private_redis(tmp_path) -> Iterator[dict]:
    """A Redis server of our own (so that stopping it disturbs nobody else), restartable on the same port."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    info: dict = {"port": port, "url": f"redis://127.0.0.1:{port}/0", "proc": None}

    def start() -> None:
        info["proc"] = subprocess.Popen(
            [
                exe,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(tmp_path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 10
        while not _redis_up("127.0.0.1", port):
            if time.time() > deadline:
                raise RuntimeError("private redis did not start")
            time.sleep(0.05)

    def stop() -> None:
        proc = info["proc"]
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(10)

    info["start"], info["stop"] = start, stop
    start()
    yield info
    stop()


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)
