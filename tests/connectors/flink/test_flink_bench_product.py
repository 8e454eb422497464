"""``bench_flink`` through the product on a real local Flink cluster: an untrained product OM policy, registered by
manifest and driven by the product's tick over the Flink connector, scales out on a step of the input rate within
3 control periods (parallelism as the JobManager's REST API shows it after each tick, and the tick's decision
log), and the bench writes one JSON object per strategy and run with the issue's keys. One short run (a step trace
of 12 periods of 10 s) on the bench's own cluster.
"""

from __future__ import annotations

import io
import json
import math

import pytest
from django.core.management import call_command
from django.db import connection

from benchmarks.flink.runner import WORDS_PER_SENTENCE
from benchmarks.live import JSON_KEYS
from connectors.flink.cluster import FlinkClusterError, flink_home

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    # bench_flink refuses SQLite for the product path (the tick's row locks and the parallelism sampler)
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the product path needs PostgreSQL (DATABASE_URL)"
    ),
]

PERIOD_S = 10.0
# sentences/s; 10 ms per record = 100 records/s per slot: counter (4.5 words per sentence) carries 45/s on one
# slot before the step and needs 2 slots for 180/s after it; splitter stays within one slot
LOW, HIGH = 10.0, 40.0
SLOT_RECORDS_S = 100.0  # records/s one slot processes at --cost-ms 10
STEP_AT = 4  # trace line (= control period of the job's time) of the step
LINES = 12


def test_an_untrained_product_policy_scales_out_on_a_step_within_3_periods_and_the_json_has_the_keys(
    tmp_path,
):
    try:
        flink_home()
    except FlinkClusterError as exc:
        pytest.fail(f"{exc} (source scripts/flink_env.sh)")
    trace = tmp_path / "step.txt"
    trace.write_text("".join(f"{LOW if i < STEP_AT else HIGH}\n" for i in range(LINES)))
    out_json, series_json = tmp_path / "bench.json", tmp_path / "series.json"
    out = io.StringIO()
    call_command(
        "bench_flink",
        "--runs", "", "--policies", "model-based-trend", "--trace", str(trace), "--trace-start", "0",
        "--steps", str(LINES), "--periods", str(LINES), "--period-s", str(PERIOD_S), "--rate-scale", "1",
        "--cost-ms", "10", "--r-max-s", "2", "--json", str(out_json), "--series-json", str(series_json),
        stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    assert "clairvoyant floor" in text and "x the clairvoyant floor" in text, text

    rows = json.loads(out_json.read_text())
    assert len(rows) == 1, rows
    row = rows[0]
    assert tuple(row) == JSON_KEYS
    assert row["engine"] == "flink" and row["strategy"] == "product:model-based-trend" and row["run"] == 1
    assert row["cold_start"] is True and row["periods"] >= LINES - 2, text
    assert row["lost"] == 0 and row["duplicated"] == 0, text
    assert row["core_s"] > 0 and row["core_s_vs_floor"] > 0 and row["core_s_vs_static_peak"] > 0
    assert row["violations_pct"] is not None and 0 <= row["violations_pct"] <= 100

    # the step as the engine reported it: the first tick whose splitter input rate is clearly above LOW
    series = json.loads(series_json.read_text())[0]["series"]
    # every slot accounted for: decided, without data, or missed (a tick that began too late on a loaded machine;
    # its ledger row says why): never failed
    assert all(r["tick"] in ("done", "no_data", "missed") for r in series), [r["tick"] for r in series]
    shown = "\n".join(
        str((r["slot"], r["tick"], r["input_rate"], r["e2e_s"], r["parallelism"], r["decisions"]))
        for r in series
    )
    step = next((i for i, r in enumerate(series) if (r["input_rate"]["splitter"] or 0.0) > 1.5 * LOW), None)
    assert step is not None, "the step never showed in the engine's rates:\n" + shown
    before = series[:step]
    assert any(r["tick"] == "done" for r in before), shown  # the rate before the step was seen
    # the tick of the period holding the step, then three more the tick had data for (the period after a restart
    # has none: the tick neither learns nor acts on it): by then the counter runs the slots the step needs
    # (HIGH x 4.5 words/s at 100 per slot: 2) and the decision log has an applied scale-out. Before the step the
    # policy may already have added slots: on a loaded machine one slot can miss R_max at LOW (CI saw 3.75 s
    # against 2 s and a scale-out 2 periods before the step), so what it ran before is not asserted.
    within = [r for r in series[step:] if r["tick"] == "done"][:4]
    assert len(within) >= 3, shown  # (the run's last slots may be missed on a loaded machine)
    # the region's node is the bench's own TaskManager (there already): no scale-out waits for one
    waits = [d for r in series for d in r["decisions"].values() if "waiting for capacity" in d["reason"]]
    assert not waits, waits
    needed = math.ceil(HIGH * WORDS_PER_SENTENCE / SLOT_RECORDS_S)
    if not any(r["parallelism"]["counter"] >= needed for r in within):
        pytest.fail(f"the counter never ran {needed} slots within 3 periods of the step (slot, tick, rates, e2e, "
                    "parallelism, decisions):\n" + shown)  # fmt: skip
    if before[-1]["parallelism"]["counter"] < needed:  # the step's doing: an applied scale-out to it
        counter = [r["decisions"].get("counter", {}) for r in within]
        assert any(d.get("outcome") == "applied" and d["target"]["tm.8slot"] >= needed for d in counter), (
            shown
        )
    assert row["reconfigurations"] >= 1, text
