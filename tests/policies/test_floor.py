"""The clairvoyant floor (``policies.floor``) on hand-computed cases.

Reference operator of the hand cases: M/D/1 replicas with mean service 0.1 s on a speedup-1 node, bound 0.2 s.
One replica meets the bound up to 0.1 + l*0.01/2/(1 - 0.1 l) <= 0.2, i.e. l <= 20/3 = 6.67 tuples/s per replica
(round robin), so a rate of 5 needs 1 replica, 12 needs 2 and 19 needs 3. Periods of 3600 s: a period costs the
deployment's price per hour ($)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policies.floor import deployment_states, neighbours, operator_floor, response_times
from policies.operator_model import QueueModel

MD1 = QueueModel(0.1, 0.0, kind="md1")
ONE = dict(speedups=np.array([1.0]), prices_per_hour=np.array([1.0]), period_s=3600.0, r_max_s=0.2)


def test_scale_out_follows_the_rate_and_scale_in_one_replica_per_period():
    out = operator_floor(np.array([5.0, 12.0, 19.0, 5.0]), MD1, **ONE)
    # needs 1, 2, 3, 1 replicas; from 3 the deployment can only drop to 2 in the last period
    assert out.deployments[:, 0].tolist() == [1, 2, 3, 2]
    assert out.cost == pytest.approx(8.0)
    assert out.violations == 0 and out.changes == 3


def test_a_given_start_that_cannot_reach_the_need_in_time_counts_the_unavoidable_violation():
    rates = np.array([5.0, 19.0])
    free = operator_floor(rates, MD1, **ONE)
    assert (
        free.deployments[:, 0].tolist() == [2, 3] and free.violations == 0 and free.cost == pytest.approx(5.0)
    )
    fixed = operator_floor(rates, MD1, initial=np.array([1]), **ONE)
    # at most 2 replicas in period 1 (rate 19 needs 3): it violates whatever the controller does, and then the
    # cheapest is not to pay for a second replica that does not help
    assert fixed.deployments[:, 0].tolist() == [1, 1] and fixed.violations == 1
    assert fixed.cost == pytest.approx(2.0)


@pytest.mark.parametrize(("budget", "cost"), [(None, 7.0), (2, 8.0), (1, 9.0), (0, 10.0)])
def test_the_reconfiguration_budget_trades_changes_for_cost(budget, cost):
    # alternating need 1, 2, 1, 2, 1: unlimited follows it (4 changes, $7); with 2 changes: 1,2,2,2,1 ($8);
    # with 1: 2,2,2,2,1 or 1,2,2,2,2 ($9); with none: 2 replicas throughout ($10)
    out = operator_floor(np.array([5.0, 12.0, 5.0, 12.0, 5.0]), MD1, max_changes=budget, **ONE)
    assert out.cost == pytest.approx(cost)
    assert out.violations == 0
    assert budget is None or out.changes <= budget


def test_the_cheaper_faster_node_type_is_chosen():
    # type 0: speed 1, $1/h; type 1: speed 2, $1.5/h. At 12 tuples/s: 2 x type 0 ($2) or 1 x type 1 (0.05 s +
    # 12*0.0025/2/0.4 = 0.0875 s <= 0.2 s, $1.5): the floor takes type 1
    out = operator_floor(
        np.array([12.0, 12.0]), MD1, np.array([1.0, 2.0]), np.array([1.0, 1.5]), 3600.0, 0.2, k_max=3
    )
    assert out.deployments.tolist() == [[0, 1], [0, 1]]
    assert out.cost == pytest.approx(3.0)


def test_a_rate_beyond_k_max_violates_every_period_at_the_cheapest_deployment():
    out = operator_floor(np.array([100.0, 100.0, 100.0]), MD1, k_max=2, **ONE)
    assert out.violations == 3
    assert out.deployments[:, 0].tolist() == [1, 1, 1] and out.cost == pytest.approx(3.0)


def test_cost_scales_with_the_period_length():
    out = operator_floor(np.array([5.0] * 6), MD1, np.array([1.0]), np.array([2.0]), 60.0, 0.2)
    assert out.cost == pytest.approx(6 * 2.0 * 60.0 / 3600.0)


@pytest.mark.parametrize("balancing", ["round_robin", "proportional"])
@pytest.mark.parametrize("aggregation", ["worst", "weighted"])
def test_vectorised_response_times_match_the_queue_model(balancing, aggregation):
    model = QueueModel(1 / 180, (1 / 180) ** 2 / 2, balancing=balancing, aggregation=aggregation)
    speedups = np.array([1.0, 0.7, 1.3])
    states = deployment_states(3, 1, 6)
    for rate in (0.0, 50.0, 300.0, 900.0):
        got = response_times(model, states, speedups, rate)
        want = np.array([model.response_time(k, speedups, rate) for k in states])
        both_inf = ~np.isfinite(got) & ~np.isfinite(want)
        assert np.all(both_inf | np.isclose(got, want, rtol=1e-12, atol=0.0)), rate


def test_states_and_moves():
    states = deployment_states(2, 1, 2)
    assert sorted(map(tuple, states.tolist())) == [(0, 1), (0, 2), (1, 0), (1, 1), (2, 0)]
    moves = neighbours(states)
    i = states.tolist().index([1, 0])
    # remove type 0 -> (0, 0) is outside k_min; remove type 1 impossible; add type 0 -> (2, 0); add 1 -> (1, 1)
    assert moves[i].tolist()[:2] == [-1, -1]
    assert states[moves[i, 2]].tolist() == [2, 0] and states[moves[i, 3]].tolist() == [1, 1]


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="rates"):
        operator_floor(np.array([-1.0]), MD1, **ONE)
    with pytest.raises(ValueError, match="initial"):
        operator_floor(np.array([1.0]), MD1, initial=np.array([0]), **ONE)
    with pytest.raises(ValueError, match="max_changes"):
        operator_floor(np.array([1.0]), MD1, max_changes=-1, **ONE)
    with pytest.raises(ValueError, match="state space too large"):
        operator_floor(np.full(20, 1.0), MD1, np.ones(10), np.ones(10), 60.0, 0.2, k_max=10, max_changes=100)
    assert math.isinf(response_times(MD1, np.array([[1]]), np.array([1.0]), 10.0)[0])


def test_state_count_matches_the_enumeration():
    from policies.floor import count_states

    for n_res, lo, hi in [(1, 1, 5), (2, 2, 4), (3, 1, 10), (4, 3, 6)]:
        assert len(deployment_states(n_res, lo, hi)) == count_states(n_res, lo, hi)
        assert len({tuple(r) for r in deployment_states(n_res, lo, hi).tolist()}) == count_states(
            n_res, lo, hi
        )
