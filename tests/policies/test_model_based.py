"""Model-based RL with full backups: value iteration, monotone violation model, state, reconfiguration."""

from __future__ import annotations

import numpy as np
import pytest

from policies.base import Observation, apply_action
from policies.om import mdp
from policies.om.model_based import (
    CAPACITY_FIT_MIN_PERIODS,
    DELAY_FIT_MIN_PERIODS,
    ModelBased,
    capacity_estimates,
    level_exceedance,
    mg1_rate_bound,
    monotone_majorant,
    per_replica_bounds,
    queueing_delay_fit,
    queueing_variability,
)
from policies.operator_model import (
    CostWeights,
    NodeType,
    OperatorSpec,
    QueueModel,
    RateLevels,
    infrastructure,
)
from policies.sim.operator import run_operator
from policies.sim.scenario import paper_spec
from policies.sim.trace import load_trace


def one_type_spec(k_max: int, levels: int) -> OperatorSpec:
    return OperatorSpec(infrastructure("A", 1), k_max=k_max, rate_levels=RateLevels(levels, 650.0))


# ---- value iteration --------------------------------------------------------------------------------------------


def test_value_iteration_matches_hand_solved_two_deployment_mdp() -> None:
    # states k=1 (cost 1 per step) and k=2 (cost 0.1); moving costs 0.2; gamma 0.9.
    # Optimal: move from 1 to 2 and stay: V(2) = 0.1 / (1 - 0.9) = 1, V(1) = 1 + 0.2 + 0.9 * V(2) = 2.1.
    spec = one_type_spec(2, 1)
    space = mdp.build_space(spec)
    assert space.deployments[:, 0].tolist() == [1, 2]
    cost = np.array([[1.0], [0.1]])
    future, _ = mdp.value_iteration(space, cost, np.ones((1, 1)), w_rcf=0.2, gamma=0.9, tol=1e-12)
    np.testing.assert_allclose((cost + future)[:, 0], [2.1, 1.0], atol=1e-10)
    q1 = mdp.q_values(space, 0, 0, cost + future, np.ones((1, 1)), 0.2, 0.9)
    assert mdp.greedy(q1) == 2  # add one replica
    q2 = mdp.q_values(space, 1, 0, cost + future, np.ones((1, 1)), 0.2, 0.9)
    assert mdp.greedy(q2) == 0  # stay


def test_value_iteration_uses_rows_of_the_transition_matrix_as_next_level_distributions() -> None:
    # one deployment, two levels: V = c + gamma P V, i.e. V = (I - gamma P)^-1 c.
    spec = one_type_spec(1, 2)
    space = mdp.build_space(spec)
    p = np.array([[0.5, 0.5], [0.2, 0.8]])
    cost = np.array([[1.0, 0.0]])
    future, _ = mdp.value_iteration(space, cost, p, w_rcf=0.2, gamma=0.9, tol=1e-12)
    expected = np.linalg.solve(np.eye(2) - 0.9 * p, cost[0])
    np.testing.assert_allclose((cost + future)[0], expected, atol=1e-9)


def test_one_sweep_is_the_bellman_operator_on_a_random_space() -> None:
    spec = paper_spec("A", 3, 5)
    space = mdp.build_space(spec)
    rng = np.random.default_rng(3)
    n_levels = spec.rate_levels.n
    p = rng.random((n_levels, n_levels))
    p /= p.sum(axis=1, keepdims=True)
    cost = rng.random((space.size, n_levels))
    future = rng.random((space.size, n_levels))
    out = mdp.sweep(space, cost, p, future, 0.2, 0.99)
    value = cost + future
    for d in range(0, space.size, 7):
        for lvl in (0, 13, 29):
            q = [
                (0.0 if a == 0 else 0.2) + 0.99 * p[lvl] @ value[space.succ[d, a]]
                for a in range(space.succ.shape[1])
                if space.succ[d, a] >= 0
            ]
            assert out[d, lvl] == pytest.approx(min(q), abs=1e-12)


def test_reduced_space_counts_and_closure() -> None:
    spec = paper_spec("A", 10, 20)
    assert mdp.count_deployments(10, 20) == 30_045_014
    space = mdp.build_space(spec, max_types=2)
    assert space.size == 10 * 20 + 45 * 190
    assert ((space.deployments > 0).sum(axis=1) <= 2).all()
    # every in-space successor is the deployment the action produces
    d = space.lookup(np.array([2, 0, 0, 3, 0, 0, 0, 0, 0, 0]))
    assert d >= 0
    assert space.succ[d, 1 + 10 + 1] == -1  # a third type would leave the space
    assert space.deployments[space.succ[d, 1 + 10 + 3]].tolist() == [2, 0, 0, 4, 0, 0, 0, 0, 0, 0]


def test_performance_classes_have_the_true_rate_thresholds() -> None:
    spec = paper_spec("A", 3, 10)
    space = mdp.build_space(spec)
    thr = mdp.rate_thresholds(spec, space)
    speeds = spec.speedups
    for d in range(0, space.size, 11):
        k = space.deployments[d]
        t = thr[space.cls[d]]
        assert spec.model.response_time(k, speeds, t * (1 - 1e-9)) <= spec.r_max_s
        assert spec.model.response_time(k, speeds, t * (1 + 1e-6)) > spec.r_max_s


