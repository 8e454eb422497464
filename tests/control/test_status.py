"""Spec vs status: the real tick over the simulated engine writes each Deployment's status (what the engine runs)
and its history (linked to the decision), never its declared replicas; the API, ``describe`` and the fleet page
show that status."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler import manifests
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Decision, SimulatedEngine
from autoscaler.control.status import engine_ids
from autoscaler.control.tick import run_tick
from autoscaler.models import Deployment, DeploymentHistory

pytestmark = pytest.mark.django_db

BUSY = 3.0  # as in test_tick: one A1 replica is too small for the trace at this rate scale


def engine_deployments(app) -> dict[str, dict[str, int]]:
    raw = SimulatedEngine.objects.get(application=app).deployments
    return {op: {t: n for t, n in dep.items() if n} for op, dep in raw.items()}


def api_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def test_status_equals_the_engines_deployment_after_a_scaling_action():
    app = simulated_pipeline("st", n_operators=2, rate_scale=BUSY)
    assert all(d.status_replicas is None for d in Deployment.objects.filter(operator__application=app))
    out = None
    for slot in range(10, 20):  # until a scaling action is applied
        out = run_tick(app.pk, slot)
        if out.applied:
            break
    assert out is not None and out.applied, "no scaling action was applied"
    engine = engine_deployments(app)
    applied = Decision.objects.filter(application=app, slot=out.slot, outcome="applied").select_related(
        "operator"
    )
    assert applied
    for decision in applied:
        dep = Deployment.objects.get(operator=decision.operator)
        assert dep.status_replicas == engine[dep.operator.name] != {"A1": 1}
        assert dep.replicas == {"A1": 1}  # the declared spec is never overwritten by the loop
        assert dep.status_decision_id == decision.pk and dep.status_source == "control"
        row = dep.history.first()
        assert row.source == "control" and row.decision_id == decision.pk
        assert row.replicas == engine[dep.operator.name]

        # API: spec as declared, read-only status = the engine's deployment, history linked to the decision
        client = api_client(app.owner)
        body = client.get(f"/api/v1/deployments/{dep.name}/").json()
        assert body["spec"]["replicas"] == {"A1": 1}
        status = body["status"]
        assert status["observed"] and status["replicas"] == engine[dep.operator.name]
        assert status["decision"]["id"] == decision.pk and status["matchesSpec"] is False
        assert status["costPerHour"] == pytest.approx(
            sum(n * p for t, n in engine[dep.operator.name].items() for p in [price(dep, t)])
        )
        history = client.get(f"/api/v1/deployments/{dep.name}/history/").json()
        assert history[0]["source"] == "control" and history[0]["decision"]["id"] == decision.pk

        # describe: spec, status and the history row with the decision's id
        text = StringIO()
        call_command("describe", "deployment", dep.name, "--owner", app.owner.username, stdout=text)
        shown = text.getvalue()
        running = " ".join(f"{t}x{n}" for t, n in sorted(engine[dep.operator.name].items()))
        assert f"{running}" in shown and f"{decision.pk} (slot {decision.slot}, applied)" in shown, shown

        # export stays the spec only, and applies back unchanged
        (doc,) = manifests.export("Deployment", dep.name, app.owner)
        assert "status" not in doc
        assert [r.action for r in manifests.apply_documents([doc], app.owner)] == ["unchanged"]
    app_status = api_client(app.owner).get(f"/api/v1/applications/{app.name}/").json()["status"]
    assert app_status["phase"] == "Controlled" and app_status["lastTick"]["slot"] == out.slot
    assert app_status["replicas"] == {name: engine[name] for name in ("op0", "op1")}
    assert app_status["reconfigurationsApplied"] == 1 and app_status["lastPeriodViolated"] is True


def price(dep: Deployment, node_type: str) -> float:
    return dep.region.catalog.node_types.get(name=node_type).price_per_hour


def test_status_follows_every_tick_and_the_history_keeps_every_change():
    app = simulated_pipeline("follow", n_operators=2, rate_scale=BUSY)
    applies = 0
    for slot in range(10, 22):
        out = run_tick(app.pk, slot)
        applies += out.applied
        engine = engine_deployments(app)
        for dep in Deployment.objects.filter(operator__application=app).select_related("operator"):
            assert dep.status_replicas == engine[dep.operator.name], slot
            assert dep.replicas == {"A1": 1}
    assert applies >= 1
    control_rows = DeploymentHistory.objects.filter(deployment__operator__application=app, source="control")
    changes = Decision.objects.filter(application=app, outcome="applied").exclude(
        applied__isnull=True
    )  # every applied decision that changed replicas has its history row
    changed = [d for d in changes if d.applied != d.deployment]
    assert sorted(r.decision_id for r in control_rows) == sorted(d.pk for d in changed)
    assert all(r.decision_id is not None for r in control_rows)


def test_the_first_observation_writes_the_status_without_touching_the_spec_or_the_history():
    app = simulated_pipeline("seen", n_operators=1, rate_scale=0.01)  # quiet: no scaling action
    run_tick(app.pk, 10)
    dep = Deployment.objects.get(operator__application=app)
    assert dep.status_replicas == {"A1": 1} and dep.status_source == "observed"
    assert dep.status_decision_id is None and dep.status_since is not None
    assert not dep.history.exists()  # the engine runs what was declared: no change to record


def test_the_first_observation_records_a_difference_from_the_spec():
    app = simulated_pipeline("drift", n_operators=1, rate_scale=0.01)
    SimulatedEngine.objects.create(application=app, deployments={"op0": {"A1": 1, "A2": 2}})
    run_tick(app.pk, 10)  # observes A1x1 A2x2 (then may scale in: quiet)
    dep = Deployment.objects.get(operator__application=app)
    assert dep.status_replicas == engine_deployments(app)["op0"] and dep.replicas == {"A1": 1}
    first = dep.history.order_by("id").first()
    assert first.source == "observed" and first.replicas == {"A1": 1, "A2": 2} and first.decision is None


def test_a_refused_apply_leaves_the_status_as_the_engine_runs_it():
    app = simulated_pipeline("refused", n_operators=1, rate_scale=BUSY)
    run_tick(app.pk, 9)  # creates the engine, observes it, scales up
    dep = Deployment.objects.get(operator__application=app)
    before, rows = dep.status_replicas, dep.history.count()
    SimulatedEngine.objects.filter(application=app).update(faults={"refuseApply": True})
    run_tick(app.pk, 10)
    assert Decision.objects.filter(application=app, slot=10, outcome="rolled_back").exists()
    dep.refresh_from_db()
    assert dep.status_replicas == engine_deployments(app)["op0"] == before
    assert dep.history.count() == rows  # nothing changed on the engine: no history row


def test_engine_ids_are_read_from_the_apply_details():
    assert engine_ids({"job": "f00", "targets": {}}, "op") == {"job": "f00"}
    assert engine_ids({"op": {"generation": 7, "executors": 2}}, "op") == {"generation": 7}
    assert engine_ids({}, "op") == {}
    # a Spark apply that failed and was rolled back: the generation that restored the previous executors runs
    assert engine_ids({"op": {"generation": 7, "rollback_generation": 8, "verified": False}}, "op") == {
        "generation": 8
    }


def test_a_verified_apply_writes_the_engines_identifiers_with_the_status():
    """What a Flink (job id) or Spark (generation) realizer reports with a verified apply is stored with the
    status, through the same path the tick takes (``record_apply``); an unverified one writes nothing."""
    from autoscaler.control.models import Tick
    from autoscaler.control.status import record_apply
    from connectors.base import ApplyResult

    app = simulated_pipeline("ids", n_operators=1, rate_scale=BUSY)
    run_tick(app.pk, 10)
    tick = Tick.objects.get(application=app, slot=10)
    dep = Deployment.objects.get(operator__application=app)
    running = dict(dep.status_replicas)
    unverified = ApplyResult(ok=False, deployments={"op0": {"A1": 9}}, details={"job": "j-0"})
    assert record_apply(app, tick, unverified) == 0
    dep.refresh_from_db()
    assert dep.status_replicas == running and dep.status_engine_ids != {"job": "j-0"}
    # same replicas, a new job id (Flink restarts the job on every rescale): only the identifiers change
    same = ApplyResult(
        ok=True, deployments={"op0": running}, details={"job": "j-1", "op0": {"generation": 3}}
    )
    assert record_apply(app, tick, same) == 0
    dep.refresh_from_db()
    assert dep.status_engine_ids == {"job": "j-1", "generation": 3} and dep.status_replicas == running
    more = {t: n + 1 for t, n in running.items()}
    changed = ApplyResult(ok=True, deployments={"op0": more}, details={"job": "j-2"})
    assert record_apply(app, tick, changed) == 1
    dep.refresh_from_db()
    assert dep.status_replicas == more and dep.status_engine_ids == {"job": "j-2"}
    assert dep.history.first().replicas == more


def test_the_application_phase_follows_its_state_and_last_tick():
    from autoscaler.control.resource_status import application_status

    app = simulated_pipeline("phases", n_operators=1, rate_scale=0.01)
    assert application_status(app)["phase"] == "Pending"  # running, no tick yet
    run_tick(app.pk, 10)
    assert application_status(app)["phase"] == "Controlled"
    SimulatedEngine.objects.filter(application=app).update(faults={"missingSlots": [10]})
    run_tick(app.pk, 11)  # observes period 10: no data
    assert application_status(app)["phase"] == "NoData"
    app.state = "paused"
    app.save()
    assert application_status(app)["phase"] == "Paused"


def test_a_deployment_changed_on_the_engine_without_an_apply_becomes_the_status():
    """Drift: the engine loses a replica (or someone scales the job by hand) between two periods without an
    apply; the next tick writes the engine's deployment as the status (source "observed", no decision) and
    appends it to the history."""
    app = simulated_pipeline("drift", n_operators=2, rate_scale=0.2)
    for slot in range(10, 14):
        run_tick(app.pk, slot)
    engine = SimulatedEngine.objects.get(application=app)
    name = sorted(engine.deployments)[0]
    before = {t: n for t, n in engine.deployments[name].items() if n}
    lost = dict(before)
    lost["A2"] = lost.get("A2", 0) + 2  # two replicas appear that no decision asked for
    engine.deployments = {**engine.deployments, name: lost}
    engine.save()
    run_tick(app.pk, 14)  # observes period 13: the engine's change happened before it
    run_tick(app.pk, 15)  # observes period 14: still no apply in between -> drift
    dep = Deployment.objects.get(operator__application=app, operator__name=name)
    rows = list(dep.history.filter(source="observed").values_list("replicas", "decision_id"))
    assert (lost, None) in rows, rows
    assert dep.replicas == {"A1": 1}  # the declared spec is untouched
