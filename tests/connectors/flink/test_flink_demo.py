"""``bash scripts/demo.sh --engine flink`` on a real local Flink cluster: decisions with complete metrics are
recorded for the Flink application, and stopping it leaves no process behind (no JobManager, TaskManager or
Python worker, no web server or Celery process)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DEMO_SECONDS = int(os.environ.get("TEST_FLINK_DEMO_SECONDS", "120"))  # of control loop, after start-up


@pytest.mark.slow
def test_demo_runs_flink_under_rl_control_and_stops_everything(run_demo):
    demo = run_demo(["--engine", "flink"], DEMO_SECONDS, "demo-flink-wordcount")
    out = demo.output
    assert "demo: Flink JobManager http://127.0.0.1:" in out and "job demo-flink-wordcount (" in out
    assert {name for name, _, _ in demo.decisions} == {"splitter", "counter"}
    for _name, _outcome, obs in demo.decisions:
        assert obs["input_rate"] > 0 and obs["deployment"]
    assert "decisions with complete metrics" in out and "slot " in out  # decisions were printed as written
    assert not demo.leftover, "processes survived the demo:\n" + "\n".join(demo.leftover)


@pytest.mark.parametrize("args", [["--engine", "storm"], ["--engine"], ["--bogus"]])
def test_demo_rejects_an_unknown_engine_or_argument_before_starting_anything(args):
    proc = subprocess.run(
        ["bash", "scripts/demo.sh", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "spark" in proc.stderr and "flink" in proc.stderr  # names the choices
