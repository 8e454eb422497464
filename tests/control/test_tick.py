"""The synchronous tick (``run_tick``): idempotence, no-data periods, dry run, agent state, aggregates, rails."""

from __future__ import annotations

import pytest

from autoscaler.control import aggregates
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.connectors import ConnectorUnavailable, build_connector
from autoscaler.control.models import AgentState, ApplicationControl, Decision, SimulatedEngine, Tick
from autoscaler.control.rails import RailsError, parse_rails
from autoscaler.control.tick import run_tick
from policies.registry import om_choice

pytestmark = pytest.mark.django_db

# slot 0 of the taxi trace is quiet; the rate scale makes one A1 replica (180 tuples/s at 5 ms) too small
BUSY = 3.0


def engine(app) -> SimulatedEngine:
    return SimulatedEngine.objects.get(application=app)


def test_tick_decides_for_every_operator_and_scales_up_an_overloaded_pipeline():
    app = simulated_pipeline("busy", n_operators=2, rate_scale=BUSY)
    out = run_tick(app.pk, 10)
    assert out.status == "done" and out.decisions == 2
    rows = list(Decision.objects.filter(application=app, slot=10))
    assert {d.operator.name for d in rows} == {"op0", "op1"}
    assert all(d.violated for d in rows)
    assert all(d.resource_cost > 0 for d in rows)
    applied = [d for d in rows if d.outcome == "applied"]
    assert applied, [d.reason for d in rows]
    assert engine(app).applies == 1
    for d in applied:
        assert sum(engine(app).deployments[d.operator.name].values()) == 2
        assert d.proposal["explanation"]["policy"] == "threshold"


def test_a_tick_delivered_twice_applies_once_and_learns_once():
    app = simulated_pipeline("twice", n_operators=2, rate_scale=BUSY)
    first = run_tick(app.pk, 10)
    assert first.applied and engine(app).applies == 1
    steps = {a.operator_id: (a.steps, bytes(a.blob)) for a in AgentState.objects.all()}
    again = run_tick(app.pk, 10)
    assert not first.duplicate and again.duplicate
    assert engine(app).applies == 1
    assert Decision.objects.filter(application=app, slot=10).count() == 2
    assert {a.operator_id: (a.steps, bytes(a.blob)) for a in AgentState.objects.all()} == steps
    run_tick(app.pk, 11)
    assert all(a.steps == 1 for a in AgentState.objects.all())


def test_missing_metrics_record_no_data_take_no_action_and_do_not_learn():
    app = simulated_pipeline("gap", n_operators=2, rate_scale=BUSY, om_policy="ql")
    run_tick(app.pk, 10)
    SimulatedEngine.objects.filter(application=app).update(faults={"missingSlots": [10]})
    before = {a.operator_id: bytes(a.blob) for a in AgentState.objects.all()}
    applies = engine(app).applies
    out = run_tick(app.pk, 11)  # observes period 10
    assert out.status == "no_data"
    assert {d.outcome for d in Decision.objects.filter(slot=11)} == {"no_data"}
    assert engine(app).applies == applies
    assert {a.operator_id: bytes(a.blob) for a in AgentState.objects.all()} == before
    assert ApplicationControl.objects.get(application=app).no_data_periods == 1


def test_dry_run_records_decisions_and_never_calls_apply():
    app = simulated_pipeline("dry", n_operators=2, rate_scale=BUSY, dry_run=True)
    for slot in range(10, 14):
        run_tick(app.pk, slot)
    assert engine(app).applies == 0
    outcomes = set(Decision.objects.filter(application=app).values_list("outcome", flat=True))
    assert "dry_run" in outcomes


def test_agent_state_survives_a_restart_bit_exactly():
    app = simulated_pipeline("durable", n_operators=1, rate_scale=BUSY, om_policy="ql-pds")
    for slot in range(10, 15):
        run_tick(app.pk, slot)
    agent = AgentState.objects.get()
    from autoscaler.control.agents import load_policy
    from autoscaler.control.topology import topology

    topo = topology(app)
    control = ApplicationControl.objects.get(application=app)
    policy = load_policy(agent, topo.operators[0], topo, control, parse_rails(control.rails))
    assert policy.state_bytes() == bytes(agent.blob)
    assert agent.steps == policy.t == 4


def test_aggregates_are_incremental_and_match_the_decision_log():
    app = simulated_pipeline("agg", n_operators=2, rate_scale=BUSY)
    control = ApplicationControl.objects.get_or_create(application=app)[0]
    control.window = 3
    control.save()
    for slot in range(10, 16):
        run_tick(app.pk, slot)
    control.refresh_from_db()
    s = aggregates.summary(control)
    assert s["periods"] == 6 and s["window"]["periods"] == 3
    costs = [
        sum(Decision.objects.filter(application=app, slot=slot).values_list("resource_cost", flat=True))
        for slot in range(10, 16)
    ]
    assert control.total_cost == pytest.approx(sum(costs))
    assert control.window_cost == pytest.approx(sum(costs[-3:]))
    assert s["cost_per_hour"] == pytest.approx(sum(costs) * 3600 / (6 * 60))


