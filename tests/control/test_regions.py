"""Region step (RM + IM) with the declared policies, per-region period, realised through a NodeProvider with a
durable node record; the AM waits for capacity the RM/IM has not provisioned yet."""

from __future__ import annotations

import pytest

from autoscaler.control.builders import ensure_region, simulated_pipeline
from autoscaler.control.models import (
    ApplicationControl,
    Decision,
    RegionControl,
    RegionNode,
    RegionTick,
    WaitingRequest,
)
from autoscaler.control.regions import region_period_s, region_step, set_rm_period
from autoscaler.control.tick import run_tick
from autoscaler.models import Application, NodeTypeCatalog, Region
from connectors.infrastructure import Node, NodeProvider, NodeSpec, ProviderError

pytestmark = pytest.mark.django_db
BUSY = 3.0


class ScriptedProvider(NodeProvider):
    """A provider whose nodes, busy flags and failures the test controls (records every call)."""

    kind = "scripted"

    def __init__(self, nodes: dict[str, str], busy: set[str] = frozenset()) -> None:
        self.state = {i: Node(i, t, i in busy) for i, t in nodes.items()}
        self.fail_acquire = False
        self.calls: list[tuple] = []

    def nodes(self) -> list[Node]:
        return list(self.state.values())

    def acquire(self, spec: NodeSpec, count: int) -> list[Node]:
        self.calls.append(("acquire", spec.node_type, count))
        if self.fail_acquire:
            raise ProviderError("quota exceeded at the cloud")
        started = [Node(f"s-{len(self.state) + i}", spec.node_type) for i in range(count)]
        self.state.update({n.node_id: n for n in started})
        return started

    def release(self, node_ids: list[str]) -> list[str]:
        self.calls.append(("release", tuple(node_ids)))
        stopped = [i for i in node_ids if i in self.state and not self.state[i].busy]
        for i in stopped:
            del self.state[i]
        return stopped


def declare(app: Application, level: str, name: str, params: dict | None = None) -> None:
    app.policies = {**app.policies, level: {"name": name, "params": params or {}}}
    app.save()


def test_declared_rm_policy_first_declared_wins_with_a_warning():
    first = simulated_pipeline("first", n_operators=1)
    second = simulated_pipeline("second", n_operators=1)
    declare(first, "rm", "simple", {"n_idle": 2})
    declare(second, "rm", "simple", {"n_idle": 0})
    region = Region.objects.get(name="region-a")
    out = region_step(region.pk, 10)
    row = RegionTick.objects.get(region=region, slot=10)
    assert row.state["rm"] == {
        "policy": "simple",
        "params": {"n_idle": 2},
        "source": "declared by application 'first'",
    }
    assert any("'second'" in w and "first declared wins" in w for w in row.warnings)
    # adopted the 2 A1 nodes the deployments use, acquired 2 idle nodes (n_idle=2) of the cheapest type
    assert (
        row.decisions
        == out["decisions"]
        == [
            {
                "node_type": "A2",
                "requested": 2,
                "granted": 2,
                "executed": 2,
                "reason": row.decisions[0]["reason"],
            }
        ]
    )
    nodes = RegionNode.objects.filter(region=region)
    assert sorted(nodes.values_list("node_type", "state")) == [("A1", "ready")] * 2 + [("A2", "ready")] * 2
    assert region_step(region.pk, 10)["duplicate"] is True
    assert RegionNode.objects.filter(region=region).count() == 4
    control = RegionControl.objects.get(region=region)
    assert control.capacity["ready_slots"] == {"A1": 2, "A2": 2, "A3": 0}
    assert control.capacity["used_slots"] == {"A1": 2, "A2": 0, "A3": 0}
    # the declaration changes: the agent restarts and the step says so
    declare(first, "rm", "simple", {"n_idle": 1})
    region_step(region.pk, 11)
    row = RegionTick.objects.get(region=region, slot=11)
    assert any("starts afresh" in w for w in row.warnings)
    assert row.decisions[0]["requested"] == -1 and row.decisions[0]["executed"] == -1
    assert RegionNode.objects.filter(region=region, state="released").count() == 1


