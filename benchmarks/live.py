"""What ``bench_spark`` and ``bench_flink`` share (issue 21): the machine-readable record (the same keys for both
engines), the median/worst summary of repeated runs, and the clairvoyant floor of a trace.

One object per strategy and run (``JSON_KEYS``): ``engine`` ("spark", "flink"), ``strategy``, ``run`` (1-based
repetition), ``periods`` (control periods measured), ``cold_start`` (False for a ``-pretrained`` variant),
``violations_pct`` (% of periods whose end-to-end latency exceeded R_max), ``core_s`` (core-seconds used: Spark
executor-cores, Flink task slots of the controlled operators), ``core_s_vs_static_peak``, ``core_s_vs_floor``
(against the clairvoyant floor of the run's rates), ``floor_core_s`` (that floor: the core-seconds of every period
sized for its own mean rate at the per-replica capacity the bench assumes or, on Flink, measured; the rows
recorded before the key existed carry the floor their run printed: Flink's nominal 1,540 slot-s up to run 15 of
model-based-trend), ``reconfigurations``, ``lost`` / ``duplicated`` (records, sink
vs trace), ``predicted_violations_pct`` / ``predicted_core_s`` (an engine model's prediction for the run's own
series: the recorded deployments replayed on the model, so its core-seconds are the run's own for every strategy
whose deployments the run recorded; None when the engine has none or it cannot be fitted),
``closed_loop_violations_pct`` / ``closed_loop_core_s`` (what the run's policy itself, run cold through the
product on the engine model fitted from the run, does: the model and the policy predicted together; None where
there is no such simulation, e.g. Spark, a pre-trained or a non-policy strategy).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

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
    "floor_core_s",
    "reconfigurations",
    "lost",
    "duplicated",
    "predicted_violations_pct",
    "predicted_core_s",
    "closed_loop_violations_pct",
    "closed_loop_core_s",
)


def round_or_none(x: float | None, digits: int) -> float | None:
    """``x`` rounded; None for None or a non-finite number (JSON has no NaN)."""
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def rows_to_fill(json_path: str | None, unit: str) -> tuple[list[dict[str, Any]], dict[tuple, dict], str]:
    """``--predict-from``'s rows of ``--json PATH`` (none without a path), the same by (strategy, run), and the
    table's header (core-seconds in ``unit``); CommandError naming the file when it cannot be read."""
    from django.core.management.base import CommandError

    rows: list[dict[str, Any]] = []
    if json_path:
        try:
            rows = json.loads(Path(json_path).read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"--json: {json_path}: {exc}") from None
    header = (
        f"| strategy | run | violations % measured (replayed; closed loop) | {unit} measured (replayed; closed "
        "loop) |\n|---|---|---|---|"
    )
    return rows, {(row["strategy"], row["run"]): row for row in rows}, header


def predicted_row(
    row: dict[str, Any] | None,
    name: str,
    run: int,
    predicted: tuple[float | None, float | None],
    closed_loop: tuple[float | None, float | None],
) -> str:
    """``--predict-from``'s table line of one run (measured, then replayed and closed-loop violations % and
    core-seconds), filling the ``predicted_*`` / ``closed_loop_*`` keys of its JSON ``row`` when there is one."""
    if row is not None:
        row["predicted_violations_pct"] = round_or_none(predicted[0], 2)
        row["predicted_core_s"] = round_or_none(predicted[1], 1)
        row["closed_loop_violations_pct"] = round_or_none(closed_loop[0], 2)
        row["closed_loop_core_s"] = round_or_none(closed_loop[1], 1)
    measured = row or {}
    return (
        f"| {name} | {run} | {measured.get('violations_pct', '-')} ({fmt(predicted[0], 1)}; "
        f"{fmt(closed_loop[0], 1)}) | {measured.get('core_s', '-')} ({fmt(predicted[1], 0)}; "
        f"{fmt(closed_loop[1], 0)}) |"
    )


def _ratio(x: float, base: float | None) -> float | None:
    return round_or_none(x / base if base is not None and base > 0 else None, 3)


def record(
    engine: str,
    strategy: str,
    run: int,
    periods: int,
    cold_start: bool,
    violations_pct: float,
    core_s: float,
    static_peak_core_s: float | None,
    floor_core_s: float | None,
    reconfigurations: int,
    lost: int,
    duplicated: int,
    predicted_violations_pct: float | None = None,
    predicted_core_s: float | None = None,
    closed_loop_violations_pct: float | None = None,
    closed_loop_core_s: float | None = None,
) -> dict[str, Any]:
    """One object with exactly ``JSON_KEYS`` (in that order); ratios are None without a positive base."""
    row: dict[str, Any] = {
        "engine": engine,
        "strategy": strategy,
        "run": int(run),
        "periods": int(periods),
        "cold_start": bool(cold_start),
        "violations_pct": round_or_none(violations_pct, 2),
        "core_s": round(float(core_s), 1),
        "core_s_vs_static_peak": _ratio(core_s, static_peak_core_s),
        "core_s_vs_floor": _ratio(core_s, floor_core_s),
        "floor_core_s": round_or_none(floor_core_s, 1),
        "reconfigurations": int(reconfigurations),
        "lost": int(lost),
        "duplicated": int(duplicated),
        "predicted_violations_pct": round_or_none(predicted_violations_pct, 2),
        "predicted_core_s": round_or_none(predicted_core_s, 1),
        "closed_loop_violations_pct": round_or_none(closed_loop_violations_pct, 2),
        "closed_loop_core_s": round_or_none(closed_loop_core_s, 1),
    }
    assert tuple(row) == JSON_KEYS
    return row


