"""The AM's violation-budget guard and the arbiter's hold on scale-ins while an operator violates."""

from __future__ import annotations

import numpy as np
import pytest

from policies.am.arbiter import Arbiter, Request
from policies.am.bo import BayesianAM
from policies.am.guard import GuardParams, ViolationBudgetGuard
from policies.am.naive import NaiveAM
from policies.app_graphs import application
from policies.operator_model import CostWeights
from policies.sim.application import simulate_application
from tests.policies.test_am_bo import NT, OneStepLookahead, factory, observations

ADD, REMOVE = 2, 1  # one node type: 0 nothing, 1 remove, 2 add
TUNED = CostWeights(perf=0.2, res=0.4, rcf=0.4)


def test_guard_tightens_waits_floors_and_relaxes_over_a_scripted_sequence() -> None:
    p = GuardParams(
        window=10, trigger=1.0, spent=0.5, relax_below=0.25, tighten=0.5, min_scale=0.25, cooldown=5
    )
    g = ViolationBudgetGuard(0.1, p)
    # the window must fill before the guard judges: 9 violated periods change nothing
    assert [g.update(True) for _ in range(9)] == [None] * 9
    change = g.update(True)  # 10/10 violated > 10% and 100% so far > 5%
    assert change is not None and change[0] == 0.5 and g.scale == 0.5
    assert "violations 100.00% over the last 10 periods > 10.00%" in change[1]
    assert [g.update(True) for _ in range(4)] == [None] * 4  # cooldown of 5 periods
    assert g.update(True)[0] == 0.25  # type: ignore[index]
    assert [g.update(True) for _ in range(10)] == [None] * 10  # at min_scale: nothing tighter
    # quiet periods: the window empties, then the guard relaxes one step per cooldown back to 1
    changes = [g.update(False) for _ in range(30)]
    scales = [c[0] for c in changes if c is not None]
    assert scales == [0.5, 1.0]
    assert g.scale == 1.0
    assert all(g.update(False) is None for _ in range(20))  # at 1: nothing looser


def test_guard_does_not_tighten_while_the_run_so_far_is_within_the_spent_share() -> None:
    g = ViolationBudgetGuard(0.1, GuardParams(window=10, spent=0.5, cooldown=0))
    for _ in range(200):  # 200 quiet periods bank budget
        g.update(False)
    # 2 violations in the last 10 periods: 20% > 10% in the window, but 2/210 < 5% so far
    assert [g.update(v) for v in [True] * 2 + [False] * 8] == [None] * 10
    assert g.scale == 1.0


def test_guard_weights_shift_towards_performance_and_sum_to_one() -> None:
    g = ViolationBudgetGuard(0.05)
    tuned = CostWeights(perf=0.2, res=0.5, rcf=0.3)
    assert g.weights(tuned) is tuned
    g.scale = 0.5
    w = g.weights(tuned)
    assert (w.res, w.rcf) == pytest.approx((0.25, 0.15))
    assert w.perf == pytest.approx(0.6) and w.perf + w.res + w.rcf == pytest.approx(1.0)


def test_guard_state_round_trip_continues_identically() -> None:
    rng = np.random.default_rng(3)
    flags = rng.random(600) < 0.08
    a = ViolationBudgetGuard(0.05, GuardParams(window=50, cooldown=10))
    for v in flags[:300]:
        a.update(bool(v))
    b = ViolationBudgetGuard.from_dict(a.to_dict())
    assert [a.update(bool(v)) for v in flags[300:]] == [b.update(bool(v)) for v in flags[300:]]
    assert b.to_dict() == a.to_dict()


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"window": 0}, "guard.window"),
        ({"cooldown": -1}, "guard.cooldown"),
        ({"tighten": 1.0}, "guard.tighten"),
        ({"min_scale": 0.0}, "guard.min_scale"),
        ({"trigger": 0.0}, "guard.trigger"),
        ({"spent": -0.1}, "guard.spent"),
        ({"relax_below": 1.0}, "guard.relax_below"),
    ],
)
def test_bad_guard_parameters_are_rejected_naming_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        GuardParams(**kwargs)


