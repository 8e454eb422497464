"""Node accounting: region capacity, RM/IM and AM grants read one document (``autoscaler.control.capacity``).

Regressions of the causes found in the simulated demo, then a property test over random request sequences
(several applications and operators, region steps with a provisioning delay, node losses) checking the
invariants after every step."""

from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler.control import capacity, placement
from autoscaler.control.builders import ensure_region, simulated_pipeline
from autoscaler.control.models import Decision, RegionControl, RegionNode, RegionTick, Tick, WaitingRequest
from autoscaler.control.regions import region_step
from autoscaler.control.tick import run_tick
from autoscaler.control.topology import topology
from autoscaler.models import Application, Deployment, NodeType, NodeTypeCatalog, Region
from connectors.infrastructure import BookkeepingProvider
from policies.am.arbiter import Arbiter, Request
from policies.base import action_delta

pytestmark = pytest.mark.django_db
BUSY = 3.0


def declare(app: Application, level: str, name: str, params: dict | None = None) -> None:
    app.policies = {**app.policies, level: {"name": name, "params": params or {}}}
    app.save()


def counts(region: Region) -> dict[str, dict[str, int]]:
    return RegionControl.objects.get(region=region).capacity["nodes"]


# ---- the causes, one test each -------------------------------------------------------------------------------
def test_a_deployment_applied_after_the_first_step_gets_its_nodes():
    """Before: a bookkeeping region adopted nodes only at its first step; the replicas of an application created
    later ran without a node (used > ready), so free went negative and the AM's capacity fell below what the
    application already ran ("no free node of A1 (2 of 1 in use)") while the RM saw nothing to do."""
    first = simulated_pipeline("first", n_operators=1)
    declare(first, "rm", "simple", {"n_idle": 0})
    region = Region.objects.get(name="region-a")
    region_step(region.pk, 9)
    assert counts(region)["A1"]["ready"] == 1
    late = simulated_pipeline("late", n_operators=2)  # 2 more A1 replicas, after the region's first step
    region_step(region.pk, 10)
    row = RegionTick.objects.get(region=region, slot=10)
    assert any("adopted" in e for e in row.executed)
    assert counts(region)["A1"] == {
        "ready": 3,
        "pending": 0,
        "used": 3,
        "free": 0,
        "ready_slots": 3,
        "used_slots": 3,
        "free_slots": 0,
        "unplaced": 0,
    }
    topo = topology(late)
    ks = [topo.vector({"A1": 1})] * 2
    assert capacity.read(topo, ks).slots.tolist()[0] == 2  # its own two replicas: never below what it runs


def test_the_rm_acquires_the_node_type_a_request_waits_for():
    """Before: the simple RM counted idle nodes of ANY type as covering the waiting requests and acquired only
    the cheapest type: a request for A1 waited while an A2 was idle or pending."""
    app = simulated_pipeline("wants-a1", n_operators=1)
    declare(app, "rm", "simple", {"n_idle": 1})
    region = Region.objects.get(name="region-a")
    Region.objects.filter(pk=region.pk).update(provisioning_delay_s=120.0)
    region_step(region.pk, 9)  # adopts op0's A1, acquires one spare A2 (booting until 540 + 120 s)
    region_step(region.pk, 11)  # 660 s: the A2 is ready and idle
    assert counts(region)["A2"]["free"] == 1 and counts(region)["A1"]["free"] == 0
    WaitingRequest.objects.create(
        region=region,
        application=app,
        operator=app.operators.get(name="op0"),
        node_type="A1",
        since_slot=11,
        last_slot=11,
        reason="waiting for capacity in region region-a: no free node of A1",
    )
    region_step(region.pk, 12)
    row = RegionTick.objects.get(region=region, slot=12)
    assert row.state["waiting"] == [1, 0, 0]
    assert [(d["node_type"], d["executed"]) for d in row.decisions] == [("A1", 1)]
    assert counts(region)["A1"]["pending"] == 1 and counts(region)["A2"]["free"] == 1  # the spare A2 stays