def test_freeze_window_and_max_replicas_deny_changes_with_a_reason():
    app = simulated_pipeline("frozen", n_operators=1, rate_scale=BUSY)
    ApplicationControl.objects.create(
        application=app, rails={"freezeWindows": [{"start": "00:00", "end": "23:59"}]}
    )
    run_tick(app.pk, 10)
    d = Decision.objects.get(slot=10)
    assert d.outcome == "denied" and "freeze window" in d.reason
    assert engine(app).applies == 0
    ApplicationControl.objects.filter(application=app).update(rails={"maxReplicas": {"op0": 1}})
    run_tick(app.pk, 11)
    d = Decision.objects.get(slot=11)
    assert d.outcome == "no_change" and engine(app).applies == 0


def test_refused_reconfiguration_is_rolled_back_and_unlearned():
    app = simulated_pipeline("refused", n_operators=1, rate_scale=BUSY)
    build_connector(app)  # creates the engine row
    SimulatedEngine.objects.filter(application=app).update(faults={"refuseApply": True})
    run_tick(app.pk, 10)
    d = Decision.objects.get(slot=10)
    assert d.proposal["action"] != 0
    assert d.outcome == "rolled_back" and "refused" in d.reason
    assert sum(engine(app).deployments["op0"].values()) == 1
    assert Tick.objects.get(slot=10).result["ok"] is False


def test_rails_are_validated_with_the_field_named():
    with pytest.raises(RailsError, match="rails.scaleDownDelayS"):
        parse_rails({"scaleDownDelayS": -1})
    with pytest.raises(RailsError, match="rails.maxReplicas.nope: unknown operator"):
        parse_rails({"maxReplicas": {"nope": 2}}, ["a"])
    with pytest.raises(RailsError, match="rails.freezeWindows.0.start"):
        parse_rails({"freezeWindows": [{"start": "25:00", "end": "01:00"}]})


def test_a_spark_application_whose_job_never_reported_records_no_data():
    app = simulated_pipeline("spark", n_operators=1)
    app.engine, app.connector = "spark", {}
    app.save()
    assert build_connector(app).engine == "spark"
    out = run_tick(app.pk, 10)
    assert out.status == "no_data" and out.decisions == 1
    assert "no progress from the Spark job" in Tick.objects.get(application=app, slot=10).error
    assert Decision.objects.get(application=app, slot=10).outcome == "no_data"
    assert not AgentState.objects.filter(steps__gt=0).exists()


def test_an_engine_without_connector_module_is_unavailable(monkeypatch):
    import sys

    app = simulated_pipeline("flinkless", n_operators=1)
    app.engine = "flink"
    monkeypatch.setitem(sys.modules, "connectors.flink.connector", None)
    with pytest.raises(ConnectorUnavailable, match="flink connector is not available"):
        build_connector(app)


def test_scale_down_delay_blocks_removals_after_a_scale_up():
    app = simulated_pipeline("delay", n_operators=1, rate_scale=BUSY)
    ApplicationControl.objects.create(application=app, rails={"scaleDownDelayS": 1e9})
    run_tick(app.pk, 10)  # overloaded: scale up
    assert Decision.objects.get(slot=10).outcome == "applied"
    app.connector = {**app.connector, "rateScale": 0.05}  # the load drops: the policy wants to remove one
    app.save()
    quiet = 11
    run_tick(app.pk, quiet)
    d = Decision.objects.get(slot=quiet)
    assert d.proposal["action"] != 0 and d.outcome == "denied"
    assert "scale-down delay" in d.reason


def test_ineffective_scale_up_blocks_further_scale_ups():
    app = simulated_pipeline("ineffective", n_operators=1, rate_scale=BUSY, om_policy="threshold-speedup")
    ApplicationControl.objects.create(
        application=app, rails={"ineffectiveScaleUpRatio": 0.5, "ineffectiveBlockS": 600}
    )
    build_connector(app)
    # the engine's nodes deliver a fraction of their nominal speed: added replicas barely add capacity
    SimulatedEngine.objects.filter(application=app).update(faults={"speedupOverride": {"A3": 0.05}})
    run_tick(app.pk, 10)
    first = Decision.objects.get(slot=10)
    assert first.outcome == "applied" and "A3" in first.proposal["target"]
    run_tick(app.pk, 11)
    d = Decision.objects.get(slot=11)
    assert d.outcome == "denied" and "ineffective scale-up" in d.reason