# ---- monotone violation model -----------------------------------------------------------------------------------


def brute_majorant(freq: np.ndarray, visited: np.ndarray, space: mdp.DeploymentSpace) -> np.ndarray:
    n_a, n_b = space.grid_shape
    f = np.where(visited, freq, 0.0).reshape(n_a, n_b, -1)
    out = np.zeros_like(f)
    for a in range(n_a):
        for b in range(n_b):
            for lvl in range(f.shape[2]):
                out[a, b, lvl] = f[a:, b:, : lvl + 1].max()
    return out.reshape(freq.shape)


def test_monotone_projection_is_the_smallest_monotone_majorant() -> None:
    spec = paper_spec("A", 3, 4)
    space = mdp.build_space(spec)
    rng = np.random.default_rng(0)
    visits = rng.integers(0, 3, size=(space.n_classes, spec.rate_levels.n)).astype(float)
    violations = np.minimum(visits, rng.integers(0, 2, size=visits.shape)).astype(float)
    v = monotone_majorant(violations, visits, space)
    with np.errstate(invalid="ignore", divide="ignore"):
        freq = np.where(visits > 0, violations / visits, 0.0)
    np.testing.assert_array_equal(v, brute_majorant(freq, visits > 0, space))
    g = v.reshape(*space.grid_shape, -1)
    assert (np.diff(g, axis=2) >= 0).all()  # higher level never violates less
    assert (np.diff(g, axis=0) <= 0).all()  # more replicas never violate more
    assert (np.diff(g, axis=1) <= 0).all()  # faster slowest type never violates more
    assert (v >= freq).all()


def test_projection_keeps_data_that_is_already_monotone() -> None:
    spec = paper_spec("A", 3, 4)
    space = mdp.build_space(spec)
    # a true monotone model: violation iff the level's midpoint exceeds the class threshold
    thr = mdp.rate_thresholds(spec, space)
    mids = np.array([spec.rate_levels.rate(lvl) for lvl in range(spec.rate_levels.n)])
    truth = (mids[None, :] > thr[:, None]).astype(float)
    visits = np.full(truth.shape, 2.0)
    np.testing.assert_array_equal(monotone_majorant(truth * 2.0, visits, space), truth)


# ---- the policy ---------------------------------------------------------------------------------------------------


def test_learns_the_taxi_head_cheaply_and_without_many_violations(taxi_head) -> None:
    trace = load_trace(taxi_head)
    spec = paper_spec("A", 3, 10)
    result = run_operator(trace, ModelBased(spec))
    summary = result.summary()
    assert summary["violations_pct"] < 2.0
    assert summary["avg_cost"] < 0.06


def test_sweep_period_is_automatic_from_the_space_size() -> None:
    small = ModelBased(paper_spec("A", 3, 10))
    big = ModelBased(paper_spec("A", 10, 20))
    assert small.space.size == 285 and big.space.size == 8750
    assert 1 <= small.sweep_every < big.sweep_every
    assert ModelBased(paper_spec("A", 3, 10), {"sweep_every": 5}).sweep_every == 5


def run_steps(policy: ModelBased, trace: np.ndarray, k: np.ndarray) -> tuple[list[int], np.ndarray]:
    spec = policy.spec
    actions = []
    for rate in trace:
        violated = spec.model.response_time(k, spec.speedups, float(rate)) > spec.r_max_s
        a = policy.act(k, float(rate), violated)
        actions.append(a)
        if a:
            t, d = (a - 1, -1) if a <= spec.n_res else (a - 1 - spec.n_res, 1)
            k = k.copy()
            k[t] += d
    return actions, k


@pytest.mark.parametrize("n_res,k_max", [(3, 10), (4, 12)])
def test_state_round_trip_is_bit_exact_and_continues_identically(taxi_head, n_res, k_max) -> None:
    trace = load_trace(taxi_head)
    policy = ModelBased(paper_spec("B", n_res, k_max), {"sweep_every": 3, "warmup_steps": 10}, seed=4)
    k0 = np.eye(n_res, dtype=np.int64)[0]
    _, k = run_steps(policy, trace[:1500], k0)
    data = policy.state_bytes()
    clone = ModelBased.from_state(paper_spec("B", n_res, k_max), data)
    assert clone.state_bytes() == data
    for name in ("trans_counts", "visits", "violations", "v_hat", "future", "p_hat"):
        np.testing.assert_array_equal(getattr(clone, name), getattr(policy, name))
    a1, k1 = run_steps(policy, trace[1500:], k)
    a2, k2 = run_steps(clone, trace[1500:], k)
    assert a1 == a2 and (k1 == k2).all()
    assert clone.state_bytes() == policy.state_bytes()


def test_explain_returns_values_of_alternatives_without_side_effects(taxi_head) -> None:
    trace = load_trace(taxi_head)[:300]
    spec = paper_spec("A", 3, 10)
    policy = ModelBased(spec)
    _, k = run_steps(policy, trace, np.array([1, 0, 0]))
    before = policy.state_bytes()
    action, values = policy._decide(k, 400.0, None, True)
    assert policy.state_bytes() == before
    assert 0 in values and action in values
    assert values[action] == min(values.values())
    proposal = policy.step(Observation(deployment=k, input_rate=400.0, violated=False))
    assert "alternatives" in proposal.explanation
    assert set(proposal.explanation["last_period_cost_terms"]) == {"perf", "res", "rcf"}


