"""model-based on an engine whose every change stops the job (Flink's rescale by restart), ``restart_aware``:
the periods a restart's catch-up spans teach no bound, and a scale-in goes only to a deployment whose measured
capacity works the restart's backlog off within a period. Simulated second by second: replicas of ``C`` tuples/s,
a change stops the job for ``D`` seconds while the arrivals queue."""

from __future__ import annotations

import numpy as np
import pytest

from policies.base import Observation
from policies.om.model_based import ModelBased
from policies.operator_model import NodeType, OperatorSpec, RateLevels
from tests.deployment_counts import reversed_scale_ins

C, PERIOD_S, R_MAX_S, K_MAX = 40.0, 10.0, 3.0, 8  # tuples/s per replica, s, s, replicas
PARAMS = {"capacity_bound": True, "multi_step": True, "trend_periods": 3}  # model-based-trend
#: a rise to 200 tuples/s (5 replicas at 100 % busy), a plateau, a fall to 40 and a plateau (tuples/s)
RATES = [float(r) for r in np.concatenate([np.linspace(20, 200, 20), np.full(10, 200), np.linspace(200, 40, 25),
                                           np.full(10, 40)])]  # fmt: skip


class RestartEngine:
    """A FIFO fluid queue stepped each second: ``k`` replicas serve ``k C`` tuples/s, none during the first
    ``downtime_s`` seconds of the period after a change. The response time is the period's mean of queue /
    capacity + one service time; the observation carries the measured downtime as ``restart_s``."""

    def __init__(self, downtime_s: float) -> None:
        self.queue, self.k_prev, self.downtime_s = 0.0, None, downtime_s

    def period(self, k: int, rate: float) -> Observation:
        down = self.downtime_s if self.k_prev is not None and k != self.k_prev else 0.0
        processed = busy = 0.0
        waits = []
        for s in range(int(PERIOD_S)):
            self.queue += rate
            done = min(self.queue, 0.0 if s < down else k * C)
            self.queue -= done
            processed += done
            busy += done / (k * C)
            waits.append(self.queue / (k * C) + 1.0 / C)
        self.k_prev = k
        rt = float(np.mean(waits))
        return Observation(np.array([k]), rate, response_time_s=rt, violated=rt > R_MAX_S,
                           utilisation=min(busy / PERIOD_S, 1.0), processing_rate=processed / PERIOD_S,
                           period_s=PERIOD_S, restart_s=self.downtime_s)  # fmt: skip


def _spec() -> OperatorSpec:
    return OperatorSpec(
        node_types=(NodeType("vm", 1.0, 0.005, 1, 512),), k_max=K_MAX, r_max_s=R_MAX_S,
        rate_levels=RateLevels(30, 400.0),
    )  # fmt: skip


def _run(
    params: dict, downtime_s: float, report_restart: bool = True
) -> tuple[list[int], int, int, ModelBased]:
    """(replicas per period, violated periods, replica-periods, the policy) over :data:`RATES`."""
    policy, engine, k, ks, violated = ModelBased(_spec(), params), RestartEngine(downtime_s), 1, [], 0
    for rate in RATES:
        obs = engine.period(k, rate)
        if not report_restart:
            obs.restart_s = None
        ks.append(k)
        violated += bool(obs.violated)
        k = int(policy.step(obs).deployment.sum())
    return ks, violated, sum(ks), policy


@pytest.mark.parametrize("downtime_s", [9.0, 13.0])
def test_restarts_longer_than_most_of_a_period_no_longer_reverse_scale_ins(downtime_s: float) -> None:
    """Measured without the rule: 4 reversals (8 -> 6 -> 7 -> 8, 8 -> 5 -> 6 -> 8, ...), 32-34 violated periods
    and 423-426 replica-periods; with it none, 19-24 and 304-374."""
    ks_on, viol_on, cost_on, _ = _run({**PARAMS, "restart_aware": True}, downtime_s)
    ks_off, viol_off, cost_off, _ = _run({**PARAMS, "restart_aware": False}, downtime_s)
    assert reversed_scale_ins(ks_off) >= 2, ks_off  # the engine provokes what the rule is for
    assert reversed_scale_ins(ks_on) == 0, ks_on
    assert viol_on < viol_off and cost_on < cost_off, (viol_on, viol_off, cost_on, cost_off)
    assert ks_on[-1] < max(ks_on)  # it still scales in on the fall


def test_a_withheld_scale_in_says_why_and_the_settling_count_survives_the_agent_state() -> None:
    policy, engine = ModelBased(_spec(), {**PARAMS, "restart_aware": True}), RestartEngine(13.0)
    k, notes = 1, []
    for rate in RATES:
        proposal = policy.step(engine.period(k, rate))
        notes.append(proposal.explanation.get("settling"))
        k = int(proposal.deployment.sum())
    withheld = [n for n in notes if n and "restart" in n["reason"]]
    assert withheld and withheld[0]["restart_s"] == 13.0 and "13.0 s of arrivals" in withheld[0]["reason"]
    # a change observed with a 13-s restart on 10-s periods: the next ceil(13 / 10) = 2 periods settle too
    k_new = k + 1
    policy.step(engine.period(k_new, 40.0))
    assert policy._settle_left == 2
    restored = ModelBased(_spec(), {**PARAMS, "restart_aware": True})
    restored.load_state(policy.state_bytes())
    assert restored._settle_left == 2
    thr_hi = restored.thr_hi.copy()
    violated = Observation(np.array([k_new]), 400.0, response_time_s=60.0, violated=True, utilisation=1.0,
                           processing_rate=k_new * C, period_s=PERIOD_S, restart_s=13.0)  # fmt: skip
    restored.step(violated)  # a catch-up period: no bound learned from it
    assert np.array_equal(restored.thr_hi, thr_hi) and restored._settle_left == 1


