"""The application dashboard's data: rollup rows of a time range, derived series, downsampled for the charts.

Every series ships at most ``max_points`` points (default 2000): lines with LTTB (shape and extremes kept),
stacked areas reduced per bucket on one shared x axis, violations as merged intervals. Times are sent as
milliseconds since the epoch (plotly date axes).

The request only reads: the rollup is maintained by the Celery beat task ``dashboard.rollup``. When it is behind
the ledger (a bulk import, a worker that was down, the first minutes after an upgrade) the answer says so:
``rolledToMs`` (end of the last rolled-up period), ``ledgerLastMs`` (end of the newest finished tick) and
``behindPeriods``; the page shows "rolled up to <time>, N periods not yet shown" above the charts and the charts
end at ``rolledToMs``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from django.core.cache import cache
from django.urls import reverse

from autoscaler.models import Application
from dashboard.monitor import rollup, series

RANGES_S: dict[str, float | None] = {"hour": 3600.0, "day": 86400.0, "week": 7 * 86400.0, "all": None}
MAX_POINTS = 2000
MAX_EVENTS = 1000
#: newest missed slots read per request (merged into gaps)
MAX_GAP_ROWS = 5000
#: seconds a computed answer stays cached (it is keyed by the rollup's state, so never stale)
CACHE_S = 300
#: sliding window of the budget burn-down (periods), as the control plane's aggregates
WINDOW_PERIODS = 60


def clean(values: np.ndarray, digits: int = 4) -> list[float | None]:
    """JSON-ready list: rounded to ``digits`` significant digits, non-finite -> None."""
    v = np.asarray(values, dtype=float)
    finite = np.isfinite(v)
    safe = np.where(finite & (v != 0), np.abs(v), 1.0)
    scale = 10.0 ** (digits - 1 - np.floor(np.log10(safe)))
    out = (np.round(np.where(finite, v, 0.0) * scale) / scale).tolist()
    if not finite.all():
        for i in np.flatnonzero(~finite).tolist():
            out[i] = None
    return out


def ms(times: np.ndarray) -> list[int]:
    return (np.asarray(times, dtype=float) * 1000.0).round().astype(np.int64).tolist()


def resolve_range(
    app: Application, name: str, start: float | None, end: float | None
) -> tuple[float | None, float | None, float | None]:
    """(start, end, last) in s. ``name`` picks the last hour/day/week/all of the recorded data (ending at the
    latest period); explicit ``start``/``end`` (s, from a zoom) win."""
    bounds = rollup.time_bounds(app)
    last = bounds[1] if bounds else None
    if start is not None or end is not None:
        return start, end, last
    span = RANGES_S[name]
    if span is None or last is None:
        return None, None, last
    return last - span, last, last


def _cum_fraction(flags: np.ndarray) -> np.ndarray:
    """Running fraction of true flags since the first sample (NaN = not counted)."""
    ok = np.isfinite(flags)
    num = np.cumsum(np.where(ok, flags, 0.0))
    den = np.cumsum(ok)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1), np.nan)


def _window_fraction(flags: np.ndarray, w: int) -> np.ndarray:
    ok = np.isfinite(flags)
    num = np.cumsum(np.where(ok, flags, 0.0))
    den = np.cumsum(ok).astype(float)
    num_w = num - np.concatenate((np.zeros(w), num[:-w])) if len(num) > w else num
    den_w = den - np.concatenate((np.zeros(w), den[:-w])) if len(den) > w else den
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den_w > 0, num_w / np.maximum(den_w, 1), np.nan)


def dashboard_data(
    app: Application,
    range_name: str = "day",
    start: float | None = None,
    end: float | None = None,
    max_points: int = MAX_POINTS,
) -> dict[str, Any]:
    """Everything the dashboard's charts draw (see the module doc), read from the rollup as it is.

    Answers are cached (``CACHE_S``) under the rollup's state, so a dashboard polling while no new period
    arrived costs two small queries; any new period or definition change makes a new key."""
    return json.loads(dashboard_json(app, range_name, start, end, max_points))


def dashboard_json(
    app: Application,
    range_name: str = "day",
    start: float | None = None,
    end: float | None = None,
    max_points: int = MAX_POINTS,
) -> bytes:
    """:func:`dashboard_data` encoded as JSON (UTF-8); the encoded answer is what is cached."""
    state = rollup.state(app)
    lag = rollup.lag(app)
    key = (
        f"dash:{app.pk}:{app.updated_at.timestamp()}:{state}:{lag['ledgerLast']}:{range_name}:{start}:{end}:"
        f"{max_points}"
    )
    hit = cache.get(key)
    if hit is not None:
        return hit
    out = _compute(app, range_name, start, end, max_points)
    out["rolledToMs"] = None if lag["rolledTo"] is None else lag["rolledTo"] * 1000.0
    out["ledgerLastMs"] = None if lag["ledgerLast"] is None else lag["ledgerLast"] * 1000.0
    out["behindPeriods"] = lag["behindPeriods"]
    body = json.dumps(out, separators=(",", ":")).encode()
    cache.set(key, body, CACHE_S)
    return body


def _compute(
    app: Application, range_name: str, start: float | None, end: float | None, max_points: int
) -> dict[str, Any]:
    start, end, last = resolve_range(app, range_name, start, end)
    frame = rollup.load(app, start, end, max_events=MAX_EVENTS)
    n = len(frame)
    t = frame.times
    period_s = float(np.median(np.diff(t))) if n > 1 else float(app.om_period_s)
    out: dict[str, Any] = {
        "application": app.name,
        "range": range_name,
        "start": None if start is None else start * 1000.0,
        "end": None if end is None else end * 1000.0,
        "lastMs": None if last is None else last * 1000.0,
        "rows": n,
        "maxPoints": max_points,
        "periodS": period_s,
        "rMaxMs": app.r_max_ms,
        "etaV": app.eta_v,
        "etaR": app.eta_r,
    }
    if n == 0:
        out.update(empty=True, events=[])
        return out
    out["empty"] = False
    # slots without a decision (worker, broker or database down, paused, stale): shaded with their reason
    gaps = missed_gaps(frame)
    out["gaps"] = [[a * 1000.0, b * 1000.0, reason] for a, b, reason in gaps]
    breaks = [round(a * 1000.0) for a, _, _ in gaps]
    # lines: LTTB, broken at the gaps (no line drawn across a gap)
    for key, col in (("rate", "rate"), ("capacity", "capacity"), ("rt", "rt_ms")):
        y = frame.col(col)
        if key == "rt":
            y = np.where(np.isinf(y), np.nan, y)
        x_s, y_s = series.lttb(t, y, max_points)
        x_b, y_b = series.break_at(ms(x_s), clean(y_s), breaks)
        out[key] = {"x": x_b, "y": y_b}
    # saturated periods: the response time is unbounded (a queue that only grows): no point of the line, so
    # they are sent as intervals for the chart to mark "> R_max, saturated"
    saturated = np.isinf(frame.col("rt_ms"))
    out["saturated"] = [[a * 1000.0, b * 1000.0] for a, b in series.runs(t, saturated, period_s)]
    out["saturatedPeriods"] = int(saturated.sum())
    finite_rt = frame.col("rt_ms")[np.isfinite(frame.col("rt_ms"))]
    out["rtMaxMs"] = float(finite_rt.max()) if len(finite_rt) else None
    violated = frame.col("violated")
    out["violations"] = [[a * 1000.0, b * 1000.0] for a, b in series.runs(t, violated == 1.0, period_s)]
    out["violatedPeriods"] = int(np.nansum(violated))
    # budget burn-down: running and sliding-window fractions vs eta
    reconf = frame.col("reconfigured")
    burn = np.column_stack(
        [
            _cum_fraction(violated),
            _cum_fraction(reconf),
            _window_fraction(violated, WINDOW_PERIODS),
            _window_fraction(reconf, WINDOW_PERIODS),
        ]
    )
    bx, by = series.bucket_reduce(t, burn, max_points, "last")
    out["burn"] = {
        "x": ms(bx),
        "violation": clean(by[:, 0]),
        "reconfiguration": clean(by[:, 1]),
        "violationWindow": clean(by[:, 2]),
        "reconfigurationWindow": clean(by[:, 3]),
        "window": WINDOW_PERIODS,
    }
    # cost per hour and cumulative cost by node type
    all_types = [c.split(":", 1)[1] for c in frame.prefixed("cost:")]
    out["nodeTypes"] = all_types  # every type of the application, in its catalog's order (stable colours)
    out["operators"] = sorted({c.split(":")[1] for c in frame.prefixed("replicas:")})
    # types that cost nothing in the range (never used) are left out: nothing to stack, fewer series to draw
    spent = np.nansum(frame.cols([f"cost:{ty}" for ty in all_types]), axis=0) > 0 if all_types else []
    types = [ty for ty, used in zip(all_types, spent, strict=True) if used]
    type_cols = [f"cost:{ty}" for ty in types]
    costs = frame.cols(type_cols)
    per_hour = costs * 3600.0 / period_s
    cumulative = np.cumsum(np.nan_to_num(costs), axis=0)
    cx, cy = series.bucket_reduce(t, per_hour, max_points, "mean")
    _, cum = series.bucket_reduce(t, cumulative, max_points, "last")
    out["cost"] = {
        "x": ms(cx),
        "types": types,
        "perHour": {ty: clean(cy[:, j]) for j, ty in enumerate(types)},
        "cumulative": {ty: clean(cum[:, j]) for j, ty in enumerate(types)},
        "total": float(np.nansum(costs)),
    }
    # replicas per operator stacked by node type (peak per bucket)
    rep_cols = frame.prefixed("replicas:")
    reps = frame.cols(rep_cols, np.float32)  # counts: exact in float32, the maximum needs no widening
    used = (reps > 0).any(axis=0) if reps.shape[1] else np.zeros(0, dtype=bool)  # NaN > 0 is false
    keep = np.flatnonzero(used).tolist()
    rx, ry = series.bucket_reduce(t, reps[:, keep], max_points, "max")
    out["replicas"] = {
        "x": ms(rx),
        "series": [
            {"operator": rep_cols[j].split(":")[1], "type": rep_cols[j].split(":")[2], "y": clean(ry[:, i])}
            for i, j in enumerate(keep)
        ],
    }
    out["events"] = scaling_events(frame)
    return out


def missed_gaps(frame: rollup.Frame) -> list[tuple[float, float, str]]:
    """The range's missed slots (the newest ``MAX_GAP_ROWS``, as the rollup keeps them) as ``(start, end,
    reason)`` intervals (s), neighbours with one reason merged. No query: the rollup read them from the ledger."""
    got = frame.gaps[-MAX_GAP_ROWS:]
    return series.merge_gaps([(float(t), float(t) + float(p), reason or "missed") for t, p, reason in got])


def scaling_events(frame: rollup.Frame) -> list[dict[str, Any]]:
    """The range's granted and denied scaling proposals (newest ``MAX_EVENTS``, oldest first), with links, the
    AM's reason and whether the OM explored (chose an action it did not rank best)."""
    base = reverse("dashboard:decision-detail", args=[0])[: -len("0/")]
    out = []
    for e in frame.events[-MAX_EVENTS:]:
        t, pk, outcome, op, action = e[:5]
        out.append(
            {
                "t": t * 1000.0,
                "id": pk,
                "outcome": outcome,
                "operator": op,
                "action": action,
                "reason": e[5] if len(e) > 5 else "",
                "explored": bool(e[6]) if len(e) > 6 else False,
                "url": f"{base}{pk}/",
            }
        )
    return out