def test_reconfigure_keeps_statistics_and_recomputes_values(taxi_head) -> None:
    trace = load_trace(taxi_head)[:800]
    policy = ModelBased(paper_spec("A", 3, 10))
    _, k = run_steps(policy, trace, np.array([1, 0, 0]))
    counts, visits, future = policy.trans_counts.copy(), policy.visits.copy(), policy.future.copy()
    sweeps = policy.sweeps_done
    policy.reconfigure(weights=CostWeights(perf=0.2, res=0.6, rcf=0.2))
    np.testing.assert_array_equal(policy.trans_counts, counts)
    np.testing.assert_array_equal(policy.visits, visits)
    assert not np.array_equal(policy.future, future)
    # new weights alone: a warm start of reweight_sweeps; a new bound: reconfigure_sweeps
    assert policy.sweeps_done - sweeps == policy.params["reweight_sweeps"] == 30
    sweeps = policy.sweeps_done
    # a new bound changes what a violation is: the rate model stays, the violation statistics restart
    policy.reconfigure(r_max_s=0.1)
    assert policy.sweeps_done - sweeps == policy.params["reconfigure_sweeps"] == 300
    np.testing.assert_array_equal(policy.trans_counts, counts)
    assert policy.visits.sum() == 0 and policy.v_hat.max() == 0
    # reloading a state does not count as a reconfiguration
    data = policy.state_bytes()
    assert ModelBased.from_state(paper_spec("A", 3, 10), data).state_bytes() == data


def test_a_new_bound_keeps_the_half_of_the_threshold_bracket_that_stays_true(taxi_head) -> None:
    trace = load_trace(taxi_head)[:1500]
    spec = paper_spec("A", 3, 10)
    r0 = spec.r_max_s  # the policy shares the spec: reconfigure changes it
    policy = ModelBased(spec)
    run_steps(policy, trace, np.array([1, 0, 0]))
    hi = policy.thr_hi.copy()
    assert policy.thr_lo.max() > 0 and np.isfinite(hi).any()
    # tighter: every rate that violated the old bound violates the new one (hi kept); meeting it says nothing
    policy.reconfigure(r_max_s=r0 / 2)
    np.testing.assert_array_equal(policy.thr_hi, hi)
    assert (policy.thr_lo == 0).all()
    # looser (back to the first bound): what met the old bound meets the new one (lo kept)
    run_steps(policy, trace[:300], np.array([3, 0, 0]))
    lo = policy.thr_lo.copy()
    assert lo.max() > 0
    policy.reconfigure(r_max_s=r0)
    np.testing.assert_array_equal(policy.thr_lo, lo)
    assert np.isinf(policy.thr_hi).all()


def test_deployment_outside_the_reduced_space_moves_back_into_it() -> None:
    spec = paper_spec("A", 10, 20)
    policy = ModelBased(spec, {"warmup_steps": 0, "sweep_every": 1000})
    k = np.array([2, 1, 3, 0, 0, 0, 0, 0, 0, 0])
    action = policy.act(k, 300.0, False)
    assert action == 1 + 1  # remove the single replica of type 1


@pytest.mark.parametrize(
    "params,field",
    [
        ({"sweep_every": -1}, "sweep_every"),
        ({"sweeps_per_update": 0}, "sweeps_per_update"),
        ({"reweight_sweeps": -1}, "reweight_sweeps"),
        ({"nope": 1}, "nope"),
    ],
)
def test_bad_params_name_the_field(params, field) -> None:
    with pytest.raises(ValueError, match=f"params.{field}"):
        ModelBased(paper_spec("A", 3, 10), params)


# ---- threshold violation model ------------------------------------------------------------------------------------


def test_per_replica_bounds_are_monotone_in_speed_and_stay_in_the_bracket() -> None:
    lo = np.array([50.0, 0.0, 120.0, 0.0])
    hi = np.array([np.inf, 100.0, np.inf, 400.0])
    theta = per_replica_bounds(lo, hi)
    # speed 0: hi forced down to 100 by the violation on the faster speed 1; lo 50 -> midpoint 75
    # speed 1: [50 (from the slower speed 0), 100) -> 75; speed 2: [120, 400 from speed 3) -> 260; speed 3: 260
    np.testing.assert_allclose(theta, [75.0, 75.0, 260.0, 260.0])
    assert (np.diff(theta) >= 0).all()
    assert (
        per_replica_bounds(np.array([10.0]), np.array([np.inf]))[0] == np.inf
    )  # optimistic until a violation
    assert per_replica_bounds(np.array([90.0]), np.array([80.0]))[0] == 80.0  # contradiction: the safe side


