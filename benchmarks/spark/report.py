"""``bench_spark``'s machine-readable results and its median/worst summary over repeated runs.

One object per strategy and run (``JSON_KEYS``): ``engine`` ("spark"), ``strategy``, ``run`` (1-based
repetition), ``periods`` (control periods measured), ``cold_start`` (False for a ``-pretrained`` variant),
``violations_pct`` (% of periods whose mean end-to-end latency exceeded R_max), ``core_s`` (executor-core-seconds
used), ``core_s_vs_static_peak`` (against the static-peak run of the same repetition when there is one, else
against static peak's nominal executor-seconds: peak executors x the run's duration), ``core_s_vs_floor``
(against the clairvoyant floor, ``strategies.clairvoyant_bound``), ``reconfigurations`` (acknowledged executor
changes), ``lost`` / ``duplicated`` (records, sink vs trace), ``predicted_violations_pct`` /
``predicted_core_s``: what the micro-batch engine model fitted from the run predicts for its executor series
(``prediction.engine_prediction``; None when it cannot be fitted), ``closed_loop_violations_pct`` /
``closed_loop_core_s``: what the run's policy does, cold, through the product on that engine
(``closed_loop.closed_loop_prediction``; product runs only, else None). The record and the summary are shared with
``bench_flink`` (``benchmarks.live``).
"""

from __future__ import annotations

from benchmarks.live import JSON_KEYS, fmt, record
from benchmarks.live import summary as _summary

from .runner import RunResult
from .strategies import PRETRAINED

__all__ = ["JSON_KEYS", "fmt", "json_rows", "summary"]


def json_rows(
    runs: list[tuple[int, RunResult]], nominal_peak_core_s: float, floor_core_s: float
) -> list[dict]:
    """The objects of ``runs`` ((repetition, result) in run order); see module docstring for the keys."""
    peak_of = {
        rep: r.core_seconds
        for rep, r in runs
        if r.strategy == "static-peak" and r.core_seconds > 0 and not r.error
    }
    return [
        record(
            "spark",
            r.strategy,
            rep,
            r.periods,
            not r.strategy.endswith(PRETRAINED),
            r.violations_pct,
            r.core_seconds,
            peak_of.get(rep, nominal_peak_core_s),
            floor_core_s,
            r.reconfigurations,
            r.lost,
            r.duplicated,
            r.engine_violations_pct,
            r.engine_core_s,
            r.closed_loop_violations_pct,
            r.closed_loop_core_s,
        )
        for rep, r in runs
    ]


def summary(rows: list[dict], floor_core_s: float) -> str:
    """Per strategy over its runs: median and worst (``benchmarks.live.summary``), in executor-core-s."""
    return _summary(rows, floor_core_s, "executor-core-s")
