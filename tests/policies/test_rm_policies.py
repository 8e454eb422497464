"""Region Manager policies: simple provisioning on a scripted demand, model-based RL value iteration on a
hand-solved case, the monotonicity projection, parameter validation and the durable-state round trip."""

from __future__ import annotations

import numpy as np
import pytest

from policies.im.global_policy import CheapestFirst, RegionQuota
from policies.im.infrastructure import Placement, RegionPool
from policies.operator_model import NodeType
from policies.rm.base import RegionState
from policies.rm.model_based import ModelBasedRM, project_monotone
from policies.rm.simple import SimpleProvisioning

VM = NodeType("vm2", 1.0, 1.0, cores=2)


def run_scripted(demand: list[int], n_idle: int, max_nodes: int = 50):
    """Drive one region: per period set the replica count of operator 'op' to ``demand[t]`` via scale-outs and
    scale-ins, then let the RM and IM act. Returns per-period (idle + booting, waiting, nodes)."""
    pool = RegionPool("r", (VM,), max_nodes)
    placement = Placement({"r": pool})
    rm = SimpleProvisioning("r", (VM,), max_nodes, {"n_idle": n_idle})
    im = CheapestFirst({"r": (VM,)}, {"r": RegionQuota(max_nodes)})
    rng = np.random.default_rng(0)
    log = []
    for t, target in enumerate(demand):
        placement.retry_waiting(t)
        have = pool.replicas_of("op") + placement.waiting_for("op")
        for _ in range(target - have):
            placement.scale_out("op", "r", t)
        for _ in range(have - target):
            if not placement.cancel("op"):
                pool.remove("op", rng)
        state = pool.region_state(t, 0.5, placement.unsatisfied("r"), placement.unsatisfied("r"))
        props = rm.propose(state)
        decisions = im.decide(props, {"r": state})
        rm.granted(props, im.apply(decisions, {"r": pool}, t))
        active, pending, idle = pool.counts(t)
        log.append((int(idle.sum() + pending.sum()), placement.unsatisfied("r"), len(pool.nodes)))
    return log