def test_level_exceedance_of_uniform_rates_is_linear_inside_the_level() -> None:
    from policies.om.model_based import HIST_BINS_PER_LEVEL, TOP_SPAN_LEVELS
    from policies.operator_model import RateLevels

    levels = RateLevels(30, 650.0)
    hist = np.zeros(HIST_BINS_PER_LEVEL * (levels.n - 1 + TOP_SPAN_LEVELS))
    hist[: HIST_BINS_PER_LEVEL * 10] = 1.0  # uniform over levels 0..9, nothing above
    w = levels.width
    thresholds = np.array([0.0, 3.25 * w, 9.5 * w, 100 * w])
    v = level_exceedance(thresholds, hist, levels)
    assert v.shape == (4, 30)
    np.testing.assert_allclose(v[0, :10], 1.0)
    np.testing.assert_allclose(v[1, 3], 0.75)
    np.testing.assert_allclose(v[1, :3], 0.0)
    np.testing.assert_allclose(v[1, 4:10], 1.0)
    np.testing.assert_allclose(v[2, 9], 0.5)
    np.testing.assert_allclose(v[3], 0.0)
    # never observed levels: uniform over their nominal width
    np.testing.assert_allclose(v[0, 10:], 1.0)


def test_level_exceedance_of_some_levels_gives_exactly_those_columns_of_the_full_result() -> None:
    from policies.om.model_based import HIST_BINS_PER_LEVEL, TOP_SPAN_LEVELS
    from policies.operator_model import RateLevels

    levels = RateLevels(30, 650.0)
    rng = np.random.default_rng(5)
    hist = rng.poisson(2.0, HIST_BINS_PER_LEVEL * (levels.n - 1 + TOP_SPAN_LEVELS)).astype(float)
    thresholds = rng.uniform(0.0, 700.0, 12)
    full = level_exceedance(thresholds, hist, levels)
    cols = np.array([0, 7, 8, 29])  # 29: the top level, whose histogram spans TOP_SPAN_LEVELS widths
    np.testing.assert_array_equal(level_exceedance(thresholds, hist, levels, cols), full[:, cols])


@pytest.mark.parametrize("sweep_every", [1, 7])
def test_incremental_threshold_model_equals_a_full_recomputation_at_every_sweep(
    taxi_head, sweep_every
) -> None:
    """Between changes of the bounds only the levels that received a rate are recomputed; at every sweep the
    learned cost must still be what a recomputation of every level from the same statistics gives."""
    trace = load_trace(taxi_head)[:1500]
    spec = paper_spec("A", 3, 10)
    policy = ModelBased(spec, {"sweep_every": sweep_every, "warmup_steps": 0})
    checked = 0
    original = policy._sweep

    def checking_sweep(n: int) -> None:
        nonlocal checked
        theta = per_replica_bounds(policy.thr_lo, policy._upper_bounds())
        thresholds = policy.space.class_n * theta[policy._class_rank]
        full = level_exceedance(thresholds, policy.rate_hist, spec.rate_levels)
        np.testing.assert_allclose(policy.v_hat, full, rtol=1e-12, atol=1e-12)
        checked += 1
        original(n)

    policy._sweep = checking_sweep
    run_operator(trace, policy)
    assert checked >= len(trace) // sweep_every - 1
    assert np.isfinite(policy.thr_hi).any()  # the bounds moved during the run: both paths were exercised


def test_threshold_learner_brackets_the_true_per_replica_bound(taxi_head) -> None:
    trace = load_trace(taxi_head)
    spec = paper_spec("A", 3, 10)
    policy = ModelBased(spec)
    run_operator(trace, policy)
    space = policy.space
    true = mdp.rate_thresholds(spec, space).reshape(space.grid_shape)[0]  # n = 1: the per-replica bound
    bounded = np.isfinite(policy.thr_hi)
    assert bounded.any()
    assert (policy.thr_lo <= true + 1e-9).all()
    assert (true[bounded] < policy.thr_hi[bounded]).all()
    assert (np.diff(per_replica_bounds(policy.thr_lo, policy.thr_hi)) >= 0).all()


def test_counts_model_is_available_and_learns(taxi_head) -> None:
    trace = load_trace(taxi_head)[:1500]
    policy = ModelBased(paper_spec("A", 3, 10), {"violation_model": "counts"})
    run_operator(trace, policy)
    assert policy.visits.sum() == len(trace) - 1
    g = policy.v_hat.reshape(*policy.space.grid_shape, -1)
    assert (np.diff(g, axis=2) >= 0).all() and (np.diff(g, axis=0) <= 0).all()


def test_a_violation_without_throughput_does_not_bound_the_per_replica_rate() -> None:
    """A violated period that processed nothing (x = 0) would make theta = 0: every deployment violating, so
    adding replicas looks useless and the policy never scales out again (seen on Flink with a stale reading)."""
    spec = paper_spec("A", 1, 10)
    policy = ModelBased(spec)
    k1 = np.array([1])
    for rate in (40.0, 60.0):
        policy.step(Observation(k1, rate, violated=False))
    policy.step(Observation(k1, 0.0, violated=True))
    assert np.isinf(policy.thr_hi).all()  # not bounded by the zero-throughput period
    policy.step(Observation(k1, 120.0, violated=True))
    assert policy.thr_hi[0] == 120.0 and policy.thr_lo[0] == 60.0


# ---- capacity bound (utilisation) -------------------------------------------------------------------------------