def test_a_grant_not_yet_applied_keeps_its_slot_across_a_step():
    """Before: every step reset the grants and counted running replicas only, so a scale-out granted and not
    yet applied was free again (granted twice) and its node could be released as idle."""
    one = simulated_pipeline("one", n_operators=1)
    two = simulated_pipeline("two", n_operators=1)
    declare(one, "rm", "simple", {"n_idle": 1})
    region = Region.objects.get(name="region-a")
    region_step(region.pk, 9)  # A1 x2 adopted, one idle A2
    topo = topology(one)
    k = topo.vector({"A1": 1})
    up = 1 + len(topo.type_names) + 1  # +1 A2
    cap = capacity.read(topo, [k])
    granted = Arbiter(0.5, 1.0, node_capacity=cap.slots).arbitrate([Request(0, k, up)])
    assert granted[0].granted and cap.reserve(topo, [Request(0, k, up)], granted, slot=10)
    Tick.objects.create(application=one, slot=10, period_s=60.0, status=Tick.Status.APPLYING)
    declare(one, "rm", "simple", {"n_idle": 0})  # the RM would now release every idle node
    region_step(region.pk, 10)
    assert (
        RegionNode.objects.filter(region=region, node_type="A2", state="ready").count() == 1
    )  # not released
    assert counts(region)["A2"]["used"] == 1 and counts(region)["A2"]["free"] == 0
    other = topology(two)
    assert capacity.read(other, [other.vector({"A1": 1})]).slots.tolist()[1] == 0  # not granted twice
    Tick.objects.filter(application=one, slot=10).update(status=Tick.Status.DONE)  # failed: nothing runs
    region_step(region.pk, 11)
    assert RegionControl.objects.get(region=region).capacity["grants"] == []


def test_a_dry_run_application_reserves_nothing_and_the_real_tick_leaves_consistent_counts():
    dry = simulated_pipeline("dry", n_operators=1, rate_scale=BUSY, dry_run=True)
    declare(dry, "rm", "simple", {"n_idle": 2})
    region = Region.objects.get(name="region-a")
    region_step(region.pk, 9)
    run_tick(dry.pk, 10)
    d = Decision.objects.get(application=dry, slot=10)
    assert d.proposal["action"] != 0
    doc = RegionControl.objects.get(region=region).capacity
    assert doc["grants"] == []


def test_api_page_and_document_show_the_same_counts(client):
    app = simulated_pipeline("shown", n_operators=2)
    declare(app, "rm", "simple", {"n_idle": 1})
    region = Region.objects.get(name="region-a")
    region_step(region.pk, 10)
    doc = RegionControl.objects.get(region=region).capacity
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=app.owner).key}")
    body = api.get("/api/v1/control/regions/region-a/").json()
    assert body["node_counts"] == doc["nodes"] == capacity.node_counts(doc)
    assert body["node_counts"]["A1"] == {
        "ready": 2,
        "pending": 0,
        "used": 2,
        "free": 0,
        "ready_slots": 2,
        "used_slots": 2,
        "free_slots": 0,
        "unplaced": 0,
    }
    assert body["steps"][0]["state"]["nodes"] == doc["nodes"]
    # another user sees the same counts but not the application's entries
    stranger = get_user_model().objects.create_user("stranger")
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=stranger).key}")
    theirs = api.get("/api/v1/control/regions/region-a/").json()
    assert theirs["node_counts"] == doc["nodes"] and theirs["capacity"]["apps"] == {}
    staff = get_user_model().objects.create_user("ops", password="pw-ops-1", is_staff=True)
    client.force_login(staff)
    page = client.get(reverse("dashboard:region-edit", args=["region-a"]))
    assert page.status_code == 200
    rows = page.context["node_counts"]
    assert {r.pop("node_type"): r for r in rows} == doc["nodes"]
    assert page.content.count(b'id="node-counts"') == 1  # once, in the page body
    title = page.content.split(b"<title>", 1)[1].split(b"</title>", 1)[0]
    assert b"<" not in title and b"Region region-a" in title


