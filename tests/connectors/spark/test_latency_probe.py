"""The latency probe reads stage times from Spark's logs (1 s resolution)."""

from __future__ import annotations

import datetime as dt

from benchmarks.spark.latency_probe import _first_log_time, _granted_time


def test_stage_times_are_read_from_worker_and_executor_logs(tmp_path):
    worker = tmp_path / "worker.log"
    worker.write_text(
        "Spark Command: java ...\n"
        "26/11/26 13:14:05 INFO Worker: Asked to launch executor app-1/10 for probe\n"
        "26/11/26 13:14:07 INFO Worker: Asked to launch executor app-1/1 for probe\n"
    )
    expected = dt.datetime(2026, 11, 26, 13, 14, 7).timestamp()
    assert _granted_time(worker, "app-1", "1") == expected  # not executor 10
    assert _granted_time(worker, "app-1", "2") is None
    stderr = tmp_path / "stderr"
    stderr.write_text('Spark Executor Command: "java"\n====\n26/11/26 13:14:08 INFO Started daemon\n')
    assert _first_log_time(stderr) == expected + 1
    assert _first_log_time(tmp_path / "missing") is None


def test_steps_name_executor_counts_and_optionally_a_new_executor_memory():
    import pytest

    from benchmarks.spark.latency_probe import _step

    assert _step("3") == (3, None) and _step("2:768") == (2, 768)
    for bad in ("x", "2:big", ":512"):
        with pytest.raises(ValueError, match="expected N or N:MEM"):
            _step(bad)
