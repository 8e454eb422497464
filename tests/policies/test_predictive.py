"""The ``predictive`` OM policy (issue 24, item 3): its forecaster learns a seasonal pattern, its MPC scales out
before a rise it has learned, its state round-trips exactly, and it beats ``model-based`` on a month of Taxi."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.predictive import flash_shape, noisy, step_shape, weekly_shape
from policies.base import JUMP, Observation
from policies.om import mdp
from policies.om.model_based import speed_scaled_brackets
from policies.om.predictive import Predictive, recoup_periods, stage_edges, stage_points, stage_spans
from policies.paths import SHIPPED_TRACES_DIR
from policies.seasonal import SeasonalForecaster, variance_line
from policies.sim.operator import run_operator
from policies.sim.scenario import build_policy, paper_spec
from policies.sim.trace import load_trace

DAY = 120  # periods of a short synthetic "day" (60 s periods)
SHORT = {  # the policy's seasons scaled to that day
    "period_s": 60.0,
    "day_s": 60.0 * DAY,
    "week_s": 7 * 60.0 * DAY,
    "bin_s": 300.0,
    "min_history_s": 60.0 * DAY,
    "interpolate": False,  # a step is a step: the profile constant per bin
}


def _daily(days: int, low: float, high: float, rise: int, fall: int) -> np.ndarray:
    """``days`` short days: ``low`` tuples/s, ``high`` from period ``rise`` to ``fall`` of each day."""
    day = np.full(DAY, low)
    day[rise:fall] = high
    return np.tile(day, days)


def _forecaster(shift_sigmas: float = 0.0) -> SeasonalForecaster:
    """The forecaster ``predictive`` builds with its defaults (60-s periods), the upward CUSUM at ``shift_sigmas``
    (0: off)."""
    return Predictive(paper_spec("A", 3, 10), {"shift_sigmas": shift_sigmas}).fc


def test_forecaster_learns_a_daily_sine_within_a_bound():
    rng = np.random.default_rng(0)
    t = np.arange(1440 * 5)
    truth = 300.0 + 150.0 * np.sin(2 * np.pi * t / 1440)
    fc = SeasonalForecaster(60.0, 86_400.0, 604_800.0, 600.0, 2.0, 0.2, 28 * 86_400.0)
    for x in truth[:-60] + rng.normal(0.0, 5.0, len(t) - 60):
        fc.observe(float(x))
    assert fc.source() == "day"
    err = np.abs(fc.forecast(60) - truth[-60:])
    # 10-minute bins of a 150 tuples/s sine, linearly interpolated, noise 5: a few tuples/s
    assert err.max() < 8.0, err.max()
    # a persistence forecast (the last rate) misses the 60-minute-ahead rate by far more
    assert np.abs(truth[-61] - truth[-1]) > 5 * err.max()


def test_forecaster_uses_the_weekly_profile_after_a_week():
    day = 1440
    # weekdays 400 tuples/s, weekends 100: a daily profile cannot know Saturday
    week = np.concatenate([np.full(5 * day, 400.0), np.full(2 * day, 100.0)])
    fc = SeasonalForecaster(60.0, 86_400.0, 604_800.0, 600.0, 2.0, 0.2, 28 * 86_400.0)
    trace = np.tile(week, 2)[: 7 * day * 2 - 2 * day - 30]  # stop 30 minutes before the second Saturday
    for x in trace:
        fc.observe(float(x))
    assert fc.source() == "week"
    ahead = fc.forecast(120)
    assert ahead[:20].min() > 350.0 and ahead[-60:].max() < 150.0


def test_a_flash_crowd_is_not_learned_as_a_daily_event():
    rng = np.random.default_rng(2)
    rate = np.full(1440 * 3, 150.0)
    at = 1440 + 720
    rate[at : at + 15] = 900.0  # once, on day 2 at noon
    fc = _forecaster()
    noisy = rng.poisson(rate).astype(float)
    for x in noisy[: at + 1]:
        fc.observe(float(x))
    assert fc.forecast(1)[0] > 600.0  # the level followed the jump at once
    assert fc.jumped  # ... and says so (the plan may step on it: ``surprise_steps``)
    meta, arrays = fc.state()
    twin = _forecaster()
    twin.load(meta, arrays)
    assert twin.jumped
    for x in noisy[at + 1 : at + 1440 - 30]:
        fc.observe(float(x))
    # 30 periods before the same time the next day: no phantom flash crowd ahead, and a narrow error at 150
    assert fc.forecast(60).max() < 200.0
    assert fc.error_std(1, 150.0) < 20.0
    # without the clipping the flash crowd comes back as a daily event
    free = SeasonalForecaster(60.0, 86_400.0, 604_800.0, 600.0, 2.0, 0.2, 28 * 86_400.0, True, 0.0, 6.0)
    for x in noisy[: at + 1440 - 30]:
        free.observe(float(x))
    assert free.forecast(60).max() > 300.0


def _ramp(slope: float, sign: float = 1.0, flat: int = 2000, hold: int = 30, tail: int = 0) -> np.ndarray:
    """``flat`` periods at 450 tuples/s, then 20 periods rising (``sign`` -1: falling) by ``slope`` tuples/s each,
    ``hold`` at the end level and ``tail`` back at 450; Poisson counts."""
    shape = np.concatenate(
        [
            np.full(flat, 450.0),
            450.0 + sign * slope * np.arange(1, 21),
            np.full(hold, 450.0 + sign * 20 * slope),
            np.full(tail, 450.0),
        ]
    )
    return np.random.default_rng(5).poisson(shape).astype(float)


def test_a_run_of_under_forecasts_within_the_noise_raises_the_level_and_noise_does_not():
    """A rise of 15 tuples/s a period (0.7 error stds at 450) never jumps (6 stds), and the level, taking a fifth of
    each error, lags it by ~75 tuples/s. The upward CUSUM finds the run and raises the level: the one-period
    forecast misses the ramp by less. Neither 2,000 periods of noise nor the same ramp downwards shift the level
    (upward only: an over-forecast costs resources, not the bound)."""
    trace = _ramp(15.0)
    misses = {}
    for limit in (0.0, 6.0):
        fc, miss, shifts = _forecaster(limit), [], 0
        for t, x in enumerate(trace):
            ahead = fc.forecast(1)[0]
            fc.observe(float(x))
            assert t < 2000 or not fc.jumped
            shifts += fc.shifted
            if t >= 2000:
                miss.append(x - ahead)
            elif t == 1999:
                assert shifts == 0  # noise alone
        misses[limit] = np.abs(miss).mean()
        assert (shifts > 0) == (limit > 0)
    assert misses[6.0] < 0.9 * misses[0.0], misses  # measured: 31 against 38 tuples/s
    fc = _forecaster(6.0)
    for x in _ramp(15.0, sign=-1.0):
        fc.observe(float(x))
        assert not fc.shifted


def test_the_cusum_state_round_trips_mid_run():
    trace = _ramp(15.0)
    fc = _forecaster(6.0)
    split = 2000
    for x in trace[:split]:
        fc.observe(float(x))
    while fc.shift_cusum == 0.0:  # into the ramp until the CUSUM is above 0: a run under way
        fc.observe(float(trace[split]))
        split += 1
    assert fc.shift_n > 0 and split < 2010
    twin = _forecaster(6.0)
    twin.load(*fc.state())
    for x in trace[split:]:
        fc.observe(float(x))
        twin.observe(float(x))
        assert twin.level == fc.level and twin.shifted == fc.shifted
    meta, arrays = fc.state()
    del meta["shift"]  # a state saved before the CUSUM: no run under way
    old = _forecaster(6.0)
    old.load(meta, arrays)
    assert old.shift_cusum == 0.0 and not old.shifted


@pytest.mark.parametrize(("infra", "k_max", "slope"), [("B", 10, 15.0), ("A", 20, 20.0)])
def test_a_run_of_under_forecasts_is_met_before_it_violates(infra, k_max, slope):
    """Two days at 450 tuples/s, then a rise of ``slope`` tuples/s a period for 20 periods, held for 60: without the
    CUSUM the plan, on a level that lags the rise, held its replicas into violating periods (measured: B K10 1
    violating period, A K20 2); with it, none, at a lower cost."""
    spec = paper_spec(infra, 3, k_max)
    start = 2 * 1440 + 600
    trace = _ramp(slope, flat=start, hold=60, tail=600)
    runs = {s: run_operator(trace, Predictive(spec, {"shift_sigmas": s}), spec=spec) for s in (0.0, 6.0)}
    assert runs[0.0].violation[start:].sum() > 0
    assert runs[6.0].violation[start:].sum() == 0
    assert runs[6.0].cost.mean() < runs[0.0].cost.mean()


def test_a_holiday_that_began_the_weekly_profile_is_unlearned_when_its_weekday_repeats_the_deviation():
    """The first season of a profile bin is taken in whole, later ones only within the clipping limit (a one-off
    is not learned). When the first was the one-off (the Taxi trace's first day is holiday-like: its weekday's
    weekly profile kept a busy night and an empty morning for weeks, and the plan scaled in for a night that its
    morning undid), the following weeks deviate beyond the limit again and again: a deviation repeated in the same
    direction is the season, and is taken in whole."""
    rng = np.random.default_rng(4)
    day = np.full(DAY, 100.0)
    day[40:80] = 400.0  # the morning
    holiday = np.full(DAY, 100.0)  # the first day: no morning
    days = [holiday] + [day] * 21
    fc = SeasonalForecaster(
        60.0, 60.0 * DAY, 7 * 60.0 * DAY, 300.0, 2.0, 0.2, 28 * 60.0 * DAY, False, 3.0, 6.0
    )
    for x in rng.poisson(np.concatenate(days)):
        fc.observe(float(x))
    assert fc.source() == "week" and fc.t == 21 * DAY + DAY
    # the fourth occurrence of the holiday's weekday (day 21, seen in whole) taught the profile its morning ...
    fc_morning = fc.profile(21 * DAY + np.arange(45, 75))
    assert fc_morning.min() > 300.0, fc_morning.min()
    # (without the rule every week moves it by the clipping limit only: about 150 tuples/s)
    rng = np.random.default_rng(4)
    clipped = SeasonalForecaster(
        60.0, 60.0 * DAY, 7 * 60.0 * DAY, 300.0, 2.0, 0.2, 28 * 60.0 * DAY, False, 3.0, 6.0, False
    )
    for x in rng.poisson(np.concatenate(days)):
        clipped.observe(float(x))
    assert clipped.profile(21 * DAY + np.arange(45, 75)).max() < 200.0
    # ... while a holiday later on (day 14, once) is still a one-off: its weekday keeps its morning
    once = SeasonalForecaster(
        60.0, 60.0 * DAY, 7 * 60.0 * DAY, 300.0, 2.0, 0.2, 28 * 60.0 * DAY, False, 3.0, 6.0
    )
    for x in rng.poisson(np.concatenate([day] * 14 + [holiday] + [day] * 7)):
        once.observe(float(x))
    assert once.profile(21 * DAY + np.arange(45, 75)).min() > 300.0


def test_a_profile_taking_in_a_step_bin_by_bin_leaves_the_one_period_forecast_at_the_noise():
    """A step from 150 to 450 tuples/s: on its second day the daily profile takes it in whole, bin by bin
    (``repeats_are_seasons``). Interpolated, the next bin's first half reads the bin that just ended: taken in at
    once, it moved the profile under the residual level, which saw-toothed bin after bin (one-period error RMS 35.8
    tuples/s over the day, against the Poisson noise's 21; on the step benchmark B K10 reconfigured 17 times
    against 3). A bin now takes in its season at the end of the next one."""
    rng = np.random.default_rng(0)
    day = 1440
    trace = rng.poisson(np.concatenate([np.full(day, 150.0), np.full(2 * day, 450.0)])).astype(float)
    for delayed in (True, False):
        fc = SeasonalForecaster(
            60.0, 86_400.0, 604_800.0, 600.0, 2.0, 0.2, 28 * 86_400.0, True, 3.0, 6.0, True, delayed
        )
        errors = []
        for t, x in enumerate(trace):
            if t >= 2 * day + 60:
                errors.append(x - fc.forecast(1)[0])
            fc.observe(float(x))
        rms = float(np.sqrt(np.mean(np.square(errors))))
        if delayed:
            assert rms < 1.2 * np.sqrt(450.0), rms  # measured 23.2
        else:
            assert rms > 1.5 * np.sqrt(450.0), rms  # the saw-tooth (measured 35.8)


def test_forecaster_learns_that_the_error_grows_with_the_rate():
    rng = np.random.default_rng(1)
    rate = 275.0 - 225.0 * np.cos(2 * np.pi * np.arange(1440 * 4) / 1440)  # 50 .. 500 tuples/s
    fc = SeasonalForecaster(60.0, 86_400.0, 604_800.0, 600.0, 2.0, 0.2, 28 * 86_400.0)
    for x in rng.poisson(rate):  # count-like arrivals: var = rate (as in the Taxi trace, about)
        fc.observe(float(x))
    low, high = fc.error_std(1, 50.0), fc.error_std(1, 500.0)
    assert high > 2.0 * low  # sqrt(10) for pure Poisson noise
    assert variance_line(np.zeros(5)) == (np.inf, 0.0)


def _exceedance_step_by_step(fc: SeasonalForecaster, xhat, thresholds, ahead=None):
    """``SeasonalForecaster.exceedance`` as it was written before it was made in place (the reference)."""
    from policies.seasonal import Z_BIN

    fc._refresh()
    ahead = np.arange(1, len(xhat) + 1) if ahead is None else np.asarray(ahead)
    bucket = np.searchsorted(fc.horizons, ahead, side="right") - 1
    ab = fc._var_ab[bucket]
    scale = np.sqrt(np.maximum(ab[:, 0] + ab[:, 1] * xhat, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = (thresholds[None, :] - xhat[:, None]) / scale[:, None]
    gap = np.nan_to_num(gap, nan=0.0, posinf=1e9, neginf=-1e9)
    idx = np.floor(gap / Z_BIN).astype(np.int64) + fc.error_bins // 2
    pad = np.hstack([np.zeros((len(fc._cdf), 1)), fc._cdf, np.ones((len(fc._cdf), 1))])
    p = 1.0 - pad[bucket[:, None], np.clip(idx + 1, 0, fc.error_bins + 1)]
    point = (xhat[:, None] > thresholds[None, :]).astype(float)
    p = np.where(np.isnan(p), point, p)
    return np.where(np.isinf(thresholds)[None, :], 0.0, p)


@pytest.mark.parametrize("periods", [0, 3, 40, 3000])
def test_the_exceedance_is_the_step_by_step_one_to_the_bit(periods):
    """The in-place exceedance (the plan's hottest line) gives the very floats of the step-by-step formula: before
    any error (no scale), with horizons still without errors (the point forecast), with a zero error (0 / 0 gaps),
    infinite and equal-to-the-forecast thresholds, and on a learned forecaster."""
    rng = np.random.default_rng(3)
    fc = SeasonalForecaster(60.0, 86_400.0, 604_800.0, 600.0, 2.0, 0.2, 28 * 86_400.0, True, 3.0, 6.0)
    for x in rng.poisson(275.0 - 225.0 * np.cos(2 * np.pi * np.arange(periods) / 1440)):
        fc.observe(float(x))
    flat = SeasonalForecaster(60.0, 86_400.0, 604_800.0, 600.0, 2.0, 0.2, 28 * 86_400.0)
    for _ in range(periods):
        flat.observe(200.0)  # no error at all: a zero scale
    for f in (fc, flat):
        for _ in range(20):
            xhat = rng.uniform(0.0, 600.0, rng.integers(1, 90))
            thresholds = np.concatenate([rng.uniform(0.0, 600.0, 30), [np.inf, xhat[0], 200.0, 0.0]])
            for ahead in (None, rng.integers(1, 100, len(xhat))):
                got = f.exceedance(xhat, thresholds, ahead)
                want = _exceedance_step_by_step(f, xhat, thresholds, ahead)
                assert got.shape == want.shape and np.array_equal(got.view(np.int64), want.view(np.int64))


def test_mpc_scales_out_before_a_learned_rise_and_model_based_does_not():
    spec = paper_spec("A", 3, 10)
    trace = _daily(10, 60.0, 900.0, rise=70, fall=110)
    rp = run_operator(trace, build_policy("predictive", spec, SHORT), spec=spec)
    rm = run_operator(trace, build_policy("model-based", spec), spec=spec)
    rises = [d * DAY + 70 for d in range(5, 10)]
    need = int(rp.replicas[rises[0] + 10])  # what the high rate needs, one replica added per period
    assert need >= 4
    for r in rises:
        # the scale-out started periods before the rise and was complete when the rate rose
        assert rp.replicas[r - 1] > rp.replicas[r - 20] and rp.replicas[r] >= need, rp.replicas[r - 5 : r + 3]
        assert not rp.violation[r : r + 3].any()
    # model-based either violates at the rises (day 5: it reacted after) or holds the capacity all day (day 9)
    assert rm.violation[rises[0] : rises[0] + 3].any()
    assert rp.cost[5 * DAY :].mean() < 0.8 * rm.cost[5 * DAY :].mean()


@pytest.mark.parametrize("multi_step", [False, True])
def test_state_round_trip_continues_identically(multi_step):
    spec = paper_spec("A", 3, 10)
    trace = _daily(4, 80.0, 380.0, rise=50, fall=90) + np.tile(np.arange(DAY) % 7, 4)
    policy = Predictive(spec, {**SHORT, "multi_step": multi_step})
    k = np.array([1, 0, 0])
    split = 2 * DAY + 55
    for rate in trace[:split]:
        k = policy.step(Observation(k, float(rate), violated=bool(rate > 150 * k.sum()))).deployment
    assert policy._planning() and policy.plan_t >= 0
    blob = policy.state_bytes()
    twin = Predictive.from_state(paper_spec("A", 3, 10), blob)
    assert twin.state_bytes() == blob
    for rate in trace[split:]:
        obs = Observation(k, float(rate), violated=bool(rate > 150 * k.sum()))
        a, b = policy.step(obs), twin.step(obs)
        assert a.action == b.action and a.explanation == b.explanation
        k = a.deployment
    assert policy.state_bytes() == twin.state_bytes()


def test_explanation_carries_the_forecast():
    spec = paper_spec("A", 3, 10)
    policy = Predictive(spec, SHORT)
    k = np.array([1, 0, 0])
    trace = _daily(2, 80.0, 300.0, rise=50, fall=90)
    for rate in trace[: DAY + 5]:
        prop = policy.step(Observation(k, float(rate), violated=bool(rate > 150 * k.sum())))
        k = prop.deployment
    fc = prop.explanation["forecast"]
    assert fc["source"].startswith("daily profile")
    assert len(fc["forecast_tuples_s"]) == len(fc["forecast_periods_ahead"])
    assert prop.explanation["alternatives"]


def _type0_replicas_needed(policy: Predictive, rates: np.ndarray) -> int:
    """Type-0 replicas whose learned per-replica bound (the lower end of its bracket) carries every rate."""
    rank = int(
        policy.inner._class_rank[policy.inner.space.cls[policy.inner.space.lookup(np.array([1, 0, 0]))]]
    )
    return int(np.ceil(rates.max() / policy.inner.thr_lo[rank]))


def test_one_unforeseen_step_does_not_make_the_plan_hold_a_spare_replica_on_b():
    """Infrastructure B (a violation costs ~900 periods of a type-0 replica): after a step the plan holds what the
    rates need, not one replica more. Planning on the h-step error tails (open loop: ``reaction_periods`` =
    the whole counted horizon), the step's own errors at 64 periods ahead made a spare replica look worth it."""
    spec = paper_spec("B", 3, 10)
    trace = noisy(step_shape(), 0)
    late = slice(2 * len(trace) // 3, None)  # a day and more after the step
    held = {}
    for reaction in (1, 64):
        policy = Predictive(spec, {"reaction_periods": reaction})
        res = run_operator(trace, policy, spec=spec)
        need = _type0_replicas_needed(policy, trace[late])
        held[reaction] = np.mean(res.replicas[late] > need)
        assert res.deployment[late][:, 1:].sum() == 0  # type 0 only: the others cost more per tuple/s here
    assert held[1] < 0.05, held
    assert held[64] > 0.5, held  # the open-loop plan: the spare replica most of the time


def test_the_plan_leaves_a_flash_crowds_deployment_once_the_savings_repay_the_moves_on_b():
    """Infrastructure B, K_max 10: one type-0 replica's resource cost repays a reconfiguration in 300 periods; a
    64-period plan never sees the 4 removals back from a flash crowd's 6 replicas pay for themselves and held
    6 replicas for the rest of the run. The horizon reaching ``horizon_recoups`` recoup periods leaves them. One
    replica a period (``surprise_steps`` off: the step back at one reconfiguration, on the rate that ends the flash
    crowd, pays within 64 periods)."""
    spec = paper_spec("B", 3, 10)
    assert recoup_periods(spec) == pytest.approx(0.2 * spec.cost_scale / (0.2 * 0.95))  # price step 1 - 0.05
    trace = noisy(flash_shape(), 0)
    after = slice(len(trace) // 2 + 15 + 300, None)  # from one recoup time after the flash crowd on
    mean = {}
    for recoups in (2.0, 0.0):
        policy = Predictive(spec, {"horizon_recoups": recoups, "surprise_steps": False})
        res = run_operator(trace, policy, spec=spec)
        need = _type0_replicas_needed(policy, trace[after])
        assert res.replicas[len(trace) // 2 + 5] >= 6  # it carried the flash crowd
        mean[recoups] = res.replicas[after].mean() - need
    assert mean[2.0] < 0.1, mean
    assert mean[0.0] > 2.0, mean  # without the far horizon: the flash crowd's replicas kept


def _scale_outs_taken_back(res, within: int) -> int:
    """Changes that added capacity (a higher price) undone (back to the deployment before) within ``within``
    periods."""
    dep, price = np.asarray(res.deployment), np.asarray(res.price)
    changes = np.flatnonzero(np.any(np.diff(dep, axis=0) != 0, axis=1)) + 1
    taken_back = 0
    for t in changes[price[changes] > price[changes - 1]]:
        later = changes[(changes > t) & (changes <= t + within)]
        taken_back += any(np.array_equal(dep[u], dep[t - 1]) for u in later)
    return taken_back


def test_a_plan_does_not_undo_a_change_for_the_noise_of_its_residual_level_on_b():
    """Infrastructure B, K_max 20 (a reconfiguration costs as much as 600 periods of a type-0 replica), the
    shipped month of Taxi: remade on a residual level that moves with every one-period error, the plan took back
    scale-outs within a few hours. Committed to the level a change was made on
    (``commit_changes``), it takes back fewer, reconfigures less, violates no more and costs less (measured:
    7 against 10 scale-outs taken back within 240 periods, 35 against 37 reconfigurations, 4 violations each,
    0.001427 against 0.001430).

    Measured with the forecaster of then (``delayed_bins`` off): with it on, this month's commitment changes
    nothing (10 scale-outs taken back, 39 reconfigurations and 4 violations either way, 0.0014370 against
    0.0014364)."""
    spec = paper_spec("B", 3, 20)
    trace = load_trace(SHIPPED_TRACES_DIR / "taxi_last_month.txt")
    runs = {
        c: run_operator(trace, Predictive(spec, {"commit_changes": c, "delayed_bins": False}), spec=spec)
        for c in (True, False)
    }
    assert _scale_outs_taken_back(runs[True], 240) < _scale_outs_taken_back(runs[False], 240)
    assert runs[True].reconfiguration.sum() < runs[False].reconfiguration.sum()
    assert runs[True].violation.sum() <= runs[False].violation.sum()
    assert runs[True].summary()["avg_cost"] < runs[False].summary()["avg_cost"]


def test_multi_step_carries_a_flash_crowd_in_one_reconfiguration_and_leaves_it_in_one():
    """With ``multi_step`` the plan may step to any deployment at one reconfiguration: it meets a flash crowd it
    did not foresee after one violating period (the papers' one replica per period: four) and goes back in one."""
    spec = paper_spec("B", 3, 10)
    trace = noisy(flash_shape(), 0)
    start = len(trace) // 2
    runs = {
        m: run_operator(trace, Predictive(spec, {"multi_step": m, "surprise_steps": False}), spec=spec)
        for m in (True, False)
    }
    flash = slice(start, start + 15)
    assert runs[True].violation[flash].sum() == 1
    assert runs[False].violation[flash].sum() >= 4
    around = slice(start - 5, start + 15 + 60)
    assert runs[True].reconfiguration[around].sum() == 2  # one step out, one back
    assert runs[True].summary()["avg_cost"] < runs[False].summary()["avg_cost"]


@pytest.mark.parametrize("k_max", [10, 20])
def test_a_surprise_step_meets_a_flash_crowd_after_one_violating_period_and_leaves_it_in_one_on_b(k_max):
    """``surprise_steps``: the rate that opens a flash crowd (and the one that ends it) is beyond the forecaster's
    jump limit, and the plan made on it adds (removes) the replicas it needs in one reconfiguration. One replica a
    period, the plan violated in four periods of the flash crowd and paid eight reconfigurations around it
    (measured on this trace, K_max 10: 0.0024526 one replica a period, 0.0017582 with the surprise steps,
    model-based-trend's multi-replica steps 0.0017583)."""
    spec = paper_spec("B", 3, k_max)
    trace = noisy(flash_shape(), 0)
    start = len(trace) // 2
    runs = {s: run_operator(trace, Predictive(spec, {"surprise_steps": s}), spec=spec) for s in (True, False)}
    flash, around = slice(start, start + 15), slice(start - 5, start + 15 + 60)
    assert runs[True].violation[flash].sum() == 1
    assert runs[False].violation[flash].sum() >= 4
    assert runs[True].reconfiguration[around].sum() == 2  # one step out, one back
    assert runs[False].reconfiguration[around].sum() >= 8
    assert runs[True].summary()["avg_cost"] < runs[False].summary()["avg_cost"]
    assert np.array_equal(runs[True].deployment[:start], runs[False].deployment[:start])  # no surprise before


def test_a_surprise_step_adds_or_removes_replicas_and_removes_them_only_to_a_bracketed_class_on_a():
    """A surprise step is several replicas added, or several removed, never a swap of node types, and a removal
    goes only to a class a violation has bracketed. Any deployment as the target, the step trace's jump on A with
    K_max 20 (from two type-0 replicas and a type-2 one, the rate 150 -> 441) stepped to one type-2 replica: the
    plan's optimism about an untried class (no bound: it carries any rate), a violation in the next period."""
    trace = noisy(step_shape(), 0)
    steps = 0
    for k_max in (10, 20):
        spec = paper_spec("A", 3, k_max)
        res = run_operator(trace, Predictive(spec), spec=spec)
        dep = np.asarray(res.deployment, dtype=int)
        for t in np.flatnonzero(np.asarray(res.action) == JUMP):
            steps += 1
            delta = dep[t + 1] - dep[t]
            assert (delta >= 0).all() or (delta <= 0).all(), (k_max, t, dep[t], dep[t + 1])
            if (delta <= 0).all():
                assert not res.violation[t + 1], (k_max, t, dep[t], dep[t + 1])
    assert steps >= 1


def test_speed_scaled_brackets_follow_the_definition_of_a_speedup():
    speeds = np.array([0.05, 1.0, 30.0])
    lo, hi = speed_scaled_brackets(np.array([0.0, 163.0, 0.0]), np.array([np.inf, 165.0, np.inf]), speeds)
    # a replica 20 times slower carries at most a twentieth; one 30 times faster at least 30 times as much
    assert hi[0] == pytest.approx(165.0 * 0.05) and lo[2] == pytest.approx(163.0 * 30.0)
    assert lo[0] == 0.0 and np.isinf(hi[2])
    assert (lo[1], hi[1]) == (163.0, 165.0)
    # and it agrees with the simulator's queue: the true bounds of every speed lie in the brackets
    spec = paper_spec("B", 3, 10)
    true = np.array([_true_theta(spec, s) for s in speeds])
    lo, hi = speed_scaled_brackets(
        np.array([0.0, 0.99 * true[1], 0.0]), np.array([np.inf, 1.01 * true[1], np.inf]), speeds
    )
    assert np.all(lo <= true) and np.all(true < hi)


def _true_theta(spec, speed: float) -> float:
    """The per-replica rate (tuples/s) at which the spec's M/G/1 replica of ``speed`` reaches R_max (bisection)."""
    one, speeds = np.array([1]), np.array([speed])
    lo, hi = 0.0, speed / spec.model.service_mean_s
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if spec.model.response_time(one, speeds, mid) <= spec.r_max_s else (lo, mid)
    return lo


def test_speed_scaling_spares_the_violations_of_trying_a_type_twenty_times_slower_on_b():
    """Infrastructure B's type 1 (speedup 0.05, price 0.05) cannot meet the bound at any rate the operator sees;
    without speed scaling the learner tried it as optimistically as an unseen type and violated for ~20 periods
    at the start of a run. With it the first violations of type 0 rule type 1 out."""
    spec = paper_spec("B", 3, 10)
    trace = noisy(weekly_shape(1), 0)[: 2 * 1440]
    violations = {}
    for scaled in (True, False):
        res = run_operator(trace, Predictive(spec, {"speed_scaling": scaled}), spec=spec)
        violations[scaled] = int(res.violation.sum())
        if scaled:
            assert res.deployment[60:, 1].sum() == 0  # type 1 never held after the first hour
    assert violations[True] <= 5 and violations[False] >= 3 * violations[True], violations


def test_stages_cover_the_horizon_and_their_points_weigh_each_period_once():
    edges = stage_edges(600, 8, 8, 64)
    assert edges[0] == 0 and edges[-1] == 600
    assert np.all(np.diff(edges)[:8] == 1) and np.all(np.diff(edges)[8:15] == 8)
    assert np.all(np.diff(edges)[15:-1] == 16 * 2 ** np.arange(len(edges) - 17))  # doubling, the last one cut
    points, weights, stage = stage_points(edges, 8)
    for s in range(len(edges) - 1):
        assert weights[stage == s].sum() == pytest.approx(edges[s + 1] - edges[s])
        assert np.all((points[stage == s] >= edges[s]) & (points[stage == s] < edges[s + 1]))
    assert len(points) < 200  # the exceedance of a 600-period plan is evaluated at far fewer periods
    # near horizon beyond the plan's: the papers' fixed blocks only
    assert stage_edges(64, 8, 8, 64).tolist() == [*range(9), 16, 24, 32, 40, 48, 56, 64]


def test_a_far_block_is_charged_for_a_peak_between_its_evaluated_periods():
    """B K20 plans 1,200 periods ahead; its far blocks are evaluated at 8 periods each, up to 64 apart. A narrow
    peak between them was charged or missed depending on where they fell (differently from one replan to the
    next); every evaluated period now stands for its span of periods at the span's highest forecast."""
    spec = paper_spec("B", 3, 20)
    policy = Predictive(spec)
    for rate in noisy(np.full(2 * 1440, 300.0), 0):  # the forecaster learns its error distribution
        policy.fc.observe(float(rate))
    thr = mdp.rate_thresholds(spec, policy.inner.space)
    block = int(np.flatnonzero(np.diff(policy.edges) == 512)[0])  # the 512-period block from period 560 on
    start = int(policy.edges[block])
    assert start == 560 and start + 32 in policy.points.tolist()  # evaluated at 592, 656, ...
    flat = np.full(policy.horizon, 300.0)
    peak = flat.copy()
    peak[start + 40 : start + 50] = (
        700.0  # 10 periods above 4 type-0 replicas' bound (658), between 592 and 656
    )
    d4 = policy.space.lookup(np.array([4, 0, 0]))
    w = {name: policy._solve(x, thr)[2][d4] for name, x in (("flat", flat), ("peak", peak))}
    assert w["peak"] > w["flat"] + spec.weights.perf, w  # charged as more than one violation


def test_a_far_block_has_room_for_more_than_one_move_on_a():
    """A K20 plans 267 periods ahead; beyond the fine stages its blocks (8-91 periods) each ended with one action,
    so a plan valued any change of more than a few replicas in the far future (three type-2 replicas for three
    type-0 ones: six moves) as held at intermediate deployments for whole blocks (the fourth pass: 20.7 % of the
    whole trace in three type-2 replicas, the bound 2.9 %). A block of n periods has room for n moves; up to
    ``block_moves`` = 2 (one swap of node types) end each block now."""
    spec = paper_spec("A", 3, 20)
    plans = {moves: Predictive(spec, {"block_moves": moves}) for moves in (1, 2)}
    for policy in plans.values():
        for rate in noisy(np.full(2 * 1440, 300.0), 0):  # the forecaster learns its error distribution
            policy.fc.observe(float(rate))
    thr = mdp.rate_thresholds(spec, plans[1].inner.space)
    xhat = np.full(plans[1].horizon, 420.0)  # three type-0 replicas (494 tuples/s) carry it ...
    xhat[:150] = 600.0  # ... after a peak that three type-2 ones (642) carry
    w = {moves: policy._solve(xhat, thr)[2] for moves, policy in plans.items()}
    assert np.all(w[2] <= w[1] + 1e-12)  # more room, never a dearer plan
    # from twenty type-2 replicas (a flash crowd's deployment) the way down is cheaper by more than a move
    d = plans[1].space.lookup(np.array([0, 0, 20]))
    assert w[2][d] < w[1][d] - spec.weights.rcf, (w[1][d], w[2][d])


def test_stage_spans_tile_the_horizon_around_the_evaluated_periods():
    edges = stage_edges(1200, 8, 8, 64)
    points, weights, _ = stage_points(edges, 8)
    starts = stage_spans(edges, 8)
    ends = np.append(starts[1:], edges[-1])
    assert starts[0] == 0 and np.all(ends - starts == weights)
    assert np.all((points >= starts) & (points < ends))


def test_the_far_horizon_follows_the_weights_and_prices():
    a, b = paper_spec("A", 3, 10), paper_spec("B", 3, 20)
    # the smallest price step between node types repays a reconfiguration in 0.2 C_max / (0.2 step) periods:
    # A K10 (prices 0.7, 1, 1.3): 20 / 0.3 = 67; B K20 (prices 0.05, 1, 30): 600 / 0.95 = 632
    assert recoup_periods(a) == pytest.approx(20.0 / 0.3)
    assert Predictive(a).horizon == 134
    assert Predictive(b).horizon == 1264
    assert Predictive(b, {"horizon_recoups": 0.0}).horizon == 64
    one_price = paper_spec("A", 1, 10)  # a single node type: a removal saves the unit of speed's price
    assert recoup_periods(one_price) == pytest.approx(20.0)


def test_the_plan_sees_a_change_of_node_type_pay_on_a():
    """Infrastructure A, K_max 10, the shipped month of Taxi: a plan that only saw one unit of speed's price repay
    a reconfiguration (20 periods; its horizon stayed at 64) held the node type it had. Reaching two recoup
    periods of the price step between node types (0.3: 67 periods), it costs less and reconfigures less
    (measured: 0.029500 against 0.029587, 284 against 298 reconfigurations).

    Measured with the profile of then (``repeats_are_seasons`` off): with the rule on, this month (a young weekly
    profile through the December holidays) favours the 64-period plan (0.029550 against 0.029216), while the
    first 150,000 periods of the whole Taxi trace still favour the longer one (0.031169 against 0.031415). The
    run-of-under-forecasts CUSUM (``shift_sigmas``) is off as then too: with it this month favours the 64-period
    plan (0.028679 against 0.029425)."""
    spec = paper_spec("A", 3, 10)
    trace = load_trace(SHIPPED_TRACES_DIR / "taxi_last_month.txt")
    # the horizon of the rule before: two recoups of one unit of speed (40 periods), inside the near 64
    then = {"repeats_are_seasons": False, "delayed_bins": False, "shift_sigmas": 0.0}
    before = {**then, "horizon_recoups": 2.0 * 20.0 / recoup_periods(spec)}
    runs = {
        name: run_operator(trace, Predictive(spec, params), spec=spec)
        for name, params in (("now", then), ("before", before))
    }
    assert Predictive(spec, before).horizon == 64
    assert runs["now"].summary()["avg_cost"] < runs["before"].summary()["avg_cost"]
    assert runs["now"].reconfiguration.sum() < runs["before"].reconfiguration.sum()


def test_a_committed_forecast_is_the_forecast_of_a_past_level_decayed_since():
    policy = Predictive(paper_spec("A", 3, 10), SHORT)
    for rate in _daily(2, 80.0, 380.0, rise=50, fall=90):
        policy.fc.observe(float(rate))
    fc = policy.fc
    now = fc.forecast(16)
    assert np.array_equal(fc.forecast(16, fc.level, fc.phi(), 0), now)
    later = fc.forecast(16, fc.level, 0.5, 3)  # a level seen 3 periods ago, halving per period
    profile = fc.profile(fc.t - 1 + np.arange(1, 17))
    assert np.allclose(later, np.maximum(profile + 0.5 ** (np.arange(1, 17) + 3) * fc.level, 0.0))
    with pytest.raises(ValueError, match="params.commit_changes"):
        Predictive(paper_spec("A", 3, 10), {"commit_changes": 1})
    with pytest.raises(ValueError, match="params.repeats_are_seasons"):
        Predictive(paper_spec("A", 3, 10), {"repeats_are_seasons": 1})
    with pytest.raises(ValueError, match="params.delayed_bins"):
        Predictive(paper_spec("A", 3, 10), {"delayed_bins": 1})


@pytest.mark.parametrize("field", ["horizon", "replan_every", "block_steps", "reaction_periods"])
def test_bad_parameters_name_the_field(field):
    with pytest.raises(ValueError, match=f"params.{field}"):
        Predictive(paper_spec("A", 3, 10), {field: 0})
    with pytest.raises(ValueError, match="params.horizon_recoups"):
        Predictive(paper_spec("A", 3, 10), {"horizon_recoups": -1.0})


def test_beats_model_based_on_three_weeks_of_taxi():
    trace = load_trace(SHIPPED_TRACES_DIR / "taxi_last_month.txt", steps=21 * 1440)
    spec = paper_spec("A", 3, 10)
    costs = {}
    for name in ("predictive", "model-based"):
        summary = run_operator(trace, build_policy(name, spec), spec=spec).summary()
        costs[name] = summary["avg_cost"]
        if name == "predictive":
            assert summary["violations_pct"] < 0.5
    # measured: predictive 2-4 % below model-based here (the first day is model-based's in both)
    assert costs["predictive"] < 0.99 * costs["model-based"], costs


def test_a_violation_budget_holds_the_violating_periods_near_it_and_leaves_a_plan_under_it_alone():
    """A noisy daily cycle at a weight of violations so low (0.1 against 0.7 for resources) that the cost-optimal
    plan violates in 2.7 % of its periods. With a budget of 1 % the violation weight grows with the excess (dual
    ascent) and the plan violates half as often, at a little more cost; a budget the plan keeps anyway (10 %)
    changes no decision."""
    from policies.operator_model import CostWeights

    t = np.arange(DAY * 30)
    shape = 300.0 + 200.0 * np.sin(2 * np.pi * t / DAY)
    trace = np.maximum(shape * (1.0 + 0.05 * np.random.default_rng(1).normal(size=len(t))), 0.0)
    spec = paper_spec("A", 3, 10, weights=CostWeights(perf=0.1, res=0.7, rcf=0.2))
    runs, weights = {}, {}
    for budget in (0.0, 0.01, 0.1):
        policy = Predictive(spec, {**SHORT, "violation_budget": budget})
        runs[budget] = run_operator(trace, policy, spec=spec)
        weights[budget] = policy.perf_weight()
    planned = {b: float(r.violation[DAY:].mean()) for b, r in runs.items()}  # the first day is model-based's
    assert planned[0.0] > 0.02
    assert planned[0.01] < 0.6 * planned[0.0], planned
    assert runs[0.01].summary()["avg_cost"] < 1.02 * runs[0.0].summary()["avg_cost"]
    assert weights[0.0] == weights[0.1] == 0.1
    assert np.array_equal(runs[0.1].deployment, runs[0.0].deployment)
