"""Control endpoints: /metrics, summary, decisions, rails, agent export / import / reset (API and command)."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import AgentState
from autoscaler.control.tick import run_tick

pytestmark = pytest.mark.django_db


@pytest.fixture
def app():
    app = simulated_pipeline("api-app", n_operators=2, rate_scale=3.0, om_policy="ql", owner="carol")
    for slot in range(10, 14):
        run_tick(app.pk, slot)
    return app


@pytest.fixture
def api(app):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=app.owner).key}")
    return client


def test_metrics_endpoint_exposes_counters_gauges_and_latency_histogram(app, client, settings):
    settings.METRICS_TOKEN = "scraper-token"  # /metrics answers the scraper's bearer token (or staff users)
    text = client.get("/metrics", headers={"Authorization": "Bearer scraper-token"}).content.decode()
    assert "# TYPE autoscaler_control_ticks_total counter" in text
    assert 'autoscaler_control_ticks_total{application="api-app",owner="carol"} 4' in text
    assert 'autoscaler_control_decisions_total{application="api-app",owner="carol"} 8' in text
    assert "# TYPE autoscaler_control_tick_latency_seconds histogram" in text
    assert 'le="+Inf"} 4' in text
    assert "autoscaler_control_violation_fraction{" in text


def test_summary_and_decisions(api, app):
    s = api.get("/api/v1/control/applications/api-app/summary/").json()
    assert s["aggregates"]["periods"] == 4 and s["aggregates"]["eta_v"] == 0.05
    windows = s["aggregates"]["windows"]
    assert windows["hour"]["periods"] == windows["week"]["periods"] == windows["all"]["periods"] == 4
    assert windows["hour"]["cost_per_hour"] == pytest.approx(s["aggregates"]["cost_per_hour"])
    rows = api.get("/api/v1/control/applications/api-app/decisions/?limit=3").json()
    assert len(rows) == 3 and rows[0]["slot"] == 13
    assert api.get("/api/v1/control/applications/nope/summary/").status_code == 404


def test_rails_are_validated_and_stored(api):
    bad = api.put("/api/v1/control/applications/api-app/rails/", {"maxReplicas": {"ghost": 2}}, format="json")
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["loc"] == "rails.maxReplicas.ghost"
    ok = api.put(
        "/api/v1/control/applications/api-app/rails/",
        {"maxReplicas": {"op0": 3}, "scaleDownDelayS": 300},
        format="json",
    )
    assert ok.status_code == 200 and ok.json()["maxReplicas"] == {"op0": 3}


def test_agents_export_import_round_trip_and_reset(api, app):
    exported = api.get("/api/v1/control/applications/api-app/agents/").json()
    assert set(exported["agents"]) == {"op0", "op1"}
    blobs = {a.operator.name: bytes(a.blob) for a in AgentState.objects.select_related("operator")}
    assert api.delete("/api/v1/control/applications/api-app/agents/?operator=op0").json() == {"reset": 1}
    assert AgentState.objects.count() == 1
    tampered = json.loads(json.dumps(exported))
    tampered["agents"]["op0"]["state"] = "bm90IGEgc3RhdGU="
    bad = api.put("/api/v1/control/applications/api-app/agents/", tampered, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["loc"] == "agents.op0.state"
    assert api.put("/api/v1/control/applications/api-app/agents/", exported, format="json").json() == {
        "imported": 2
    }
    assert {a.operator.name: bytes(a.blob) for a in AgentState.objects.select_related("operator")} == blobs


def test_agent_state_command(app, tmp_path):
    out = tmp_path / "agents.json"
    call_command("agent_state", "export", "api-app", str(out), "--owner", "carol")
    call_command("agent_state", "reset", "api-app", "--owner", "carol")
    assert AgentState.objects.count() == 0
    call_command("agent_state", "import", "api-app", str(out), "--owner", "carol")
    assert AgentState.objects.count() == 2
    with pytest.raises(CommandError, match="operators: unknown operator 'zz'"):
        call_command("agent_state", "reset", "api-app", "--owner", "carol", "--operator", "zz")
