"""Online forecaster of an operator's input rate: seasonal profile + smoothed residual with AR(1) decay
(the ``predictive`` OM policy's rate model, :mod:`policies.om.predictive`).

Model, per control period ``t`` (period length ``period_s`` seconds, declared by the user)::

    x[t] = S(t) + r[t] + noise          (tuples/s)

- ``S`` is the seasonal profile: a per-bin mean of the observed rates over a *week* (bins of ``bin_s`` seconds),
  used once one whole week has been seen; before that the same over a *day*; before a whole day, nothing (0).
  A bin takes in this season's mean of its observations when the bin ends (weight ``1 / seasons seen``, at
  least ``1 / memory_periods``: exponential forgetting), not while it runs: the residual below is measured
  against the profile of the seasons before, so a level shift (a step) stays in the residual for every bin ahead
  instead of being half absorbed by the bin in progress (which made the forecast fall back towards the old
  level). Between bin centres the profile is interpolated linearly (``interpolate``); a bin then takes in its
  season at the end of the next bin, whose first half still reads it.
- ``r`` is the residual level: an exponentially weighted mean (weight ``level_alpha``) of ``x - S``; it carries
  what the profile does not know (this week is busier than the last) and decays towards the profile with the
  AR(1) coefficient ``phi`` learned from its own lag-1 regression (forgetting over one day of periods).
  A rate farther from its one-period forecast than ``jump_sigmas`` error standard deviations (at the forecast)
  sets the level at once (weight 1): a step or a flash crowd, and its end, are followed in one period instead of
  five (at 3 standard deviations, noise set it too: the plan scaled in after every deep dip and out again).
  A run of under-forecasts, each within the noise, that the level follows too slowly (weight ``level_alpha`` of
  each error) is found by a one-sided CUSUM of the standardised one-period errors (Page's test, upward only,
  ``shift_sigmas``): ``C = max(0, C + z - shift_slack)``; when ``C`` exceeds ``shift_sigmas`` the level is raised
  by the rest of the run's mean error (the errors since ``C`` left 0; the level took ``level_alpha`` of this one's)
  and ``C`` restarts. On the Taxi trace's day-305 burst (errors of +3.2, +1.0, +2.5, +2.8, +3.3 standard
  deviations, each below ``jump_sigmas``) the level had reached a fifth of the run, and the plan held its
  replicas through 9 violating periods. Upward only: an over-forecast costs resources, not the bound, and a
  two-sided test scaled in on runs of low rates that came back (measured in docs/benchmarks.md).
- Forecast ``h`` periods ahead: ``x_hat[t+h] = S(t+h) + phi^h r[t]``.
- Uncertainty: the forecast errors ``e`` realised at horizons 1, 2, 4, ..., 64 periods. Their variance is
  learned as a line in the forecast, ``var(e | x_hat) = a + b x_hat`` (least squares of ``e^2`` on ``x_hat``
  per horizon): count-like arrivals (the Taxi trace) have ``var`` proportional to the rate (the std of the
  one-period error is 9 tuples/s at 50 tuples/s and 25 at 550), a homoscedastic source has ``b = 0``. The
  standardised errors ``z = e / sqrt(a + b x_hat)`` are counted in histograms (bins of :data:`Z_BIN`);
  ``P(x[t+h] > theta)`` reads the histogram of the largest counted horizon <= ``h``. No distribution is
  assumed: the tails are the observed ones. Counts and sums forget with the time constant ``error_memory_s``.
- Robustness to one-offs (``clip_sigmas`` > 0): a season moves a profile bin by at most ``clip_sigmas`` one-period
  error standard deviations, and an error enters the variance sums clipped to ``clip_sigmas`` standard deviations
  (of the smaller of forecast and rate): a flash crowd is neither learned as a daily event nor makes every later
  forecast uncertain; its errors stay in the tails of the histograms. A deviation beyond the limit in the same
  direction as the bin's last season's is no one-off and is taken in whole (``repeats_are_seasons``): the first
  season of a bin is taken in whole, so when *it* was the one-off, later seasons could not undo it (the Taxi
  trace's first day, holiday-like with a busy night and an empty morning, stayed its weekday's weekly profile for
  weeks).

Everything is learned from the rates the operator saw; the exact state round-trips (:meth:`state` /
:meth:`load`). Pure Python + numpy.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np

#: horizons (periods) whose forecast errors are counted; P(x > theta) at horizon h reads the largest one <= h
ERROR_HORIZONS = (1, 2, 4, 8, 16, 32, 64)
#: the error CDFs and variance lines are recomputed when the counts grew by this fraction (a numerical
#: tolerance, not a model setting)
REFRESH_FRACTION = 0.01
LINE_MIN_SPREAD = 0.2  # the variance line is fitted once the forecasts spread by this fraction of their mean
Z_BIN = 0.05  # resolution of the standardised-error histograms (standard deviations)
Z_BINS = 480  # ... over -12 .. +12 standard deviations (beyond: the end bins)


class SeasonalForecaster:
    """Seasonal (daily, then weekly) profile + smoothed residual with learned AR(1) decay, and empirical
    forecast-error distributions per horizon."""

    def __init__(
        self,
        period_s: float,
        day_s: float,
        week_s: float,
        bin_s: float,
        memory_periods: float,
        level_alpha: float,
        error_memory_s: float,
        interpolate: bool = True,
        clip_sigmas: float = 0.0,
        jump_sigmas: float = 0.0,
        repeats_are_seasons: bool = True,
        delayed_bins: bool = True,
        shift_sigmas: float = 0.0,
        shift_slack: float = 1.0,
    ) -> None:
        """``period_s``: seconds per control period; ``day_s``/``week_s``: season lengths (s); ``bin_s``: profile
        bin (s); ``memory_periods``: seasons of memory of each profile bin; ``level_alpha``: weight of a new
        residual in the residual level (0-1]; ``error_memory_s``: the forecast errors counted forget with this time
        constant (s); ``repeats_are_seasons``: a deviation beyond the clipping limit in the same direction as the
        last season's is taken in whole; ``delayed_bins``: with interpolation, a bin takes in its season at the
        end of the next bin (:meth:`_close_bin`); ``shift_sigmas`` / ``shift_slack``: the decision limit and the
        slack (one-period error stds) of the upward CUSUM that finds a run of under-forecasts (0: none)."""
        for name, v in (("period_s", period_s), ("day_s", day_s), ("week_s", week_s), ("bin_s", bin_s)):
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"params.{name}: must be > 0 seconds, got {v!r}")
        if not 0.0 < level_alpha <= 1.0:
            raise ValueError(f"params.level_alpha: must be in (0, 1], got {level_alpha!r}")
        if not memory_periods >= 1.0:
            raise ValueError(f"params.memory_periods: must be >= 1, got {memory_periods!r}")
        self.period_s = float(period_s)
        self.seasons = (float(day_s), float(week_s))
        self.bin_s = float(bin_s)
        self.n_bins = tuple(max(1, round(s / bin_s)) for s in self.seasons)
        self.beta_min = 1.0 / memory_periods  # weight of a season's bin mean, at least
        self.level_alpha = float(level_alpha)
        self.phi_forget = 1.0 - period_s / day_s  # the AR(1) regression forgets over one day
        self.error_bins = Z_BINS
        self.clip_sigmas = float(clip_sigmas)  # 0: no clipping
        self.jump_sigmas = float(jump_sigmas)  # 0: the level never jumps
        self.shift_sigmas = float(shift_sigmas)  # 0: no run of under-forecasts is looked for
        self.shift_slack = float(shift_slack)
        self.repeats_are_seasons = bool(repeats_are_seasons)
        self.delayed_bins = bool(delayed_bins)
        self.interpolate = float(bool(interpolate))  # 1: linear between bin centres, 0: constant per bin
        if not error_memory_s >= period_s:
            raise ValueError(f"params.error_memory_s: must be >= period_s, got {error_memory_s!r}")
        self.error_forget = 1.0 - period_s / error_memory_s  # per period
        self.horizons = np.array(ERROR_HORIZONS)
        self.ring = int(self.horizons.max()) + 1
        self.reset()

    def reset(self) -> None:
        self.t = 0  # periods observed
        self.profiles = [np.zeros(n) for n in self.n_bins]
        self.counts = [np.zeros(n) for n in self.n_bins]  # seasons taken in per bin
        # per bin: the sign of the last season's innovation when it exceeded the clipping limit (else 0)
        self.beyond = [np.zeros(n) for n in self.n_bins]
        self.open_bin = [-1, -1]  # per season: the bin in progress ...
        self.open_sum = [0.0, 0.0]  # ... the sum (tuples/s) and number of its observations this season
        self.open_n = [0, 0]
        # per season: the bin that ended last and its mean, waiting while the interpolation still reads it
        self.pend_bin = [-1, -1]
        self.pend_mean = [0.0, 0.0]
        self.level = 0.0  # residual level (tuples/s)
        #: the last observed rate was beyond ``jump_sigmas`` one-period error stds of its forecast (the level
        #: followed it at once): news no forecast carried
        self.jumped = False
        self._reset_shift()
        self.sxy = 0.0  # forgetful sums of the lag-1 regression of the residual level
        self.sxx = 0.0
        # forecasts awaiting their period (Python lists: the per-period updates are scalar)
        self.pred = [[math.nan] * len(self.horizons) for _ in range(self.ring)]
        self.err_hist = np.zeros((len(self.horizons), self.error_bins))  # standardised errors
        # per horizon: n, sum x_hat, sum x_hat^2, sum e^2, sum x_hat e^2 (the variance line's least squares)
        self.var_stats = [[0.0] * 5 for _ in self.horizons]
        self._forget_cache()

    def _reset_shift(self) -> None:
        """No run of under-forecasts under way (the CUSUM at 0)."""
        self.shift_cusum = 0.0  # the upward CUSUM of the standardised one-period errors (error stds)
        self.shift_sum = 0.0  # the one-period errors (tuples/s) since it left 0, and their number
        self.shift_n = 0
        #: the last period ended a run of under-forecasts (the level was raised by it)
        self.shifted = False

    def _shift(self, err: float, std: float) -> float:
        """Update the upward CUSUM with this period's one-period error ``err`` (tuples/s, forecast error std
        ``std``); the run's mean error (tuples/s) when it crosses ``shift_sigmas``, else 0."""
        if self.shift_cusum <= 0.0:
            self.shift_sum, self.shift_n = 0.0, 0
        self.shift_cusum = max(0.0, self.shift_cusum + err / std - self.shift_slack)
        self.shift_sum += err
        self.shift_n += 1
        if self.shift_cusum <= self.shift_sigmas:
            return 0.0
        self.shift_cusum = 0.0
        self.shifted = True
        return self.shift_sum / self.shift_n

    def _forget_cache(self) -> None:
        self._cdf: np.ndarray | None = None  # per counted horizon: CDF of the errors (refreshed lazily)
        self._pad_of: np.ndarray | None = None  # the CDFs _sf was computed from
        self._sf = np.zeros(0)  # 1 - the CDFs padded (flattened; see _survival)
        self._sf_nan = False  # some horizon has no CDF (no error counted at all)
        self._var_ab = np.zeros((len(self.horizons), 2))  # ... and their variance lines a + b x_hat
        self._var_ab[:, 0] = np.inf  # nothing known: every gap is 0 standard deviations
        self._var_ab_list = self._var_ab.tolist()
        self._new_errors = 0  # periods of errors counted since the refresh

    def _refresh(self) -> None:
        """Recompute the error CDFs and stds when none are cached or the counts grew by more than
        :data:`REFRESH_FRACTION` since (a cumulative sum per period would cost more than the rest of a period)."""
        total = self.var_stats[0][0]
        if self._cdf is not None and self._new_errors <= REFRESH_FRACTION * total:
            return
        # exponential forgetting of the errors, applied in one go for the periods since the last refresh
        forget = self.error_forget**self._new_errors
        self.err_hist *= forget
        self.var_stats = [[v * forget for v in row] for row in self.var_stats]
        hist = self.err_hist.copy()
        stats = np.array(self.var_stats)
        for i in range(1, len(hist)):  # horizons without errors yet borrow the shorter horizon's
            if hist[i].sum() == 0:
                hist[i] = hist[i - 1]
                stats[i] = stats[i - 1]
        tot = hist.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            cdf = np.cumsum(hist, axis=1) / tot
        self._cdf = np.where(tot > 0, cdf, np.nan)
        self._var_ab = np.array([variance_line(row) for row in stats])
        self._var_ab_list = self._var_ab.tolist()
        self._new_errors = 0

    # ---- the seasonal profile ------------------------------------------------------------------------------
    def source(self, t: int | None = None) -> str:
        """Which profile the forecast made after ``t`` periods uses: ``week``, ``day`` or ``none``."""
        seen = (self.t if t is None else t) * self.period_s
        if seen >= self.seasons[1]:
            return "week"
        if seen >= self.seasons[0]:
            return "day"
        return "none"

    def profile(self, steps: np.ndarray, source: str | None = None) -> np.ndarray:
        """``S`` (tuples/s) at absolute period indices ``steps`` (0 = the first period observed)."""
        src = self.source() if source is None else source
        steps = np.asarray(steps, dtype=float)
        if src == "none":
            return np.zeros(steps.shape)
        j = 1 if src == "week" else 0
        prof, n = self.profiles[j], self.n_bins[j]
        pos = np.mod(steps * self.period_s, self.seasons[j]) / self.bin_s - 0.5 * self.interpolate
        i0 = np.floor(pos)
        f = (pos - i0) * self.interpolate
        i0 = i0.astype(np.int64) % n
        return (1.0 - f) * prof[i0] + f * prof[(i0 + 1) % n]

    def phi(self) -> float:
        """AR(1) coefficient of the residual level per period, in [0, 1] (1 before any evidence)."""
        if self.sxx <= 0.0:
            return 1.0
        return min(1.0, max(0.0, self.sxy / self.sxx))

    # ---- learning ------------------------------------------------------------------------------------------
    def _profile_at(self, step: int, src: str) -> float:
        """``S`` at one period index (scalar fast path of :meth:`profile`)."""
        if src == "none":
            return 0.0
        j = 1 if src == "week" else 0
        prof, n = self.profiles[j], self.n_bins[j]
        pos = (step * self.period_s % self.seasons[j]) / self.bin_s - 0.5 * self.interpolate
        i0 = math.floor(pos)
        f = (pos - i0) * self.interpolate
        return (1.0 - f) * float(prof[i0 % n]) + f * float(prof[(i0 + 1) % n])

    def _bin(self, t: int, j: int) -> int:
        return int((t * self.period_s % self.seasons[j]) // self.bin_s) % self.n_bins[j]

    def _close_bin(self, j: int) -> None:
        """The bin in progress of season ``j`` ended: its mean of this season enters the profile -- with
        interpolation at the end of the next bin, whose first half still reads it. The residual level is measured
        against the profile of the seasons before: taken in at once, a bin that took in a level shift (a step, in
        whole by ``repeats_are_seasons``) moved the profile under the next bin's first half, and the level and
        every forecast saw-toothed bin after bin while the shift went into the profile."""
        b = self.open_bin[j]
        if b >= 0 and self.open_n[j] > 0:
            mean = self.open_sum[j] / self.open_n[j]
            if self.interpolate and self.delayed_bins:
                b, mean, self.pend_bin[j], self.pend_mean[j] = self.pend_bin[j], self.pend_mean[j], b, mean
            if b >= 0:
                self._take_in(j, b, mean)
        self.open_sum[j] = 0.0
        self.open_n[j] = 0

    def _take_in(self, j: int, b: int, mean: float) -> None:
        """Bin ``b`` of season ``j`` takes in this season's mean ``mean`` (tuples/s)."""
        counts, prof = self.counts[j], self.profiles[j]
        innovation = mean - float(prof[b])
        if counts[b] > 0 and self.clip_sigmas > 0:
            # a one-off (a flash crowd, a step) moves the bin by a few error stds, not to the event: it stays
            # in the residual level, which decays, instead of coming back as a phantom the next season. A
            # deviation beyond the limit in the same direction as the last season's is no one-off: the
            # profile is (it kept a first season that was one, e.g. a holiday, as the weekly profile of its
            # weekday for weeks), and the season is taken in whole
            limit = self.clip_sigmas * self.error_std(1, float(prof[b]))
            sign = math.copysign(1.0, innovation) if abs(innovation) > limit else 0.0
            if sign == 0.0 or sign != self.beyond[j][b] or not self.repeats_are_seasons:
                innovation = min(max(innovation, -limit), limit)
            self.beyond[j][b] = sign
        counts[b] += 1.0
        beta = max(1.0 / counts[b], self.beta_min)
        prof[b] += beta * innovation

    def observe(self, rate: float) -> None:
        """Period ``t`` ended with input rate ``rate`` (tuples/s)."""
        t = self.t
        slot = t % self.ring
        row = self.pred[slot]
        half = self.error_bins // 2
        top = self.error_bins - 1
        last = row[0]  # the one-period-ahead forecast of this period (nan: none)
        self._refresh()  # the variance lines the errors are standardised with
        for i, xhat in enumerate(row):
            if xhat != xhat:  # nan: no forecast for this period at this horizon
                continue
            err = rate - xhat
            a, b = self._var_ab_list[i]
            var = a + b * xhat
            if var > 0.0 and math.isfinite(var):  # else no scale yet: the error only enters the variance sums
                zb = min(max(math.floor(err / math.sqrt(var) / Z_BIN) + half, 0), top)
                self.err_hist[i, zb] += 1.0
            e2 = err * err
            # the variance is a scale, robust to a one-off (a flash crowd's errors would make every forecast
            # uncertain for weeks); the one-off itself stays in the tail of the standardised histogram. The limit
            # is the variance at the smaller of forecast and rate: the forecasts made during a flash crowd
            # expect it to last, and their errors after it must not teach that high forecasts are uncertain
            low = a + b * min(xhat, max(rate, 0.0))
            if self.clip_sigmas > 0 and low > 0.0 and math.isfinite(low):
                e2 = min(e2, self.clip_sigmas * self.clip_sigmas * low)
            st = self.var_stats[i]
            st[0] += 1.0
            st[1] += xhat
            st[2] += xhat * xhat
            st[3] += e2
            st[4] += xhat * e2
            row[i] = math.nan
        self._new_errors += 1
        src = self.source()
        s_now = self._profile_at(t, src)
        for j in range(2):
            b = self._bin(t, j)
            self.open_bin[j] = b
            self.open_sum[j] += rate
            self.open_n[j] += 1
            if self._bin(t + 1, j) != b:  # the bin ends with this period
                self._close_bin(j)
        old = self.level
        resid = rate - s_now
        alpha = self.level_alpha
        self.jumped = self.shifted = False
        shift = 0.0  # the rest of a run of under-forecasts' mean error, ended in this period (tuples/s)
        a, b = self._var_ab_list[0]
        var = a + b * last if last == last else math.nan
        if 0.0 < var < math.inf:
            std = math.sqrt(var)
            if self.jump_sigmas > 0 and abs(rate - last) > self.jump_sigmas * std:
                # a jump beyond the noise (a step, a flash crowd, its end): the level follows at once
                alpha = 1.0
                self.jumped = True
                self._reset_shift()
            elif self.shift_sigmas > 0:
                shift = (1.0 - alpha) * self._shift(rate - last, std)
        self.level = resid if t == 0 else old + alpha * (resid - old) + shift
        if t > 0:
            lam = self.phi_forget
            self.sxy = lam * self.sxy + old * self.level
            self.sxx = lam * self.sxx + old * old
        self.t = t + 1
        src_next = self.source()
        if src_next != src:  # the profile changed (day -> week): restart the residual from this rate
            self.level = rate - self._profile_at(t, src_next)
            self._reset_shift()
        # the forecasts of this period for the counted horizons, checked when their period ends
        phi, level = self.phi(), self.level
        for i, h in enumerate(ERROR_HORIZONS):
            self.pred[(t + h) % self.ring][i] = max(self._profile_at(t + h, src_next) + phi**h * level, 0.0)

    # ---- forecasting ---------------------------------------------------------------------------------------
    def forecast(
        self, horizon: int, level: float | None = None, phi: float | None = None, since: int = 0
    ) -> np.ndarray:
        """``x_hat`` (tuples/s) for the next ``horizon`` periods (index 0 = the next period); with ``level``
        (tuples/s), ``phi`` (per period) and ``since`` (periods), the forecast of a residual level that was
        ``level`` ``since`` periods ago and decays with ``phi`` (default: the current level and ``phi``)."""
        h = np.arange(1, horizon + 1)
        s = self.profile(self.t - 1 + h)
        lv = self.level if level is None else level
        decay = self.phi() if phi is None else phi
        return np.maximum(s + decay ** (h + since) * lv, 0.0)

    def exceedance(
        self, xhat: np.ndarray, thresholds: np.ndarray, ahead: np.ndarray | None = None
    ) -> np.ndarray:
        """``P[i, c]`` = probability that the rate exceeds ``thresholds[c]`` (tuples/s) in the period with
        forecast ``xhat[i]``, ``ahead[i]`` periods ahead (default ``i + 1``): from the error histogram of the
        largest counted horizon <= ``ahead[i]`` (a horizon without any error yet reads the nearest shorter one
        that has; none at all: the point forecast)."""
        self._refresh()
        assert self._cdf is not None
        H = len(xhat)
        ahead = np.arange(1, H + 1) if ahead is None else np.asarray(ahead)
        bucket = np.searchsorted(self.horizons, ahead, side="right") - 1
        ab = self._var_ab[bucket]
        scale = np.sqrt(np.maximum(ab[:, 0] + ab[:, 1] * xhat, 0.0))  # H: std of the error (tuples/s)
        half = self.error_bins // 2
        # the bin of the standardised error the rate must exceed, floor(gap / Z_BIN), clipped to the padded CDFs'
        # range (-half - 1: below the first bin, half: above the last); a 0 / 0 gap is 0, an infinite one the end
        # bin. In place, one H x C array: the plan's hottest line (the same floats as computing it step by step)
        with np.errstate(invalid="ignore", divide="ignore"):
            g = np.subtract(thresholds[None, :], xhat[:, None])
            g /= scale[:, None]
            g /= Z_BIN
        np.floor(g, out=g)
        np.clip(g, -half - 1, half, out=g)
        nan = np.isnan(g)
        if nan.any():
            g[nan] = 0.0
        # ... as an index into the flattened padded survival functions (exact: small integers in floats)
        g += (bucket * (self.error_bins + 2) + half + 1).astype(float)[:, None]
        sf, sf_nan = self._survival()
        p = np.take(sf, g.astype(np.intp))
        if sf_nan:  # a horizon without any error yet: the point forecast
            point = (xhat[:, None] > thresholds[None, :]).astype(float)
            p = np.where(np.isnan(p), point, p)
        inf = np.isinf(thresholds)
        if inf.any():
            p[:, inf] = 0.0
        return p

    def _survival(self) -> tuple[np.ndarray, bool]:
        """``1 -`` the error CDFs padded with 0 below the first bin and 1 above the last, flattened (one gather, no
        H x bins copy), and whether any is undefined (a horizon without errors); cached with the CDFs."""
        assert self._cdf is not None
        if self._pad_of is not self._cdf:
            n = len(self._cdf)
            pad = np.hstack([np.zeros((n, 1)), self._cdf, np.ones((n, 1))])
            self._sf = (1.0 - pad).reshape(-1)
            self._sf_nan = bool(np.isnan(pad).any())
            self._pad_of = self._cdf
        return self._sf, self._sf_nan

    def error_std(self, h: int, xhat: float) -> float:
        """Standard deviation (tuples/s) of the forecast error ``h`` periods ahead of a forecast ``xhat``
        (tuples/s), from the variance line of the largest counted horizon <= ``h``; ``inf`` before any error."""
        i = max(0, bisect.bisect_right(ERROR_HORIZONS, h) - 1)
        self._refresh()
        a, b = self._var_ab_list[i]
        return math.sqrt(max(a + b * xhat, 0.0))

    # ---- durable state -------------------------------------------------------------------------------------
    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {
            "t": self.t,
            "level": self.level,
            "jumped": self.jumped,
            "shift": [self.shift_cusum, self.shift_sum, self.shift_n, self.shifted],
            "sxy": self.sxy,
            "sxx": self.sxx,
            "new_errors": self._new_errors,
            "open_bin": self.open_bin,
            "open_sum": self.open_sum,
            "open_n": self.open_n,
            "pend_bin": self.pend_bin,
            "pend_mean": self.pend_mean,
        }
        arrays = {
            "fc_day": self.profiles[0],
            "fc_week": self.profiles[1],
            "fc_day_n": self.counts[0],
            "fc_week_n": self.counts[1],
            "fc_day_beyond": self.beyond[0],
            "fc_week_beyond": self.beyond[1],
            "fc_pred": np.array(self.pred),
            "fc_err": self.err_hist,
            # the cached CDFs decide like the counts they were computed from: kept for an exact continuation
            "fc_cdf": np.zeros((0, self.error_bins)) if self._cdf is None else self._cdf,
            "fc_var_ab": self._var_ab,
            "fc_var_stats": np.array(self.var_stats),
        }
        return meta, arrays

    def load(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.t = int(meta["t"])
        self.level, self.sxy, self.sxx = float(meta["level"]), float(meta["sxy"]), float(meta["sxx"])
        self.jumped = bool(meta.get("jumped", False))  # states saved before the flag: no jump
        # states saved before the CUSUM: no run under way
        cusum, total, n, shifted = meta.get("shift", (0.0, 0.0, 0, False))
        self.shift_cusum, self.shift_sum, self.shift_n = float(cusum), float(total), int(n)
        self.shifted = bool(shifted)
        self.profiles = [arrays["fc_day"].copy(), arrays["fc_week"].copy()]
        self.counts = [arrays["fc_day_n"].copy(), arrays["fc_week_n"].copy()]
        # states saved before the rule: no deviation beyond the limit remembered
        self.beyond = [
            arrays[key].copy() if key in arrays else np.zeros(n)
            for key, n in zip(("fc_day_beyond", "fc_week_beyond"), self.n_bins, strict=True)
        ]
        self.pred = arrays["fc_pred"].tolist()
        self.err_hist = arrays["fc_err"].copy()
        self.var_stats = arrays["fc_var_stats"].tolist()
        self._forget_cache()
        if len(arrays["fc_cdf"]):
            self._cdf = arrays["fc_cdf"].copy()
            self._var_ab = arrays["fc_var_ab"].copy()
            self._var_ab_list = self._var_ab.tolist()
        self._new_errors = int(meta["new_errors"])
        self.open_bin = [int(x) for x in meta["open_bin"]]
        self.open_sum = [float(x) for x in meta["open_sum"]]
        self.open_n = [int(x) for x in meta["open_n"]]
        # states saved before the delay: nothing waiting (the last bin was taken in at its end)
        self.pend_bin = [int(x) for x in meta.get("pend_bin", (-1, -1))]
        self.pend_mean = [float(x) for x in meta.get("pend_mean", (0.0, 0.0))]


def variance_line(stats: np.ndarray) -> tuple[float, float]:
    """``(a, b)`` of ``var(e) = a + b x_hat`` (tuples/s squared) from the sums ``n, sum x_hat, sum x_hat^2,
    sum e^2, sum x_hat e^2``; ``(inf, 0)`` without any error.

    Least squares of ``e^2`` on ``x_hat`` once the forecasts spread by :data:`LINE_MIN_SPREAD` of their mean
    (std / mean) and the slope is positive; ``a`` at least 1 % of the mean squared error (a line crossing 0
    above ``x_hat = 0`` would call low-rate forecasts certain). Before that, the proportional line through the
    mean, ``var = (mean e^2 / mean x_hat) x_hat``: count-like arrivals, whose variance grows with the rate --
    a constant variance measured at one rate would call the noise of a rate three times higher (a step)
    three times smaller than a Poisson count makes it."""
    n, sx, sxx, se, sxe = (float(v) for v in stats)
    if n == 0:
        return math.inf, 0.0
    mean_e, mean_x = se / n, sx / n
    var_x = sxx / n - mean_x * mean_x
    if n < 2 or var_x <= (LINE_MIN_SPREAD * mean_x) ** 2:
        if mean_x <= 0.0:
            return mean_e, 0.0
        return 0.01 * mean_e, 0.99 * mean_e / mean_x
    b = (sxe / n - mean_x * mean_e) / var_x
    if b <= 0.0:
        return mean_e, 0.0
    return max(mean_e - b * mean_x, 0.01 * mean_e), b
