"""The README's demo command on a real local Spark cluster: decisions with complete metrics are recorded for the
Spark application, and stopping it leaves no process behind."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO_SECONDS = int(os.environ.get("TEST_DEMO_SECONDS", "420"))

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes_with_env(marker: str) -> list[str]:
    """Command lines of live processes whose environment holds ``marker`` (children inherit it)."""
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
        if marker.encode() in env.split(b"\0") and stat.split(")")[-1].split()[0] != "Z":
            found.append(f"{pid}: {cmd[:160]}")
    return found


def test_demo_runs_spark_under_rl_control_and_stops_everything(tmp_path):
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    env.update(
        AUTOSCALER_VAR_DIR=str(var),
        DEMO_SECONDS=str(DEMO_SECONDS),
        DEMO_PORT=str(_free_port()),
        DEMO_PERIOD="15",
    )
    marker = f"AUTOSCALER_VAR_DIR={var}"
    started = time.monotonic()
    proc = subprocess.run(
        ["bash", "scripts/demo.sh"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_SECONDS + 600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert time.monotonic() - started >= DEMO_SECONDS  # it ran for the requested time
    assert "demo: Spark master spark://127.0.0.1:" in out

    with sqlite3.connect(var / "db.sqlite3") as db:
        rows = db.execute(
            "SELECT o.name, d.outcome, d.observed FROM control_decision d "
            "JOIN autoscaler_application a ON a.id = d.application_id "
            "JOIN autoscaler_operator o ON o.id = d.operator_id WHERE a.name = 'demo-wordcount'"
        ).fetchall()
    # decisions of ticks where every operator had complete metrics (a tick with one incomplete operator records
    # "no_data" for all of them)
    decided = [
        (name, outcome, json.loads(obs))
        for name, outcome, obs in rows
        if outcome != "no_data" and json.loads(obs).get("complete")
    ]
    assert decided, f"no decision with complete metrics among {len(rows)}: {out[-3000:]}"
    for name, _outcome, obs in decided:
        assert name in ("splitter", "counter")
        assert obs["input_rate"] is not None and obs["input_rate"] >= 0
        assert obs["deployment"]  # the deployment in place was observed
    assert {name for name, _, _ in decided} == {"splitter", "counter"}
    assert (var / "spark-demo" / "wordcount" / "top.json").is_file()  # the pipeline produced its output

    leftover = _processes_with_env(marker)
    assert not leftover, "processes survived the demo:\n" + "\n".join(leftover)