def test_without_a_measured_downtime_nothing_changes() -> None:
    """Live changes (Spark's executors, the simulator: downtime 0) and engines that report none (None): the
    decisions are those of the policy without the rule."""
    base, *_ = _run({**PARAMS, "restart_aware": False}, 13.0, report_restart=False)
    on, *_ = _run({**PARAMS, "restart_aware": True}, 13.0, report_restart=False)
    assert on == base
    zero_on, *_ = _run({**PARAMS, "restart_aware": True}, 0.0)
    zero_off, *_ = _run({**PARAMS, "restart_aware": False}, 0.0)
    assert zero_on == zero_off


def test_a_scale_in_is_planned_on_the_downtime_of_its_own_kind_of_change() -> None:
    """Spark adds and removes executors live and restarts only for another executor size: after a restart-based
    swap (``restart_s`` 13 s, the latest change) a scale-in that keeps the node type is expected to cost the
    latest resize's downtime (0 here), not the swap's. With resizes unmeasured the latest change's is used."""

    def run(resize: float | None) -> tuple[int, int]:
        """(replica-periods, scale-ins withheld for a restart) with every observation saying the latest change
        was a 13-s swap and the latest resize cost ``resize`` s."""
        policy, engine = ModelBased(_spec(), {**PARAMS, "restart_aware": True}), RestartEngine(0.0)
        k, ks, withheld = 1, [], 0
        for rate in RATES:
            obs = engine.period(k, rate)
            obs.restart_s, obs.swap_restart_s, obs.resize_restart_s = 13.0, 13.0, resize
            ks.append(k)
            proposal = policy.step(obs)
            withheld += "restart" in (proposal.explanation.get("settling") or {}).get("reason", "")
            k = int(proposal.deployment.sum())
        return sum(ks), withheld

    cost_own, withheld_own = run(0.0)
    cost_latest, withheld_latest = run(None)
    assert withheld_own == 0 and withheld_latest > 0, (withheld_own, withheld_latest)
    assert cost_own < cost_latest, (cost_own, cost_latest)
    obs = Observation(np.array([1]), 1.0, restart_s=5.0, resize_restart_s=0.0)
    assert obs.expected_restart_s(False) == 0.0 and obs.expected_restart_s(True) == 5.0


def _steady(k: int, rate: float, since: int | None = None) -> Observation:
    """A period at ``rate`` tuples/s on ``k`` replicas of :data:`C` that meets the bound."""
    return Observation(np.array([k]), rate, response_time_s=0.2, violated=False, utilisation=rate / (k * C),
                       processing_rate=rate, period_s=PERIOD_S, restart_s=4.0, periods_since_change=since)  # fmt: skip


def _catch_up(k: int, rate: float, since: int | None) -> Observation:
    """The period after another operator's 4-s restart: the arrivals of the downtime reach this operator on top
    of the rate, it is busy all the time and its share of the path is over its bound."""
    return Observation(np.array([k]), rate * 1.4, response_time_s=5.0, violated=True, utilisation=1.0,
                       processing_rate=k * C, period_s=PERIOD_S, restart_s=4.0, periods_since_change=since)  # fmt: skip


def _after_steady(rate: float, since_catch_up: int | None) -> int:
    """Replicas proposed in a catch-up period after 12 steady periods at ``rate`` on 3 replicas."""
    policy = ModelBased(_spec(), {**PARAMS, "restart_aware": True})
    for i in range(12):
        policy.step(_steady(3, rate * (0.9 + 0.02 * (i % 6)), since=20 + i))
    return int(policy.step(_catch_up(3, rate, since_catch_up)).deployment.sum())


def test_a_catch_up_after_another_operators_restart_is_not_read_as_overload() -> None:
    """Flink restarts the whole job for any operator's change. On 3 replicas of 40 tuples/s that carried 80
    tuples/s (67 % busy), the period after another operator's 4-s restart (10-s periods) reads 112 tuples/s, 100 %
    busy and over the bound: the 120 tuples/s in place work the 4 s of arrivals off within the period
    (``3 C >= 80 (1 + 4 / 10)``), so no replica is added. Told nothing of the restart, the same period made it
    scale out (the closed loop on Flink's fitted engine: the splitter 1 -> 2 -> 3 on the counter's restarts, each
    scale-out another restart). Where the deployment does not drain (110 tuples/s, 92 % busy: 154 needed), and
    once the catch-up is over (3 periods after a 4-s restart), it scales out as before."""
    assert _after_steady(80.0, since_catch_up=None) > 3  # the rule's reason to exist
    assert _after_steady(80.0, since_catch_up=1) == 3
    assert _after_steady(80.0, since_catch_up=2) == 3  # ceil(4 / 10) = 1 more period
    assert _after_steady(80.0, since_catch_up=3) > 3
    assert _after_steady(110.0, since_catch_up=1) > 3


