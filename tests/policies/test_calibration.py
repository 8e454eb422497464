"""Self-calibration (issue 20, item 1): the rate range grows with the observed rates and what was learned per level
is carried over; the service time is learned from the operator's own measurements."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from policies import calibration
from policies.base import Observation, apply_action, decode_state, encode_state
from policies.om.deep import DeepQLearningPDSPlus
from policies.om.model_based import ModelBased
from policies.om.offline import OfflineOptimum
from policies.om.qlearning import QLearning, QLearningPDS, QLearningPDSPlus
from policies.operator_model import OperatorSpec, QueueModel, RateLevels, infrastructure
from policies.paths import taxi_trace
from policies.sim.operator import run_operator
from policies.sim.scenario import run_paper
from policies.sim.trace import load_trace

MU = 180.0
TRUTH = QueueModel(1.0 / MU, (1.0 / MU) ** 2 / 2.0)


def spec(
    n_res: int = 1, k_max: int = 10, levels: RateLevels | None = None, mode: str = "given"
) -> OperatorSpec:
    return OperatorSpec(
        infrastructure("A", n_res), k_max=k_max, model=TRUTH, rate_levels=levels, model_mode=mode
    )


def test_grow_nests_the_old_levels_in_the_new_ones() -> None:
    old = RateLevels(30, 650.0, grow=True)
    new, m = calibration.grow(old, 30 * 650.0)
    assert m == 45 and new.n == 30 and new.max_rate == 650.0 * 45 and new.grow
    assert new.max_rate >= 30 * 650.0 * calibration.RANGE_HEADROOM
    rates = np.linspace(0.0, 649.9, 5000)
    assert all(new.level(r) == old.level(r) // m for r in rates)  # every old level lies inside one new level
    assert not calibration.needs_growth(RateLevels(30, 650.0), 10_000.0)  # the papers' fixed range clamps
    assert calibration.needs_growth(old, 650.0) and not calibration.needs_growth(old, 649.0)
    with pytest.raises(ValueError, match="rate_levels.max_rate"):
        RateLevels(30, 0.0)
    with pytest.raises(ValueError, match="model_mode"):
        OperatorSpec(infrastructure("A", 1), model_mode="guess")


def test_a_peak_rate_hint_starts_a_growing_range() -> None:
    hinted = calibration.levels_from_hint(400.0)
    assert hinted == RateLevels(calibration.INITIAL_LEVELS, 400.0 * calibration.RANGE_HEADROOM, grow=True)
    assert calibration.levels_from_hint(None) is None
    with pytest.raises(ValueError, match="expected_peak_rate"):
        calibration.levels_from_hint(-1.0)
    pol = QLearningPDS(spec(levels=hinted))
    pol.act(np.array([1]), 5000.0, False)
    assert pol.levels.max_rate >= 5000.0 and pol.rerangings == 1


def test_merge_counts_and_values() -> None:
    a = np.arange(7, dtype=float)
    assert calibration.merge_counts(a, 3).tolist() == [3.0, 12.0, 6.0, 0, 0, 0, 0]
    w = np.array([1, 0, 1, 0, 0, 0, 2], dtype=float)
    assert calibration.merge_values(a, 3, weights=w, fill=-1.0).tolist() == [1.0, -1.0, 6.0, -1, -1, -1, -1]


def test_ql_pds_values_reappear_at_the_remapped_level_and_the_step_says_so() -> None:
    pol = QLearningPDS(spec(levels=RateLevels(30, 650.0, grow=True)), {"explore": False})
    k = np.array([3])
    rng = np.random.default_rng(1)
    for _ in range(200):  # learn at level 4 only (rates 90..108 tuples/s)
        pol.act(k, float(rng.uniform(90.0, 108.0)), bool(rng.random() < 0.2))
    before = np.array(pol.v)
    assert (before[:, 4] != 0).any() and (np.delete(before, 4, axis=1) == 0).all()
    d_now = pol.index.lookup((3,))
    proposal = pol.step(Observation(k, 30 * 650.0, violated=True))  # a rate 30x above the range
    cal = proposal.explanation["calibration"]
    assert cal["old_range_tuples_s"] == [0.0, 650.0] and cal["new_range_tuples_s"] == [0.0, 650.0 * 45]
    assert "19500" in cal["reason"]
    after = np.array(pol.v)
    others = [d for d in range(len(before)) if d != d_now]  # the step's own update wrote at (d_now, level 0)
    assert np.array_equal(after[others, 0], before[others, 4])
    assert (after[:, 1:] == 0).all()
    assert pol.levels.max_rate == 650.0 * 45 and pol.rerangings == 1
    # the next step does not report it again
    assert "calibration" not in pol.step(Observation(k, 19_000.0, violated=False)).explanation


def test_ql_rows_are_averaged_over_the_old_levels_with_data() -> None:
    pol = QLearning(spec(levels=RateLevels(4, 40.0, grow=True)), {"explore": False})
    d = pol.index.id_of((2,))
    pol._row(d, 0)[:] = [1.0, 2.0, 3.0]
    pol._row(d, 1)[:] = [3.0, 4.0, 5.0]
    pol._row(d, 3)[:] = [7.0, 7.0, 7.0]
    pol.act(np.array([2]), 50.0, False)  # no previous decision: nothing learned, range 40 -> 80 (factor 2)
    assert pol.levels.max_rate == 80.0
    assert pol.q_values(np.array([2]), 0) == [2.0, 3.0, 4.0]
    assert pol.q_values(np.array([2]), 1) == [7.0, 7.0, 7.0]
    assert pol.q[d][2] is None and pol.q[d][3] is None


def ramp_trace(low: float, high: float, n_low: int, n_ramp: int, n_high: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = np.concatenate([np.full(n_low, low), np.linspace(low, high, n_ramp), np.full(n_high, high)])
    return base * rng.uniform(0.95, 1.0, len(base))


def test_model_based_grows_resolves_and_scales_out_to_a_rate_30x_above_its_range() -> None:
    """Range 65 tuples/s, rates ramping to 30x that: the grown policy reaches the replicas the rate needs (K_max
    allows); the fixed range saturates."""
    trace = ramp_trace(40.0, 30 * 65.0, 300, 1500, 1500)
    needed = next(
        n for n in range(1, 40) if TRUTH.response_time(np.array([n]), np.ones(1), 30 * 65.0) <= 0.05
    )
    out = {}
    for grow in (True, False):
        pol = ModelBased(spec(k_max=20, levels=RateLevels(30, 65.0, grow=grow)))
        out[grow] = run_operator(trace, pol, k0=np.array([1]))
    grown, fixed = out[True], out[False]
    tail = slice(-1000, None)
    assert grown.replicas[tail].min() >= needed - 1 and grown.replicas[-1] >= needed
    assert grown.violation[tail].mean() < 0.02
    assert fixed.replicas[tail].max() < needed - 2 and fixed.violation[tail].mean() > 0.5


def test_service_rate_1600_up_to_1800_tuples_s_is_not_stuck_at_one_replica() -> None:
    trace = load_trace(taxi_trace(), 4_000)
    trace = trace * (1800.0 / trace.max())
    fixed = run_paper(trace, "model-based", "A", 3, 10, mu=1600.0)
    calib = run_paper(trace, "model-based", "A", 3, 10, mu=1600.0, calibrate=True)
    assert calib.meta["rerangings"] >= 1 and calib.meta["rate_range_tuples_s"] >= 1800.0
    assert calib.replicas.max() >= 2
    assert calib.violation.mean() < fixed.violation.mean()


@pytest.mark.parametrize("cls", [QLearning, QLearningPDS, QLearningPDSPlus, ModelBased])
def test_state_round_trips_across_a_reranging(cls: type) -> None:
    sp = spec(n_res=2, levels=None, mode="learn")
    pol = cls(sp, seed=3)
    rng = np.random.default_rng(0)
    k = np.array([1, 0])
    rate = 50.0
    for i in range(300):
        rate = rate * 1.02 if i < 200 else rate
        u = TRUTH.utilisation(k, sp.speedups, rate)
        r = TRUTH.response_time(k, sp.speedups, rate)
        a = pol.act(k, rate, bool(r > sp.r_max_s), Observation(k, rate, r, bool(r > sp.r_max_s), u))
        if a:
            k = apply_action(k, a)
        rate *= rng.uniform(0.99, 1.01)
    assert pol.rerangings >= 2
    data = pol.state_bytes()
    twin = cls(spec(n_res=2, levels=None, mode="learn"), seed=99)
    twin.load_state(data)
    assert twin.state_bytes() == data
    assert twin.levels == pol.levels and twin.rerangings == pol.rerangings
    # both continue identically, through one more re-ranging
    for r_next in (rate, rate * 3.0, rate * 3.1):
        obs = Observation(k, r_next, violated=False, utilisation=0.5)
        assert twin.step(obs).action == pol.step(obs).action
    assert twin.state_bytes() == pol.state_bytes()


def test_states_written_before_calibration_still_load() -> None:
    sp = spec(levels=RateLevels(30, 650.0))
    pol = QLearningPDSPlus(sp, seed=1)
    for r in (100.0, 200.0, 300.0):
        pol.act(np.array([2]), r, False)
    meta, arrays = decode_state(pol.state_bytes())
    for key in ("levels", "rerangings"):
        meta.pop(key)
    arrays.pop("_service_stats")
    old = encode_state(meta, arrays)
    twin = QLearningPDSPlus(spec(levels=RateLevels(30, 650.0)), seed=5)
    twin.load_state(old)
    assert twin.levels == RateLevels(30, 650.0) and twin.v == pol.v


def test_service_time_estimator_converges_on_the_true_service_time() -> None:
    truth = QueueModel(1.0 / 500.0, (1.0 / 500.0) ** 2)  # exponential service: M/M/1 replicas
    speed = np.array([1.0, 0.7, 1.3])
    rng = np.random.default_rng(2)
    by_util = calibration.ServiceTimeEstimator()
    by_rt = calibration.ServiceTimeEstimator()
    for _ in range(200):
        k = rng.integers(0, 4, 3)
        if k.sum() == 0:
            continue
        rate = float(rng.uniform(10.0, 0.9 * truth.capacity(k, speed)))
        u = truth.utilisation(k, speed, rate)
        r = truth.response_time(k, speed, rate)
        by_util.observe(k, speed, rate, u, r)
        by_rt.observe(k, speed, rate, None, r)
    assert by_util.mean_s() == pytest.approx(truth.service_mean_s, rel=1e-9)
    assert by_util.var_s2() == pytest.approx(truth.service_var_s2, rel=1e-6)
    assert by_rt.mean_s() == pytest.approx(truth.service_mean_s, rel=1e-9)
    assert calibration.ServiceTimeEstimator().model() is None


def test_a_learning_policy_in_the_simulator_learns_the_simulated_service_time() -> None:
    trace = load_trace(taxi_trace(), 3000)
    pol = QLearningPDSPlus(spec(n_res=3, levels=None, mode="learn"), seed=0)
    run_operator(trace, pol, spec=spec(n_res=3))
    assert pol.service.mean_s() == pytest.approx(1.0 / MU, rel=1e-6)
    assert pol.approx_model().service_mean_s == pytest.approx(1.0 / MU, rel=0.03)
    # "hint": the spec's model until the estimator has data
    hinted = QLearningPDSPlus(replace(spec(n_res=3), model=QueueModel(0.01, 1e-4), model_mode="hint"))
    assert hinted.planning_model().service_mean_s == 0.01
    obs = Observation(np.array([1, 0, 0]), 90.0, 0.01, False, 0.5)
    for _ in range(calibration.SERVICE_MIN_SAMPLES):
        hinted.step(obs)
    assert hinted.planning_model().service_mean_s == pytest.approx(0.5 / 90.0)


def test_deep_and_dp_follow_the_range() -> None:
    pol = DeepQLearningPDSPlus(spec(n_res=2, levels=RateLevels(30, 100.0, grow=True), mode="learn"), seed=0)
    k = np.array([1, 0])
    for r in (50.0, 60.0, 70.0, 80.0):
        pol.step(Observation(k, r, violated=False, utilisation=r / MU))
    pol.step(Observation(k, 400.0, violated=True, utilisation=0.99))
    assert pol.levels.max_rate == 600.0
    n = pol.replay.size
    assert pol.replay.data["level"][:n].tolist() == [pol.level(r) for r in pol.replay.data["rate"][:n]]
    trace = np.linspace(10.0, 5000.0, 200)
    dp = OfflineOptimum.from_trace(spec(n_res=1, k_max=40, levels=None), trace)
    assert dp.levels.max_rate >= 5000.0


@pytest.mark.parametrize("self_calibrating", [False, True])
def test_bo_simulations_use_self_calibrating_oms(self_calibrating: bool) -> None:
    """The AM's simulated OMs grow their range and learn the fitted service time like the control loop's OMs."""
    from policies.am.bo import BayesianAM, Observations, fit_queue_model
    from policies.app_graphs import application

    built: list[QLearningPDSPlus] = []

    def factory(sp: OperatorSpec, seed: int) -> QLearningPDSPlus:
        built.append(QLearningPDSPlus(sp, {}, seed))
        return built[-1]

    app = application("A")
    nt = infrastructure("A", 2)
    models = [fit_queue_model(mean_s=op.service_mean_s, var_s2=op.service_mean_s**2) for op in app.operators]
    rates = np.linspace(100.0, 2000.0, 200)  # well past the papers' 650 tuples/s
    am = BayesianAM(app, nt, factory, self_calibrating=self_calibrating)
    am.evaluate(am.configuration, Observations(rates, models))
    assert len(built) == app.n
    for om, m in zip(built, models, strict=True):
        if self_calibrating:
            assert om.rerangings >= 1 and om.levels.max_rate > 650.0
            assert om.spec.model_mode == "learn"
            assert om.service.mean_s() == pytest.approx(m.service_mean_s, rel=1e-6)
        else:
            assert om.levels == RateLevels(30, 650.0) and om.rerangings == 0 and om.service.samples == 0


@pytest.mark.parametrize("name", sorted(__import__("policies.registry").registry.OM_POLICIES))
def test_every_om_policy_runs_self_calibrating_past_the_papers_range(name: str) -> None:
    trace = np.linspace(20.0, 3000.0, 300)
    res = run_paper(trace, name, "A", 2, 20, calibrate=True)
    assert res.meta["rate_range_tuples_s"] >= 3000.0
    assert np.isfinite(res.cost).all()
