"""Safety rails declared in the Application manifest (``spec.rails``): validation, storage, round trip, API, and
the control plane reading them from there (the legacy control-app rails only when none are declared)."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler import manifests
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import ApplicationControl, Decision
from autoscaler.control.tick import run_tick
from autoscaler.models import Application
from autoscaler.schemas.errors import ManifestError

pytestmark = pytest.mark.django_db

BUSY = 60.0
RAILS = {
    "minReplicas": {"op0": 1},
    "maxReplicas": {"*": 4},
    "scaleDownDelayS": 300.0,
    "freezeWindows": [{"start": "22:00", "end": "02:00"}],
    "ineffectiveScaleUpRatio": 0.5,
    "ineffectiveBlockS": 900.0,
    "rollbackOnFailure": False,
}


def _manifest(app: Application) -> dict:
    (doc,) = manifests.export("Application", app.name, app.owner)
    return doc


def test_rails_round_trip_through_the_manifest():
    app = simulated_pipeline("railed", n_operators=2)
    doc = _manifest(app)
    assert "rails" not in doc["spec"]  # no rails declared: nothing exported
    doc["spec"]["rails"] = RAILS
    (result,) = manifests.apply_documents([doc], app.owner)
    assert result.action == "configured"
    app.refresh_from_db()
    assert app.rails == RAILS
    again = _manifest(app)
    assert again["spec"]["rails"] == RAILS
    (same,) = manifests.apply_documents([again], app.owner)
    assert same.action == "unchanged"


@pytest.mark.parametrize(
    ("rails", "loc", "msg"),
    [
        ({"maxReplicas": {"ghost": 2}}, "spec.rails.maxReplicas.ghost", "unknown operator"),
        (
            {"minReplicas": {"op0": 5}, "maxReplicas": {"op0": 2}},
            "spec.rails.minReplicas.op0",
            "above maxReplicas",
        ),
        ({"minReplicas": {"op0": 11}}, "spec.rails.minReplicas.op0", "above maxParallelism 10"),
        ({"scaleDownDelayS": -1}, "spec.rails.scaleDownDelayS", "greater than or equal to 0"),
        (
            {"freezeWindows": [{"start": "25:00", "end": "01:00"}]},
            "spec.rails.freezeWindows[0].start",
            "pattern",
        ),
        ({"maxReplicas": {"op0": 0}}, "spec.rails.maxReplicas", "must be >= 1"),
        ({"rollback": True}, "spec.rails.rollback", "Extra inputs"),
    ],
)
def test_bad_rails_are_rejected_naming_the_field_and_nothing_changes(rails, loc, msg):
    app = simulated_pipeline("railed", n_operators=2)
    doc = _manifest(app)
    doc["spec"]["rails"] = rails
    with pytest.raises(ManifestError) as exc:
        manifests.apply_documents([doc], app.owner)
    errors = exc.value.as_list()
    assert any(e["loc"] == loc and msg in e["msg"] for e in errors), errors
    app.refresh_from_db()
    assert app.rails == {}


def test_api_shows_rails_and_the_rails_endpoint_writes_the_application():
    app = simulated_pipeline("railed", n_operators=2, owner="dora")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=app.owner).key}")
    put = client.put("/api/v1/control/applications/railed/rails/", {"maxReplicas": {"op1": 3}}, format="json")
    assert put.status_code == 200
    app.refresh_from_db()
    assert app.rails == {"maxReplicas": {"op1": 3}}
    shown = client.get("/api/v1/applications/railed/").json()
    assert shown["spec"]["rails"] == {"maxReplicas": {"op1": 3}}
    bad = client.put(
        "/api/v1/control/applications/railed/rails/", {"minReplicas": {"op1": 11}}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["errors"][0]["loc"] == "rails.minReplicas.op1"
    app.refresh_from_db()
    assert app.rails == {"maxReplicas": {"op1": 3}}


def test_the_tick_obeys_manifest_rails_over_the_legacy_control_rails():
    app = simulated_pipeline("railed", n_operators=1, rate_scale=BUSY)
    # legacy store says "frozen all day"; the manifest's rails (declared) win
    ApplicationControl.objects.create(
        application=app, rails={"freezeWindows": [{"start": "00:00", "end": "23:59"}]}
    )
    doc = _manifest(app)
    doc["spec"]["rails"] = {"maxReplicas": {"op0": 1}}
    manifests.apply_documents([doc], app.owner)
    run_tick(app.pk, 10)
    d = Decision.objects.get(slot=10)
    assert d.outcome == "no_change" and "freeze" not in d.reason
    # no rails declared: the legacy rails apply again
    doc["spec"].pop("rails")
    manifests.apply_documents([doc], app.owner)
    run_tick(app.pk, 11)
    d = Decision.objects.get(slot=11)
    assert d.outcome == "denied" and "freeze window" in d.reason
