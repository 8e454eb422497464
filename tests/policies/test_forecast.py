"""Trend-aware planning (``policies.forecast``, model-based's ``trend_periods``) and steps that keep their target
while they wait."""

from __future__ import annotations

import numpy as np

from policies.base import JUMP, Observation
from policies.forecast import LeadTime, RateTrend, planned_rate
from policies.om.model_based import ModelBased
from policies.operator_model import CostWeights, NodeType, OperatorSpec, QueueModel

TYPES = (NodeType("A1", 1.0, 1.0), NodeType("A2", 0.7, 0.7), NodeType("A3", 1.3, 1.3))
TRUE = QueueModel(0.005, 0.005**2 / 2)  # 5 ms per tuple on a speed-1 node: 200 tuples/s per A1 replica
MULTI = {"capacity_bound": True, "multi_step": True}
TREND = {**MULTI, "trend_periods": 3}


def spec() -> OperatorSpec:
    return OperatorSpec(
        TYPES, k_max=10, r_max_s=0.1 / 3, weights=CostWeights(1 / 3, 1 / 3, 1 / 3), rate_levels=None,
        model_mode="learn",
    )  # fmt: skip


def observe(policy: ModelBased, k: np.ndarray, rate: float):
    s = policy.spec
    r = TRUE.response_time(k, s.speedups, rate)
    u = min(TRUE.utilisation(k, s.speedups, rate), 1.0)
    processed = min(rate, TRUE.capacity(k, s.speedups))
    violated = not r <= s.r_max_s
    obs = Observation(k.copy(), rate, r if np.isfinite(r) else None, violated, u, True, processed)
    return violated, policy.step(obs)


def run_delayed(params: dict, rates: list[float], delay: int):
    """Drive the policy with an actuator that realises a change ``delay`` periods after it was first proposed
    (a node being provisioned); while one waits, the deployment stays. Returns per period (k, violated,
    proposal) and the policy."""
    policy = ModelBased(spec(), params, seed=1)
    k = np.array([1, 0, 0])
    pending: tuple[int, np.ndarray] | None = None
    out = []
    for t, rate in enumerate(rates):
        violated, proposal = observe(policy, k, rate)
        out.append((k.copy(), violated, proposal))
        if pending is None and not proposal.is_noop:
            pending = (t + delay, proposal.deployment.copy())
        elif pending is not None and not proposal.is_noop:
            pending = (pending[0], proposal.deployment.copy())  # the latest target, at the first due time
        if pending is not None and t + 1 >= pending[0]:
            k, pending = pending[1], None
        elif pending is not None:
            policy.override_last_action(0)  # not applied (yet): learn what really happened
    return out, policy


def ramp(n_flat: int = 20, n_ramp: int = 160, lo: float = 60.0, hi: float = 1200.0) -> list[float]:
    return [lo] * n_flat + list(np.linspace(lo, hi, n_ramp))


def test_a_trend_is_consecutive_rises_and_its_slope_the_smallest() -> None:
    trend = RateTrend(3)
    for a, b in [(100, 105), (105, 112), (112, 118)]:
        trend.observe(a, b)
    assert trend.run == 3 and trend.slope() == 5.0
    trend.observe(118, 118)  # flat: no trend
    assert trend.run == 0 and trend.slope() == 0.0
    step = RateTrend(3)
    for a, b in [(150, 150), (150, 150), (150, 900)]:  # a step is one rise, not a trend
        step.observe(a, b)
    assert step.slope() == 0.0
    noise = RateTrend(3)
    for a, b in [(100, 110), (110, 95), (95, 120), (120, 118)]:
        noise.observe(a, b)
    assert noise.slope() == 0.0
    assert RateTrend(0).slope() == 0.0  # off


def test_the_lead_time_is_measured_from_the_first_proposal_to_the_first_period_with_more_capacity() -> None:
    lead = LeadTime()
    assert lead.periods() == 1  # nothing measured: the next period
    lead.proposed(10, 1.0, 2.0)
    lead.proposed(11, 1.0, 2.0)  # asked again while waiting: the wait started at 10
    lead.observed(11, 1.0)
    lead.observed(12, 1.0)
    lead.observed(13, 2.0)
    assert list(lead.samples) == [4] and lead.periods() == 4
    lead.proposed(20, 2.0, 3.0)
    lead.proposed(21, 2.0, 2.0)  # no longer asks for more: no sample
    lead.observed(22, 3.0)
    assert list(lead.samples) == [4] and lead.pending is None
    trend = RateTrend(2)
    for a, b in [(100, 110), (110, 120)]:
        trend.observe(a, b)
    assert planned_rate(120.0, trend, lead) == (120.0 + 10.0 * 2, 2)  # no further ahead than the trend's run
    trend.observe(120, 130)
    assert planned_rate(130.0, trend, lead) == (130.0 + 10.0 * 3, 3)
    restored = LeadTime()
    restored.load(lead.state())
    assert list(restored.samples) == [4] and restored.periods() == 4


