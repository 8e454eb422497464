"""Time-window aggregates (last hour / day / 7 days / all time) against a brute-force recomputation, constant
storage and O(1) cost per recorded period and per read."""

from __future__ import annotations

import time

import numpy as np
import pytest

from autoscaler.control import aggregates
from autoscaler.control.aggregates import TIME_WINDOWS, record_no_data_period, record_period, windows_summary
from autoscaler.control.models import ApplicationControl
from autoscaler.models import Application


def control() -> ApplicationControl:
    return ApplicationControl(application=Application(name="w", eta_v=0.05, eta_r=0.1))


def brute(history, width, n, now_s):
    b = int(now_s // width)
    rows = [h for h in history if b - n < int(h[0] // width) <= b]
    periods = [h for h in rows if not h[1]]
    k = len(periods)
    return {
        "periods": k,
        "no_data_periods": len(rows) - k,
        "violation_fraction": sum(h[2] for h in periods) / k if k else None,
        "reconfiguration_fraction": sum(h[3] for h in periods) / k if k else None,
        "cost": sum(h[4] for h in periods),
    }


def test_windows_match_a_brute_force_recomputation_over_nine_days():
    rng = np.random.default_rng(3)
    c = control()
    history = []
    t0 = 1_800_000_000.0
    for i in range(9 * 24 * 6):  # 10-minute periods over 9 days, with gaps
        at = t0 + 600.0 * i
        if rng.random() < 0.05:
            continue
        if rng.random() < 0.03:
            record_no_data_period(c, at)
            c.no_data_periods += 1
            history.append((at, True, False, False, 0.0))
            continue
        v, r, cost = bool(rng.random() < 0.1), bool(rng.random() < 0.2), float(rng.random())
        record_period(c, violated=v, reconfigured=r, cost=cost, seconds=600.0, at_s=at)
        history.append((at, False, v, r, cost))
    with pytest.raises(ValueError, match="now_s: .* is before the last recorded period"):
        windows_summary(c, history[-1][0] - 3 * 3600.0)
    for now in (None, history[-1][0] + 1800.0, history[-1][0] + 2 * 86400.0):
        got = windows_summary(c, now)
        ref_now = history[-1][0] if now is None else now
        for name, (width, n) in TIME_WINDOWS.items():
            want = brute(history, width, n, ref_now)
            for key, value in want.items():
                assert got[name][key] == pytest.approx(value), (name, now, key)
    allw = windows_summary(c)["all"]
    assert allw["periods"] == sum(not h[1] for h in history)
    assert allw["no_data_periods"] == sum(h[1] for h in history)
    week = windows_summary(c)["week"]
    assert week["within_eta_v"] == (week["violation_fraction"] <= 0.05)
    assert week["cost_per_hour"] == pytest.approx(week["cost"] * 3600.0 / (600.0 * week["periods"]))


def test_storage_is_constant_and_cost_per_period_and_read_is_small():
    c = control()
    sizes = set()
    started = time.perf_counter()
    for i in range(5000):
        record_period(c, violated=i % 7 == 0, reconfigured=False, cost=1.0, seconds=60.0, at_s=60.0 * i)
        sizes.add(len(c.time_windows))
    per_record_ms = (time.perf_counter() - started) * 1000 / 5000
    started = time.perf_counter()
    for _ in range(200):
        windows_summary(c)
    per_read_ms = (time.perf_counter() - started) * 1000 / 200
    assert len(sizes) == 1  # the blob never grows
    assert per_record_ms < 2.0 and per_read_ms < 5.0, (per_record_ms, per_read_ms)
    assert windows_summary(c)["hour"]["periods"] == 60


def test_unknown_window_is_named():
    with pytest.raises(KeyError, match="unknown 'month'"):
        aggregates.window_summary(control(), "month")
