"""Infrastructure Manager: ranking, quotas and per-period budget with reasons, consolidation proposals and the
waiting placement rule."""

from __future__ import annotations

import numpy as np
import pytest

from policies.im.global_policy import CheapestFirst, RegionPreference, RegionQuota
from policies.im.infrastructure import Placement, RegionPool
from policies.operator_model import NodeType
from policies.rm.base import RegionState, RMProposal

CHEAP = NodeType("cheap", 1.0, 0.5, cores=2)  # 0.25 $/h per slot
DEAR = NodeType("dear", 1.0, 2.0, cores=2)  # 1.00 $/h per slot
CATALOGS = {"eu": (DEAR,), "us": (CHEAP,), "asia": (CHEAP, DEAR)}


def st(region: str, nodes: int, idle: int = 0, n_types: int = 1) -> RegionState:
    active = np.zeros(n_types, np.int64)
    idle_a = np.zeros(n_types, np.int64)
    active[0], idle_a[0] = nodes, idle
    return RegionState(region, active, np.zeros(n_types, np.int64), idle_a, 0, 2 * nodes, 0.5)


def states(**nodes: int) -> dict[str, RegionState]:
    return {r: st(r, nodes.get(r, 0), n_types=len(CATALOGS[r])) for r in CATALOGS}


def test_cheapest_first_serves_cheap_capacity_first_under_the_budget() -> None:
    im = CheapestFirst(CATALOGS, params={"acquisition_budget_per_period": 2.0})
    props = [RMProposal("eu", "dear", 1, "need"), RMProposal("us", "cheap", 2, "need")]
    decisions = im.decide(props, states())
    assert [d.proposal.region for d in decisions] == ["us", "eu"]
    assert decisions[0].granted == 2 and "accepted" in decisions[0].reason
    # 2.0 - 2 * 0.5 = 1.0 $/h left: a 2.0 $/h node does not fit.
    assert decisions[1].granted == 0 and "acquisition budget" in decisions[1].reason


def test_budget_cuts_a_request_in_part_and_says_so() -> None:
    im = CheapestFirst(CATALOGS, params={"acquisition_budget_per_period": 1.2})
    (d,) = im.decide([RMProposal("us", "cheap", 5, "need")], states())
    assert d.granted == 2 and "cut from 5 to 2" in d.reason and "acquisition budget" in d.reason


def test_region_preference_order_and_quotas() -> None:
    quotas = {"us": RegionQuota(max_nodes=3), "eu": RegionQuota(max_nodes=10, max_new_nodes_per_period=1)}
    im = RegionPreference(CATALOGS, quotas, {"region_order": ["eu", "us"]})
    props = [RMProposal("us", "cheap", 4, "need"), RMProposal("eu", "dear", 3, "need")]
    decisions = im.decide(props, states(us=2, eu=5))
    assert [d.proposal.region for d in decisions] == ["eu", "us"]
    assert decisions[0].granted == 1 and "new nodes per period" in decisions[0].reason
    assert decisions[1].granted == 1 and "region quota" in decisions[1].reason
    (d,) = im.decide([RMProposal("us", "cheap", 1, "need")], states(us=3))
    assert d.granted == 0 and "region quota exhausted" in d.reason and "3/3" in d.reason


def test_releases_come_first_and_only_idle_nodes_are_released() -> None:
    im = CheapestFirst(CATALOGS)
    sts = states()
    sts["us"] = st("us", 4, idle=1)
    props = [RMProposal("eu", "dear", 1, "need"), RMProposal("us", "cheap", -3, "too many idle")]
    decisions = im.decide(props, sts)
    assert decisions[0].proposal.region == "us"
    assert decisions[0].granted == -1 and "only 1 idle" in decisions[0].reason
    assert decisions[1].granted == 1


def test_bad_input_is_rejected_naming_the_field() -> None:
    with pytest.raises(ValueError, match="quotas.mars: region referenced by no catalog"):
        CheapestFirst(CATALOGS, {"mars": RegionQuota()})
    with pytest.raises(ValueError, match="params.acquisition_budget_per_period"):
        CheapestFirst(CATALOGS, params={"acquisition_budget_per_period": -1.0})
    with pytest.raises(ValueError, match="params.region_order"):
        RegionPreference(CATALOGS, params={"region_order": ["mars"]})
    with pytest.raises(ValueError, match="proposal.node_type"):
        CheapestFirst(CATALOGS).decide([RMProposal("us", "dear", 1, "x")], states())
    with pytest.raises(ValueError, match="quota.max_nodes"):
        RegionQuota(max_nodes=-1)