def test_rollback_when_the_job_fails_after_a_reconfiguration():
    app = simulated_pipeline("rollback", n_operators=1, rate_scale=BUSY)
    run_tick(app.pk, 10)
    assert sum(engine(app).deployments["op0"].values()) == 2
    SimulatedEngine.objects.filter(application=app).update(faults={"failingOperators": ["op0"]})
    out = run_tick(app.pk, 11)
    tick = Tick.objects.get(application=app, slot=11)
    assert out.status == "no_data" and "rolling back" in tick.error
    assert engine(app).deployments["op0"] == {"A1": 1}
    assert tick.result["ok"] is True


@pytest.mark.parametrize(
    "faults,rolled_back",
    [
        ({"jobState": "FAILED"}, True),  # the whole job failed, as Flink reports it (no per-operator text)
        ({"jobState": "RESTARTING"}, False),  # a restart is not a failure: the realizer verifies the rescale
        ({"missingSlots": [10]}, False),  # a metrics outage says nothing about the reconfiguration
    ],
)
def test_the_rollback_rail_reads_the_typed_cause_not_the_reason_text(faults, rolled_back):
    app = simulated_pipeline(f"cause-{len(faults)}-{rolled_back}", n_operators=1, rate_scale=BUSY)
    run_tick(app.pk, 10)
    scaled = dict(engine(app).deployments["op0"])
    assert sum(scaled.values()) == 2
    SimulatedEngine.objects.filter(application=app).update(faults=faults)
    out = run_tick(app.pk, 11)
    tick = Tick.objects.get(application=app, slot=11)
    assert out.status == "no_data"
    assert ("rolling back" in tick.error) is rolled_back
    assert engine(app).deployments["op0"] == ({"A1": 1} if rolled_back else scaled)
    assert tick.metrics["cause"] in ("job_failing", "job_not_running", "metrics_missing")


def test_an_application_that_declares_no_om_runs_the_recommended_one_and_steps_several_replicas():
    """One set of defaults: no ``spec.policies.om`` means the recommended OM (``model-based-multistep``), whose
    multi-replica step goes through the real tick as one granted reconfiguration, node accounting included."""
    app = simulated_pipeline("default-om", n_operators=1, rate_scale=BUSY)  # ~940 tuples/s: 5 x A1 carry it
    app.policies = {"am": app.policies["am"]}  # no OM declared
    app.save()
    for slot in range(10, 24):
        run_tick(app.pk, slot)
    rows = list(Decision.objects.filter(application=app).order_by("slot"))
    assert {d.proposal["explanation"]["policy"] for d in rows} == {"model-based"}
    # overloaded from its first period (it never saw a period within its bound), it still leaves the overload
    # and the backlog drains (the policy once kept 1 x A1 + 1 x A2 at 100 % violations: its per-replica bound
    # was the midpoint of [0, measured capacity])
    assert not any(d.violated for d in rows[-3:]), [(d.slot, d.deployment, d.reason) for d in rows]
    steps = [d for d in rows if d.proposal["action"] == -1 and d.outcome == "applied"]
    assert steps, [(d.proposal["explanation"]["action"], d.reason) for d in rows]
    d = steps[0]
    assert d.proposal["explanation"]["action"].startswith("in one step: ")
    # several new replicas in one reconfiguration (of the type in place, or of the type the best one-replica
    # action would bring: 1 x A1 -> 2 x A2 is two new replicas)
    added = sum(max(n - d.deployment.get(t, 0), 0) for t, n in d.proposal["target"].items())
    assert added >= 2, (d.deployment, d.proposal["target"])
    assert sum(engine(app).deployments["op0"].values()) >= sum(d.proposal["target"].values())