def test_provisioning_delay_is_honoured_and_the_record_is_durable():
    app = simulated_pipeline("slow", n_operators=1)
    region = Region.objects.get(name="region-a")
    Region.objects.filter(pk=region.pk).update(provisioning_delay_s=90.0)
    assert region_period_s(region) == 60.0
    region_step(region.pk, 10)  # adopts op0's A1 node, acquires one idle A2 (booting until 600 + 90 s)
    booting = RegionNode.objects.get(region=region, node_type="A2")
    assert booting.state == "booting" and booting.ready_at_s == 690.0
    region_step(region.pk, 11)  # t = 660 s: still booting, counted as pending: no second acquisition
    row = RegionTick.objects.get(region=region, slot=11)
    assert row.state["pending"] == [0, 1, 0] and row.decisions == []
    assert RegionControl.objects.get(region=region).capacity["ready_slots"]["A2"] == 0
    region_step(region.pk, 12)  # t = 720 s: ready
    booting.refresh_from_db()
    assert booting.state == "ready"
    assert RegionTick.objects.get(region=region, slot=12).state["active"] == [1, 1, 0]
    assert app.pk  # the application's deployment is what made the A1 node busy


def test_release_only_idle_nodes_and_provider_failures_are_recorded():
    ensure_region()
    catalog = NodeTypeCatalog.objects.get(name="infra-a")
    region = Region.objects.create(name="scripted", catalog=catalog, max_nodes=10, max_new_nodes_per_period=5)
    provider = ScriptedProvider({"n1": "A2", "n2": "A2", "n3": "A2"}, busy={"n3"})
    region_step(region.pk, 10, provider=provider)  # adopts 3 nodes; 2 idle > n_idle=1: release 1
    row = RegionTick.objects.get(region=region, slot=10)
    assert {"adopted": "n1"} in row.executed and row.state["idle"] == [0, 2, 0]
    released = [c for c in provider.calls if c[0] == "release"]
    assert released == [("release", ("n2",))]  # newest idle node; the busy n3 is never offered
    assert set(provider.state) == {"n1", "n3"}
    assert RegionNode.objects.get(region=region, node_id="n2").state == "released"
    # a node disappears at the provider: recorded as lost; the busy one is not idle -> acquire, which fails
    del provider.state["n1"]
    provider.fail_acquire = True
    region_step(region.pk, 11, provider=provider)
    row = RegionTick.objects.get(region=region, slot=11)
    assert RegionNode.objects.get(region=region, node_id="n1").state == "lost"
    assert row.decisions[0]["granted"] == 1 and row.decisions[0]["executed"] == 0
    assert "quota exceeded" in RegionControl.objects.get(region=region).last_error
    assert not RegionNode.objects.filter(region=region, state__in=["booting", "ready"]).exclude(node_id="n3")


def test_scale_out_waits_for_capacity_then_proceeds_when_the_rm_provisions():
    app = simulated_pipeline("waits", n_operators=1, rate_scale=BUSY)
    declare(app, "rm", "simple", {"n_idle": 0})
    region = Region.objects.get(name="region-a")
    region_step(region.pk, 9)  # managed from now on: 1 A1 node (op0's), no idle node
    run_tick(app.pk, 10)
    d = Decision.objects.get(application=app, slot=10)
    assert d.proposal["action"] != 0 and d.outcome == "denied" and not d.granted
    assert d.reason.startswith("waiting for capacity in region region-a: no free node of A2")
    waiting = WaitingRequest.objects.get(operator=d.operator)
    assert (waiting.node_type, waiting.since_slot, waiting.slots) == ("A2", 10, 1)
    region_step(region.pk, 10)  # the unsatisfied request is counted and covered
    row = RegionTick.objects.get(region=region, slot=10)
    assert row.state["unsatisfied"] == 1 and row.state["waiting_slots"] == 1
    assert row.decisions[0]["node_type"] == "A2" and row.decisions[0]["executed"] == 1
    run_tick(app.pk, 11)
    d = Decision.objects.get(application=app, slot=11)
    assert d.granted and d.outcome == "applied", d.reason
    assert not WaitingRequest.objects.filter(application=app).exists()