def _steps(policy: ModelBased, observations: list[tuple[int, float, bool, float | None]]) -> None:
    for replicas, rate, violated, util in observations:
        policy.step(Observation(np.array([replicas]), rate, violated=violated, utilisation=util))


def test_capacity_bound_closes_the_bracket_before_any_violation() -> None:
    """2 replicas at 60 tuples/s, 60 % busy: a replica handles at most 30 / 0.6 = 50 tuples/s, so theta <= 50 and
    the estimate is the middle of [30, 50] -- without a single violation. The paper's learner stays optimistic."""
    seen = [(2, 60.0, False, 0.6)] * 3
    bounded = ModelBased(one_type_spec(10, 30), {"capacity_bound": True})
    _steps(bounded, seen)
    assert np.isinf(bounded.thr_hi).all()
    assert capacity_estimates(bounded.cap_stats)[0] == pytest.approx(50.0)
    assert per_replica_bounds(bounded.thr_lo, bounded._upper_bounds())[0] == pytest.approx(40.0)
    optimistic = ModelBased(one_type_spec(10, 30))
    _steps(optimistic, seen)
    assert not optimistic.cap_stats.any()
    assert np.isinf(per_replica_bounds(optimistic.thr_lo, optimistic._upper_bounds())).all()
    # deciding (without learning from it) for 2 replicas at 110 tuples/s, 55 each, above the measured capacity:
    # only the bounded policy adds a replica
    k2 = np.array([2])
    assert apply_action(k2, bounded._decide(k2, 110.0, None, False)[0]).sum() == 3
    assert apply_action(k2, optimistic._decide(k2, 110.0, None, False)[0]).sum() <= 2


def test_capacity_bound_keeps_the_largest_reliable_ratio_and_yields_to_contradicting_periods() -> None:
    policy = ModelBased(one_type_spec(10, 30), {"capacity_bound": True})
    _steps(policy, [(1, 20.0, False, 0.5)])  # 40 tuples/s
    _steps(policy, [(1, 9.0, False, 0.2)])  # below the reliable utilisation: ignored
    _steps(policy, [(1, 30.0, False, 0.5)])  # 60 tuples/s: the larger (less pessimistic) estimate wins
    assert capacity_estimates(policy.cap_stats)[0] == pytest.approx(60.0)
    # a period without violation at 70 tuples/s per replica contradicts theta <= 60: the estimate is ignored
    _steps(policy, [(1, 70.0, False, None)])
    assert np.isinf(policy._upper_bounds()).all()
    # a violation still bounds theta as in the paper
    _steps(policy, [(1, 90.0, True, None)])
    assert policy._upper_bounds()[0] == 90.0


def test_capacity_fit_separates_a_fixed_overhead_from_the_per_tuple_cost() -> None:
    """u = 0.4 + x / 100 (a micro-batch engine: 40 % of the interval is overhead, 10 ms per tuple): x / u
    reads 25-45 tuples/s, the line reaches u = 1 at 60 tuples/s, the true capacity."""
    xs = np.array([5.0, 10.0, 20.0, 30.0, 45.0])
    stats = np.zeros((1, 6))
    for i, x in enumerate(xs):
        u = 0.4 + x / 100.0
        stats[0, :5] += (1.0, x, u, x * x, x * u)
        stats[0, 5] = max(stats[0, 5], x / u)
        if i + 1 < CAPACITY_FIT_MIN_PERIODS:  # too few periods: the conservative ratio
            assert capacity_estimates(stats)[0] == pytest.approx(stats[0, 5])
    assert capacity_estimates(stats)[0] == pytest.approx(60.0)
    flat = np.zeros((1, 6))
    for _ in range(5):  # the same rate every period: no spread, no fit
        flat[0, :5] += (1.0, 20.0, 0.6, 400.0, 12.0)
        flat[0, 5] = 20.0 / 0.6
    assert capacity_estimates(flat)[0] == pytest.approx(20.0 / 0.6)
    assert np.isinf(capacity_estimates(np.zeros((2, 6)))).all()


def test_service_variability_is_learned_from_response_times_under_load() -> None:
    """An M/G/1 operator with cs^2 = 0.5 (v = 0.75), observed with its utilisation and response time: the fit
    recovers v, and the per-replica bound it gives is the rate where the true response time reaches R_max, where
    M/M/1's (v = 1, the guess before any response time) is below it. Without response times nothing is fitted."""
    spec = one_type_spec(10, 30)
    r_max = spec.r_max_s
    truth = QueueModel(service_mean_s=1 / 200, service_var_s2=(1 / 200) ** 2 / 2)
    one, speed = np.array([1]), np.array([1.0])
    policy = ModelBased(spec, {"capacity_bound": True})
    blind = ModelBased(spec, {"capacity_bound": True})
    for rate in (80.0, 110.0, 130.0, 150.0, 160.0):
        rt, u = truth.response_time(one, speed, rate), truth.utilisation(one, speed, rate)
        policy.step(Observation(one, rate, response_time_s=rt, violated=rt > r_max, utilisation=u))
        blind.step(Observation(one, rate, violated=rt > r_max, utilisation=u))
    assert queueing_variability(policy.delay_stats) == pytest.approx(0.75)
    assert queueing_variability(blind.delay_stats) == 1.0
    lo, hi = 0.0, 200.0  # the true bound, by bisection on the true model
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if truth.response_time(one, speed, mid) <= r_max else (lo, mid)
    bound = mg1_rate_bound(np.array([200.0]), 0.75, r_max)[0]
    assert bound == pytest.approx(lo, rel=1e-9)
    assert policy._queueing_guess()[0] == pytest.approx(bound)
    mm1 = mg1_rate_bound(np.array([200.0]), 1.0, r_max)[0]
    assert mm1 == pytest.approx(200.0 - 1.0 / r_max) and mm1 < bound
    assert blind._queueing_guess()[0] == pytest.approx(mm1)


