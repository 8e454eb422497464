"""Incremental per-application aggregates: totals, a sliding window of the last ``window`` observed periods, and
time windows (last hour, last day, last 7 days) -- all O(1) per tick and per read, whatever the history length.

- totals since the start (``ApplicationControl.periods`` ... ``total_cost``): counters;
- the period window (``summary()["window"]``): a ring buffer (flags byte + resource cost + period length per
  period) with running sums;
- time windows (``windows_summary()`` / ``summary()["windows"]``, ``TIME_WINDOWS``): per window a ring of
  ``buckets`` time buckets of ``width_s`` seconds (periods, no-data periods, violated, reconfigured, resource
  cost in currency, observed seconds), stored in ``ApplicationControl.time_windows`` (format byte 1, then per
  window int64 bucket numbers and float64 sums). Recording a period touches one bucket per window; reading sums
  at most 168 buckets (microseconds). A window ends at ``now_s`` (default: the end of the last recorded period,
  so a paused application still shows its last hour) and is exact to one bucket width (hour: 1 min, day: 15 min,
  week: 1 h) at its old end.

Fractions are of observed periods (no-data periods are counted apart and are in no fraction), compared with the
application's eta_V / eta_R; ``cost_per_hour`` = resource cost / observed seconds * 3600 (currency/h).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from autoscaler.control.models import ApplicationControl

VIOLATED, RECONFIGURED = 1, 2


#: name -> (bucket width (s), number of buckets)
TIME_WINDOWS: dict[str, tuple[float, int]] = {"hour": (60.0, 60), "day": (900.0, 96), "week": (3600.0, 168)}
TIME_WINDOWS_FORMAT = 1
_COLS = ("periods", "no_data_periods", "violated", "reconfigured", "cost", "seconds")


def _load_windows(control: ApplicationControl) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], float]:
    """(window -> (bucket numbers int64[n], sums float64[n, 6]), last recorded time (s)) from the blob."""
    raw = bytes(control.time_windows or b"")
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    size = 1 + 8 + sum(n * 8 * (1 + len(_COLS)) for _, n in TIME_WINDOWS.values())
    if len(raw) != size or raw[0] != TIME_WINDOWS_FORMAT:
        for name, (_, n) in TIME_WINDOWS.items():
            out[name] = (np.full(n, -1, dtype=np.int64), np.zeros((n, len(_COLS))))
        return out, -1.0
    last = float(np.frombuffer(raw, dtype="<f8", count=1, offset=1)[0])
    pos = 9
    for name, (_, n) in TIME_WINDOWS.items():
        index = np.frombuffer(raw, dtype="<i8", count=n, offset=pos).copy()
        pos += 8 * n
        sums = np.frombuffer(raw, dtype="<f8", count=n * len(_COLS), offset=pos).reshape(n, len(_COLS)).copy()
        pos += 8 * n * len(_COLS)
        out[name] = (index, sums)
    return out, last


def _store_windows(control: ApplicationControl, windows: dict, last: float) -> None:
    parts = [bytes([TIME_WINDOWS_FORMAT]), np.array([last], dtype="<f8").tobytes()]
    for name in TIME_WINDOWS:
        index, sums = windows[name]
        parts += [index.astype("<i8").tobytes(), sums.astype("<f8").tobytes()]
    control.time_windows = b"".join(parts)


def record_time_windows(control: ApplicationControl, at_s: float, values: tuple[float, ...]) -> None:
    """Add one period ending at ``at_s`` (s since the epoch) with ``values`` in ``_COLS`` order to every
    time window (O(1): one bucket per window)."""
    windows, last = _load_windows(control)
    for name, (width, n) in TIME_WINDOWS.items():
        index, sums = windows[name]
        b = int(at_s // width)
        i = b % n
        if index[i] != b:
            index[i], sums[i] = b, 0.0
        sums[i] += values
    _store_windows(control, windows, max(last, at_s))


def windows_summary(control: ApplicationControl, now_s: float | None = None) -> dict[str, Any]:
    """Per time window ("hour", "day", "week") and "all" (since the start): periods, no-data periods, cost per
    hour (currency/h), violation and reconfiguration fractions, and whether they are within eta_V / eta_R."""
    app = control.application
    windows, last = _load_windows(control)
    if now_s is not None and now_s < last:
        raise ValueError(
            f"now_s: {now_s} is before the last recorded period ({last}); windows look back from it"
        )
    now_s = last if now_s is None else now_s
    out: dict[str, Any] = {}
    for name, (width, n) in TIME_WINDOWS.items():
        index, sums = windows[name]
        b = int(now_s // width)
        total = sums[(index > b - n) & (index <= b)].sum(axis=0) if now_s >= 0 else np.zeros(len(_COLS))
        out[name] = _fractions(dict(zip(_COLS, total.tolist(), strict=True)), app, width * n)
    out["all"] = _fractions(
        {
            "periods": control.periods,
            "no_data_periods": control.no_data_periods,
            "violated": control.violated_periods,
            "reconfigured": control.reconfigured_periods,
            "cost": control.total_cost,
            "seconds": control.observed_seconds,
        },
        app,
        None,
    )
    return out


def window_summary(control: ApplicationControl, name: str, now_s: float | None = None) -> dict[str, Any]:
    """One entry of :func:`windows_summary` ("hour", "day", "week" or "all"); KeyError names the known ones."""
    if name not in (*TIME_WINDOWS, "all"):
        raise KeyError(f"window: unknown {name!r} (known: {', '.join((*TIME_WINDOWS, 'all'))})")
    return windows_summary(control, now_s)[name]


def _fractions(v: dict[str, float], app, span_s: float | None) -> dict[str, Any]:
    n = int(round(v["periods"]))
    viol = v["violated"] / n if n else None
    reconf = v["reconfigured"] / n if n else None
    return {
        "span_s": span_s,
        "periods": n,
        "no_data_periods": int(round(v["no_data_periods"])),
        "cost": v["cost"],
        "cost_per_hour": v["cost"] * 3600.0 / v["seconds"] if v["seconds"] else None,
        "violation_fraction": viol,
        "reconfiguration_fraction": reconf,
        "eta_v": app.eta_v,
        "eta_r": app.eta_r,
        "within_eta_v": None if viol is None else viol <= app.eta_v,
        "within_eta_r": None if reconf is None else reconf <= app.eta_r,
    }


def record_no_data_period(control: ApplicationControl, at_s: float) -> None:
    """Count a no-data period ending at ``at_s`` in the time windows (the caller counts the total)."""
    record_time_windows(control, at_s, (0.0, 1.0, 0.0, 0.0, 0.0, 0.0))


def record_period(
    control: ApplicationControl,
    *,
    violated: bool,
    reconfigured: bool,
    cost: float,
    seconds: float,
    at_s: float | None = None,
) -> None:
    """Add one observed period (resource ``cost`` in currency over ``seconds``, ending at ``at_s`` s since the
    epoch) to the totals, the period window and (when ``at_s`` is given) the time windows."""
    if at_s is not None:
        record_time_windows(
            control, at_s, (1.0, 0.0, float(violated), float(reconfigured), float(cost), float(seconds))
        )
    control.periods += 1
    control.violated_periods += int(violated)
    control.reconfigured_periods += int(reconfigured)
    control.total_cost += cost
    control.observed_seconds += seconds
    w = control.window
    flags = bytearray(bytes(control.ring_flags or b""))
    costs = bytearray(bytes(control.ring_cost or b""))
    secs = bytearray(bytes(control.ring_seconds or b""))
    if len(flags) != w:
        flags, costs, secs = bytearray(w), bytearray(8 * w), bytearray(8 * w)
        control.ring_pos = control.ring_fill = 0
        control.window_violated = control.window_reconfigured = 0
        control.window_cost = control.window_seconds = 0.0
    pos = control.ring_pos
    if control.ring_fill == w:  # drop the oldest period
        old = flags[pos]
        control.window_violated -= old & VIOLATED
        control.window_reconfigured -= (old & RECONFIGURED) >> 1
        control.window_cost -= struct.unpack_from("<d", costs, 8 * pos)[0]
        control.window_seconds -= struct.unpack_from("<d", secs, 8 * pos)[0]
    else:
        control.ring_fill += 1
    flags[pos] = (VIOLATED if violated else 0) | (RECONFIGURED if reconfigured else 0)
    struct.pack_into("<d", costs, 8 * pos, cost)
    struct.pack_into("<d", secs, 8 * pos, seconds)
    control.window_violated += int(violated)
    control.window_reconfigured += int(reconfigured)
    control.window_cost += cost
    control.window_seconds += seconds
    control.ring_pos = (pos + 1) % w
    control.ring_flags, control.ring_cost, control.ring_seconds = bytes(flags), bytes(costs), bytes(secs)


def summary(control: ApplicationControl) -> dict[str, Any]:
    """Cost per hour and violation / reconfiguration fractions (all time and over the window) vs eta_V/eta_R."""
    app = control.application
    n, wn = control.periods, control.ring_fill

    def frac(a: int, b: int) -> float | None:
        return a / b if b else None

    return {
        "periods": n,
        "no_data_periods": control.no_data_periods,
        "cost_per_hour": control.total_cost * 3600.0 / control.observed_seconds
        if control.observed_seconds
        else None,
        "violation_fraction": frac(control.violated_periods, n),
        "reconfiguration_fraction": frac(control.reconfigured_periods, n),
        "window": {
            "periods": wn,
            "cost_per_hour": control.window_cost * 3600.0 / control.window_seconds
            if control.window_seconds
            else None,
            "violation_fraction": frac(control.window_violated, wn),
            "reconfiguration_fraction": frac(control.window_reconfigured, wn),
        },
        "eta_v": app.eta_v,
        "eta_r": app.eta_r,
        "within_eta_v": None if not wn else control.window_violated / wn <= app.eta_v,
        "within_eta_r": None if not wn else control.window_reconfigured / wn <= app.eta_r,
        "windows": windows_summary(control),
    }