def test_the_catch_up_hold_says_why_and_its_reference_rate_survives_the_agent_state() -> None:
    policy = ModelBased(_spec(), {**PARAMS, "restart_aware": True})
    for _ in range(12):
        policy.step(_steady(3, 80.0, since=30))
    restored = ModelBased(_spec(), {**PARAMS, "restart_aware": True})
    restored.load_state(policy.state_bytes())
    assert restored._steady_rate == pytest.approx(80.0)
    proposal = restored.step(_catch_up(3, 80.0, since=1))
    assert int(proposal.deployment.sum()) == 3
    assert "catching up after a restart (4.0 s)" in proposal.explanation["settling"]["reason"]


def test_restart_aware_must_be_a_boolean() -> None:
    with pytest.raises(ValueError, match="params.restart_aware: must be true or false"):
        ModelBased(_spec(), {"restart_aware": "yes"})


def _after_a_low_reading(window: int) -> tuple[int, dict, ModelBased]:
    """(replicas proposed, the settling note, the policy) for one period read at 55 tuples/s after 12 steady
    periods at 76-84 tuples/s on 3 replicas, 4-s restarts on 10-s periods, ``restart_rate_window`` ``window``."""
    policy = ModelBased(_spec(), {**PARAMS, "restart_aware": True, "restart_rate_window": window})
    for i in range(12):
        policy.step(_steady(3, 80.0 + 4.0 * (-1) ** i, since=20 + i))
    proposal = policy.step(_steady(3, 55.0, since=40))
    return int(proposal.deployment.sum()), proposal.explanation.get("settling") or {}, policy


def test_a_scale_in_drains_the_restart_at_the_latest_peak_rate_not_at_one_low_reading() -> None:
    """Two replicas work 55 tuples/s and a 4-s restart's backlog off within a period (80 >= 55 x 1.4) but not
    the 84 tuples/s read two periods before (118 needed): one low reading (measurement noise, a dip before a
    rise) no longer buys a scale-in whose restart the next periods cannot carry. With a window of one period the
    check reads the latest rate alone, as it did before."""
    k_latest, _, _ = _after_a_low_reading(1)
    k_peak, note, policy = _after_a_low_reading(3)
    assert k_latest == 2
    assert k_peak == 3 and note["withheld"] == [2] and "4.0 s of arrivals" in note["reason"]
    restored = ModelBased(_spec(), {**PARAMS, "restart_aware": True})
    restored.load_state(policy.state_bytes())
    assert restored._steady_rates == pytest.approx(policy._steady_rates)
    assert len(restored._steady_rates) == 3 and max(restored._steady_rates) == pytest.approx(84.0)


def test_typical_capacity_is_the_pooled_ratio_not_the_largest() -> None:
    """Per-period ratios x / u of 81, 90 and 84 tuples/s per replica (busy 0.5 each): the largest is 90, the
    pooled sum x / sum u 85. Without a measurement, inf."""
    from policies.om.model_based import capacity_estimates, typical_capacity

    stats = np.zeros((2, 6))
    for x in (40.5, 45.0, 42.0):
        stats[0, :5] += (1.0, x, 0.5, x * x, x * 0.5)
        stats[0, 5] = max(stats[0, 5], x / 0.5)
    assert typical_capacity(stats)[0] == pytest.approx(85.0)
    assert capacity_estimates(stats)[0] >= 90.0
    assert np.isinf(typical_capacity(stats)[1])


@pytest.mark.parametrize("window", [0, 1.5, True, "3"])
def test_restart_rate_window_must_be_a_positive_integer(window: object) -> None:
    with pytest.raises(ValueError, match=r"params\.restart_rate_window: must be (>= 1|an integer|a number)"):
        ModelBased(_spec(), {"restart_rate_window": window})


def test_a_state_saved_with_only_the_latest_steady_rate_loads_it_as_a_window_of_one() -> None:
    """States saved before ``restart_rate_window`` kept ``steady_rate`` alone: the catch-up hold reads it as
    before, and the drain check starts its window from it."""
    policy = ModelBased(_spec(), {**PARAMS, "restart_aware": True})
    for i in range(12):
        policy.step(_steady(3, 80.0 + 4.0 * (-1) ** i, since=20 + i))
    get_state = policy._get_state

    def legacy_state() -> tuple[dict, dict]:
        meta, arrays = get_state()
        meta = {k: v for k, v in meta.items() if k != "steady_rates"}
        return {**meta, "steady_rate": 70.0}, arrays

    policy._get_state = legacy_state  # type: ignore[method-assign]
    restored = ModelBased(_spec(), {**PARAMS, "restart_aware": True})
    restored.load_state(policy.state_bytes())
    assert restored._steady_rates == [70.0] and restored._steady_rate == 70.0