def summary(rows: list[dict], floor_core_s: float, unit: str = "core-s") -> str:
    """Per strategy over its runs: median and worst violations and ``unit`` (vs static peak and vs the clairvoyant
    floor), the sim-to-real gaps, records lost/duplicated, as a markdown table."""
    by: dict[str, list[dict]] = {}
    for row in rows:
        by.setdefault(row["strategy"], []).append(row)
    lines = [
        f"Median and worst over runs (clairvoyant floor {floor_core_s:.0f} {unit}; sim-to-real: engine "
        "model prediction minus the real run, largest gap over runs):",
        "",
        "| strategy | runs | viol. % median (worst) | core-s median (worst) | vs static peak median | vs floor median "
        "(worst) | reconf. median | pred. viol. gap pp | pred. core-s gap % | closed-loop viol. gap pp | "
        "closed-loop core-s gap % | lost | dup. |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rs in by.items():
        v = [r["violations_pct"] for r in rs if r["violations_pct"] is not None]
        c = [r["core_s"] for r in rs]
        fl = [r["core_s_vs_floor"] for r in rs if r["core_s_vs_floor"] is not None]
        sp = [r["core_s_vs_static_peak"] for r in rs if r["core_s_vs_static_peak"] is not None]
        gv, gc = _gaps(rs, "predicted_violations_pct", "predicted_core_s")
        lv, lc = _gaps(rs, "closed_loop_violations_pct", "closed_loop_core_s")
        lines.append(
            f"| {name} | {len(rs)} | {fmt(np.median(v) if v else None, 0)} ({fmt(max(v) if v else None, 0)}) | "
            f"{np.median(c):.0f} ({max(c):.0f}) | "
            f"{fmt(np.median(sp) if sp else None)} | {fmt(np.median(fl) if fl else None)} "
            f"({fmt(max(fl) if fl else None)}) | {np.median([r['reconfigurations'] for r in rs]):.0f} | "
            f"{_worst(gv)} | {_worst(gc)} | {_worst(lv)} | {_worst(lc)} | "
            f"{sum(r['lost'] for r in rs)} | {sum(r['duplicated'] for r in rs)} |"
        )
    return "\n".join(lines) + "\n"


def _gaps(rows: list[dict], violations_key: str, core_s_key: str) -> tuple[list[float], list[float]]:
    """Per row with a prediction under the keys: predicted minus measured violations (pp), and predicted minus
    measured core-seconds in % of the measured."""
    gv = [
        r[violations_key] - r["violations_pct"]
        for r in rows
        if r.get(violations_key) is not None and r["violations_pct"] is not None
    ]
    gc = [
        100.0 * (r[core_s_key] - r["core_s"]) / r["core_s"]
        for r in rows
        if r.get(core_s_key) is not None and r["core_s"] > 0
    ]
    return gv, gc


def _worst(gaps: list[float]) -> str:
    """The gap of largest magnitude, signed, rounded to a whole number; "-" without any."""
    return fmt(max(gaps, key=abs) if gaps else None, 0)


def fmt(x: float | None, digits: int = 2) -> str:
    """``x`` rounded to ``digits`` decimals, "-" when there is none."""
    return "-" if x is None else f"{x:.{digits}f}"


def clairvoyant_floor(
    count_at: Callable[[float], float], duration_s: float, period_s: float, mu: float, headroom: float = 0.1
) -> float:
    """Capacity-unit-seconds (executor- or slot-seconds) of sizing every period of ``period_s`` s exactly for its own
    mean arrival rate, ``(count_at(b) - count_at(a)) / (b - a)`` records/s, at ``mu`` records/s per unit with
    ``headroom`` (integer units, at least one): no strategy that changes its size once per period and keeps that
    headroom can use less (no lead, lag or backlog)."""
    n = max(1, math.ceil(duration_s / period_s))
    total = 0.0
    for i in range(n):
        a, b = i * period_s, min((i + 1) * period_s, duration_s)
        rate = (count_at(b) - count_at(a)) / max(b - a, 1e-9)
        total += max(1, math.ceil(rate * (1 + headroom) / mu)) * (b - a)
    return total