def test_on_a_ramp_with_a_provisioning_delay_the_trend_scales_out_before_the_violation() -> None:
    rates = ramp()
    plain, _ = run_delayed(MULTI, rates, delay=2)
    trend, policy = run_delayed(TREND, rates, delay=2)
    v_plain = sum(v for _, v, _ in plain[40:])
    v_trend = sum(v for _, v, _ in trend[40:])
    assert v_trend < v_plain, (v_trend, v_plain)
    assert policy.lead.periods() >= 2  # learned from its own waits
    notes = [p.explanation["forecast"] for _, _, p in trend if "forecast" in p.explanation]
    assert notes and all(n["planned_rate_tuples_s"] > 0 for n in notes)
    assert any(n["horizon_periods"] >= 2 for n in notes)
    # and it never removes replicas while the rate rises
    for (k, _, p), rate_now, rate_before in zip(trend[41:], rates[41:], rates[40:], strict=False):
        if rate_now > rate_before and not p.is_noop:
            assert p.deployment.sum() >= k.sum() or p.action == JUMP, (k, p.deployment)


def test_the_trend_and_a_waiting_step_survive_a_restart() -> None:
    rates = ramp(n_ramp=60)
    _, policy = run_delayed(TREND, rates, delay=3)
    assert policy.trend.run >= 3
    policy._waiting_jump = np.array([0, 0, 4])
    restored = ModelBased.from_state(spec(), policy.state_bytes())
    assert restored.trend.run == policy.trend.run
    assert list(restored.trend.increments) == list(policy.trend.increments)
    assert list(restored.lead.samples) == list(policy.lead.samples)
    assert restored.lead.pending == policy.lead.pending
    assert np.array_equal(restored._waiting_jump, [0, 0, 4])
    k = np.array([2, 0, 0])
    assert restored.act(k, 500.0, False) == policy.act(k, 500.0, False)


def test_a_waiting_step_keeps_its_target_while_it_still_qualifies() -> None:
    """A step still waiting (for nodes or a token) stays the plan while it qualifies: switching between targets
    of about equal value restarted the wait for other nodes on bench_loop's ramp (A3 x 5 <-> A1 x 7 while the
    nodes of the other were being provisioned). A target that no longer qualifies is dropped."""
    _, policy = run_delayed(TREND, ramp(n_ramp=200, hi=1800.0), delay=3)
    space = policy.space
    d = space.lookup(np.array([0, 10, 0]))  # 10 x A2 (K_max) at a rate no A2 deployment carries
    level = policy.levels.level(1700.0)
    policy._waiting_jump = None
    best = policy._best_jump(d, level, overloaded=True)
    assert best is not None
    kept = []
    for c in range(space.size):
        policy._waiting_jump = space.deployments[c]
        got = policy._best_jump(d, level, overloaded=True)
        if got[0] == c:
            kept.append(c)
        else:
            assert got[0] == best[0]  # not qualifying: the best one
    assert best[0] in kept and len(kept) > 1
    policy._waiting_jump = space.deployments[space.lookup(np.array([0, 9, 0]))]  # one action away: not a step
    assert policy._best_jump(d, level, overloaded=True)[0] == best[0]
    other = next(c for c in kept if c != best[0])
    policy._waiting_jump = space.deployments[other]
    # a waiting target that no longer beats the one-replica actions gives way to the best step
    worse = policy._best_jump(d, level, overloaded=True)[1]
    assert policy._best_jump(d, level, overloaded=True, bar=worse)[0] == best[0]


def test_the_budget_wait_plans_further_along_the_trend() -> None:
    """When the AM's budget will not allow another reconfiguration for a while (``budget_wait_periods``), a
    scale-out made now must carry the operator that much further along the trend: the horizon grows by the wait,
    and the policy scales out earlier than with a full bucket."""

    speedups = np.array([t.speedup for t in TYPES])

    def when_capacity_reaches(target: float, wait: float) -> tuple[int, list[int]]:
        """The period whose proposal first reaches ``target`` (sum of speedups), and the forecast horizons."""
        policy = ModelBased(spec(), TREND, seed=1)
        k, horizons = np.array([2, 0, 0]), []
        for t, rate in enumerate(ramp(n_flat=5, n_ramp=60, lo=200.0, hi=800.0)):
            r = TRUE.response_time(k, speedups, rate)
            u = min(TRUE.utilisation(k, speedups, rate), 1.0)
            violated = not r <= policy.spec.r_max_s
            obs = Observation(k.copy(), rate, r if np.isfinite(r) else None, violated, u, True, None, wait)
            proposal = policy.step(obs)
            horizons.append(proposal.explanation.get("forecast", {}).get("horizon_periods", 0))
            if float(proposal.deployment @ speedups) >= target - 1e-9:
                return t, horizons
            k = proposal.deployment
        raise AssertionError(f"capacity {target} never reached on the ramp")

    t_full, h_full = when_capacity_reaches(4.0, 0.0)
    t_wait, h_wait = when_capacity_reaches(4.0, 10.0)
    assert t_wait < t_full, (t_wait, t_full)
    assert max(h_wait) > max(h_full)
