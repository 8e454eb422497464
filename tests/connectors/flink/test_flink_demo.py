"""``bash scripts/demo.sh --engine flink`` on a real local Flink cluster: decisions with complete metrics are
recorded for the Flink application, and stopping it leaves no process behind (no JobManager, TaskManager or
Python worker, no web server or Celery process)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DEMO_SECONDS = int(os.environ.get("TEST_FLINK_DEMO_SECONDS", "120"))  # of control loop, after start-up


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes_of(var: Path) -> list[str]:
    """Live processes started for this demo: their environment holds ``AUTOSCALER_VAR_DIR=<var>`` (children
    inherit it, the Flink JVMs too) or their command line names ``var`` (e.g. ``-Dlog.file=<var>/...``)."""
    marker = f"AUTOSCALER_VAR_DIR={var}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat.split(")")[-1].split()[0] == "Z":
            continue
        if marker in env.split(b"\0") or str(var) in cmd:
            found.append(f"{pid}: {cmd[:200]}")
    return found


@pytest.mark.slow
def test_demo_runs_flink_under_rl_control_and_stops_everything(tmp_path):
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    env.update(
        AUTOSCALER_VAR_DIR=str(var),
        DEMO_SECONDS=str(DEMO_SECONDS),
        DEMO_PORT=str(_free_port()),
        DEMO_PERIOD="15",
    )
    started = time.monotonic()
    proc = subprocess.run(
        ["bash", "scripts/demo.sh", "--engine", "flink"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_SECONDS + 300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert time.monotonic() - started >= DEMO_SECONDS  # it ran for the requested time
    assert "demo: Flink JobManager http://127.0.0.1:" in out and "job demo-flink-wordcount (" in out

    with sqlite3.connect(var / "db.sqlite3") as db:
        rows = db.execute(
            "SELECT o.name, d.outcome, d.observed FROM control_decision d "
            "JOIN autoscaler_application a ON a.id = d.application_id "
            "JOIN autoscaler_operator o ON o.id = d.operator_id WHERE a.name = 'demo-flink-wordcount'"
        ).fetchall()
    decided = [
        (name, outcome, json.loads(obs))
        for name, outcome, obs in rows
        if outcome != "no_data" and json.loads(obs).get("complete")
    ]
    assert decided, f"no decision with complete metrics among {len(rows)}: {out[-3000:]}"
    assert {name for name, _, _ in decided} == {"splitter", "counter"}
    for _name, _outcome, obs in decided:
        assert obs["input_rate"] > 0 and obs["deployment"]
    assert "decisions with complete metrics" in out and "slot " in out  # decisions were printed as written

    leftover = _processes_of(var)
    assert not leftover, "processes survived the demo:\n" + "\n".join(leftover)


@pytest.mark.parametrize("args", [["--engine", "storm"], ["--engine"], ["--bogus"]])
def test_demo_rejects_an_unknown_engine_or_argument_before_starting_anything(args):
    proc = subprocess.run(
        ["bash", "scripts/demo.sh", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "spark" in proc.stderr and "flink" in proc.stderr  # names the choices
