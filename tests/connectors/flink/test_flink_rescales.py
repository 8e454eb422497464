"""Several live rescales in a row (4 within about a minute) on a real local Flink cluster: the final counts of the
WordCount sink must equal the trace's exact counts (no record lost or counted twice across the restarts).

The stream is sparse (about 20 words/s over a vocabulary of 180 counted words, so a word comes back every 9 s
or so) and the rescales fall in its second half, so that a count lost at a restart is not hidden by the word
coming back and re-emitting its exact total (as in a dense stream). Measured: exact with the former sink (counts
in memory, written every 0.5 s) as with the current one (every count appended at once)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from connectors.base import ScalingPlan
from connectors.flink.connector import build
from connectors.flink.jobs import submit_wordcount
from connectors.flink.pipelines.trace_source import Schedule, expected_counts, load_rates, read_counts
from policies.paths import taxi_trace

pytestmark = pytest.mark.slow

OPERATORS = ["sentences", "splitter", "counter", "top"]
STREAMS = [("sentences", "splitter"), ("splitter", "counter"), ("counter", "top")]
JOB = dict(trace_start=600, steps=30, step_s=2.5, rate_scale=0.03, duration_s=75.0, ticks_per_s=50.0,
           cost_ms=1.0, parallelism=1, job_name="wc-rescales")  # fmt: skip
#: (operator, parallelism) applied one after the other, each as soon as the previous one took effect
RESCALES = [("counter", 3), ("splitter", 2), ("counter", 2), ("counter", 4)]


def test_counts_stay_exact_across_several_rescales_in_a_row(shared_cluster):
    cluster = shared_cluster
    counts_dir = Path(cluster.root) / "counts"
    job_id = submit_wordcount(cluster, taxi_trace(), counts_dir=counts_dir, **JOB)
    submitted = time.time()
    settings = {"restUrl": cluster.rest_url, "jobName": JOB["job_name"], "applyTimeoutS": 45}
    conn = build(settings, OPERATORS, STREAMS, {"splitter": {"vm.small": 1}, "counter": {"vm.small": 1}})
    time.sleep(25)  # the job runs, checkpoints and counts for a while before the first restart
    for slot, (op, k) in enumerate(RESCALES, start=1):
        result = conn.realizer.apply(ScalingPlan({op: {"vm.small": k}}, slot=slot))
        assert result.ok, (cluster.job_diagnosis(job_id, "after the apply"), op, k, result.error)
        time.sleep(3)
    deadline = submitted + JOB["duration_s"] + 150
    while (state := cluster.rest().job(job_id)["state"]) != "FINISHED":
        assert state not in ("FAILED", "CANCELED") and time.time() < deadline, cluster.job_diagnosis(
            job_id, state
        )
        time.sleep(2)
    schedule = Schedule(load_rates(str(taxi_trace()), JOB["trace_start"], JOB["steps"]), JOB["step_s"],
                        JOB["rate_scale"], JOB["ticks_per_s"])  # fmt: skip
    expected = expected_counts(schedule, int(JOB["duration_s"] * JOB["ticks_per_s"]))
    got = read_counts(str(counts_dir))
    diff = {w: (got.get(w, 0), n) for w, n in expected.items() if got.get(w, 0) != n}
    extra = {w: n for w, n in got.items() if w not in expected}
    assert sum(expected.values()) > 1000, sum(expected.values())
    assert not diff and not extra, f"(got, expected) per word: {diff}; unexpected words: {extra}"