def test_a_latency_offset_is_learned_apart_from_the_service_variability() -> None:
    """The same M/G/1 operator (v = 0.75) whose response times also carry 0.6 s that no queue explains (its
    share of a Flink path's fixed part, ``connectors.latency_share``): the fit recovers both, and the bound is the
    rate at which the queue reaches the 0.4 s left of a 1-s R_max. Fitted through the origin (until 3 Dec) the offset
    read as a variability above 40, and the bound kept the replica below 82 % busy."""
    spec = OperatorSpec(infrastructure("A", 1), k_max=10, rate_levels=RateLevels(30, 650.0), r_max_s=1.0)
    truth = QueueModel(service_mean_s=1 / 200, service_var_s2=(1 / 200) ** 2 / 2)
    one, speed = np.array([1]), np.array([1.0])
    policy = ModelBased(spec, {"capacity_bound": True})
    for rate in (80.0, 110.0, 130.0, 150.0, 160.0, 120.0):
        rt, u = truth.response_time(one, speed, rate) + 0.6, truth.utilisation(one, speed, rate)
        policy.step(Observation(one, rate, response_time_s=rt, violated=rt > 1.0, utilisation=u))
    v, offset = policy.delay_fit()
    assert v == pytest.approx(0.75) and offset == pytest.approx(0.6)
    assert policy._queueing_guess()[0] == pytest.approx(mg1_rate_bound(np.array([200.0]), 0.75, 0.4)[0])
    n, sw, sy, sww, swy = policy.delay_stats
    through_origin = swy / sww
    assert through_origin > 40.0
    # 82 % busy at most through the origin, 99 % with the offset apart (the true bound: 198 tuples/s)
    assert mg1_rate_bound(np.array([200.0]), through_origin, 1.0)[0] < 0.85 * 200.0
    assert policy._queueing_guess()[0] > 0.98 * 200.0


def test_the_delay_fit_before_its_rates_spread_and_from_an_older_state() -> None:
    """One utilisation cannot tell an offset from a variability: a slope through the origin above M/M/1's is
    read as an offset at v = 1, one below as the variability. A state saved before the offset existed keeps its
    variability until the new fit has DELAY_FIT_MIN_PERIODS periods."""
    w, y = 0.01, 0.5  # s
    same = np.array([3.0, 3 * w, 3 * y, 3 * w * w, 3 * w * y])
    assert queueing_delay_fit(same) == pytest.approx((1.0, y - w))
    calm = np.array([3.0, 3 * w, 3 * 0.8 * w, 3 * w * w, 3 * w * 0.8 * w])
    assert queueing_delay_fit(calm) == pytest.approx((0.8, 0.0))
    assert queueing_delay_fit(np.zeros(5)) == (1.0, 0.0)
    spec = OperatorSpec(infrastructure("A", 1), k_max=10, rate_levels=RateLevels(30, 650.0), r_max_s=1.0)
    policy = ModelBased(spec, {"capacity_bound": True})
    meta, arrays = policy._get_state()
    arrays["delay_stats"] = np.array([0.3, 0.1])  # (sum w y, sum w^2) of the old layout: v = 3
    older = ModelBased(spec, {"capacity_bound": True})
    older._set_state(meta, arrays)
    assert older.delay_fit() == pytest.approx((3.0, 0.0)) and older.delay_stats.shape == (5,)
    again = ModelBased(spec, {"capacity_bound": True})
    again.load_state(older.state_bytes())
    assert again.delay_fit() == pytest.approx((3.0, 0.0))
    again.delay_stats[:] = (DELAY_FIT_MIN_PERIODS, 0.05, 2.5, 0.0006, 0.026)
    assert again.delay_fit() == queueing_delay_fit(again.delay_stats)


def test_mg1_rate_bound_edges() -> None:
    assert np.isinf(mg1_rate_bound(np.array([np.inf]), 0.8, 0.1)).all()  # no measured capacity
    assert mg1_rate_bound(np.array([5.0]), 0.8, 0.1)[0] == 0.0  # one service time (0.2 s) exceeds R_max
    assert queueing_variability(np.array([0.1, 1.0])) == 0.5  # below a deterministic service's: clipped