def test_a_request_that_lost_a_node_to_a_batch_the_budget_denies_does_not_wait():
    """Before: the arbiter gave the last free node to the higher-priority operator, then the token bucket denied
    the whole batch; the other operator was left "waiting for capacity" (a WaitingRequest for the RM) while the
    node stayed free. Seen in the replayed demo: A2 ready 2, used 1, and a request waiting for A2."""
    k = np.array([1, 0])
    up = 1 + 2 + 0  # +1 of type 0
    arbiter = Arbiter(0.1, 1.0, node_capacity=[3, 0], node_type_names=["A1", "A2"])
    arbiter.bucket.tokens = 0.0
    d = arbiter.arbitrate([Request(0, k, up, violated=True), Request(1, k, up)])
    assert [x.applied for x in d] == [0, 0]
    assert all("reconfiguration budget exhausted" in x.reason for x in d), [x.reason for x in d]
    assert not any(x.waits_for_capacity for x in d)
    full = Arbiter(0.1, 1.0, node_capacity=[2, 0], node_type_names=["A1", "A2"])  # no node free at all
    full.bucket.tokens = 0.0
    d = full.arbitrate([Request(0, k, up, violated=True), Request(1, k, up)])
    assert d[1].waits_for_capacity and d[1].short_type == 0
    assert d[1].reason.startswith("denied: no free node of A1")


# ---- property test ---------------------------------------------------------------------------------------------
PERIOD_S = 60.0
N_APPS, N_OPS = 3, 2


class LossyProvider(BookkeepingProvider):
    """Nodes in memory, as the bookkeeping provider, that the test can lose (a crashed VM)."""

    kind = "lossy"

    def lose(self, index: int) -> str | None:
        ids = sorted(self._nodes)
        if not ids:
            return None
        gone = ids[index % len(ids)]
        del self._nodes[gone]
        return gone


def _world(delay_s: float) -> tuple[Region, list[Application]]:
    ensure_region()
    catalog = NodeTypeCatalog.objects.create(name="prop-nodes")
    NodeType.objects.create(
        catalog=catalog, position=0, name="S", cores=1, memory_mib=1024, speedup=1.0, price_per_hour=1.0
    )
    NodeType.objects.create(
        catalog=catalog, position=1, name="M", cores=2, memory_mib=2048, speedup=1.5, price_per_hour=1.8
    )
    region = Region.objects.create(
        name="prop", catalog=catalog, max_nodes=40, max_new_nodes_per_period=4, provisioning_delay_s=delay_s
    )
    apps = []
    for i in range(N_APPS):
        app = simulated_pipeline(f"p{i}", n_operators=N_OPS, owner=f"owner{i % 2}")
        app.regions.set([region])
        Deployment.objects.filter(operator__application=app).update(region=region, replicas={"S": 1})
        declare(app, "rm", "simple", {"n_idle": 1})
        apps.append(app)
    return region, apps


def _running(region: Region) -> dict[str, int]:
    out: dict[str, int] = {}
    for per in placement.running_replicas(region).values():
        for t, n in per.items():
            out[t] = out.get(t, 0) + n
    return out


def _apply_pending(app: Application) -> None:
    """The tick's phase 2: the engine runs the plan (here: the stored deployments), the tick is done."""
    for tick in Tick.objects.filter(application=app, status=Tick.Status.APPLYING):
        for op, target in (tick.plan or {}).items():
            Deployment.objects.filter(operator__application=app, operator__name=op).update(replicas=target)
        tick.status = Tick.Status.DONE
        tick.save()


