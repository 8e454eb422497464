"""Rendering of the hierarchy benchmarks' sections (no simulation)."""

from __future__ import annotations

from benchmarks.multilevel import METRICS, TUNING_STEPS, configurations, render


def _results(held: bool) -> list[dict]:
    m = dict.fromkeys(METRICS, 1.0)
    return [
        {"ics": i, "acs": a, "w_d": w, "after_warmup": m, "whole_run": m, "held_out": m if held else None,
         "wall_seconds": 1.0, "steps": 100_000}
        for i, a, w in configurations()
    ]  # fmt: skip


def test_multilevel_section_keeps_its_differences_and_reports_the_held_out_part() -> None:
    full = render(_results(True), 100_000, 4320, 10.0, 10, 0.8)
    assert f"**Held-out part** (periods {TUNING_STEPS}..100000" in full
    assert "*Run length*: the paper's 100,000 minutes." in full
    assert "**Where and why we differ from the paper**" in full and "*Table 2, small w_d*" in full
    short = render(_results(False), 20_000, 4320, 10.0, 10, 0.8)
    assert "Held-out part" not in short
    assert "20,000 minutes instead of the paper's 100,000" in short
