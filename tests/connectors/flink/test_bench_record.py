"""``bench_flink``'s machine-readable record and floor without a cluster: one object per strategy and run with
exactly the issue's keys (``benchmarks.live.JSON_KEYS``), ratios against the same repetition's static
peak (else its nominal slot-seconds) and the clairvoyant floor, and the options of the product path checked
before anything starts."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.flink.command import measured_floor_note
from benchmarks.flink.runner import BenchConfig, RunResult, json_rows, measured_capacity
from benchmarks.live import JSON_KEYS, clairvoyant_floor, record, summary


def _trace(tmp_path, rates: list[float]) -> str:
    path = tmp_path / "trace.txt"
    path.write_text("".join(f"{r}\n" for r in rates))
    return str(path)


def _cfg(tmp_path) -> BenchConfig:
    # 4 trace lines of 10 s: 10 then 40 sentences/s; 100 records/s per slot (10 ms); 10 s control periods
    return BenchConfig(
        trace=_trace(tmp_path, [10, 10, 40, 40]), trace_start=0, steps=4, duration_s=40.0, rate_scale=1.0,
        cost_ms=10.0, period_s=10.0,
    )  # fmt: skip


def test_the_floor_sizes_every_period_of_both_operators_for_its_own_rate(tmp_path):
    cfg = _cfg(tmp_path)
    # splitter: 1 slot throughout (44/s with headroom); counter 45/s -> 1 slot, then 180/s x 1.1 -> 2 slots
    assert cfg.floor_slot_s() == pytest.approx(1 * 40 + (1 * 20 + 2 * 20))
    # the shared floor itself: per period, ceil(rate x (1 + headroom) / mu) units, at least one
    assert clairvoyant_floor(lambda t: 30.0 * t, 20.0, 10.0, 10.0, 0.0) == pytest.approx(3 * 20)
    assert clairvoyant_floor(lambda t: 0.0 * t, 20.0, 10.0, 10.0, 0.0) == pytest.approx(1 * 20)


def test_the_floor_at_the_measured_capacity_sizes_for_what_a_slot_processed(tmp_path):
    """A slot that processed 80 records/s (12.5 ms per record busy) where 10 ms of sleep promise 100: the
    counter's 180/s x 1.1 needs 3 slots, not 2, and the splitter still 1 (44 / 80)."""
    cfg = _cfg(tmp_path)
    assert cfg.floor_slot_s({"counter": 80.0, "splitter": 80.0}) == pytest.approx(1 * 40 + (1 * 20 + 3 * 20))
    assert cfg.floor_slot_s({"counter": 80.0}) == cfg.floor_slot_s({"counter": 80.0, "splitter": 100.0})
    peak = RunResult(
        "static-peak",
        periods=3,
        slot_s=200.0,
        lost=0,
        duplicated=0,
        service_times={"splitter": [0.0125, 0.0125, 0.02], "counter": [0.0125, 0.01, 0.0125]},
    )
    prod = RunResult("product:model-based-trend", periods=2, slot_s=110.0, lost=0, duplicated=0,
                     service_times={"counter": [0.0125, 0.0125]})  # fmt: skip
    capacity, n = measured_capacity([peak, prod])
    assert capacity == pytest.approx({"splitter": 80.0, "counter": 80.0}) and n == 3
    assert measured_capacity([RunResult("x")]) == ({}, 0)
    note = measured_floor_note([(1, peak), (1, prod)], cfg, json_rows([(1, peak), (1, prod)], cfg))
    assert "over 3 complete periods" in note and ": 120 slot-s." in note, note
    assert "| product:model-based-trend | 1 | 110 (110) | 0.92 (0.92) |" in note, note
    assert "no service time measured" in measured_floor_note([(1, RunResult("x"))], cfg, [])
    # the JSON's floor is the measured one (120 slot-s), and says so in floor_core_s
    rows = json_rows([(1, peak), (1, prod)], cfg)
    assert [r["floor_core_s"] for r in rows] == [120.0, 120.0]
    assert rows[1]["core_s_vs_floor"] == pytest.approx(round(110.0 / 120.0, 3))


def test_json_rows_have_exactly_the_issue_keys_and_the_ratios_of_their_repetition(tmp_path):
    cfg = _cfg(tmp_path)
    floor = cfg.floor_slot_s()
    peak1 = RunResult("static-peak", periods=4, violations=0, slot_s=200.0, lost=0, duplicated=0)
    prod1 = RunResult("product:model-based-trend", periods=4, incomplete=1, violations=1, slot_s=100.0,
                      reconfigurations=2, lost=0, duplicated=3)  # fmt: skip
    prod2 = RunResult("product:model-based-trend", periods=4, slot_s=120.0, lost=0, duplicated=0)
    pre = RunResult("model-based-pretrained", periods=0, slot_s=0.0)  # nothing complete: no violation %
    rows = json_rows([(1, peak1), (1, prod1), (2, prod2), (2, pre)], cfg)
    assert [tuple(r) for r in rows] == [JSON_KEYS] * 4
    json.dumps(rows, allow_nan=False)  # valid JSON: no NaN anywhere
    p = rows[1]
    assert p["engine"] == "flink" and p["strategy"] == "product:model-based-trend" and p["run"] == 1
    assert p["periods"] == 4 and p["cold_start"] is True and p["reconfigurations"] == 2
    assert p["violations_pct"] == pytest.approx(100 / 3, abs=0.01)  # of the 3 complete periods
    assert p["core_s"] == 100.0 and p["core_s_vs_static_peak"] == 0.5
    assert p["core_s_vs_floor"] == pytest.approx(round(100.0 / floor, 3))
    assert p["floor_core_s"] == pytest.approx(round(floor, 1))  # no service time measured: the nominal floor
    assert (p["lost"], p["duplicated"]) == (0, 3)
    assert p["predicted_violations_pct"] is None and p["predicted_core_s"] is None  # no Flink engine model
    # repetition 2 has no static-peak run: against static peak's nominal slot-seconds (its sizes x duration)
    nominal = sum(cfg.static_parallelism(40.0).values()) * cfg.duration_s
    assert rows[2]["core_s_vs_static_peak"] == pytest.approx(round(120.0 / nominal, 3))
    assert rows[3]["cold_start"] is False and rows[3]["violations_pct"] is None
    table = summary(rows, floor, "slot-s")
    assert "| product:model-based-trend | 2 |" in table and f"clairvoyant floor {floor:.0f} slot-s" in table


def test_record_refuses_nothing_but_keeps_the_key_order():
    row = record("flink", "ds2", 3, 60, True, math.nan, 1.0, 0.0, None, 0, 0, 0)
    assert tuple(row) == JSON_KEYS
    assert (
        row["violations_pct"] is None
        and row["core_s_vs_static_peak"] is None
        and row["core_s_vs_floor"] is None
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--runs", "", "--policies", "model-based-trend-pretrained"], "no pre-trained variant"),
        (["--runs", "", "--policies", "no-such-policy"], "--policies:"),
        (["--runs", "", "--policies", ""], "--runs: nothing to run"),
        (["--policies", "ds2", "--repeat", "0"], "--repeat: must be >= 1"),
        (["--policies", "ds2", "--eta-v", "0"], "--eta-v: must be in (0, 1]"),
        (["--periods", "0"], "--periods: must be >= 1"),
        (["--trace", "/nonexistent/trace.txt"], "--trace:"),
    ],
)
def test_bench_flink_rejects_bad_product_options_before_starting_anything(args, message):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError) as err:
        call_command("bench_flink", *args)
    assert message in str(err.value)