def test_the_downtime_of_an_applied_change_reaches_the_oms_which_settle_through_its_catch_up():
    """The connector's measured downtime of a reconfiguration is kept with the application and given to every OM
    as ``Observation.restart_s`` (with the period): model-based (``restart_aware``) then lets the periods a
    restart's catch-up spans teach no bound (here ceil(90 s / 60 s) = 2 after the change), durably."""
    trend = om_choice("model-based-trend")
    app = simulated_pipeline(
        "restarts", n_operators=1, om_policy=trend["name"], om_params=trend["params"], rate_scale=BUSY
    )
    app.connector = {**app.connector, "downtimeS": 90.0}
    app.save()
    slot = 10
    while not Decision.objects.filter(application=app, outcome="applied").exists():
        assert slot < 30, list(Decision.objects.filter(application=app).values_list("reason", flat=True))
        run_tick(app.pk, slot)
        slot += 1
    memory = ApplicationControl.objects.get(application=app).operator_memory
    assert memory["__app__"]["last_downtime_s"] == 90.0
    # kept by kind too: the change either swapped a node type or only changed replica counts
    change = Decision.objects.get(application=app, outcome="applied")
    swapped = {t for t, n in change.deployment.items() if n} != {t for t, n in change.applied.items() if n}
    kind, other = ("swap", "resize") if swapped else ("resize", "swap")
    assert memory["__app__"][f"{kind}_downtime_s"] == 90.0 and f"{other}_downtime_s" not in memory["__app__"]
    run_tick(app.pk, slot)  # the period in which the new deployment ran
    from autoscaler.control.agents import load_policy
    from autoscaler.control.topology import topology

    topo = topology(app)
    control = ApplicationControl.objects.get(application=app)
    agent = AgentState.objects.get(operator=topo.operators[0])
    policy = load_policy(agent, topo.operators[0], topo, control, parse_rails(control.rails))
    assert policy._settle_left == 2, policy._settle_left


def test_every_om_learns_how_many_periods_ago_the_application_changed(monkeypatch):
    """``Observation.periods_since_change``: on an engine that restarts the whole job (Flink), an operator that
    did not change still sees the catch-up; every OM of the application is told how many periods ago the latest
    change of any operator was applied (None before the first). Recorded by wrapping the policy's step (the
    observation is otherwise internal to the tick)."""
    from policies.om.model_based import ModelBased

    seen: dict[int, list[int | None]] = {}
    slot = 10
    original = ModelBased.step

    def recording(self, obs):
        seen.setdefault(slot, []).append(obs.periods_since_change)
        return original(self, obs)

    monkeypatch.setattr(ModelBased, "step", recording)
    trend = om_choice("model-based-trend")
    app = simulated_pipeline(
        "since", n_operators=2, om_policy=trend["name"], om_params=trend["params"], rate_scale=BUSY
    )

    def last_apply() -> int | None:
        control = ApplicationControl.objects.filter(application=app).first()  # created by the first tick
        memory = (control.operator_memory or {}) if control is not None else {}
        return memory.get("__app__", {}).get("last_apply_slot")

    while last_apply() is None:
        assert slot < 30
        run_tick(app.pk, slot)
        slot += 1
    applied_at = slot - 1
    assert all(v is None for s, values in seen.items() if s <= applied_at for v in values)
    run_tick(app.pk, slot)
    assert seen[slot] == [1, 1]  # both OMs, the changed one and the other
    if last_apply() == applied_at:  # no change in between: one period later
        slot += 1
        run_tick(app.pk, slot)
        assert seen[slot] == [2, 2]


def test_a_change_is_a_swap_when_an_operator_gains_or_loses_a_node_type_else_a_resize():
    from autoscaler.control.tick import _swaps_a_node_type

    before = {"a": {"A1": 2, "A2": 0}, "b": {"A1": 1}}
    assert not _swaps_a_node_type(before, {"a": {"A1": 4}, "b": {"A1": 1, "A2": 0}})  # counts only
    assert _swaps_a_node_type(before, {"a": {"A2": 2}, "b": {"A1": 1}})  # a moved to another type
    assert _swaps_a_node_type(before, {"a": {"A1": 2}, "b": {"A1": 1, "A3": 1}})  # b gained one
    assert not _swaps_a_node_type(None, {"a": {"A2": 2}})  # nothing known before: not counted as a swap


def test_the_predictive_om_keeps_the_applications_eta_v_shared_along_its_longest_path():
    """``violation_budget`` of an OM that declares it an SLO parameter comes from the application's eta_V, divided
    among the controlled operators of the longest path (here a chain of 2: 5 % -> 2.5 % each), unless the
    user set it; an OM without the parameter is built from its params as they are."""
    from autoscaler.control.agents import load_policy, slo_params
    from autoscaler.control.topology import topology
    from policies import registry

    app = simulated_pipeline("slo-budget", n_operators=2, om_policy="predictive", rate_scale=BUSY)
    topo = topology(app)
    control = ApplicationControl.objects.get_or_create(application=app)[0]
    policy = load_policy(None, topo.operators[0], topo, control, parse_rails(control.rails))
    assert policy.params["violation_budget"] == pytest.approx(app.eta_v / 2)
    assert slo_params(registry.load("om", "predictive"), {"violation_budget": 0.01}, topo) == {
        "violation_budget": 0.01
    }
    app.eta_v = 1.0  # no SLO on violations: no budget
    app.save()
    assert slo_params(registry.load("om", "predictive"), {}, topology(app)) == {"violation_budget": 0.0}
    assert slo_params(registry.load("om", "model-based"), {}, topo) == {}