def test_a_wait_denied_by_the_budget_keeps_its_request_and_the_rm_keeps_the_node():
    """Before: a scale-out waiting for capacity that the AM then denied for the reconfiguration budget (the node
    had arrived, the token had not) stopped waiting, so the RM released the node it had just provisioned as idle
    and the next period waited again (bench_loop ramp: 16 A3 nodes released in one such period)."""
    app = simulated_pipeline("waits-budget", n_operators=1, rate_scale=BUSY)
    declare(app, "rm", "simple", {"n_idle": 0})
    region = Region.objects.get(name="region-a")
    region_step(region.pk, 9)
    run_tick(app.pk, 10)
    assert WaitingRequest.objects.get(application=app).node_type == "A2"
    region_step(region.pk, 10)  # the A2 node the request waits for
    assert RegionNode.objects.filter(region=region, node_type="A2", state="ready").count() == 1
    ApplicationControl.objects.filter(application=app).update(bucket_tokens=0.0)
    run_tick(app.pk, 11)
    d = Decision.objects.get(application=app, slot=11)
    assert not d.granted and "reconfiguration budget exhausted" in d.reason, d.reason
    waiting = WaitingRequest.objects.get(application=app)
    assert (waiting.node_type, waiting.since_slot, waiting.last_slot) == ("A2", 10, 11)
    region_step(region.pk, 11)
    assert RegionNode.objects.filter(region=region, node_type="A2", state="ready").count() == 1
    ApplicationControl.objects.filter(application=app).update(bucket_tokens=3.0)
    run_tick(app.pk, 12)
    d = Decision.objects.get(application=app, slot=12)
    assert d.granted and d.outcome == "applied", d.reason
    assert not WaitingRequest.objects.filter(application=app).exists()