def _am_round(app: Application, asks: list[tuple[int, int, int]], slot: int, defer: bool) -> list[tuple]:
    """The AM part of a tick as ``decide.grant`` runs it: read capacity, arbitrate, reserve, record
    the waiting requests; the plan is applied now or (``defer``) by a later action. Returns the waits and
    grants [(kind, node type)]."""
    _apply_pending(app)  # run_tick finishes earlier applying ticks before deciding
    topo = topology(app)
    n = len(topo.type_names)
    ks = [topo.vector(op.deployment.replicas) for op in topo.operators]
    actions = [0] * len(ks)
    for op_i, t, up in asks:
        actions[op_i % len(ks)] = (1 + n + t) if up else (1 + t)
    requests = [Request(i, ks[i], a) for i, a in enumerate(actions)]
    cap = capacity.read(topo, ks)
    arbiter = Arbiter(0.99, 1.0, k_max=6, k_min=1, node_capacity=cap.slots, node_type_names=topo.type_names)
    granted = arbiter.arbitrate(requests)
    assert cap.reserve(topo, requests, granted, slot=slot)
    plan, events = {}, []
    WaitingRequest.objects.filter(application=app).delete()
    for op, r, d in zip(topo.operators, requests, granted, strict=True):
        if d.changed:
            k = ks[r.operator].copy()
            t, delta = action_delta(d.applied, n)
            k[t] += delta
            plan[op.name] = topo.as_dict(k)
            if delta > 0:
                events.append(("grant", topo.type_names[t]))
        elif r.action and d.waits_for_capacity:
            t, _ = action_delta(r.action, n)
            WaitingRequest.objects.create(
                region=op.deployment.region,
                application=app,
                operator=op,
                node_type=topo.type_names[t],
                since_slot=slot,
                last_slot=slot,
                reason=d.reason,
            )
            events.append(("wait", topo.type_names[t]))
    if plan:
        Tick.objects.update_or_create(
            application=app,
            slot=slot,
            defaults={"period_s": PERIOD_S, "status": Tick.Status.APPLYING, "plan": plan},
        )
        if not defer:
            _apply_pending(app)
    return events


def _check(region: Region, events: list[tuple] = ()) -> None:
    doc = RegionControl.objects.get(region=region).capacity
    if not doc:
        return
    rows = RegionNode.objects.filter(region=region)
    running = _running(region)
    for t, c in doc["nodes"].items():
        assert c["ready"] == c["used"] + c["free"], (t, c)
        assert c["ready"] == rows.filter(node_type=t, state="ready").count(), (t, c)
        assert c["pending"] == rows.filter(node_type=t, state="booting").count(), (t, c)
        assert c["used_slots"] >= running.get(t, 0), (t, c, running)
        assert c["ready_slots"] == c["ready"] * {"S": 1, "M": 2}[t]
        assert c["free_slots"] == max(c["ready_slots"] - c["used_slots"], 0)
        assert c["free"] * {"S": 1, "M": 2}[t] <= c["free_slots"]  # a free node is free slots
    for kind, t in events:
        c = doc["nodes"][t]
        if kind == "grant":  # no grant beyond the ready capacity
            assert c["used_slots"] <= c["ready_slots"], (t, c)
        else:  # a request waits only when no node of its type is free
            assert c["free"] == 0 and c["free_slots"] == 0, (t, c)
    assert capacity.node_counts(doc) == doc["nodes"] == capacity.region_node_counts(region.pk)


