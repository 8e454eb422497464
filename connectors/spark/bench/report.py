"""``bench_spark``'s machine-readable results and its median/worst summary over repeated runs.

One object per strategy and run (``JSON_KEYS``): ``engine`` ("spark"), ``strategy``, ``run`` (1-based
repetition), ``periods`` (control periods measured), ``cold_start`` (False for a ``-pretrained`` variant),
``violations_pct`` (% of periods whose mean end-to-end latency exceeded R_max), ``core_s`` (executor-core-seconds
used), ``core_s_vs_static_peak`` (against the static-peak run of the same repetition when there is one, else
against static peak's nominal executor-seconds: peak executors x the run's duration), ``core_s_vs_floor``
(against the clairvoyant floor, ``strategies.clairvoyant_bound``), ``reconfigurations`` (acknowledged executor
changes), ``lost`` / ``duplicated`` (records, sink vs trace), ``predicted_violations_pct`` /
``predicted_core_s``: what the micro-batch engine model fitted from the run predicts for its executor series
(``prediction.engine_prediction``; None when it cannot be fitted).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .runner import RunResult
from .strategies import PRETRAINED

JSON_KEYS = (
    "engine",
    "strategy",
    "run",
    "periods",
    "cold_start",
    "violations_pct",
    "core_s",
    "core_s_vs_static_peak",
    "core_s_vs_floor",
    "reconfigurations",
    "lost",
    "duplicated",
    "predicted_violations_pct",
    "predicted_core_s",
)


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(float(x), digits)


def json_rows(
    runs: list[tuple[int, RunResult]], nominal_peak_core_s: float, floor_core_s: float
) -> list[dict]:
    """The objects of ``runs`` ((repetition, result) in run order); see module docstring for the keys."""
    peak_of = {
        rep: r.core_seconds
        for rep, r in runs
        if r.strategy == "static-peak" and r.core_seconds > 0 and not r.error
    }
    out = []
    for rep, r in runs:
        base = peak_of.get(rep, nominal_peak_core_s)
        row: dict[str, Any] = {
            "engine": "spark",
            "strategy": r.strategy,
            "run": rep,
            "periods": r.periods,
            "cold_start": not r.strategy.endswith(PRETRAINED),
            "violations_pct": round(r.violations_pct, 2),
            "core_s": round(r.core_seconds, 1),
            "core_s_vs_static_peak": _round(r.core_seconds / base if base > 0 else None, 3),
            "core_s_vs_floor": _round(r.core_seconds / floor_core_s if floor_core_s > 0 else None, 3),
            "reconfigurations": r.reconfigurations,
            "lost": r.lost,
            "duplicated": r.duplicated,
            "predicted_violations_pct": _round(r.engine_violations_pct, 2),
            "predicted_core_s": _round(r.engine_core_s, 1),
        }
        out.append(row)
    return out


def summary(rows: list[dict], floor_core_s: float) -> str:
    """Per strategy over its runs: median and worst violations and executor-core-seconds (vs static peak and
    vs the clairvoyant floor), the sim-to-real gaps, records lost/duplicated, as a markdown table."""
    by: dict[str, list[dict]] = {}
    for row in rows:
        by.setdefault(row["strategy"], []).append(row)
    lines = [
        f"Median and worst over runs (clairvoyant floor {floor_core_s:.0f} executor-core-s; sim-to-real: engine "
        "model prediction minus the real run, largest gap over runs):",
        "",
        "| strategy | runs | viol. % median (worst) | core-s median (worst) | vs static peak median | vs floor median "
        "(worst) | reconf. median | pred. viol. gap pp | pred. core-s gap % | lost | dup. |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rs in by.items():
        v = [r["violations_pct"] for r in rs]
        c = [r["core_s"] for r in rs]
        fl = [r["core_s_vs_floor"] for r in rs if r["core_s_vs_floor"] is not None]
        sp = [r["core_s_vs_static_peak"] for r in rs if r["core_s_vs_static_peak"] is not None]
        gv = [
            r["predicted_violations_pct"] - r["violations_pct"]
            for r in rs
            if r["predicted_violations_pct"] is not None
        ]
        gc = [
            100.0 * (r["predicted_core_s"] - r["core_s"]) / r["core_s"]
            for r in rs
            if r["predicted_core_s"] is not None and r["core_s"] > 0
        ]
        lines.append(
            f"| {name} | {len(rs)} | {np.median(v):.0f} ({max(v):.0f}) | {np.median(c):.0f} ({max(c):.0f}) | "
            f"{fmt(np.median(sp) if sp else None)} | {fmt(np.median(fl) if fl else None)} "
            f"({fmt(max(fl) if fl else None)}) | {np.median([r['reconfigurations'] for r in rs]):.0f} | "
            f"{fmt(max(gv, key=abs) if gv else None, 0)} | {fmt(max(gc, key=abs) if gc else None, 0)} | "
            f"{sum(r['lost'] for r in rs)} | {sum(r['duplicated'] for r in rs)} |"
        )
    return "\n".join(lines) + "\n"


def fmt(x: float | None, digits: int = 2) -> str:
    """``x`` rounded to ``digits`` decimals, "-" when there is none."""
    return "-" if x is None else f"{x:.{digits}f}"
