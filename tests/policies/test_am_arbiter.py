"""Application Manager arbitration: token bucket, batching, conflicts, replica and capacity bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.am.arbiter import Arbiter, Request, TokenBucket

ADD, REMOVE = 2, 1  # one node type: 0 nothing, 1 remove, 2 add


def req(u: int, k: list[int], action: int, violated: bool = False, util: float = 0.5) -> Request:
    return Request(u, np.array(k, dtype=np.int64), action, violated, util)


def test_token_bucket_accounting_over_a_scripted_sequence() -> None:
    arb = Arbiter(eta_r=0.25, bucket_capacity=1.0, k_max=10)
    # period: (proposals of op0, op1) -> expected granted?, expected tokens after the period
    script = [
        ((ADD, 0), True, 0.0),  # starts full: 1 token, spent
        ((ADD, 0), False, 0.25),
        ((0, ADD), False, 0.5),
        ((0, 0), None, 0.75),  # nothing proposed: tokens keep accumulating
        ((ADD, ADD), True, 0.0),  # 1.0 token: the batch of two costs one
        ((REMOVE, 0), False, 0.25),
    ]
    k = [[2], [2]]
    for (a0, a1), granted, tokens in script:
        decisions = arb.arbitrate([req(0, k[0], a0), req(1, k[1], a1)])
        changes = [d for d in decisions if d.proposed != 0]
        if granted is None:
            assert not changes
        for d in changes:
            assert d.granted is granted
            if not granted:
                assert d.reason.startswith("denied: reconfiguration budget exhausted")
                assert f"{arb.bucket.tokens:.2f} tokens < 1" in d.reason
        assert arb.bucket.tokens == pytest.approx(tokens)
    assert arb.reconfigurations == 2
    assert arb.granted_changes == 3
    assert arb.denied_changes == 3


def test_refill_accumulates_exactly_enough_for_a_reconfiguration_every_1_over_eta_periods() -> None:
    arb = Arbiter(eta_r=0.1, bucket_capacity=1.0)
    granted_at = []
    for t in range(35):
        (d,) = arb.arbitrate([req(0, [3], ADD if t % 2 else REMOVE)])
        if d.granted:
            granted_at.append(t)
    # floating-point accumulation of 0.1 must still reach one token after 10 periods
    assert granted_at == [0, 10, 20, 30]


def test_without_batching_each_change_costs_a_token_and_priority_decides() -> None:
    arb = Arbiter(eta_r=0.0, bucket_capacity=1.0, batching=False)
    d = arb.arbitrate([req(0, [2], ADD, violated=False, util=0.9), req(1, [2], ADD, violated=True, util=0.1)])
    assert [x.granted for x in d] == [False, True]  # the violated operator first
    assert "budget exhausted" in d[0].reason


def test_conflict_for_the_last_node_goes_to_the_violated_operator() -> None:
    arb = Arbiter(eta_r=0.5, bucket_capacity=2.0, node_capacity=[3], node_type_names=["A0"])
    d = arb.arbitrate(
        [req(0, [1], ADD, violated=False, util=0.95), req(1, [1], ADD, violated=True, util=0.6)]
    )
    assert d[1].granted and not d[0].granted
    assert "no free node of A0 (3 of 3 in use)" in d[0].reason
    assert "conflict" in d[0].reason and "operator 1" in d[0].reason


def test_conflict_tie_broken_by_utilisation_then_operator_order() -> None:
    arb = Arbiter(eta_r=0.5, bucket_capacity=2.0, node_capacity=[3])
    d = arb.arbitrate([req(0, [1], ADD, util=0.5), req(1, [1], ADD, util=0.8)])
    assert [x.granted for x in d] == [False, True]
    arb = Arbiter(eta_r=0.5, bucket_capacity=2.0, node_capacity=[3])
    d = arb.arbitrate([req(0, [1], ADD, util=0.5), req(1, [1], ADD, util=0.5)])
    assert [x.granted for x in d] == [True, False]


def test_scale_in_in_the_same_batch_frees_the_node_for_a_scale_out() -> None:
    arb = Arbiter(eta_r=0.5, bucket_capacity=1.0, node_capacity=[4])
    d = arb.arbitrate([req(0, [2], ADD, violated=True), req(1, [2], REMOVE)])
    assert all(x.granted for x in d)
    assert arb.reconfigurations == 1


def test_never_above_k_max_nor_below_k_min_nor_removing_a_missing_type() -> None:
    arb = Arbiter(eta_r=0.5, bucket_capacity=5.0, k_max=[3, 10], k_min=1)
    d = arb.arbitrate([req(0, [3], ADD), req(1, [1], REMOVE)])
    assert "exceed K_max=3" in d[0].reason and not d[0].granted
    assert "below k_min=1" in d[1].reason and not d[1].granted
    assert arb.reconfigurations == 0 and arb.bucket.tokens == pytest.approx(5.0)  # nothing applied, no token
    # two node types: removing a replica of a type with none
    (x,) = arb.arbitrate([Request(0, np.array([2, 0]), 2, False, 0.1)])
    assert "no replica on type 1 to remove" in x.reason


@pytest.mark.parametrize("bad", [1.0, -0.1, 1.5, "0.1", True])
def test_budget_outside_unit_interval_is_rejected_naming_the_field(bad: object) -> None:
    with pytest.raises(ValueError, match="eta_r"):
        Arbiter(eta_r=bad)  # type: ignore[arg-type]


def test_bucket_capacity_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="bucket_capacity"):
        TokenBucket(0.1, capacity=0.5)


@settings(max_examples=60, deadline=None)
@given(
    eta=st.floats(0.0, 0.95),
    capacity=st.floats(1.0, 4.0),
    batching=st.booleans(),
    node_cap=st.integers(3, 12),
    script=st.lists(st.lists(st.sampled_from([0, 0, 1, 2]), min_size=3, max_size=3), min_size=1, max_size=60),
)
def test_am_never_grants_beyond_budget_nor_capacity(
    eta: float, capacity: float, batching: bool, node_cap: int, script: list[list[int]]
) -> None:
    k_max = 4
    arb = Arbiter(
        eta_r=eta, bucket_capacity=capacity, k_max=k_max, node_capacity=[node_cap], batching=batching
    )
    ks = [np.array([1]) for _ in range(3)]
    tokens_spent = 0
    for t, actions in enumerate(script, start=1):
        decisions = arb.arbitrate([Request(u, ks[u], a) for u, a in enumerate(actions)])
        applied = [d.applied for d in decisions]
        n_changes = sum(1 for a in applied if a)
        tokens_spent += (1 if n_changes else 0) if batching else n_changes
        # the bucket bound: over t periods at most capacity + eta * t tokens
        assert tokens_spent <= capacity + eta * t + 1e-9
        assert arb.reconfigurations <= capacity + eta * t + 1e-9
        for u, a in enumerate(applied):
            if a == ADD:
                ks[u] = ks[u] + 1
            elif a == REMOVE:
                ks[u] = ks[u] - 1
        assert all(1 <= int(k.sum()) <= k_max for k in ks)
        assert sum(int(k[0]) for k in ks) <= max(node_cap, 3)


def test_scale_in_reserve_keeps_tokens_for_scale_outs() -> None:
    arb = Arbiter(eta_r=0.5, bucket_capacity=3.0, scale_in_reserve=1.0)
    arb.bucket.tokens = 1.0  # after this period's refill: 1.5 tokens
    (d,) = arb.arbitrate([req(0, [3], REMOVE)])
    assert not d.granted and "scale-in deferred: 1.50 tokens < 1 + 1 kept for scale-outs" in d.reason
    (d,) = arb.arbitrate([req(0, [3], ADD, violated=True)])  # 2.0 tokens: the scale-out may use them
    assert d.granted and arb.bucket.tokens == pytest.approx(1.0)
    (d,) = arb.arbitrate([req(0, [4], REMOVE)])  # 1.5 < 2 again
    assert not d.granted
    (d,) = arb.arbitrate([req(0, [4], REMOVE)])  # 2.0 tokens: granted
    assert d.granted
    with pytest.raises(ValueError, match="scale_in_reserve"):
        Arbiter(eta_r=0.1, bucket_capacity=1.5, scale_in_reserve=1.0)


def test_a_batch_without_violation_waits_for_the_nodes_of_a_batch_mate() -> None:
    """One token for both instead of one each: the operator that could go now waits for the one whose node is
    being provisioned, unless someone violates."""
    add_a1, add_a2 = 3, 4  # two node types: 1-2 remove, 3-4 add

    def arbiter(defer: bool) -> Arbiter:
        return Arbiter(eta_r=0.1, bucket_capacity=3.0, k_max=10, node_capacity=[3, 2],
                       node_type_names=["A1", "A2"], defer_for_nodes=defer)  # fmt: skip

    two = [Request(0, np.array([2, 0]), add_a1, False, 0.7), Request(1, np.array([0, 2]), add_a2, False, 0.7)]
    d = arbiter(True).arbitrate(two)
    assert not d[0].granted and d[0].reason.startswith(
        "deferred: to reconfigure together with operator(s) [1]"
    )
    assert d[1].reason.startswith("denied: no free node of A2")
    d = arbiter(False).arbitrate(two)
    assert d[0].granted and not d[1].granted
    urgent = [Request(0, np.array([2, 0]), add_a1, True, 0.9), two[1]]
    d = arbiter(True).arbitrate(urgent)
    assert d[0].granted, d[0].reason  # a violation ends the wait


def test_the_wait_after_one_reconfiguration_is_what_the_bucket_allows() -> None:
    assert TokenBucket(0.1, 3.0, 3.0).wait_after_one() == 0.0  # 2 tokens left after one
    assert TokenBucket(0.1, 3.0, 1.4).wait_after_one() == pytest.approx(5.0)  # 0.5 left: 5 periods to 1
    assert TokenBucket(0.1, 3.0, 0.0).wait_after_one() == pytest.approx(19.0)  # none now: 9 to one, 10 more
    assert TokenBucket(0.0, 1.0, 1.0).wait_after_one() == float("inf")


def test_a_batch_waits_when_a_batch_mate_lost_the_last_node_to_it() -> None:
    """Three operators ask for one A2 each and one A2 node is free: the first would take it and the others would
    wait, each needing a token of its own later (seen in bench_loop's ramp: the other two then violated while the
    bucket refilled). With ``defer_for_nodes`` the batch waits for all three, unless one violates; the node the
    first would have taken stays free, and all three wait for nodes."""
    add_a2 = 4
    reqs = [Request(u, np.array([0, 6]), add_a2, False, 0.8 - 0.1 * u) for u in range(3)]

    def arbiter(defer: bool) -> Arbiter:
        return Arbiter(eta_r=0.1, bucket_capacity=3.0, k_max=10, node_capacity=[0, 19],
                       node_type_names=["A1", "A2"], defer_for_nodes=defer)  # fmt: skip

    d = arbiter(True).arbitrate(reqs)
    assert not any(x.granted for x in d)
    assert d[0].reason.startswith("deferred: to reconfigure together with operator(s) [1, 2]"), d[0].reason
    # every scale-out of the batch waits for its node, so that the RM provisions for all three
    assert all(x.waits_for_capacity and x.short_type == 1 for x in d), [x.reason for x in d]
    assert (
        d[1].reason
        == "denied: no free node of A2 for the whole batch (1 free): waiting for nodes to reconfigure together"
    )
    d = arbiter(False).arbitrate(reqs)
    assert d[0].granted and not d[1].granted and not d[2].granted
    urgent = [Request(0, np.array([0, 6]), add_a2, True, 0.9), *reqs[1:]]
    assert arbiter(True).arbitrate(urgent)[0].granted  # a violation ends the wait


def test_a_removal_that_makes_room_for_a_scale_out_is_arbitrated_as_a_scale_out() -> None:
    """A staged node-type swap's break-before-make step (``for_scale_out``) removes a replica only so that the
    region can acquire a node of the awaited type: no scale-in reserve holds it, nor a violating batch-mate."""
    arb = Arbiter(eta_r=0.5, bucket_capacity=3.0, scale_in_reserve=1.0)
    arb.bucket.tokens = 1.0  # 1.5 after the refill: a plain scale-in waits for 2
    plain, staged = req(0, [3], REMOVE), req(0, [3], REMOVE)
    staged.for_scale_out = True
    (d,) = arb.arbitrate([plain])
    assert not d.granted and "scale-in deferred" in d.reason
    arb.bucket.tokens = 1.0
    (d,) = arb.arbitrate([staged])
    assert d.granted and arb.bucket.tokens == pytest.approx(0.5)
    held = Arbiter(eta_r=0.5, bucket_capacity=3.0, batching=True, hold_scale_ins=True)
    other = req(1, [2], 0, violated=True)
    (d, _) = held.arbitrate([req(0, [3], REMOVE), other])
    assert not d.granted and "scale-in held" in d.reason
    staged = req(0, [3], REMOVE)
    staged.for_scale_out = True
    (d, _) = held.arbitrate([staged, other])
    assert d.granted