def test_simple_keeps_n_idle_idle_nodes_on_a_scripted_demand() -> None:
    demand = [1, 2, 3, 4, 4, 6, 8, 8, 5, 2, 1, 1, 3]
    log = run_scripted(demand, n_idle=2)
    for t, (idle_or_booting, waiting, nodes) in enumerate(log):
        # Idle or booting nodes beyond those that will host the waiting scale-outs (2 slots per node).
        spare = idle_or_booting - -(-waiting // 2)
        assert spare == 2, f"period {t}: {spare} spare idle/booting nodes"
        # Nodes = the ones hosting replicas + the 2 idle (best-fit placement; random scale-ins may fragment).
        assert nodes >= -(-demand[t] // 2) + 2


def test_simple_demand_beyond_idle_capacity_waits_then_is_served() -> None:
    # Jump from 1 to 9 replicas: one idle node (2 slots) cannot host 8 new replicas at once.
    log = run_scripted([1, 9, 9, 9], n_idle=1)
    assert log[1][1] > 0, "the scale-outs beyond the idle slots must wait"
    assert log[2][1] == 0, "after one provisioning delay every waiting request is placed"


def test_simple_respects_the_region_quota() -> None:
    log = run_scripted([1, 5, 12, 12], n_idle=1, max_nodes=4)
    assert max(n for _, _, n in log) <= 4
    assert log[-1][1] > 0  # 12 replicas cannot fit in 4 two-slot nodes: requests keep waiting


@pytest.mark.parametrize(
    ("params", "field"),
    [({"n_idle": -1}, "n_idle"), ({"n_idle": 1.5}, "n_idle"), ({"idle": 1}, "idle")],
)
def test_simple_bad_params_name_the_field(params: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"params.{field}"):
        SimpleProvisioning("r", (VM,), 50, params)


@pytest.mark.parametrize(
    ("params", "field"),
    [({"w_d": 0.7, "w_r": 0.4}, "w_d"), ({"gamma": 1.0}, "gamma"), ({"u_quantum": 0.0}, "u_quantum")],
)
def test_model_based_bad_params_name_the_field(params: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"params.{field}"):
        ModelBasedRM("r", (VM,), 50, params)


def tiny_rm() -> ModelBasedRM:
    """K_max = 1, two utilisation levels (u-bar = 1), gamma = 0.9, w_r = 0.3; P[u'|u] = identity (no data)."""
    return ModelBasedRM("r", (VM,), 1, {"w_d": 0.7, "w_r": 0.3, "gamma": 0.9, "u_quantum": 1.0})


def test_value_iteration_matches_the_hand_solved_case_with_a_penalty_at_zero_nodes() -> None:
    # Unknown cost 1 with no node, 0 with one. By hand (V = 0.3 / (1 - 0.9) = 3 when keeping the node):
    # Q(1, f, stay) = 0.3 + 0.9 * 3 = 3.0; Q(1, f=1, release) = 0 + 1 + 0.9 * V(0) = 3.7 with V(0) = 3.0;
    # Q(0, f, acquire) = 0.3 + 0 + 0.9 * 3 = 3.0; Q(0, f, stay) = 0 + 1 + 0.9 * 3 = 3.7.
    rm = tiny_rm()
    rm.c_unknown[0] = 1.0
    rm.solve()
    for u in range(2):
        for f in range(2):
            assert rm.q[1, u, f, 1] == pytest.approx(3.0, abs=1e-6)
            assert rm.q[0, u, f, 2] == pytest.approx(3.0, abs=1e-6)
            assert rm.q[0, u, f, 1] == pytest.approx(3.7, abs=1e-6)
            assert rm.greedy(0, u, f) == 2  # acquire
            assert rm.greedy(1, u, f) == 1  # keep
        assert rm.q[1, u, 1, 0] == pytest.approx(3.7, abs=1e-6)


def test_value_iteration_releases_an_idle_node_when_demand_costs_nothing() -> None:
    # No penalty anywhere: releasing the idle node costs 0 forever; with no idle node (f = 0) the node
    # cannot be released and costs 0.3 / (1 - 0.9) = 3.
    rm = tiny_rm()
    rm.solve()
    assert rm.q[1, 0, 1, 0] == pytest.approx(0.0, abs=1e-6)
    assert rm.q[1, 0, 1, 1] == pytest.approx(0.3, abs=1e-6)
    assert rm.q[1, 0, 0, 1] == pytest.approx(3.0, abs=1e-6)
    assert rm.greedy(1, 0, 1) == 0
    assert not rm.mask[1, 0, 0, 0]


def test_monotonicity_projection() -> None:
    c = np.zeros((3, 3))
    c[2, 0] = 0.9  # more nodes and lower utilisation than (1, 1): must end up <= c[1, 1]
    c[1, 1] = 0.5
    project_monotone(c, 1, 1)
    assert c[0, 1] == c[0, 2] == c[1, 2] == 0.5  # fewer nodes / higher utilisation: raised to 0.5
    assert c[2, 0] == 0.5  # capped
    assert c[2, 2] == 0.0 and c[0, 0] == 0.0  # incomparable states untouched


def test_unknown_cost_update_is_exponential_average_then_projected() -> None:
    rm = ModelBasedRM("r", (VM,), 4, {"alpha": 0.1, "u_quantum": 0.5})
    rm.update_unknown_cost(2, 1, 0, 0.7)
    assert rm.c_unknown[2, 1, 0] == pytest.approx(0.07)
    assert rm.c_unknown[0, 2, 0] == pytest.approx(0.07)
    assert rm.c_unknown[3, 0, 0] == 0.0
    assert rm.c_unknown[0, 2, 1] == 0.0  # the other idle-flag slice is separate


def state(k: int, idle: int, u: float, unsat: int) -> RegionState:
    return RegionState(
        "r", np.array([k]), np.array([0]), np.array([idle]), 2 * (k - idle), 2 * k, u, unsat, unsat
    )


def test_model_based_rm_learns_to_keep_capacity_when_demand_goes_unsatisfied() -> None:
    rm = ModelBasedRM("r", (VM,), 10, {"w_d": 0.9, "w_r": 0.1})
    rng = np.random.default_rng(1)
    # Scripted: with fewer than 5 nodes the application's requests are unsatisfied.
    k = 2
    for _ in range(300):
        props = rm.propose(state(k, 1 if k > 4 else 0, 0.7, int(k < 5)))
        delta = sum(p.delta for p in props)
        rm.granted(props, [p.delta for p in props])
        k = int(np.clip(k + delta, 1, 10))
        if rng.random() < 0.05:
            k = 2  # the workload drops nodes back now and then
    assert rm.c_unknown[2, 7, 0] > 0.5
    assert rm.greedy(2, 7, 0) == 2, "with w_d = 0.9 the RM must acquire when it has too few nodes"


def test_model_based_state_round_trip_is_exact_and_continues_identically() -> None:
    rm = ModelBasedRM("r", (VM,), 8)
    seq = [state(k, k % 2, u, int(u > 0.8)) for k, u in [(2, 0.3), (3, 0.9), (3, 0.5), (4, 0.85), (2, 0.1)]]
    for s in seq:
        props = rm.propose(s)
        rm.granted(props, [p.delta for p in props])
    data = rm.state_bytes()
    twin = ModelBasedRM.from_state("r", (VM,), 8, data)
    assert twin.state_bytes() == data
    for s in seq[::-1]:
        a = [(p.delta, p.node_type) for p in rm.propose(s)]
        b = [(p.delta, p.node_type) for p in twin.propose(s)]
        assert a == b
    assert np.array_equal(rm.q, twin.q)
    with pytest.raises(ValueError, match="region"):
        ModelBasedRM("other", (VM,), 8).load_state(data)


def test_several_node_types_acquire_cheapest_slot_release_most_expensive_idle() -> None:
    small = NodeType("small", 1.0, 1.0, cores=1)  # 1.0 $/h per slot
    big = NodeType("big", 1.0, 1.6, cores=2)  # 0.8 $/h per slot
    rm = SimpleProvisioning("r", (small, big), 50, {"n_idle": 1})
    s = RegionState("r", np.array([1, 1]), np.array([0, 0]), np.array([0, 0]), 3, 3, 0.5)
    (p,) = rm.propose(s)
    assert p.node_type == "big" and p.delta == 1 and "n_idle=1" in p.reason
    s = RegionState("r", np.array([2, 2]), np.array([0, 0]), np.array([1, 2]), 2, 6, 0.5)
    props = rm.propose(s)
    assert [(p.node_type, p.delta) for p in props] == [("big", -2)]


def test_simple_state_round_trip() -> None:
    rm = SimpleProvisioning("r", (VM,), 10, {"n_idle": 3})
    rm.propose(state(4, 1, 0.5, 0))
    data = rm.state_bytes()
    twin = SimpleProvisioning.from_state("r", (VM,), 10, data)
    assert twin.state_bytes() == data and twin.params["n_idle"] == 3
    with pytest.raises(ValueError, match="belongs to policy"):
        ModelBasedRM("r", (VM,), 10).load_state(data)


def test_simple_makes_room_at_the_limit_for_a_type_the_requests_wait_for() -> None:
    """A full region (10 of 10 nodes) whose idle nodes are of other types than the one requests wait for: before,
    it neither released (something waits) nor acquired (the limit); now it releases idle nodes no request will
    take, most expensive first, and acquires the awaited type in the room they leave, at the same step."""
    a1, a2, a3 = NodeType("A1", 1.0, 1.0), NodeType("A2", 0.7, 0.7), NodeType("A3", 1.3, 1.3)
    rm = SimpleProvisioning("r", (a1, a2, a3), 10, {"n_idle": 1})
    waiting = np.array([0, 0, 3])  # 3 slots of A3 waited for
    full = RegionState("r", np.array([6, 4, 0]), np.zeros(3, dtype=int), np.array([1, 2, 0]), 7, 10, 0.9, 1, 3,
                       waiting, np.array([1, 2, 0]))  # fmt: skip
    props = rm.propose(full)
    assert [(p.node_type, p.delta) for p in props] == [("A1", -1), ("A2", -2), ("A3", 3)]
    assert all("to make room" in p.reason and "A3" in p.reason for p in props[:2])
    assert "3 slot(s) of A3 waited for" in props[2].reason
    roomy = RegionState("r", np.array([5, 2, 0]), np.zeros(3, dtype=int), np.zeros(3, dtype=int), 7, 7, 0.9, 1, 3,
                        waiting, np.zeros(3, dtype=int))  # fmt: skip
    (p,) = rm.propose(roomy)
    assert (p.node_type, p.delta) == ("A3", 3)
    # the only idle node is of the awaited type: it is kept for the request, and nothing else can be released
    mine = RegionState("r", np.array([6, 3, 1]), np.zeros(3, dtype=int), np.array([0, 0, 1]), 9, 10, 0.9, 1, 3,
                       waiting, np.array([0, 0, 1]))  # fmt: skip
    assert rm.propose(mine) == []
