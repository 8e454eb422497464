"""The README's test command runs on pytest-xdist workers in groups (tests/conftest.py): every test of an engine on
one worker, each other module on one worker (Spark's tests in two such groups). Checked by running a small selection the same way and reading which
worker ran each test: xdist's own ``loadgroup`` once silently ignored the groups (pytest 9 node ids)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import group_of

ROOT = Path(__file__).resolve().parents[2]
SPARK_MODULES = ("tests/connectors/spark/test_agent_scaling.py", "tests/connectors/spark/test_agent_queue.py")
OTHER_MODULE = "tests/policies/test_graph.py"


def test_the_groups_are_the_engines_and_else_the_modules():
    assert group_of(f"{SPARK_MODULES[0]}::test_x") == "engine-spark-connector"
    assert group_of("tests/demo/test_demo.py::test_y") == "engine-end-to-end"
    assert group_of("tests/connectors/spark_pipelines/test_pipelines.py::test_z") == "engine-end-to-end"
    assert group_of("tests/connectors/flink/test_flink_live.py::test_z") == "engine-flink"
    assert (
        group_of("tests/reliability/test_engine_faults.py::test_flink_job_cancelled") == "engine-end-to-end"
    )
    assert (
        group_of("tests/reliability/test_engine_faults.py::test_spark_driver_killed") == "engine-end-to-end"
    )
    assert group_of(f"{OTHER_MODULE}::test_a[1]") == OTHER_MODULE


def test_an_engine_s_tests_run_on_one_worker_and_a_module_on_one_worker():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS"))}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "-v",
         "-p", "no:cacheprovider", *SPARK_MODULES, OTHER_MODULE],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    ran = re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+?)::", run.stdout, flags=re.M)
    workers: dict[str, set[str]] = {}
    for worker, module in ran:
        workers.setdefault(group_of(module + "::t"), set()).add(worker)
    assert set(workers) == {"engine-spark-connector", OTHER_MODULE}, run.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), workers
    assert len(ran) >= 10, run.stdout[-3000:]
