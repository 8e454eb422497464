"""Multi-replica steps (``policies.base.JUMP``): model-based's ``multi_step``, the arbiter, the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from policies.am.arbiter import Arbiter, Request
from policies.base import JUMP, Observation, deployment_change, describe_action
from policies.om.model_based import ModelBased, per_replica_bounds
from policies.operator_model import CostWeights, NodeType, OperatorSpec, QueueModel
from policies.sim.operator import run_operator
from policies.sim.trace import load_trace

TYPES = (NodeType("A1", 1.0, 1.0), NodeType("A2", 0.7, 0.7), NodeType("A3", 1.3, 1.3))
TRUE = QueueModel(0.005, 0.005**2 / 2)  # 5 ms per tuple on a speed-1 node: 200 tuples/s per A1 replica
MULTI = {"capacity_bound": True, "multi_step": True}


def spec() -> OperatorSpec:
    return OperatorSpec(
        TYPES, k_max=10, r_max_s=0.1 / 3, weights=CostWeights(1 / 3, 1 / 3, 1 / 3), rate_levels=None,
        model_mode="learn",
    )  # fmt: skip


def run(params: dict, rates: list[float], k0: tuple[int, ...] = (1, 0, 0)):
    """Drive the policy as the control loop does (learned range and model, what an engine measures); returns
    per period (deployment in place, rate, violated, proposal)."""
    s = spec()
    policy = ModelBased(s, params, seed=1)
    k, out = np.array(k0), []
    for rate in rates:
        r = TRUE.response_time(k, s.speedups, rate)
        u = min(TRUE.utilisation(k, s.speedups, rate), 1.0)
        processed = min(rate, TRUE.capacity(k, s.speedups))
        violated = not r <= s.r_max_s
        proposal = policy.step(
            Observation(k.copy(), rate, r if np.isfinite(r) else None, violated, u, True, processed)
        )
        out.append((k.copy(), rate, violated, proposal))
        k = proposal.deployment
    return out


def capacity(k: np.ndarray) -> float:
    return float(TRUE.capacity(k, np.array([t.speedup for t in TYPES])))


def test_after_a_step_one_reconfiguration_carries_the_new_rate() -> None:
    """A 3x step on 2 x A2: the papers' one-replica policy takes 5 reconfigurations (A3 added twice, then the
    A2s swapped out one by one through a violated period); the multi-replica step goes to 2 x A3 in one. The
    best one-replica action adds an A3, so the step may use A3 too (before, a step kept the types in place:
    1 x A1 -> 1 x A1 + 1 x A3 -> 2 x A3 on bench_loop's step, two reconfigurations and two waits for nodes)."""
    rates = [150.0] * 80 + [450.0] * 40
    multi, single = run(MULTI, rates), run({"capacity_bound": True}, rates)
    violated = [sum(v for _, _, v, _ in r[80:]) for r in (multi, single)]
    assert violated[0] < violated[1]
    changes = [[p for _, _, _, p in r[80:] if not p.is_noop] for r in (multi, single)]
    assert len(changes[0]) == 1 < len(changes[1]), changes
    (step,) = changes[0]
    assert step.action == JUMP and step.explanation["action"].startswith("in one step: ")
    assert capacity(step.deployment) > 450.0
    assert step.deployment[2] > 0  # the type the best one-replica action brought (A3)
    assert not any(v for _, _, v, _ in multi[82:])


def test_no_step_to_less_capacity_under_overload_and_none_without_the_option(taxi_head) -> None:
    for k, _rate, violated, p in run(MULTI, [150.0] * 30 + [900.0] * 30 + [150.0] * 60):
        if p.action == JUMP and violated:
            assert capacity(p.deployment) > capacity(k)
    # the papers' policy (default params) proposes one-replica actions only
    result = run_operator(load_trace(taxi_head)[:300], ModelBased(spec(), {"capacity_bound": True}, seed=1))
    assert (result.action != JUMP).all()


def test_scale_in_steps_only_to_deployments_the_model_expects_to_meet_the_bound() -> None:
    out = run(MULTI, [150.0] * 30 + [900.0] * 30 + [150.0] * 90)
    ins = [(k, p) for k, _, _, p in out if p.action == JUMP and capacity(p.deployment) < capacity(k)]
    assert ins, "the flash crowd's replicas should go in fewer steps than one per period"
    assert not any(v for _, _, v, _ in out[-30:])  # after the scale-in the bound holds


def test_the_simulator_applies_multi_replica_steps(taxi_head) -> None:
    s = spec()
    trace = np.array([150.0] * 40 + [450.0] * 40)
    result = run_operator(trace, ModelBased(s, MULTI, seed=1), k0=np.array([1, 0, 0]))
    jumps = np.flatnonzero(result.action == JUMP)
    assert jumps.size
    t = int(jumps[0])
    assert abs(int(result.replicas[t + 1]) - int(result.replicas[t])) >= 2 or not np.array_equal(
        result.deployment[t + 1], result.deployment[t]
    )


# ---- the arbiter --------------------------------------------------------------------------------------------
def jump(u: int, k: list[int], target: list[int], violated: bool = False) -> Request:
    return Request(u, np.array(k), JUMP, violated, 0.9, np.array(target))


def arbiter(a2_nodes: int) -> Arbiter:
    """Types A1-A3, 10 nodes of A1 and A3, ``a2_nodes`` of A2; a bucket of 3 tokens refilled at 0.1 per period."""
    names = ["A1", "A2", "A3"]
    return Arbiter(
        eta_r=0.1, bucket_capacity=3.0, k_max=10, node_capacity=[10, a2_nodes, 10], node_type_names=names
    )


def test_a_step_is_one_reconfiguration_and_needs_every_node_it_adds() -> None:
    arb = arbiter(a2_nodes=2)
    (d,) = arb.arbitrate([jump(0, [0, 1, 0], [0, 4, 0], violated=True)])
    assert not d.granted and d.reason == "denied: no free node of A2 (1 of 2 in use)"
    arb = arbiter(a2_nodes=5)
    tokens = arb.bucket.tokens
    d0, d1 = arb.arbitrate([jump(0, [0, 1, 0], [0, 4, 0], violated=True), jump(1, [0, 1, 0], [0, 0, 3])])
    assert d0.granted and d0.applied == JUMP and d1.granted
    assert "batch of 2, one reconfiguration" in d0.reason
    assert arb.bucket.tokens == pytest.approx(min(tokens + 0.1, 3.0) - 1.0)


def test_a_step_above_k_max_is_denied_and_a_pure_removal_is_a_scale_in() -> None:
    arb = Arbiter(eta_r=0.1, bucket_capacity=3.0, k_max=5, hold_scale_ins=True, node_type_names=["A1", "A2"])
    (d,) = arb.arbitrate([jump(0, [2, 0], [2, 4])])
    assert d.reason == "denied: would exceed K_max=5 replicas"
    d0, d1 = arb.arbitrate([jump(0, [4, 0], [1, 0]), jump(1, [1, 0], [1, 2], violated=True)])
    assert d0.reason.startswith("denied: scale-in held") and d1.granted
    # a change of type (removes A1, adds A2) is not a scale-in: it needs the nodes it adds
    (d,) = Arbiter(eta_r=0.1, bucket_capacity=3.0, k_max=5, node_capacity=[5, 0]).arbitrate(
        [jump(0, [3, 0], [0, 3])]
    )
    assert d.reason.startswith("denied: no free node of type 1")


def test_change_and_description_of_a_step() -> None:
    k, target = np.array([0, 10, 0]), np.array([0, 0, 7])
    assert deployment_change(k, JUMP, target).tolist() == [0, -10, 7]
    assert deployment_change(k, 6).tolist() == [0, 0, 1]  # add one A3 (1 + N_res + 2)
    with pytest.raises(ValueError, match="target deployment"):
        deployment_change(k, JUMP)
    text = describe_action(JUMP, ["A1", "A2", "A3"], target - k)
    assert text == "in one step: remove 10 replicas on A2, add 7 replicas on A3"


def test_an_operator_overloaded_from_its_first_period_leaves_the_overload() -> None:
    """Never within its bound, the policy's per-replica bound was the midpoint of [0, measured capacity]: half
    the capacity, so every deployment it could reach looked too small and it kept 1 x A1 + 1 x A2 at 100 %
    violations. The queueing estimate (M/M/1's capacity - 1 / R_max until response times under load are
    measured, then M/G/1 with the learned variability) and the re-solve on new bounds fix it. The learned bound
    is the true one, without M/M/1's margin: one bet on a calm period of this noisy rate (873 after 930s) costs
    two more violated periods than the M/M/1 guess did (3)."""
    out = run(MULTI, [942.0, 948.0, 930.0, 930.0, 873.0, 969.0, 950.0, 940.0] * 3)
    assert sum(v for _, _, v, _ in out) <= 5
    assert not any(v for _, _, v, _ in out[-10:])


def test_the_queueing_guess_replaces_the_midpoint_only_inside_the_bracket() -> None:
    lo, hi = np.array([0.0, 0.0, 0.0]), np.array([140.0, 200.0, np.inf])
    assert per_replica_bounds(lo, hi).tolist() == [70.0, 100.0, np.inf]
    guess = np.array([110.0, 170.0, 230.0])
    assert per_replica_bounds(lo, hi, guess).tolist() == [110.0, 170.0, np.inf]
    # a guess outside [lo, hi) (a period within the bound above it, or below the bracket) leaves the midpoint
    assert per_replica_bounds(np.array([120.0, 0.0, 0.0]), hi, guess).tolist()[0] == 130.0


def test_under_a_node_limit_the_step_adds_the_fewest_replicas_that_meet_the_bound() -> None:
    """``Observation.node_limited``: after a 4x step on 2 x A2, under the region's node limit the step goes to
    the deployment the model expects to meet the bound with the fewest new replicas, of any type (3 x A3: 3
    new; 6 x A2 or 4 x A1 would need 4), and says why."""
    s = spec()

    def at_step(limited: bool) -> tuple[np.ndarray, dict]:
        policy = ModelBased(s, MULTI, seed=1)
        k = np.array([0, 2, 0])
        for rate in [150.0] * 40 + [600.0]:
            r = TRUE.response_time(k, s.speedups, rate)
            u = min(TRUE.utilisation(k, s.speedups, rate), 1.0)
            obs = Observation(
                k.copy(), rate, r if np.isfinite(r) else None, not r <= s.r_max_s, u, True,
                min(rate, TRUE.capacity(k, s.speedups)), node_limited=limited and rate > 150.0,
            )  # fmt: skip
            proposal = policy.step(obs)
        return proposal.deployment, proposal.explanation

    unlimited, explanation = at_step(False)
    assert "node_limit" not in explanation
    limited, explanation = at_step(True)
    start = np.array([0, 2, 0])
    new = np.maximum(limited - start, 0).sum()
    assert new <= np.maximum(unlimited - start, 0).sum()
    # the fewest new replicas of any deployment within K_max that meets the bound under the true model
    speeds = s.speedups
    fewest = min(
        np.maximum(np.array(k) - start, 0).sum()
        for k in np.ndindex(11, 11, 11)
        if 0 < sum(k) <= 10 and TRUE.response_time(np.array(k), speeds, 600.0) <= s.r_max_s
    )
    assert new == fewest == 3, limited
    assert TRUE.response_time(limited, speeds, 600.0) <= s.r_max_s, limited  # it carries the rate
    assert explanation["node_limit"]["target"] == limited.tolist()
    assert "fewest new replicas" in explanation["node_limit"]["reason"]


def test_a_proposal_revised_for_the_node_limit_is_the_limited_one_and_is_what_the_policy_learns_from() -> (
    None
):
    """``revise_for_node_limit`` (the tick calls it before the AM arbitrates when the application's proposals
    add more than the region can hold): the step of the same period decided again under the node limit gives
    the node-limited proposal, without learning twice (two instances fed the same periods, one revised, hold
    the same learned model), and the revised action is the one recorded for the next step's learning."""
    s = spec()
    start = np.array([0, 2, 0])
    history = [150.0] * 40

    def fed(params: dict) -> ModelBased:
        policy = ModelBased(s, params, seed=1)
        for rate in history:
            r = TRUE.response_time(start, s.speedups, rate)
            u = TRUE.utilisation(start, s.speedups, rate)
            policy.step(Observation(start.copy(), rate, r, not r <= s.r_max_s, u, True, rate))
        return policy

    # the 4x step: 2 x A2 saturated (no finite response time)
    obs = Observation(start.copy(), 600.0, None, True, 1.0, True, TRUE.capacity(start, s.speedups))
    revised, plain = fed(MULTI), fed(MULTI)
    first = revised.step(obs)
    plain.step(obs)
    revision = revised.revise_for_node_limit(obs)
    assert revision is not None
    assert "node_limit" in revision.explanation and "node_limit" not in first.explanation
    assert np.maximum(revision.deployment - start, 0).sum() == 3, (
        revision.deployment
    )  # 3 x A3, as when limited
    assert revised._prev is not None and revised._prev[2] == revision.action
    assert np.array_equal(revised.v_hat, plain.v_hat) and revised.t == plain.t  # nothing learned twice
    # already node-limited, or a policy without multi-replica steps: the first proposal stands
    limited = Observation(start.copy(), 600.0, None, True, 1.0, True, 200.0, node_limited=True)
    assert fed(MULTI).revise_for_node_limit(limited) is None
    single = fed({"capacity_bound": True})
    single.step(obs)
    assert single.revise_for_node_limit(obs) is None
