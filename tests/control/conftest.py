"""Real Celery workers on a real Redis broker and the test run's PostgreSQL database.

Worker tests skip on SQLite (they need a database that separate processes share with row and advisory locks)
and when no Redis answers on 127.0.0.1:6379.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.celery_procs import CeleryProcess, database_url, free_port, port_open, start_redis, wait_until

REDIS_URL = os.environ.get("CONTROL_TEST_REDIS", "redis://127.0.0.1:6379/7")
#: the worker tests here send ticks of made-up slots (10, 11, ...) by hand, i.e. replays of slots long past: the
#: staleness rule is off for them (tests/reliability runs workers with the rule on, on the real clock)
REPLAY_ENV = {"AUTOSCALER_STALE_AFTER_PERIODS": "0"}


def queue_name() -> str:
    """A broker queue of this test database only (parallel test runs use other databases and other queues)."""
    return f"control-tests-{connection.settings_dict['NAME']}"


class Worker(CeleryProcess):
    """One ``celery worker`` process (solo pool: the task runs in the process we signal) on the test queue."""

    def __init__(
        self, name: str, broker: str, log_dir: Path, extra_env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        env = dict(os.environ)
        env.update(
            DATABASE_URL=database_url(),
            CELERY_BROKER_URL=broker,
            DJANGO_SETTINGS_MODULE="autoscaler.settings",
            PYTHONUNBUFFERED="1",
        )
        env.update(extra_env if extra_env is not None else REPLAY_ENV)
        args = ["worker", "--pool=solo", "-l", "info", "-n", f"{name}@%h", "-Q", queue_name()]
        args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        super().__init__(args, env, log_dir / f"{name}.log", "ready.")


@pytest.fixture
def broker() -> str:
    if connection.vendor != "postgresql":
        pytest.skip(
            "worker tests need PostgreSQL (set DATABASE_URL): SQLite cannot be shared by worker processes"
        )
    if not port_open(int(REDIS_URL.split(":")[2].split("/")[0])):
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
        info["proc"] = start_redis(exe, port, tmp_path)

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
    wait_until(predicate, timeout, what)
