"""Server-side downsampling of time series for the charts (pure numpy, no Django).

- :func:`lttb`: Largest-Triangle-Three-Buckets (Steinarsson 2013): keeps the visual shape of one line, including
  its extremes, with ``n_out`` points; x and y keep their units (x: seconds, y: whatever the series measures).
- :func:`minmax`: per bucket the minimum and the maximum in time order (2 points per bucket): every extreme kept.
- :func:`bucket_reduce`: several series sharing one x axis (stacked areas) reduced per bucket with ``mean``,
  ``max`` or ``last``; the x of a bucket is its first sample's x.

Non-finite values (NaN = no data) are allowed: LTTB and minmax skip them inside a bucket, a bucket of only NaN
yields NaN (a gap in the chart).
"""

from __future__ import annotations

import numpy as np

DEFAULT_POINTS = 2000


def _edges(n: int, n_buckets: int) -> np.ndarray:
    """Bucket boundaries (indices) splitting ``range(n)`` into ``n_buckets`` nearly equal buckets."""
    return np.linspace(0, n, n_buckets + 1).round().astype(np.int64)


def lttb(x: np.ndarray, y: np.ndarray, n_out: int = DEFAULT_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Downsample ``(x, y)`` (x increasing) to at most ``n_out`` points with LTTB; first and last points kept.

    Returns ``(x, y)`` of the selected samples (a copy when no reduction is needed)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n_out < 3 or n <= n_out:
        return x.copy(), y.copy()
    finite = np.isfinite(y)
    y_f = np.where(finite, y, 0.0)
    edges = _edges(n - 2, n_out - 2) + 1  # inner buckets over indices 1 .. n-2
    # averages of the next bucket, computed once for all buckets (NaN ignored)
    csum_x = np.concatenate(([0.0], np.cumsum(x)))
    csum_y = np.concatenate(([0.0], np.cumsum(y_f)))
    csum_c = np.concatenate(([0], np.cumsum(finite)))
    nxt_lo = np.append(edges[1:-1], n - 1)
    nxt_hi = np.append(edges[2:], n)
    cnt = csum_c[nxt_hi] - csum_c[nxt_lo]
    avg_x = (csum_x[nxt_hi] - csum_x[nxt_lo]) / np.maximum(nxt_hi - nxt_lo, 1)
    avg_y = np.where(cnt > 0, (csum_y[nxt_hi] - csum_y[nxt_lo]) / np.maximum(cnt, 1), np.nan)
    nb = n_out - 2
    sizes = edges[1:] - edges[:-1]
    if int(sizes.max()) <= PY_BUCKET_MAX:
        return _lttb_small_buckets(x, y, y_f, edges, avg_x, avg_y, n_out)
    # the buckets as rows of a padded index matrix (sizes differ by at most one; the padding repeats a bucket's
    # last index, which argmax never prefers over its first occurrence), so each step is a few vector operations
    width = max(int(sizes.max()), 1)
    idx = edges[:-1, None] + np.minimum(np.arange(width)[None, :], np.maximum(sizes - 1, 0)[:, None])
    xs, ys = x[idx], y[idx]
    has_nan = (~np.isfinite(ys)).any(axis=1).tolist()
    avg_x_l, avg_y_l = avg_x.tolist(), avg_y.tolist()
    empty = (sizes <= 0).tolist()
    out = np.empty(n_out, dtype=np.int64)
    out[0], out[-1] = 0, n - 1
    ax, ay = float(x[0]), float(y_f[0])
    for i in range(nb):
        if empty[i]:
            out[i + 1] = edges[i]
            continue
        bx, by = avg_x_l[i], avg_y_l[i]
        if by != by:  # NaN: the next bucket has no data
            by = ay
        # twice the triangle (a, point, b) area = |p * y + q * x + r|
        p, q = ax - bx, by - ay
        r = -p * ay - q * ax
        area = np.abs(p * ys[i] + q * xs[i] + r)
        if has_nan[i]:
            area = np.nan_to_num(area, nan=-1.0)
        j = int(edges[i]) + int(area.argmax())
        out[i + 1] = j
        ax = float(x[j])
        if finite[j]:
            ay = float(y[j])
    return x[out], y[out]


#: buckets of at most this many samples are scanned in plain Python, larger ones with numpy: the few numpy calls
#: per bucket cost more than a plain scan of a short bucket (measured: a month of minutes in 2000 points, 22 per
#: bucket, 13 ms against 36 ms; numpy wins from ~80 per bucket, a year of minutes in 2000 points)
PY_BUCKET_MAX = 64


def _lttb_small_buckets(
    x: np.ndarray,
    y: np.ndarray,
    y_f: np.ndarray,
    edges: np.ndarray,
    avg_x: np.ndarray,
    avg_y: np.ndarray,
    n_out: int,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`lttb`'s bucket scan over Python lists (same selection: the first largest area, NaN never chosen
    unless the whole bucket is NaN)."""
    xl, yl, el = x.tolist(), y.tolist(), edges.tolist()
    axl, ayl = avg_x.tolist(), avg_y.tolist()
    out = [0] * n_out
    out[-1] = len(xl) - 1
    ax, ay = xl[0], float(y_f[0])
    for i in range(n_out - 2):
        lo, hi = el[i], el[i + 1]
        if hi <= lo:
            out[i + 1] = lo
            continue
        bx, by = axl[i], ayl[i]
        if by != by:  # NaN: the next bucket has no data
            by = ay
        p, q = ax - bx, by - ay
        r = -p * ay - q * ax
        best, j = -1.0, lo
        for k in range(lo, hi):
            yk = yl[k]
            if yk == yk:
                area = abs(p * yk + q * xl[k] + r)
                if area > best:
                    best, j = area, k
        out[i + 1] = j
        ax = xl[j]
        if yl[j] == yl[j]:
            ay = yl[j]
    idx = np.array(out, dtype=np.int64)
    return x[idx], y[idx]


def minmax(x: np.ndarray, y: np.ndarray, n_out: int = DEFAULT_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Downsample to at most ``n_out`` points: the minimum and the maximum of each of ``n_out // 2`` buckets,
    in time order (NaN ignored; an all-NaN bucket gives one NaN point)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n <= n_out or n_out < 2:
        return x.copy(), y.copy()
    nb = n_out // 2
    edges = _edges(n, nb)
    idx: list[int] = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if hi <= lo:
            continue
        seg = y[lo:hi]
        if not np.isfinite(seg).any():
            idx.append(lo)
            continue
        i_min = lo + int(np.nanargmin(seg))
        i_max = lo + int(np.nanargmax(seg))
        idx.extend(sorted({i_min, i_max}))
    sel = np.array(idx, dtype=np.int64)
    return x[sel], y[sel]


def bucket_reduce(
    x: np.ndarray, ys: np.ndarray, n_out: int = DEFAULT_POINTS, how: str = "mean"
) -> tuple[np.ndarray, np.ndarray]:
    """Reduce series ``ys`` (shape ``(n, m)``: m series over one x axis) to at most ``n_out`` rows.

    ``how``: ``mean`` (NaN ignored), ``max`` (NaN ignored) or ``last`` (the bucket's last row). Vectorised with
    ``np.add.reduceat`` / ``np.maximum.reduceat``: O(n m)."""
    x = np.asarray(x, dtype=float)
    ys = np.asarray(ys)
    if how != "max" or not np.issubdtype(ys.dtype, np.floating):
        ys = ys.astype(float)  # a maximum is exact in float32; sums are taken in float64
    if ys.ndim == 1:
        ys = ys[:, None]
    n = len(x)
    if n <= n_out or n_out < 1:
        return x.copy(), ys.astype(float)
    edges = _edges(n, n_out)
    starts = np.unique(edges[:-1][edges[:-1] < n])
    if how == "last":
        ends = np.append(starts[1:], n) - 1
        return x[starts], ys[ends]
    if how == "max":  # fmax ignores NaN (a bucket of only NaN stays NaN); infinities are kept out as before
        out = np.fmax.reduceat(np.where(np.isinf(ys), np.nan, ys), starts, axis=0).astype(float)
        return x[starts], out
    finite = np.isfinite(ys)
    if how == "mean":
        sums = np.add.reduceat(np.where(finite, ys, 0.0), starts, axis=0)
        counts = np.add.reduceat(finite.astype(np.int64), starts, axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        return x[starts], out
    raise ValueError(f"how: must be mean, max or last, got {how!r}")


def runs(x: np.ndarray, flags: np.ndarray, step: float, max_runs: int = 300) -> list[tuple[float, float]]:
    """Intervals ``[start, end)`` (x units) where ``flags`` is true; each sample covers ``[x, x + step)``.

    When there are more than ``max_runs`` intervals, gaps shorter than needed are closed (neighbouring runs
    merged) until at most ``max_runs`` remain, so shading stays cheap to draw."""
    x = np.asarray(x, dtype=float)
    f = np.asarray(flags, dtype=bool)
    if not f.any():
        return []
    d = np.diff(np.concatenate(([0], f.astype(np.int8), [0])))
    starts = x[np.flatnonzero(d == 1)]
    end_idx = np.flatnonzero(d == -1) - 1
    ends = x[end_idx] + step
    if len(starts) > max_runs:
        gaps = starts[1:] - ends[:-1]
        # keep the (max_runs - 1) largest gaps, merge across the others
        keep = np.sort(np.argsort(gaps)[::-1][: max_runs - 1])
        new_starts = np.concatenate(([starts[0]], starts[keep + 1]))
        new_ends = np.concatenate((ends[keep], [ends[-1]]))
        starts, ends = new_starts, new_ends
    return [(float(a), float(b)) for a, b in zip(starts, ends, strict=True)]


def merge_gaps(
    intervals: list[tuple[float, float, str]], max_gaps: int = 300
) -> list[tuple[float, float, str]]:
    """Merge time-ordered ``(start, end, reason)`` intervals that touch and share a reason (x units); at most
    ``max_gaps`` are kept (the longest), so a long history of short gaps stays cheap to draw."""
    out: list[list] = []
    for a, b, reason in intervals:
        if out and out[-1][2] == reason and a <= out[-1][1] + 1e-6:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b, reason])
    if len(out) > max_gaps:
        keep = sorted(sorted(range(len(out)), key=lambda i: out[i][0] - out[i][1])[:max_gaps])
        out = [out[i] for i in keep]
    return [(float(a), float(b), str(r)) for a, b, r in out]


def break_at(x: list, y: list, starts: list[float]) -> tuple[list, list]:
    """Insert a null point at each of ``starts`` (x units, sorted) into a time-ordered line, so that a chart does
    not draw the line across a gap."""
    if not starts:
        return x, y
    xs, ys, j = [], [], 0
    for xi, yi in zip(x, y, strict=True):
        while j < len(starts) and starts[j] <= xi:
            xs.append(starts[j])
            ys.append(None)
            j += 1
        xs.append(xi)
        ys.append(yi)
    return xs, ys
