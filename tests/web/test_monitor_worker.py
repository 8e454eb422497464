"""The what-if task through a real Celery worker process (Redis broker, the test run's PostgreSQL database).

Skips on SQLite (a worker process cannot share the test database) and when no Redis answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.tick import run_tick
from dashboard.models import WhatIfRun
from dashboard.monitor import whatif

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("WHATIF_TEST_REDIS", "redis://127.0.0.1:6379/7")


def redis_up() -> bool:
    host, port = REDIS_URL.split("//")[1].split("/")[0].split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def worker(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL (set DATABASE_URL): a worker process cannot share SQLite's test database"
        )
    if not redis_up():
        pytest.skip(f"needs Redis at {REDIS_URL}")
    s = connection.settings_dict
    queue = f"whatif-tests-{s['NAME']}"
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}",
        CELERY_BROKER_URL=REDIS_URL,
        DJANGO_SETTINGS_MODULE="autoscaler.settings",
        PYTHONUNBUFFERED="1",
    )
    if s.get("PASSWORD"):
        env["DATABASE_URL"] = env["DATABASE_URL"].replace(f"{s['USER']}@", f"{s['USER']}:{s['PASSWORD']}@")
    log = tmp_path / "worker.log"
    cmd = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "autoscaler",
        "worker",
        "--pool=solo",
        "-l",
        "info",
        "-Q",
        queue,
        "-n",
        f"whatif-{os.getpid()}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while "ready." not in log.read_text():
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"worker did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    from celery import Celery

    sender = Celery("whatif-tests", broker=REDIS_URL)
    sender.conf.task_default_queue = queue
    yield sender
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def test_a_whatif_runs_on_a_worker_and_reports_progress(alice, worker):
    app = simulated_pipeline("wk", n_operators=2, om_policy="ql-pds-plus", owner="alice", rate_scale=1.5)
    for slot in range(29_000_000, 29_000_040):
        run_tick(app.pk, slot)
    params, errors = whatif.validate(app, {"policy": "ql", "rMaxMs": "60"})
    assert not errors
    run = WhatIfRun.objects.create(application=app, owner=alice, params=params)
    run.refresh_from_db()
    # read before the task is sent: a ready worker may claim it before a poll after sending could see it queued
    assert run.status == "queued" and run.progress == 0.0
    worker.send_task("dashboard.whatif", args=[run.pk])
    seen = set()
    deadline = time.time() + 300  # liveness bound only (a loaded CI machine), not a timing assertion
    while time.time() < deadline:
        run.refresh_from_db()
        seen.add(run.status)
        if run.status in ("done", "failed"):
            break
        time.sleep(0.05)
    assert run.status == "done", run.error
    assert run.progress == 1.0 and run.result["steps"] == 40
    assert run.result["params"]["policy"] == "ql" and run.result["params"]["rMaxMs"] == 60.0
    # the task claims only a queued run (queued -> running), so "done" also proves the run went through running
    assert seen <= {"queued", "running", "done"}
