"""IM consolidation proposals reach the AM in the control plane: scale-ins leave partly used nodes, the region step
proposes moves (durable, once per (region, slot)), the application's AM applies them in one reconfiguration
(batched with its granted changes, or its own within the token bucket) and the emptied node is released."""

from __future__ import annotations

import pytest

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import ApplicationControl, Consolidation, Decision, RegionNode, SimulatedEngine
from autoscaler.control.regions import region_step
from autoscaler.control.tick import forget_definitions, run_tick
from autoscaler.models import Application, Deployment, NodeType, Region

pytestmark = pytest.mark.django_db
QUIET = 0.2  # rate scale at which the threshold OMs scale in to one replica


def half_used_pipeline(eta_r: float, n_operators: int = 2) -> tuple[Application, Region]:
    """Two-core A1 nodes; op0 and op1 run 2 replicas each, the region step packs them on one node each. A third
    operator runs 3 replicas in region-b (no region step there: its changes do not touch region-a's nodes)."""
    app = simulated_pipeline("packed", n_operators=n_operators, rate_scale=QUIET)
    # a one-token bucket without reserve (policies.options defaults to 3 with 1 kept): the budget runs out fast
    one_token = {"bucket_capacity": 1, "scale_in_reserve": 0}
    policies = {
        **app.policies,
        "am": {"name": "naive", "params": one_token},
        "rm": {"name": "simple", "params": {"n_idle": 0}},
    }
    Application.objects.filter(pk=app.pk).update(eta_r=eta_r, policies=policies)
    NodeType.objects.filter(catalog__name="infra-a", name="A1").update(cores=2)
    Deployment.objects.filter(operator__application=app, operator__name__in=["op0", "op1"]).update(
        replicas={"A1": 2}
    )
    region = Region.objects.get(name="region-a")
    if n_operators == 3:
        other = Region.objects.create(
            name="region-b", catalog=region.catalog, max_nodes=10, max_new_nodes_per_period=5
        )
        Deployment.objects.filter(operator__application=app, operator__name="op2").update(
            region=other, replicas={"A1": 3}
        )
    region_step(region.pk, 9)
    assert layout(region) == {"A1-s9-1": [f"{app.pk}/op0"] * 2, "A1-s9-2": [f"{app.pk}/op1"] * 2}
    return app, region


def layout(region: Region) -> dict[str, list[str]]:
    rows = RegionNode.objects.filter(region=region, state="ready")
    return {r.node_id: sorted(r.replicas) for r in rows}


def paid_nodes(region: Region) -> int:
    return RegionNode.objects.filter(region=region, state__in=["booting", "ready"]).count()


def decision(app: Application, slot: int, operator: str) -> Decision:
    return Decision.objects.get(application=app, slot=slot, operator__name=operator)


def test_scale_in_leaves_half_used_nodes_the_am_consolidates_within_budget_and_a_node_is_released():
    app, region = half_used_pipeline(eta_r=0.5)
    run_tick(app.pk, 10)  # both operators scale in 2 -> 1 in one batched reconfiguration: the bucket is empty
    assert decision(app, 10, "op0").outcome == decision(app, 10, "op1").outcome == "applied"
    region_step(region.pk, 10)
    assert layout(region) == {"A1-s9-1": [f"{app.pk}/op0"], "A1-s9-2": [f"{app.pk}/op1"]}
    (prop,) = Consolidation.objects.filter(region=region, slot=10)
    assert prop.status == "pending" and prop.frees == ["A1-s9-1"]
    assert prop.moves == [{"operator": "op0", "node_type": "A1", "from": "A1-s9-1", "to": "A1-s9-2"}]
    assert "can be emptied" in prop.reason and paid_nodes(region) == 2

    # slot 11: 0.5 tokens < 1 and nothing else changes: denied, the log says why, nothing moves
    run_tick(app.pk, 11)
    d = decision(app, 11, "op0")
    assert d.outcome == "no_change" and "consolidation denied: reconfiguration budget exhausted" in d.reason
    assert d.proposal["consolidation"]["status"] == "denied"
    assert SimulatedEngine.objects.get(application=app).applies == 1
    region_step(region.pk, 11)  # the same proposal again (slot 11); the one of slot 10 is superseded
    assert list(Consolidation.objects.filter(region=region).values_list("slot", "status")) == [
        (11, "pending"),
        (10, "superseded"),
    ]

    # slot 12: a full token: the AM moves op0's replica in its own reconfiguration (counts unchanged)
    forget_definitions()  # as after a worker restart: only the durable rows carry the proposal
    run_tick(app.pk, 12)
    d = decision(app, 12, "op0")
    assert d.outcome == "applied" and d.applied == d.deployment == {"A1": 1}
    assert "consolidation in its own reconfiguration at slot 12 (one token)" in d.reason
    assert "emptying node(s) A1-s9-1" in d.reason and d.proposal["consolidation"]["frees"] == ["A1-s9-1"]
    assert decision(app, 12, "op1").outcome == "no_change"
    assert SimulatedEngine.objects.get(application=app).applies == 2
    assert ApplicationControl.objects.get(application=app).bucket_tokens == pytest.approx(0.0)
    assert Consolidation.objects.get(region=region, slot=11).status == "applied"
    assert layout(region) == {"A1-s9-1": [], "A1-s9-2": [f"{app.pk}/op0", f"{app.pk}/op1"]}

    # the next region step finds the emptied node idle and the RM/IM releases it: one node less is paid for
    out = region_step(region.pk, 12)
    assert out["decisions"][0]["executed"] == -1
    assert RegionNode.objects.get(region=region, node_id="A1-s9-1").state == "released"
    assert paid_nodes(region) == 1 and not Consolidation.objects.filter(region=region, slot=12).exists()
    run_tick(app.pk, 13)  # nothing pending any more: no reconfiguration
    assert SimulatedEngine.objects.get(application=app).applies == 2
    body = api_client(app).get("/api/v1/control/regions/region-a/").json()
    assert body["nodes"] == [body["nodes"][0]] and sorted(body["nodes"][0]["replicas"]) == [
        f"{app.pk}/op0",
        f"{app.pk}/op1",
    ]
    assert [(c["slot"], c["status"]) for c in body["consolidations"]] == [(11, "applied"), (10, "superseded")]
    assert (
        body["consolidations"][0]["frees"] == ["A1-s9-1"]
        and "applied: 1 move(s)" in body["consolidations"][0]["outcome"]
    )