ACTION = st.one_of(
    st.tuples(st.just("step")),
    st.tuples(st.just("lose"), st.integers(0, 50)),
    st.tuples(st.just("apply"), st.integers(0, N_APPS - 1)),
    st.tuples(
        st.just("ask"),
        st.integers(0, N_APPS - 1),
        st.lists(
            st.tuples(st.integers(0, N_OPS - 1), st.integers(0, 1), st.booleans()), min_size=1, max_size=2
        ),
        st.booleans(),
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(delay_periods=st.integers(0, 2), actions=st.lists(ACTION, min_size=4, max_size=20))
def test_node_accounting_invariants_over_random_request_sequences(delay_periods, actions):
    with transaction.atomic():
        region, apps = _world(delay_periods * PERIOD_S)
        provider = LossyProvider()
        slot = 100
        region_step(region.pk, slot, provider=provider)
        _check(region)
        for action in actions:
            if action[0] == "step":
                slot += 1
                region_step(region.pk, slot, provider=provider)
                _check(region)
            elif action[0] == "lose":
                provider.lose(action[1])
            elif action[0] == "apply":
                _apply_pending(apps[action[1]])
                _check(region)
            else:
                _, i, asks, defer = action
                events = _am_round(apps[i], asks, slot, defer)
                _check(region, events)
        # losses are seen at the next step; released/lost nodes are in no count
        slot += 1
        region_step(region.pk, slot, provider=provider)
        _check(region)
        # (a booting node the provider does not list yet is kept until one period after its ready time)
        live = {n.node_id for n in provider.nodes()}
        recorded = set(
            RegionNode.objects.filter(region=region, state="ready").values_list("node_id", flat=True)
        )
        assert recorded <= live
        transaction.set_rollback(True)


def test_waits_in_the_replayed_demo_never_find_a_free_node():
    """The demo's shape over the real tick: three operators under an exploring OM, the region's RM stepping
    every period with a provisioning delay of 3 periods; every wait finds no free node of its type (or, for a
    batch that waits to reconfigure together, fewer than the batch adds), and no type ever runs more replicas
    than its ready slots."""
    app = simulated_pipeline(
        "demo-like", n_operators=3, om_policy="ql-pds-plus", period_s=10.0, rate_scale=0.6
    )
    region = Region.objects.get(name="region-a")
    Region.objects.filter(pk=region.pk).update(provisioning_delay_s=30.0)
    waits = 0
    for slot in range(1000, 1060):
        region_step(region.pk, slot)
        _check_real(region)
        run_tick(app.pk, slot)
        for reason in Decision.objects.filter(application=app, slot=slot).values_list("reason", flat=True):
            if reason.startswith("waiting for capacity") and "no free node of " in reason:
                waits += 1
                t = reason.split("no free node of ")[1].split(" ")[0]
                c = counts(region)[t]
                if "for the whole batch" in reason:
                    # free nodes, fewer than the batch adds: the batch waits to reconfigure together
                    free = int(reason.split("for the whole batch (")[1].split(" free")[0])
                    assert c["free_slots"] == free, (slot, reason, c)
                else:
                    assert c["free"] == 0 and c["free_slots"] == 0, (slot, reason, c)
        _check_real(region)
    assert waits > 0  # the OM explored types the region had no node of


def _check_real(region: Region) -> None:
    doc = RegionControl.objects.get(region=region).capacity
    running = _running(region)
    for t, c in doc["nodes"].items():
        assert c["ready"] == c["used"] + c["free"]
        assert c["used_slots"] >= running.get(t, 0)
        assert running.get(t, 0) <= c["ready_slots"], (t, c, running)
    assert np.all([c["unplaced"] == 0 for c in doc["nodes"].values()])


def test_over_node_limit_counts_what_runs_what_was_granted_and_what_waits_in_nodes():
    """``capacity.over_node_limit`` (the tick's ``Observation.node_limited``): nodes needed = per type
    ceil((replicas running + granted + waiting) / cores), against the region's node limit."""
    doc = capacity.build(
        1,
        5,
        {
            "A1": {"cores": 1, "ready": 4, "pending": 0, "idle": 1},
            "A2": {"cores": 2, "ready": 2, "pending": 1, "idle": 0},
        },
        {7: {"A1": 3, "A2": 3}},
        [{"app": 8, "slot": 5, "operator": "x", "node_type": "A1", "n": 1}],
        {},
    )
    # runs: A1 3 + granted 1 = 4 nodes, A2 3 slots = 2 nodes: 6 nodes
    assert not capacity.over_node_limit(doc, 6, {})
    assert capacity.over_node_limit(doc, 5, {})
    assert not capacity.over_node_limit(doc, 6, {"A2": 1})  # the fourth A2 slot fits the second node's core
    assert capacity.over_node_limit(doc, 6, {"A2": 2})
    assert capacity.over_node_limit(doc, 7, {"A1": 1, "A2": 2})
    assert not capacity.over_node_limit({"format": 1}, 0, {"A1": 5})  # no accounting: never limited