def test_per_region_rm_period(settings):
    simulated_pipeline("periodic", n_operators=1, period_s=30.0)
    region = Region.objects.get(name="region-a")
    assert region_period_s(region) == 30.0  # the shortest OM period of its running applications
    set_rm_period(region, 300.0)
    assert region_period_s(region) == 300.0
    with pytest.raises(ValueError, match="rm_period_s: must be a number of seconds > 0"):
        set_rm_period(region, 0)
    from autoscaler.celery import app as celery_app
    from autoscaler.control.tasks import dispatch

    settings.AUTOSCALER_DISPATCH_SPREAD = 0.0
    celery_app.conf.task_always_eager = True
    try:
        dispatch(now=1_800_000_000.0)
    finally:
        celery_app.conf.task_always_eager = False
    assert list(RegionTick.objects.filter(region=region).values_list("slot", "period_s")) == [
        (1_800_000_000 // 300, 300.0)
    ]


def test_region_endpoint_shows_nodes_steps_and_sets_the_period():
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    app = simulated_pipeline("shown", n_operators=1)
    declare(app, "rm", "simple", {"n_idle": 1})
    region = Region.objects.get(name="region-a")
    region_step(region.pk, 10)
    user = app.owner
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    body = client.get("/api/v1/control/regions/region-a/").json()
    assert body["rm"] == {"policy": "simple", "params": {"n_idle": 1}}
    assert [n["node_type"] for n in body["nodes"]] == ["A1", "A2"]
    assert body["steps"][0]["slot"] == 10 and body["steps"][0]["decisions"][0]["executed"] == 1
    assert client.get("/api/v1/control/regions/nowhere/").status_code == 404
    assert (
        client.put("/api/v1/control/regions/region-a/", {"rmPeriodS": 120}, format="json").status_code == 403
    )
    admin = get_user_model().objects.create_user("root", is_staff=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin).key}")
    bad = client.put("/api/v1/control/regions/region-a/", {"rmPeriodS": -5}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["loc"] == "rmPeriodS"
    assert RegionControl.objects.get(region=region).rm_period_s is None
    ok = client.put("/api/v1/control/regions/region-a/", {"rmPeriodS": 120}, format="json")
    assert ok.status_code == 200 and ok.json()["rm_period_s"] == 120.0


def test_connectors_bookkeeping_provider_realises_the_grants_and_paused_waits_do_not_count():
    from connectors.infrastructure import BookkeepingProvider

    app = simulated_pipeline("kept", n_operators=1)
    region = Region.objects.get(name="region-a")
    provider = BookkeepingProvider()
    # nothing runs at the provider yet: op0's replica has no node, which the RM acquires (an A1: the type it runs
    # on, counted as waiting demand), and n_idle=1 (A2)
    region_step(region.pk, 10, provider=provider)
    row = RegionTick.objects.get(region=region, slot=10)
    assert row.state["unplaced"] == {"A1": 1} and row.state["waiting"] == [1, 0, 0]
    assert sorted((n.node_type, n.busy) for n in provider.nodes()) == [("A1", False), ("A2", False)]
    rows = {r.node_type: r for r in RegionNode.objects.filter(region=region)}
    assert (rows["A2"].node_id, rows["A2"].state, rows["A2"].provider) == (
        [n.node_id for n in provider.nodes() if n.node_type == "A2"][0],
        "ready",
        "bookkeeping",
    )
    WaitingRequest.objects.create(
        region=region,
        application=app,
        operator=app.operators.get(name="op0"),
        node_type="A2",
        since_slot=10,
        last_slot=10,
    )
    region_step(region.pk, 11, provider=provider)
    assert RegionTick.objects.get(region=region, slot=11).state["unsatisfied"] == 1
    Application.objects.filter(pk=app.pk).update(state="paused")
    region_step(region.pk, 12, provider=provider)
    assert RegionTick.objects.get(region=region, slot=12).state["unsatisfied"] == 0


def test_two_applications_never_get_more_than_the_provisioned_slots():
    one = simulated_pipeline("one", n_operators=1, rate_scale=BUSY)
    two = simulated_pipeline("two", n_operators=1, rate_scale=BUSY)
    declare(one, "rm", "simple", {"n_idle": 1})
    region = Region.objects.get(name="region-a")
    region_step(region.pk, 9)  # 2 A1 nodes adopted (one per app), 1 idle A2 acquired: one free A2 slot
    assert RegionControl.objects.get(region=region).capacity["ready_slots"]["A2"] == 1
    run_tick(one.pk, 10)
    run_tick(two.pk, 10)
    d1 = Decision.objects.get(application=one, slot=10)
    d2 = Decision.objects.get(application=two, slot=10)
    assert d1.granted and d1.outcome == "applied"
    assert not d2.granted and d2.reason.startswith("waiting for capacity in region region-a")
    cap = RegionControl.objects.get(region=region).capacity
    assert cap["grants"] == [{"app": one.pk, "slot": 10, "operator": "op0", "node_type": "A2", "n": 1}]
    assert cap["version"] == 2  # two's tick changed nothing: it wrote nothing
    assert cap["nodes"]["A2"] == {
        "ready": 1,
        "pending": 0,
        "used": 1,
        "free": 0,
        "ready_slots": 1,
        "used_slots": 1,
        "free_slots": 0,
        "unplaced": 0,
    }


def test_a_stale_capacity_read_is_refused_and_the_tick_re_arbitrates():
    from autoscaler.control import capacity
    from autoscaler.control.topology import topology
    from policies.am.arbiter import Decision as AMDecision
    from policies.am.arbiter import Request

    app = simulated_pipeline("stale", n_operators=1)
    region = Region.objects.get(name="region-a")
    region_step(region.pk, 9)
    topo = topology(app)
    k = topo.vector({"A1": 1})
    read = capacity.read(topo, [k])
    assert read.slots.tolist() == [1, 1, 0]  # own A1 replica + the idle A2 node
    up = 1 + len(topo.type_names) + 1  # +1 replica of type index 1 (A2)
    grant = [AMDecision(0, up, up, "granted")]
    stale = capacity.read(topo, [k])
    assert read.reserve(topo, [Request(0, k, up)], grant) is True
    assert stale.reserve(topo, [Request(0, k, up)], grant) is False  # someone reserved meanwhile
    # the grant holds the one A2 slot: another application sees none free; this one sees it among its own
    # replicas once applied (its tick observes k = A1 + A2), so it cannot take a second one
    other = simulated_pipeline("other", n_operators=1)
    other_topo = topology(other)
    assert capacity.read(other_topo, [k]).slots.tolist() == [0, 0, 0]  # (its A1 node comes at the next step)
    applied = topo.vector({"A1": 1, "A2": 1})
    assert capacity.read(topo, [applied]).slots.tolist() == [1, 1, 0]
    assert capacity.read(topo, [k], freeze=True).slots.tolist() == [1, 0, 0]


def test_rm_agent_state_carries_over_between_steps():
    from policies.base import decode_state

    app = simulated_pipeline("learns", n_operators=1)
    declare(app, "rm", "model-based", {"u_quantum": 0.5})
    region = Region.objects.get(name="region-a")
    Region.objects.filter(pk=region.pk).update(max_nodes=6)
    for slot in (10, 11, 12):
        region_step(region.pk, slot)
    metas = [
        decode_state(bytes(RegionTick.objects.get(region=region, slot=s).agent_state))[0]
        for s in (10, 11, 12)
    ]
    assert [m["t"] for m in metas] == [0, 1, 2]  # learning steps: the first step has nothing to learn from
    assert all(m["policy"] == "model-based" and m["params"]["u_quantum"] == 0.5 for m in metas)
    assert not RegionTick.objects.get(region=region, slot=12).warnings


class LateProvider(ScriptedProvider):
    """Started nodes show up in ``nodes()`` only after ``visible_after`` more listings (cluster registration)."""

    def __init__(self) -> None:
        super().__init__({})
        self.hidden: dict[str, int] = {}

    def acquire(self, spec: NodeSpec, count: int) -> list[Node]:
        started = super().acquire(spec, count)
        self.hidden.update({n.node_id: 2 for n in started})
        return started

    def nodes(self) -> list[Node]:
        out = [n for i, n in self.state.items() if self.hidden.get(i, 0) <= 0]
        self.hidden = {i: c - 1 for i, c in self.hidden.items()}
        return out


def test_a_booting_node_that_registers_late_is_not_lost_and_bad_provider_settings_are_recorded():
    ensure_region()
    catalog = NodeTypeCatalog.objects.get(name="infra-a")
    region = Region.objects.create(
        name="late", catalog=catalog, max_nodes=10, max_new_nodes_per_period=5, provisioning_delay_s=60.0
    )
    provider = LateProvider()
    region_step(region.pk, 10, provider=provider)  # acquires 1 (n_idle=1), booting until 660 s
    node = RegionNode.objects.get(region=region)
    assert node.state == "booting"
    region_step(region.pk, 11, provider=provider)  # not listed yet, but within its grace: kept
    node.refresh_from_db()
    assert node.state in ("booting", "ready") and provider.calls.count(("acquire", "A2", 1)) == 1
    region_step(region.pk, 12, provider=provider)
    node.refresh_from_db()
    assert node.state == "ready"
    broken = Region.objects.create(
        name="broken",
        catalog=catalog,
        max_nodes=10,
        max_new_nodes_per_period=5,
        provider={"kind": "spark-standalone", "settings": {}},
    )
    out = region_step(broken.pk, 10)
    assert out["decisions"] == [] and "provider unavailable" in out["error"]
    assert "masterUrl" in RegionControl.objects.get(region=broken).last_error
    assert not RegionNode.objects.filter(region=broken).exists()


def test_foreign_node_types_disable_capacity_enforcement_with_a_warning():
    ensure_region()
    catalog = NodeTypeCatalog.objects.get(name="infra-a")
    region = Region.objects.create(
        name="own-cluster", catalog=catalog, max_nodes=10, max_new_nodes_per_period=5
    )
    provider = ScriptedProvider({"w1": "4c-8192m", "w2": "A2"}, busy={"w1"})
    region_step(region.pk, 10, provider=provider)
    row = RegionTick.objects.get(region=region, slot=10)
    assert any("outside the catalog (4c-8192m)" in w for w in row.warnings)
    assert RegionControl.objects.get(region=region).capacity == {}
    assert RegionNode.objects.get(region=region, node_id="w1").state == "ready"