def test_capacity_estimate_is_durable_and_old_states_load_without_it() -> None:
    spec = one_type_spec(10, 30)
    policy = ModelBased(spec, {"capacity_bound": True})
    _steps(
        policy, [(2, 60.0, False, 0.6), (2, 80.0, False, 0.8), (2, 70.0, False, 0.7)]
    )  # the first only starts
    restored = ModelBased(spec, {"capacity_bound": True})
    restored.load_state(policy.state_bytes())
    assert policy.cap_stats[0, 0] == 2
    np.testing.assert_array_equal(restored.cap_stats, policy.cap_stats)
    meta, arrays = policy._get_state()
    del arrays["cap_stats"], arrays["delay_stats"]
    older = ModelBased(spec, {"capacity_bound": True})
    older._set_state(meta, arrays)
    assert not older.cap_stats.any() and not older.delay_stats.any()


@pytest.mark.parametrize(
    "params",
    [{"capacity_bound": True}, {"capacity_bound": True, "multi_step": True, "trend_periods": 3}],
    ids=["capacity", "trend"],
)
def test_an_overloaded_operator_adds_capacity_even_when_no_deployment_is_expected_to_carry_the_rate(
    params: dict,
) -> None:
    """1 replica learned to carry ~15 tuples/s (bounds ~15/31/46 for 1/2/3 replicas, K_max 3), then a step to 80
    tuples/s that violates, busy all the period: every deployment is expected to violate, so staying put looks
    cheapest (no reconfiguration bought for nothing) -- but the backlog grows fastest there. Under a measured
    overload the OM adds capacity (an untrained Spark OM stayed at 1 executor for a period at 78 tuples/s)."""
    spec = OperatorSpec(
        node_types=(NodeType("n", 1.0, 1.0),), k_max=3, r_max_s=10.0, model_mode="learn", rate_levels=None
    )
    policy = ModelBased(spec, params)
    one = np.array([1])
    for rate in (8.0, 10.0, 10.0, 10.0):
        policy.step(Observation(one, rate, response_time_s=3.0, utilisation=0.5))
    assert (
        policy._thresholds is not None and policy._thresholds[-1] < 80.0
    )  # K_max is not expected to carry it
    proposal = policy.step(Observation(one, 80.0, response_time_s=12.0, utilisation=1.0))
    assert proposal.deployment.tolist() == [2], proposal.explanation
    # a quiet period at the same deployment: no overload, the model's choice stands (nothing forced)
    calm = ModelBased(spec, params)
    for rate in (8.0, 10.0, 10.0, 10.0, 10.0):
        calm_proposal = calm.step(Observation(one, rate, response_time_s=3.0, utilisation=0.5))
    assert calm_proposal.deployment.tolist() == [1], calm_proposal.explanation


def test_capacity_bound_must_be_a_boolean() -> None:
    with pytest.raises(ValueError, match="params.capacity_bound"):
        ModelBased(one_type_spec(10, 30), {"capacity_bound": "yes"})


def test_with_capacity_bound_an_overloaded_period_without_violation_does_not_raise_lo() -> None:
    """One executor 118 % busy at 49 tuples/s, R still under the bound (Spark: the backlog shows periods later):
    not evidence that 49 tuples/s per replica is sustainable, so it neither raises lo nor voids the capacity
    estimate. The paper's learner (no capacity bound) takes it at face value."""
    seen = [(1, 17.7, False, 0.59), (1, 23.3, False, 0.66), (1, 29.5, False, 0.77), (1, 49.3, False, 1.18)]
    bounded = ModelBased(one_type_spec(10, 30), {"capacity_bound": True})
    _steps(bounded, [(1, 10.0, False, 0.8)] + seen)
    assert bounded.thr_lo[0] == pytest.approx(29.5)
    theta = per_replica_bounds(bounded.thr_lo, bounded._upper_bounds())[0]
    assert 29.5 < theta < 49.3
    plain = ModelBased(one_type_spec(10, 30))
    _steps(plain, [(1, 10.0, False, 0.8)] + seen)
    assert plain.thr_lo[0] == pytest.approx(49.3)


def test_capacity_bound_learns_no_bound_from_the_period_of_a_deployment_change() -> None:
    """Seen on Spark: in the period after a second executor was added, 2 executors read 21 tuples/s each (the new
    one cold, the state moving), ~40 once warm. With capacity_bound that period is a transient; the paper's
    learner takes it as theta < 21."""
    seen = [(1, 30.0, False, 0.6), (1, 30.0, False, 0.6), (2, 42.0, True, 0.9)]
    bounded = ModelBased(one_type_spec(10, 30), {"capacity_bound": True})
    _steps(bounded, seen)
    assert np.isinf(bounded.thr_hi).all() and bounded.thr_lo[0] == 30.0
    assert bounded.cap_stats[0, 0] == 1  # only the settled 1-replica period
    _steps(bounded, [(2, 42.0, True, 0.9)])  # the same reading once the deployment has settled: a bound
    assert bounded.thr_hi[0] == 21.0 and bounded.cap_stats[0, 0] == 2
    paper = ModelBased(one_type_spec(10, 30))
    _steps(paper, seen)
    assert paper.thr_hi[0] == 21.0