def test_guard_rejects_a_budget_outside_the_unit_interval() -> None:
    with pytest.raises(ValueError, match="eta_v"):
        ViolationBudgetGuard(1.0)


def _busy_run(guard: ViolationBudgetGuard | None):  # noqa: ANN202
    """Application A with lookahead OMs weighing a violation (0.2) less than a reconfiguration (0.4): they never
    scale out of one replica under a load it cannot serve -- unless the guard shifts their weights."""
    app = application("A")
    am = NaiveAM(app, 0.05, 0.5)
    oms = [
        OneStepLookahead(app.operator_spec(u, NT, float(am.configuration.bounds_s[u]), TUNED), {}, u)
        for u in range(3)
    ]
    rates = np.full(300, 200.0)  # operator 2 needs a second replica, the others cope with one
    return simulate_application(app, rates, NT, oms=oms, arbiter=am.arbiter, guard=guard), oms


def test_the_guard_in_the_simulation_shifts_the_oms_weights_and_cuts_violations() -> None:
    plain, oms = _busy_run(None)
    assert plain.violation.mean() > 0.9 and all(om.spec.weights == TUNED for om in oms)
    guarded, oms = _busy_run(ViolationBudgetGuard(0.05, GuardParams(window=10, cooldown=5, tighten=0.5)))
    assert guarded.meta["guard_changes"][0] == (9, 0.5)  # the window filled at period 9
    # the scale-out fixed the violations: once the window is quiet the guard gives the tuned weights back
    assert guarded.meta["guard_changes"][-1][1] == 1.0 and all(om.spec.weights == TUNED for om in oms)
    assert guarded.violation.mean() < 0.5 * plain.violation.mean()
    assert guarded.replicas[-1].sum() > plain.replicas[-1].sum()


def test_the_guard_needs_oms() -> None:
    from policies.am.centralized import CentralizedAM

    app = application("A")
    with pytest.raises(ValueError, match="guard"):
        simulate_application(
            app, np.full(5, 100.0), NT, centralized=CentralizedAM(app, NT), guard=ViolationBudgetGuard(0.05)
        )


def test_bo_simulates_its_candidates_with_the_guard() -> None:
    app = application("A")
    obs = observations(app, 200)
    obs.rates[:] = 200.0
    plain = BayesianAM(app, NT, factory, eta_v=0.05, eta_r=0.5)
    guarded = BayesianAM(
        app, NT, factory, eta_v=0.05, eta_r=0.5, guard=GuardParams(window=10, cooldown=5), hold_scale_ins=True
    )
    assert guarded.new_arbiter().hold_scale_ins and not plain.new_arbiter().hold_scale_ins
    a = plain.evaluate(plain.configuration, obs)
    b = guarded.evaluate(guarded.configuration, obs)
    assert b["violations_pct"] < 0.5 * a["violations_pct"]
    with pytest.raises(ValueError, match="guard"):
        BayesianAM(app, NT, factory, guard={"window": 10})  # type: ignore[arg-type]


def req(u: int, k: list[int], action: int, violated: bool = False) -> Request:
    return Request(u, np.array(k, dtype=np.int64), action, violated, 0.5)


@pytest.mark.parametrize("hold", [False, True])
def test_scale_ins_are_held_while_another_operator_violates(hold: bool) -> None:
    arb = Arbiter(eta_r=0.5, bucket_capacity=3.0, k_max=10, hold_scale_ins=hold)
    out = arb.arbitrate([req(0, [3], REMOVE), req(1, [1], ADD, violated=True)])
    assert out[1].granted  # the violated operator's scale-out goes through either way
    assert out[0].granted is not hold
    if hold:
        assert out[0].reason == "denied: scale-in held while operator(s) [1] violate their bounds"
    # nobody violates: the scale-in is granted
    out = arb.arbitrate([req(0, [3], REMOVE), req(1, [2], 0)])
    assert out[0].granted