def api_client(app: Application):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=app.owner).key}")
    return client


def test_consolidation_joins_the_batched_reconfiguration_of_a_granted_change_without_an_extra_token():
    app, region = half_used_pipeline(eta_r=0.5, n_operators=3)
    run_tick(app.pk, 10)  # op0, op1 2 -> 1 and op2 3 -> 2 (region-b) in one reconfiguration
    assert decision(app, 10, "op2").applied == {"A1": 2}
    region_step(region.pk, 10)
    assert Consolidation.objects.get(region=region, slot=10).status == "pending"
    run_tick(app.pk, 11)  # 0.5 tokens: op2's scale-in and the consolidation both wait
    assert decision(app, 11, "op2").outcome == "denied" and "budget" in decision(app, 11, "op0").reason
    run_tick(app.pk, 12)  # one token: op2 scales in again and the consolidation rides in the same batch
    assert decision(app, 12, "op2").outcome == "applied" and decision(app, 12, "op2").applied == {"A1": 1}
    d = decision(app, 12, "op0")
    assert d.outcome == "applied" and "in the batched reconfiguration of slot 12 (no extra token)" in d.reason
    assert SimulatedEngine.objects.get(application=app).applies == 2  # one restart for both
    assert ApplicationControl.objects.get(application=app).bucket_tokens == pytest.approx(0.0)
    assert Consolidation.objects.get(region=region, slot=10).status == "applied"
    assert layout(region)["A1-s9-1"] == []


def test_the_region_step_of_a_slot_proposes_once_and_a_duplicate_tick_does_not_move_again():
    app, region = half_used_pipeline(eta_r=0.5)
    run_tick(app.pk, 10)
    first = region_step(region.pk, 10)
    again = region_step(region.pk, 10)
    assert again["duplicate"] is True and again["decisions"] == first["decisions"]
    assert Consolidation.objects.filter(region=region).count() == 1
    run_tick(app.pk, 11)  # denied (budget)
    run_tick(app.pk, 12)  # applied in its own reconfiguration
    before = layout(region)
    assert before["A1-s9-1"] == [] and Consolidation.objects.get(slot=10).status == "applied"
    assert run_tick(app.pk, 12).duplicate is True
    assert layout(region) == before and SimulatedEngine.objects.get(application=app).applies == 2
    region_step(region.pk, 12)
    assert Consolidation.objects.filter(region=region).count() == 1  # one full node, one idle: nothing


def test_placement_ledger_best_fit_scale_in_from_the_fullest_node_and_unplaced_replicas_keep_nodes_busy():
    from autoscaler.control import placement
    from autoscaler.control.builders import ensure_region

    region = ensure_region()
    nodes = [
        RegionNode.objects.create(
            region=region, node_id=f"n{i}", node_type="A1", state="ready", acquired_at_s=i
        )
        for i in range(3)
    ]
    cores = {"A1": 2, "A2": 1}
    assert placement.reconcile(nodes, {"1/a": {"A1": 3}, "2/b": {"A1": 1}}, cores) == {}
    assert [n.replicas for n in nodes] == [["1/a", "1/a"], ["1/a", "2/b"], []]  # best fit, oldest first
    assert placement.busy_nodes(nodes, {}) == {"n0", "n1"}
    assert placement.reconcile(nodes, {"1/a": {"A1": 2}, "2/b": {"A1": 1}}, cores) == {}
    assert [n.replicas for n in nodes] == [
        ["1/a"],
        ["1/a", "2/b"],
        [],
    ]  # from the node with most replicas of a
    stored = {r.node_id: r.replicas for r in RegionNode.objects.filter(region=region)}
    assert stored == {"n0": ["1/a"], "n1": ["1/a", "2/b"], "n2": []}  # durable
    # more replicas run than the ledger can place: every node of the type counts as busy (none is released)
    unplaced = placement.reconcile(nodes, {"1/a": {"A1": 6}, "2/b": {"A1": 1}}, cores)
    assert unplaced == {"A1": 1} and placement.busy_nodes(nodes, unplaced) == {"n0", "n1", "n2"}