def test_apply_respects_the_provisioning_delay() -> None:
    pool = RegionPool("us", (CHEAP,), 10)
    im = CheapestFirst({"us": (CHEAP,)}, params={"provisioning_delay_periods": 2})
    decisions = im.decide([RMProposal("us", "cheap", 2, "need")], {"us": pool.region_state(0, 0.0)})
    assert im.apply(decisions, {"us": pool}, now=5) == [2]
    assert pool.counts(6)[0][0] == 0 and pool.counts(6)[1][0] == 2  # still booting
    assert pool.counts(7)[0][0] == 2


def pool_with(layout: list[list[str]]) -> RegionPool:
    pool = RegionPool("us", (CHEAP,), 10)
    for replicas in layout:
        node = pool.acquire(0, now=0, delay=0)
        node.replicas.extend(replicas)
    return pool


def test_consolidation_proposal_frees_an_under_used_node() -> None:
    pool = pool_with([["a"], ["b"], ["c", "d"], []])
    im = CheapestFirst({"us": (CHEAP,)})
    (prop,) = im.propose_consolidation({"us": pool}, now=1)
    assert len(prop.frees) == 1 and len(prop.moves) == 1 and "can be emptied" in prop.reason
    for op, src, dst in prop.moves:
        pool.apply_move(op, src, dst)
    idle_before = int(pool.counts(1)[2][0])
    assert idle_before == 2  # the emptied node plus the one that was idle
    assert pool.release_idle(0, 2, now=1) == 2
    assert sorted(r for n in pool.nodes.values() for r in n.replicas) == ["a", "b", "c", "d"]
    # Nothing more to consolidate: every used node is full.
    assert im.propose_consolidation({"us": pool}, now=1) == []
    off = CheapestFirst({"us": (CHEAP,)}, params={"consolidate": False})
    assert off.propose_consolidation({"us": pool_with([["a"], ["b"]])}, now=1) == []


def test_scale_out_without_a_free_slot_waits_for_a_node_instead_of_failing() -> None:
    pool = pool_with([["a", "a"]])
    placement = Placement({"us": pool})
    assert placement.scale_out("a", "us", now=1) is None
    assert placement.unsatisfied("us") == 1 and placement.waiting_for("a") == 1
    pool.acquire(0, now=1, delay=1)
    assert placement.retry_waiting(1) == []  # the node is still booting
    placed = placement.retry_waiting(2)
    assert [r.operator for r in placed] == ["a"] and placement.unsatisfied("us") == 0
    assert pool.replicas_of("a") == 3
    # A scale-in while a scale-out waits cancels the waiting request.
    pool.nodes[1].replicas.append("b")
    assert placement.scale_out("b", "us", now=3) is None
    assert placement.cancel("b") == 1 and placement.unsatisfied("us") == 0


def test_busy_nodes_cannot_be_released() -> None:
    pool = pool_with([["a"]])
    with pytest.raises(ValueError, match="cannot release"):
        pool.release(0)
    assert pool.release_idle(0, 1, now=0) == 0


def test_registry_names_resolve_and_validate() -> None:
    from policies import registry
    from policies.rm.model_based import ModelBasedRM
    from policies.rm.simple import SimpleProvisioning

    assert registry.load("rm", "simple") is SimpleProvisioning
    assert registry.load("rm", "model-based") is ModelBasedRM
    assert registry.load("im", "cheapest-first") is CheapestFirst
    assert registry.load("im", "region-preference") is RegionPreference
    with pytest.raises(ValueError, match="params.provisioning_delay_periods"):
        registry.validate_params("im", "cheapest-first", {"provisioning_delay_periods": -1})
    with pytest.raises(ValueError, match="params.n_idle"):
        registry.validate_params("rm", "simple", {"n_idle": -2})


def test_consolidation_moves_replicas_only_between_nodes_of_the_same_type() -> None:
    pool = RegionPool("asia", (CHEAP, DEAR), 10)
    for ti, replicas in ((0, ["a"]), (1, ["b"])):  # one half-used node of each type: nothing to consolidate
        pool.acquire(ti, now=0, delay=0).replicas.extend(replicas)
    im = CheapestFirst(CATALOGS)
    assert im.propose_consolidation({"asia": pool}, now=1) == []
    pool.acquire(0, now=0, delay=0).replicas.append("c")  # a second half-used cheap node
    (prop,) = im.propose_consolidation({"asia": pool}, now=1)
    assert all(pool.nodes[src].type_index == pool.nodes[dst].type_index == 0 for _, src, dst in prop.moves)
    assert len(prop.frees) == 1 and pool.nodes[prop.frees[0]].type_index == 0
