"""Server-side downsampling (dashboard.monitor.series) and the agent inspection helpers (policies.agent_inspection)."""

from __future__ import annotations

import numpy as np
import pytest

from dashboard.monitor import series
from policies import agent_inspection


def noisy(n: int = 50_000, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.arange(n, dtype=float) * 60.0
    y = 100 + 20 * np.sin(np.arange(n) / 500.0) + rng.normal(0, 2, n)
    y[n * 12 // 50] = 900.0  # a one-sample spike
    y[n * 40 // 50 + 1] = -500.0  # and a one-sample dip
    return x, y


def test_lttb_keeps_ends_extremes_and_point_budget():
    x, y = noisy()
    xs, ys = series.lttb(x, y, 1000)
    assert len(xs) == len(ys) == 1000
    assert xs[0] == x[0] and xs[-1] == x[-1]
    assert np.all(np.diff(xs) > 0)
    assert 900.0 in ys and -500.0 in ys  # single-sample extremes survive a 50x reduction
    # every selected point is an original sample
    assert np.array_equal(ys, y[(xs / 60.0).astype(int)])


def reference_lttb(x, y, n_out):
    """LTTB as published (Steinarsson 2013, Alg. 4.2), plain Python."""
    n = len(x)
    every = (n - 2) / (n_out - 2)
    out, a = [0], 0
    for i in range(n_out - 2):
        lo, hi = int(i * every + 0.5) + 1, int((i + 1) * every + 0.5) + 1
        nlo, nhi = hi, min(int((i + 2) * every + 0.5) + 1, n)
        if i == n_out - 3:
            nlo, nhi = n - 1, n
        bx = sum(x[nlo:nhi]) / (nhi - nlo)
        by = sum(y[nlo:nhi]) / (nhi - nlo)
        best, j = -1.0, lo
        for k in range(lo, hi):
            area = abs((x[a] - bx) * (y[k] - y[a]) - (x[a] - x[k]) * (by - y[a]))
            if area > best:
                best, j = area, k
        out.append(j)
        a = j
    out.append(n - 1)
    return out


def test_lttb_selects_the_same_points_as_the_reference_algorithm():
    x, y = noisy(7919, seed=5)
    xs, _ = series.lttb(x, y, 500)
    ref = reference_lttb(x.tolist(), y.tolist(), 500)
    got = (xs / 60.0).round().astype(int).tolist()
    assert got == ref


@pytest.mark.parametrize("n,n_out", [(7919, 500), (43_200, 2000), (10_081, 1280), (50_000, 400)])
def test_lttb_plain_scan_and_numpy_scan_select_the_same_points(monkeypatch, n, n_out):
    """Short buckets are scanned in plain Python, long ones with numpy: both pick the same samples, with gaps."""
    x, y = noisy(n, seed=n)
    y[n // 3 : n // 3 + 90] = np.nan  # whole buckets without data
    y[np.random.default_rng(n).random(n) < 0.03] = np.nan
    monkeypatch.setattr(series, "PY_BUCKET_MAX", 10**9)
    plain = series.lttb(x, y, n_out)
    monkeypatch.setattr(series, "PY_BUCKET_MAX", 0)
    vector = series.lttb(x, y, n_out)
    assert np.array_equal(plain[0], vector[0]) and np.array_equal(plain[1], vector[1], equal_nan=True)
    assert len(plain[0]) == n_out and np.nanmax(plain[1]) == 900.0


def test_lttb_without_reduction_and_with_gaps():
    x = np.arange(10.0)
    y = np.arange(10.0)
    xs, ys = series.lttb(x, y, 100)
    assert np.array_equal(xs, x) and np.array_equal(ys, y)
    x, y = noisy(5000)
    y[2000:2500] = np.nan  # no data for a while
    xs, ys = series.lttb(x, y, 300)
    assert len(xs) == 300
    assert np.nanmax(ys) == 900.0


def test_minmax_keeps_every_bucket_extreme_in_time_order():
    x, y = noisy(10_000)
    xs, ys = series.minmax(x, y, 200)
    assert len(xs) <= 200
    assert np.all(np.diff(xs) > 0)
    assert ys.max() == y.max() and ys.min() == y.min()
    edges = np.linspace(0, len(x), 101).round().astype(int)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = ys[(xs >= x[lo]) & (xs <= x[hi - 1])]
        assert inside.max() == y[lo:hi].max() and inside.min() == y[lo:hi].min()


def test_bucket_reduce_mean_max_last_match_a_plain_loop():
    rng = np.random.default_rng(1)
    x = np.arange(1003, dtype=float)
    ys = rng.normal(size=(1003, 3))
    ys[5, 1] = np.nan
    edges = np.linspace(0, 1003, 101).round().astype(int)
    for how, fn in (("mean", np.nanmean), ("max", np.nanmax), ("last", lambda a, axis: a[-1])):
        bx, by = series.bucket_reduce(x, ys, 100, how)
        assert by.shape == (100, 3)
        for b, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
            assert bx[b] == x[lo]
            assert np.allclose(by[b], fn(ys[lo:hi], axis=0), equal_nan=True)
    with pytest.raises(ValueError, match="how"):
        series.bucket_reduce(x, ys, 10, "median")


def test_bucket_max_of_float32_rows_ignores_nan_and_infinities():
    """The replicas chart reduces the rollup's float32 columns without widening them: the same maxima, a
    bucket of only NaN (or infinities) stays NaN."""
    rng = np.random.default_rng(2)
    x = np.arange(1000, dtype=float)
    ys = rng.integers(0, 9, size=(1000, 4)).astype(np.float32)
    ys[:10, 0] = np.nan  # a whole bucket without data
    ys[20:30, 1] = np.inf
    ys[25, 1] = 3.0
    ys[40:50, 2] = np.nan
    ys[45, 2] = 7.0
    bx, by = series.bucket_reduce(x, ys, 100, "max")
    assert by.dtype == np.float64 and by.shape == (100, 4)
    for b in range(100):
        seg = ys[b * 10 : (b + 1) * 10].astype(float)
        seg[~np.isfinite(seg)] = np.nan
        want = [np.nan if np.isnan(c).all() else np.nanmax(c) for c in seg.T]
        assert np.allclose(by[b], want, equal_nan=True), b
    assert np.isnan(by[0, 0]) and by[2, 1] == 3.0 and by[4, 2] == 7.0


def test_runs_make_intervals_and_merge_to_a_budget():
    x = np.arange(10) * 60.0
    flags = np.array([0, 1, 1, 0, 0, 1, 0, 1, 1, 1], dtype=bool)
    assert series.runs(x, flags, 60.0) == [(60.0, 180.0), (300.0, 360.0), (420.0, 600.0)]
    assert series.runs(x, flags, 60.0, max_runs=2) == [(60.0, 180.0), (300.0, 600.0)]
    assert series.runs(x, np.zeros(10, dtype=bool), 60.0) == []


def test_learning_curve_is_the_cumulative_average_skipping_nan():
    c = np.array([np.nan, 1.0, 0.0, np.nan, 0.5])
    out = agent_inspection.learning_curve(c)
    assert np.isnan(out[0])
    assert np.allclose(out[1:], [1.0, 0.5, 0.5, 0.5])


def test_greedy_map_matches_the_policys_own_greedy_choice():
    from policies.app_graphs import app_a_pipeline
    from policies.om.qlearning import QLearningPDSPlus
    from policies.operator_model import INFRA_SPEEDUPS, NodeType

    types = tuple(NodeType(f"A{i + 1}", s, s) for i, s in enumerate(INFRA_SPEEDUPS["A"][:3]))
    spec = app_a_pipeline().operator_spec(0, types)
    policy = QLearningPDSPlus(spec, {}, seed=2)
    rng = np.random.default_rng(0)
    k = np.array([1, 0, 0])
    for _ in range(300):  # learn a little on random rates
        a = policy.act(k, float(rng.uniform(0, 600)), bool(rng.random() < 0.2))
        from policies.base import apply_action

        k = apply_action(k, a)
    m = agent_inspection.greedy_map(policy)
    assert m["policy"] == "ql-pds-plus" and m["steps"] == policy.t
    assert len(m["labels"]) == len(m["deployments"]) > 1
    assert len(m["action"][0]) == len(m["levels"]) == policy.n_levels
    for i, dep in enumerate(m["deployments"][:5]):
        for lv in (0, 7, policy.n_levels - 1):
            best, _ = policy._decide(np.array(dep), (lv + 0.5) * m["level_width"], None, True)
            assert m["action"][i][lv] == best
    assert {d for row in m["delta"] for d in row} <= {-1, 0, 1}


def test_greedy_map_rejects_rule_based_policies():
    from policies.app_graphs import app_a_pipeline
    from policies.om.threshold import ThresholdCheapest
    from policies.operator_model import NodeType

    spec = app_a_pipeline().operator_spec(0, (NodeType("A1", 1.0, 1.0),))
    with pytest.raises(ValueError, match="not tabular"):
        agent_inspection.greedy_map(ThresholdCheapest(spec))
