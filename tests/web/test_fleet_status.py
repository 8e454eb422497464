"""The fleet page, the deployment list and a deployment's page show what the engine runs (the status the control
loop writes), not only the declared replicas; before the loop has seen a deployment, the fleet says so."""

from __future__ import annotations

import re

import pytest

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Decision, SimulatedEngine
from autoscaler.control.resource_status import application_status
from autoscaler.control.tick import run_tick
from autoscaler.models import Deployment

from .conftest import client_for

pytestmark = pytest.mark.django_db


def fleet_row(client, app: str) -> str:
    html = client.get("/").content.decode()
    return re.search(rf'<tr data-app="{app}">(.*?)</tr>', html, re.S).group(1)


def test_fleet_and_deployment_pages_show_the_running_replicas_and_their_cost():
    app = simulated_pipeline("fl", n_operators=2, rate_scale=3.0)
    client = client_for(app.owner)
    before = fleet_row(client, "fl")
    assert "2 replicas running" in before and "declared, not observed yet: 2 deployments" in before
    slot = 10
    while not run_tick(app.pk, slot).applied:
        slot += 1
        assert slot < 20, "no scaling action was applied"
    engine = SimulatedEngine.objects.get(application=app).deployments
    running = sum(n for op in ("op0", "op1") for n in engine[op].values())  # the deployed operators
    assert running > 2
    row = fleet_row(client, "fl")
    cost = application_status(app)["costPerHour"]
    assert f"{cost:.3f}/h" in row and f"{running} replicas running" in row
    assert "not observed yet" not in row

    dep = Deployment.objects.get(name="fl-op0")
    decision = Decision.objects.get(operator=dep.operator, slot=slot)
    listing = client.get("/deployments/").content.decode()
    cell = re.search(r'<tr data-name="fl-op0">(.*?)</tr>', listing, re.S).group(1)
    shown = ", ".join(f"{t}: {n}" for t, n in sorted(engine["op0"].items()) if n)
    assert "declared A1: 1" in cell and f"running {shown}" in cell and f"decision {decision.pk}" in cell
    page = client.get("/deployments/fl-op0/edit/").content.decode()
    assert f'href="/decisions/{decision.pk}/"' in page and f"running {shown}" in page
