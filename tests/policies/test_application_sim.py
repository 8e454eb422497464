"""Whole-application simulator: end-to-end response time over paths, batching, denials seen by the OMs."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from policies.am.arbiter import Arbiter
from policies.app_graphs import application
from policies.base import Observation, Policy
from policies.operator_model import infrastructure
from policies.sim.application import simulate_application

NT = infrastructure("A", 1)


class Scripted(Policy):
    """Plays a fixed list of actions and records every transition it learns from."""

    name = "scripted-test"
    DEFAULTS: ClassVar[dict] = {}

    def __init__(self, spec, actions: list[int]) -> None:  # noqa: ANN001
        super().__init__(spec)
        self.actions = list(actions)
        self.learned: list[tuple[int, int, int]] = []  # (k before, action learned, k after)

    def _decide(self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool) -> tuple[int, dict]:
        return (self.actions.pop(0) if self.actions else 0), {}

    def _learn(self, k_prev, rate_prev, action, cost, k_now, rate_now, violated, obs) -> None:  # noqa: ANN001
        self.learned.append((int(k_prev.sum()), int(action), int(k_now.sum())))


def oms_for(app, scripts: list[list[int]], bounds: list[float] | None = None) -> list[Scripted]:  # noqa: ANN001
    return [
        Scripted(app.operator_spec(u, NT, None if bounds is None else bounds[u]), scripts[u])
        for u in range(app.n)
    ]


def test_pipeline_end_to_end_time_is_the_sum_of_operator_times() -> None:
    app = application("A")
    trace = np.array([50.0, 100.0, 150.0])
    res = simulate_application(app, trace, NT, oms=oms_for(app, [[], [], []]))
    gains = app.rate_gains()
    for t, lam in enumerate(trace):
        by_hand = 0.0
        for u, op in enumerate(app.operators):
            s, var = op.service_mean_s, op.service_var_s2
            rate = lam * gains[u]
            by_hand += s + rate * (var + s * s) / (
                2 * (1 - rate * s)
            )  # M/G/1 Pollaczek-Khinchine, one replica
        assert res.response_time[t] == pytest.approx(by_hand)
    assert res.violation.tolist() == [bool(r > 0.040) for r in res.response_time]
    np.testing.assert_allclose(res.price, 3.0)  # three replicas on price-1 nodes


def test_diamond_end_to_end_time_is_the_slowest_path() -> None:
    app = application("B")
    res = simulate_application(app, np.array([120.0]), NT, oms=oms_for(app, [[]] * 4))
    r = res.op_response_time[0]
    assert res.response_time[0] == pytest.approx(max(r[0] + r[1] + r[3], r[0] + r[2] + r[3]))
    assert r[2] > r[1]  # the right branch (mu = 180) is slower than the left (mu = 270)


def test_unstable_operator_makes_an_infinite_response_and_a_violation() -> None:
    app = application("A")
    res = simulate_application(app, np.array([400.0]), NT, oms=oms_for(app, [[]] * 3))
    assert np.isinf(res.response_time[0]) and res.violation[0]


def test_batched_changes_of_one_period_count_as_one_reconfiguration() -> None:
    app = application("A")
    add = 2
    oms = oms_for(app, [[add, 0, 0], [add, 0, add], [0, 0, 0]])
    res = simulate_application(app, np.full(3, 10.0), NT, oms=oms)
    assert res.reconfiguration.tolist() == [True, False, True]
    assert res.replicas[:, 0].tolist() == [1, 2, 2] and res.replicas[:, 1].tolist() == [1, 2, 2]
    assert res.summary()["reconfigurations_pct"] == pytest.approx(200 / 3)


def test_denied_proposal_keeps_the_deployment_and_the_om_learns_a_noop() -> None:
    app = application("A")
    add = 2
    oms = oms_for(app, [[add, add, 0], [0, 0, 0], [0, 0, 0]])
    arb = Arbiter(eta_r=0.1, bucket_capacity=1.0, k_max=app.k_max)  # one token at start, then 0.1 per period
    res = simulate_application(app, np.full(3, 10.0), NT, oms=oms, arbiter=arb)
    assert res.replicas[:, 0].tolist() == [1, 2, 2]  # second scale-out denied: budget exhausted
    assert res.denied[:, 0].tolist() == [False, True, False]
    # transitions learned by operator 0: (1 -add-> 2), then (2 -noop-> 2): the denied add is learned as a no-op
    assert oms[0].learned == [(1, add, 2), (2, 0, 2)]
    assert res.reconfiguration.tolist() == [True, False, False]


def test_operator_violation_uses_its_own_bound() -> None:
    app = application("A")
    res = simulate_application(
        app, np.array([100.0]), NT, oms=oms_for(app, [[]] * 3, bounds=[1.0, 1e-4, 1.0])
    )
    assert res.op_violation[0].tolist() == [False, True, False]


def test_selectivities_scale_the_operator_rates_and_capacity_limits() -> None:
    app = application("wordcount")
    nt = infrastructure("A", 1)
    res = simulate_application(app, np.array([50.0]), nt, oms=oms_for(app, [[]] * 4))
    # splitter at 50/s is stable on one replica; the filter receives 250/s: M/D/1 at rho = 250/330
    s = 1 / 330
    lam = 250.0
    assert res.op_response_time[0, 1] == pytest.approx(s + lam * s * s / (2 * (1 - lam * s)))


def test_requires_exactly_one_controller() -> None:
    app = application("A")
    with pytest.raises(ValueError, match="oms/centralized"):
        simulate_application(app, np.array([1.0]), NT)
    with pytest.raises(ValueError, match="one policy per operator"):
        simulate_application(app, np.array([1.0]), NT, oms=oms_for(app, [[]] * 3)[:2])


def test_am_hook_reconfigures_the_running_oms_at_run_time() -> None:
    from policies.am.naive import AMConfiguration
    from policies.operator_model import CostWeights

    app = application("A")
    oms = oms_for(app, [[]] * 3)
    seen: list[tuple[int, int]] = []
    new = AMConfiguration(np.array([0.010, 0.012, 0.018]), CostWeights(0.5, 0.3, 0.2))

    def hook(t: int, rates: np.ndarray) -> AMConfiguration | None:
        seen.append((t, len(rates)))
        return new if t == 4 else None

    res = simulate_application(app, np.full(10, 100.0), NT, oms=oms, am_hook=hook, hook_every=2)
    assert seen == [(2, 2), (4, 4), (6, 6), (8, 8)]
    assert [om.spec.r_max_s for om in oms] == [0.010, 0.012, 0.018]
    assert all(om.spec.weights == CostWeights(0.5, 0.3, 0.2) for om in oms)
    assert res.meta["am_reconfigured_at"] == [4]
    # the operators' violation flags follow the new bounds from period 4 on
    r = res.op_response_time[5]
    assert res.op_violation[5].tolist() == [bool(r[0] > 0.010), bool(r[1] > 0.012), bool(r[2] > 0.018)]