def test_capacity_bound_proposes_no_scale_in_while_overloaded() -> None:
    """Same learned model (8 replicas idle at 10 tuples/s: removing one is the better move), different current
    period: violated or busy all the time -> no replica is removed; the paper's policy removes one either way."""
    k8 = np.array([8])
    now = {
        "violated": Observation(k8, 10.0, violated=True),
        "slow": Observation(k8, 10.0, response_time_s=99.0),
        "busy": Observation(k8, 10.0, violated=False, utilisation=1.0),
        "calm": Observation(k8, 10.0, violated=False, utilisation=0.5),
    }
    for bound in (False, True):
        policy = ModelBased(one_type_spec(10, 30), {"capacity_bound": bound})
        _steps(policy, [(8, 10.0, False, 0.1)] * 5)
        policy._sweep(3000)  # converge the values of what was learned
        sizes = {
            name: apply_action(k8, policy._decide(k8, 10.0, obs, True)[0]).sum() for name, obs in now.items()
        }
        assert sizes["calm"] == 7
        if bound:
            assert sizes["violated"] == sizes["slow"] == sizes["busy"] == 8
        else:
            assert sizes["violated"] == sizes["slow"] == sizes["busy"] == 7


def test_capacity_bound_takes_no_capacity_from_a_period_busy_all_the_time() -> None:
    """Busy all the period, the replica falls behind: x (arrivals, 60 tuples/s) / u (1.0) is not its capacity
    (it processed 38: seen on Spark). Only periods with u < 1 measure it."""
    policy = ModelBased(one_type_spec(10, 30), {"capacity_bound": True})
    _steps(
        policy, [(1, 30.0, False, 0.75), (1, 30.0, False, 0.75), (1, 60.0, False, 1.0), (1, 60.0, False, 1.3)]
    )
    assert policy.cap_stats[0, 0] == 1 and capacity_estimates(policy.cap_stats)[0] == pytest.approx(40.0)
    assert policy.thr_lo[0] == 30.0  # nor do they raise the lower bound


def _step_run(params: dict, processing_rate: bool = True, before: float = 150.0, after: float = 450.0) -> int:
    """A 5-ms operator on A1/A2/A3 (speed = price 1.0/0.7/1.3), R_max 33 ms, learned range and model, equal
    weights: ``before`` tuples/s for 80 periods then ``after``; returns the violated periods after the step."""
    from policies.base import Observation

    types = (NodeType("A1", 1.0, 1.0), NodeType("A2", 0.7, 0.7), NodeType("A3", 1.3, 1.3))
    true = QueueModel(0.005, 0.005**2 / 2)
    spec = OperatorSpec(
        types, k_max=10, r_max_s=0.1 / 3, weights=CostWeights(1 / 3, 1 / 3, 1 / 3), rate_levels=None,
        model_mode="learn",
    )  # fmt: skip
    policy = ModelBased(spec, params, seed=1)
    k, violations = np.array([1, 0, 0]), 0
    for t in range(200):
        rate = before if t < 80 else after
        r = true.response_time(k, spec.speedups, rate)
        u = min(true.utilisation(k, spec.speedups, rate), 1.0)  # an engine's busy fraction saturates at 1
        processed = min(rate, true.capacity(k, spec.speedups)) if processing_rate else None
        violated = not r <= spec.r_max_s
        violations += violated and t >= 80
        obs = Observation(k.copy(), rate, r if np.isfinite(r) else None, violated, u, True, processed)
        k = policy.step(obs).deployment
    return violations


def test_capacity_bound_scales_out_after_a_step_instead_of_waiting_for_an_untried_type() -> None:
    """Issue 20: after a 3x step the capacity-bound policy sat at A1+A3 for 120 periods (100 % violations):
    it planned a swap to A3, which it believed infinitely fast (never measured), through a scale-in that its
    no-scale-in-under-overload rule forbids. Unmeasured speeds now get the measured capacity scaled by speed."""
    assert _step_run({"capacity_bound": True}) <= 5


def test_capacity_bound_measures_capacity_from_the_processing_rate_when_saturated_from_the_start() -> None:
    """An operator saturated from its first period (u = 1 always) measured no capacity before (only periods
    with u < 1 did): the processing rate of a saturated period is the capacity, and the policy recovers. (Without
    the processing rate it now recovers too, later: under overload with a learned bound that the deployment in
    place cannot meet, only capacity-adding actions remain; before, it stayed at 120 violated periods.)"""
    assert _step_run({"capacity_bound": True}, before=344.0, after=344.0) <= 5
    assert _step_run({"capacity_bound": True}, processing_rate=False, before=344.0, after=344.0) <= 5
    spec = one_type_spec(10, 30)
    for processed, measured in ((None, False), (40.0, True)):
        policy = ModelBased(spec, {"capacity_bound": True})
        for _ in range(3):  # saturated: 60 tuples/s arriving on one replica that processes 40
            policy.step(Observation(np.array([1]), 60.0, None, True, 1.0, True, processed))
        assert np.isfinite(capacity_estimates(policy.cap_stats)[0]) == measured


def test_scaled_to_unmeasured_speeds() -> None:
    from policies.om.model_based import scaled_to_unmeasured_speeds

    speeds = np.array([0.7, 1.0, 1.3])
    out = scaled_to_unmeasured_speeds(np.array([np.inf, 200.0, np.inf]), speeds)
    assert out.tolist() == pytest.approx([140.0, 200.0, 260.0])
    untouched = np.array([np.inf, np.inf, np.inf])
    assert np.isinf(scaled_to_unmeasured_speeds(untouched, speeds)).all()
