"""The README's demo command on a real local Spark cluster: decisions with complete metrics are recorded for the
Spark application, and stopping it leaves no process behind."""

from __future__ import annotations

import os

import pytest

#: the bound of a demo that never records complete ticks; the test stops it once it has (conftest.run_demo)
DEMO_SECONDS = int(os.environ.get("TEST_DEMO_SECONDS", "1200"))

pytestmark = pytest.mark.slow


def test_demo_runs_spark_under_rl_control_and_stops_everything(run_demo):
    top = ("spark-demo", "wordcount", "top.json")
    demo = run_demo([], DEMO_SECONDS, "demo-wordcount", ready=lambda var: var.joinpath(*top).is_file())
    assert "demo: Spark master spark://127.0.0.1:" in demo.output
    for name, _outcome, obs in demo.decisions:
        assert name in ("splitter", "counter")
        assert obs["input_rate"] is not None and obs["input_rate"] >= 0
        assert obs["deployment"]  # the deployment in place was observed
    assert {name for name, _, _ in demo.decisions} == {"splitter", "counter"}
    # the running SLO summary line: violations and reconfigurations against the budgets, cost
    slo = [line for line in demo.output.splitlines() if line.startswith("SLO demo-wordcount: ")]
    assert slo and "eta_V 5.0 %" in slo[-1] and "$/h" in slo[-1], demo.output[-2000:]
    assert demo.var.joinpath(*top).is_file()  # the pipeline produced its output
    assert not demo.leftover, "processes survived the demo:\n" + "\n".join(demo.leftover)
